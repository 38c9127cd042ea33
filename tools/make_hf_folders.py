"""Make tiny Hugging Face model folders, one per family, to try what docs/huggingface.md shows
without downloading anything: random weights of each family's layout (6+6 layers and 8 heads as
opus-mt, 32 wide) saved by transformers' own save_pretrained, with a tokeniser trained on the
spot (transformers is a test dependency: `./setup.sh` installs it).

    .venv/bin/python tools/make_hf_folders.py hf-tiny        # hf-tiny/marian, t5, flan-t5, bart
    .venv/bin/python tools/make_hf_folders.py hf-tiny --cache  # also as model ids in a cache folder
    .venv/bin/python tools/make_hf_folders.py hf-tiny --families nllb mbart50  # the families next door

--families chooses among marian, t5, flan-t5, bart (the default) and mbart50 (mBART with
mBART-50's tokeniser and its 52 language codes), nllb (M2M100's network with NLLB-200's tokeniser,
four language codes), pegasus, umt5, t5-gated-relu, bart-unequal, marian-odd.

With --cache, the folders are laid out as the Hugging Face cache keeps downloads
(hf-tiny/hub/models--tiny--marian/snapshots/...), so `HF_HUB_CACHE=hf-tiny/hub minitx decode
tiny/marian "..."` opens them by model id, as a real cache's Helsinki-NLP/opus-mt-en-de.
The models are untrained: what they say is noise; how minitx shows it is the point.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import warnings
from pathlib import Path

# The builders live with the tests that hold minitx to transformers on the same folders.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.huggingface.tiny_folders import ALL_FAMILIES, FAMILIES, save_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to make them in")
    parser.add_argument("--cache", action="store_true", help="also lay them out as a Hugging Face cache")
    parser.add_argument("--families", nargs="+", choices=ALL_FAMILIES, default=list(FAMILIES),
                        help="which families (default: %(default)s)")
    args = parser.parse_args()
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    for family in args.families:
        folder = args.out / family
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_model(folder, family, layers=6, heads=8, positions=128)  # opus-mt's 6+6 and 8 heads
        print(f"{folder}: a tiny {family} model")
        if args.cache:
            repo = args.out / "hub" / f"models--tiny--{family}"
            snapshot = repo / "snapshots" / ("0" * 40)
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(folder, snapshot)
            (repo / "refs").mkdir(parents=True)
            (repo / "refs" / "main").write_text("0" * 40)
            print(f"  and as the model id tiny/{family} in {args.out / 'hub'}")


if __name__ == "__main__":
    main()
