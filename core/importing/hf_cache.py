"""A Hugging Face model id (`Helsinki-NLP/opus-mt-en-de`, optionally `@revision`) -> its folder in
the local Hugging Face cache, with no network: the hub's own layout,
`<cache>/models--<owner>--<name>/snapshots/<commit>/`, where `refs/<revision>` names the commit
(`main` unless asked). The cache is where transformers and huggingface_hub put it:
$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.

Imports nothing heavy: a command given a model id that is not there says so before torch loads.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MODEL_ID = re.compile(r"^(?P<owner>[A-Za-z0-9][\w.-]{0,95})/(?P<name>[\w.-]{1,96})"
                      r"(?:@(?P<rev>[\w.-]{1,96}))?$")


class NotInCache(LookupError):
    """The id is a model id, but the cache does not hold it; str(e) says where minitx looked and
    how to download it (one line)."""


FILE_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".json", ".tsv", ".csv", ".jsonl", ".txt")


def looks_like_model_id(text: str) -> bool:
    """owner/name (optionally @revision), no file or folder of that name here, and not a file's
    name (`runs/model.safetensors` that does not exist is a missing file, not a model)."""
    return (bool(MODEL_ID.match(text)) and not Path(text).exists() and ".." not in text
            and not text.lower().endswith(FILE_SUFFIXES))


def cache_folder() -> Path:
    """Where the Hugging Face hub keeps models on this machine (the folder may not exist)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return home / "huggingface" / "hub"


def resolve_model_id(text: str) -> Path:
    """The snapshot folder of a model id; NotInCache when the cache does not hold it."""
    match = MODEL_ID.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a model id of the form owner/name")
    owner, name, revision = match["owner"], match["name"], match["rev"] or "main"
    cache = cache_folder()
    repo = cache / f"models--{owner}--{name}"
    model = f"{owner}/{name}"
    if not repo.is_dir():
        raise NotInCache(f"{model} is not in the Hugging Face cache {cache} (HF_HUB_CACHE or HF_HOME move "
                         f"it); download it with `hf download {model}` where there is a network and copy it "
                         "here, or give the model's folder")
    commit = revision
    ref = repo / "refs" / revision
    if ref.is_file():
        try:
            commit = ref.read_text().strip()
        except OSError:
            commit = revision
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        found = sorted(p.name for p in (repo / "snapshots").glob("*") if p.is_dir()) \
            if (repo / "snapshots").is_dir() else []
        if found and revision == "main" and not ref.is_file() and len(found) == 1:
            return repo / "snapshots" / found[0]  # a copied cache without its refs: the one snapshot
        raise NotInCache(f"{model}@{revision} is not in the Hugging Face cache ({repo} holds "
                         f"{', '.join(found[:3]) or 'no snapshot'}); download it with "
                         f"`hf download {model} --revision {revision}`")
    return snapshot


def unfinished_download(folder: Path, names) -> str | None:
    """Why `folder` lacks one of the files `names`, when it is a link to nothing: a snapshot of
    the cache links each file to a blob, and a download that stopped leaves the link without its
    blob. None when no such link is there."""
    for name in names:
        path = folder / name
        if path.is_symlink() and not path.exists():
            return (f"{path} links to {os.readlink(path)}, which is missing: the download is incomplete "
                    "(download the model again)")
    return None
