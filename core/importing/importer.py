"""`minitx import`: a state_dict trained by other code, two vocabulary files and what the tensors
cannot tell -> a minitx model and its task (core.data.imported_task), checked before anything is
written.

What is read from the tensors' shapes: d_model (the source embedding's width), the two
vocabulary sizes (the embeddings' rows; the output layer's must agree), d_ff, the layers of each
stack (the mapping's {i} count), K/V heads (the key projection's rows over d_k), the positions
(the positional table's rows: max_len is min(rows, 512) unless `positions` says).

What is not in a state_dict, and where it comes from (ImportSettings): the heads and the
tokenisation, always given; norm placement, norm kind and eps, activation, final norms,
log-softmax output and source wrapping, from the layout (LAYOUTS) unless given; with a custom
mapping, the norm placement must be given too. A missing one is an ImportFileError naming it.

Checked before a model is built (each an ImportFileError, one line naming the file and the key
or line): every mapped key present and every file key mapped (MappedState), every tensor a
finite float of the shape the others imply, the vocabulary files' lengths against the
embeddings' rows, their specials (padding, start and end required), tokens the tokenisation can
hold, the heads dividing d_model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from minitx.core.config import NORM_EPS, NORM_KINDS, ModelConfig
from minitx.core.data.given_pairs import with_pairs
from minitx.core.data.imported_task import ImportedTask
from minitx.core.data.origin import Origin
from minitx.core.data.pair_task import STORED_HELDOUT
from minitx.core.data.vocab import MAX_TOKEN_CHARS, Vocab, valid_token
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.json_files import read_json_object
from minitx.core.importing.mapping import (
    BUILTIN_LAYOUTS,
    MappedState,
    WeightMapping,
    apply_mapping,
    available_rows,
    builtin_mapping,
    read_mapping,
)
from minitx.core.importing.state_files import file_kind, read_state_dict
from minitx.core.importing.vocab_files import ROLES, VocabFile, find_specials, read_vocab_file
from minitx.core.model.components import sinusoidal_table
from minitx.core.model.transformer import Seq2Seq
from minitx.core.tensor_checks import all_finite
from minitx.core.wording import counted

DEFAULT_POSITIONS = 512  # max_len when the file's table is longer (the tutorial keeps 5000 rows)
MAX_CONFIG_BYTES = 64 * 1024

# What each known layout computes beyond its shapes (docs/import.md has why):
# torch.nn.Transformer always ends each stack in a LayerNorm, even post-norm; the Annotated
# Transformer's LayerNorm is its own (eps 1e-6 added to the unbiased std) and its Generator
# returns log-probabilities. Both codes' pipelines wrap every source in start and end tokens.
LAYOUTS: dict[str, dict[str, Any]] = {
    "nn-transformer": {"norm": "post", "norm_kind": "layer", "norm_eps": NORM_EPS["layer"],
                       "activation": "relu", "final_norms": True, "log_softmax": False,
                       "wrap_source": True},
    "annotated": {"norm": "pre", "norm_kind": "std", "norm_eps": NORM_EPS["std"], "activation": "relu",
                  "final_norms": True, "log_softmax": True, "wrap_source": True},
}
assert LAYOUTS.keys() == BUILTIN_LAYOUTS.keys()

# Settings that a custom mapping must be given (a layout's table supplies them otherwise).
REQUIRED_WITH_MAPPING = ("norm",)
DEFAULTS_WITH_MAPPING = {"norm_kind": "layer", "norm_eps": 0.0, "activation": "relu",
                         "log_softmax": False, "wrap_source": True}


@dataclass(frozen=True)
class ImportSettings:
    """What the tensors cannot tell; None: not given (the layout's value, or an error)."""

    heads: int | None = None
    tokens: str | None = None  # "word" | "char"
    norm: str | None = None  # "post" | "pre"
    norm_kind: str | None = None  # "layer" | "rms" | "std"
    norm_eps: float | None = None
    activation: str | None = None  # "relu" | "gelu" (SwiGLU is read from the tensors)
    final_norms: bool | None = None  # None: whether the mapping gives final norms
    log_softmax: bool | None = None
    wrap_source: bool | None = None
    positions: int | None = None
    position_encoding: str | None = None  # only for a mapping that gives no positional tensor
    specials: str = ""  # "pad=<blank>,bos=<s>,eos=</s>": both files (usual spellings otherwise)
    src_specials: str = ""  # the source file's, where they differ

    def merged(self, other: ImportSettings) -> ImportSettings:
        """These settings, with `other`'s wherever these say nothing."""
        changes = {f.name: getattr(other, f.name) for f in dataclasses.fields(self)
                   if getattr(self, f.name) in (None, "") and getattr(other, f.name) not in (None, "")}
        return dataclasses.replace(self, **changes)


SETTING_TYPES = {"heads": int, "tokens": str, "norm": str, "norm_kind": str, "norm_eps": float,
                 "activation": str, "final_norms": bool, "log_softmax": bool, "wrap_source": bool,
                 "positions": int, "position_encoding": str, "specials": str, "src_specials": str}
assert SETTING_TYPES.keys() == {f.name for f in dataclasses.fields(ImportSettings)}


def read_settings(path: str | os.PathLike) -> ImportSettings:
    """A small JSON config of ImportSettings' names ({"heads": 8, "tokens": "word"}); an
    ImportFileError naming the file and the key for anything else."""
    path = Path(path)
    data = read_json_object(path, MAX_CONFIG_BYTES, "an import config")
    values = {}
    for key, value in data.items():
        kind = SETTING_TYPES.get(key)
        if kind is None:
            raise ImportFileError(f"{path}: unknown key {key[:40]!r}; the keys are "
                                  f"{', '.join(SETTING_TYPES)}")
        fits = (isinstance(value, kind) and not (kind is int and isinstance(value, bool))) or (
            kind is float and isinstance(value, int) and not isinstance(value, bool))
        if not fits:
            raise ImportFileError(f"{path}: {key!r} must be a {kind.__name__}, not {json.dumps(value)[:40]}")
        values[key] = value
    return ImportSettings(**values)


@dataclass
class Imported:
    model: Seq2Seq
    task: ImportedTask
    summary: dict[str, Any]  # the checkpoint's training summary: where the model came from
    notes: list[str]  # what a person should hear once (pairs skipped, tokens read as <unk>)


def import_model(weights: str | os.PathLike, src_vocab: str | os.PathLike, tgt_vocab: str | os.PathLike,
                 settings: ImportSettings, layout: str = "", mapping: str | os.PathLike = "",
                 pairs: str | os.PathLike = "") -> Imported:
    """The model of `weights` under `layout`'s built-in mapping (or the mapping file), with its
    vocabularies and (optionally) example pairs. Raises ImportFileError (DataError for a bad
    pairs file); builds nothing until every check has passed."""
    if bool(layout) == bool(mapping):
        raise ImportFileError("give the layout (nn-transformer or annotated) or a mapping file, one of them")
    weights = Path(weights)
    state = read_state_dict(weights)
    if mapping:
        weight_mapping = read_mapping(mapping)
        settings = settings.merged(ImportSettings(**DEFAULTS_WITH_MAPPING))
        for name in REQUIRED_WITH_MAPPING:
            if getattr(settings, name) is None:
                raise ImportFileError(f"a mapping file does not say how the model normalises: give "
                                      f"--{name.replace('_', '-')} post or pre")
    else:
        weight_mapping = builtin_mapping(layout)
        settings = settings.merged(ImportSettings(**LAYOUTS[layout]))
    for name, flag in (("heads", "--heads N"), ("tokens", "--tokens word|char")):
        if getattr(settings, name) is None:
            what = ("the number of attention heads" if name == "heads"
                    else "how text becomes tokens")
            raise ImportFileError(f"the weights do not say {what}: give {flag}")

    table = _positional_target(weight_mapping)
    rows = available_rows(weight_mapping, state, table) if table else None
    positions = _positions(settings.positions, rows, table)
    mapped = apply_mapping(weight_mapping, state, sizes={"max_len": positions}, source=str(weights))
    if mapped.missing and not mapped.tensors:  # not one key of its layout: another's?
        for other in BUILTIN_LAYOUTS:
            if other != layout and not apply_mapping(builtin_mapping(other), state, sizes={"max_len": 1},
                                                     source=str(weights)).missing:
                raise ImportFileError(f"{weights} has the keys of the {other} layout, not of "
                                      f"{layout or 'the mapping'}: give --layout {other}")
    mapped.require_complete(str(weights))
    _check_tensors(mapped, weights)

    src_file, tgt_file = read_vocab_file(src_vocab), read_vocab_file(tgt_vocab)
    source = _vocab(src_file, settings.src_specials or settings.specials, settings.tokens)
    target = _vocab(tgt_file, settings.specials, settings.tokens)
    cfg = _config(mapped, weights, settings, positions, table)
    _check_vocab_rows(mapped, weights, "src_embed.weight", src_file, "source embedding")
    _check_vocab_rows(mapped, weights, "tgt_embed.weight", tgt_file, "target embedding")
    _check_vocab_rows(mapped, weights, "output.weight", tgt_file, "output layer")

    wraps = bool(settings.wrap_source)
    task = ImportedTask(target, source, wraps, Origin({}), max_len=positions - 2 if wraps else positions)
    cfg = cfg.replace(**task.model_fields())
    _check_shapes(mapped, weights, cfg)
    model = Seq2Seq(cfg)
    model.load_state_dict({k: t.to(torch.float32) for k, t in mapped.tensors.items()})
    model.eval()

    notes: list[str] = []
    origin = {
        "layout": layout,
        "mapping": f"built-in {layout}" if layout else Path(mapping).name,
        "weights": {**file_facts(weights), "format": file_kind(weights)},
        "src_vocab": file_facts(src_file.path),
        "tgt_vocab": file_facts(tgt_file.path),
        "specials": {"src": _spellings(source), "tgt": _spellings(target)},
        "positions": _positions_origin(model),
    }
    task = ImportedTask(target, source, wraps, Origin(origin), max_len=task.max_len)
    if pairs:
        task, pair_notes = kept_pairs(task, Path(pairs), positions)
        notes += pair_notes
    summary = {"imported": {"layout": layout or "mapping", "file": weights.name}}
    return Imported(model, task, summary, notes)


# ---------------------------------------------------------------------------------------------
# Shapes and tensors


def _positional_target(mapping: WeightMapping) -> str | None:
    targets = {e.target for e in mapping.entries}
    for name in ("positional", "src_positions.weight"):
        if name in targets:
            return name
    return None


def _positions(asked: int | None, rows: int | None, table: str | None) -> int:
    if asked is not None and asked < 3:
        raise ImportFileError(f"--positions {asked}: a model needs at least 3 positions")
    if rows is None:
        return asked or DEFAULT_POSITIONS
    if asked is not None and asked > rows:
        raise ImportFileError(f"--positions {asked}: the file's positional table ({table}) has {rows} rows")
    return asked or min(rows, DEFAULT_POSITIONS)


def _key(mapped: MappedState, name: str) -> str:
    return mapped.sources.get(name, name)


def _check_tensors(mapped: MappedState, path: Path) -> None:
    for name, t in mapped.tensors.items():
        if not t.is_floating_point():
            raise ImportFileError(f"{path}: {_key(mapped, name)!r} holds {t.dtype} values, not floats")
        if not all_finite(t):
            raise ImportFileError(f"{path}: {_key(mapped, name)!r} holds NaN or infinite values")


def _shape_of(mapped: MappedState, path: Path, name: str, dims: int) -> tuple[int, ...]:
    t = mapped.tensors.get(name)
    if t is None:
        raise ImportFileError(f"the mapping gives no tensor for minitx's {name!r}, which the model needs")
    if t.dim() != dims:
        raise ImportFileError(f"{path}: {_key(mapped, name)!r} (for minitx's {name!r}) has shape "
                              f"{tuple(t.shape)}; it needs {dims} axes")
    return tuple(t.shape)


def _config(mapped: MappedState, path: Path, settings: ImportSettings, positions: int,
            table: str | None) -> ModelConfig:
    """The model's config from the shapes and the settings (vocabulary ids come later, from
    the task). One line naming the setting or key for anything that does not fit."""
    V_src, d = _shape_of(mapped, path, "src_embed.weight", 2)
    V_tgt, _ = _shape_of(mapped, path, "tgt_embed.weight", 2)
    gated = "encoder.0.ff.w1.weight" in mapped.tensors
    d_ff = _shape_of(mapped, path, "encoder.0.ff.w1.weight" if gated else "encoder.0.ff.0.weight", 2)[0]
    heads = settings.heads
    if not isinstance(heads, int) or heads < 1 or d % heads:
        width = _key(mapped, "src_embed.weight")
        raise ImportFileError(f"--heads {heads}: d_model {d} (the width of {width!r}) does not split into "
                              "that many heads")
    kv_rows = _shape_of(mapped, path, "encoder.0.self_attn.k_proj.weight", 2)[0]
    if kv_rows % (d // heads):
        raise ImportFileError(f"{path}: {_key(mapped, 'encoder.0.self_attn.k_proj.weight')!r} has {kv_rows} "
                              f"rows, not a whole number of heads of {d // heads} (--heads {heads})")
    if settings.tokens not in ("word", "char"):
        raise ImportFileError(f"--tokens {settings.tokens}: must be word or char")
    if settings.norm_kind not in NORM_KINDS:
        raise ImportFileError(f"--norm-kind {settings.norm_kind}: must be one of {', '.join(NORM_KINDS)}")
    encoding = {"positional": "sinusoidal", "src_positions.weight": "learned"}.get(table or "")
    if encoding is None:
        encoding = settings.position_encoding
        if encoding not in ("rope", "none"):
            raise ImportFileError("the mapping gives no positional table ('positional' or "
                                  "'src_positions.weight'): say position_encoding rope or none in --config")
    has_final = "encoder_norm.weight" in mapped.tensors
    final = settings.final_norms if settings.final_norms is not None else has_final
    eps = settings.norm_eps or 0.0
    if eps == NORM_EPS[settings.norm_kind]:
        eps = 0.0  # the kind's default: not written
    values = {"vocab_size": V_tgt, "pad_id": 0, "sos_id": 1, "eos_id": 2, "d_model": d,
              "n_heads": heads, "kv_heads": kv_rows // (d // heads), "d_ff": d_ff,
              "n_encoder_layers": mapped.layers["encoder"], "n_decoder_layers": mapped.layers["decoder"],
              "dropout": 0.0, "max_len": positions, "norm": settings.norm,
              "activation": "swiglu" if gated else settings.activation, "norm_kind": settings.norm_kind,
              "position_encoding": encoding, "src_vocab_size": V_src, "src_pad_id": 0,
              "final_norms": bool(final) and settings.norm == "post", "norm_eps": eps,
              "log_softmax": bool(settings.log_softmax)}
    if min(V_src, V_tgt) < 4:
        small = _key(mapped, "src_embed.weight" if V_src < 4 else "tgt_embed.weight")
        raise ImportFileError(f"{path}: {small!r} has fewer than 4 rows: no room for padding, start, end "
                              "and a token")
    try:
        return ModelConfig(**values)
    except ValueError as e:
        field, _, message = str(e).partition(": ")
        flag = {"n_heads": "--heads", "max_len": "--positions", "norm_eps": "--norm-eps", "norm": "--norm",
                "activation": "--activation"}.get(field, field)
        raise ImportFileError(f"{flag}: {message}") from None


def _check_shapes(mapped: MappedState, path: Path, cfg: ModelConfig) -> None:
    """Every mapped tensor has the shape the config (made from the others) gives its name, and
    the mapping gives every tensor of minitx's model and no other."""
    with torch.device("meta"):
        expected = {k: tuple(t.shape) for k, t in Seq2Seq(cfg).state_dict().items()}
    for name in expected:
        if name not in mapped.tensors:
            raise ImportFileError(f"the mapping gives no tensor for minitx's {name!r}, which this model "
                                  f"({cfg.norm}-norm, {cfg.position_encoding} positions) needs")
    for name, t in mapped.tensors.items():
        if name not in expected:
            raise ImportFileError(f"the mapping gives {name!r} (from {_key(mapped, name)!r}), which minitx's "
                                  f"model does not have")
        if tuple(t.shape) != expected[name]:
            raise ImportFileError(f"{path}: {_key(mapped, name)!r} has shape {tuple(t.shape)}, but the other "
                                  f"tensors make minitx's {name!r} {expected[name]}")


# ---------------------------------------------------------------------------------------------
# Vocabularies


def _vocab(file: VocabFile, specials: str, level: str | None) -> Vocab:
    """A vocabulary file as a Vocab of `level`, its specials found or named; each ordinary
    token checked against the tokenisation (ImportFileError naming the file and line)."""
    found = find_specials(file, specials)
    special_ids = {found.pad, found.bos, found.eos} | ({found.unk} if found.unk is not None else set())
    if len(file.tokens) - len(special_ids) < 1:
        raise ImportFileError(f"{file.path} has no token besides its specials")
    for i, token in enumerate(file.tokens):
        if i in special_ids:
            if not valid_token(token, "word"):
                raise ImportFileError(f"{file.path} line {i + 1}: the special token {token!r} holds spaces "
                                      f"or is longer than {MAX_TOKEN_CHARS} characters")
        elif not valid_token(token, level or "word"):
            what = ("one character: --tokens char reads every character as a token" if level == "char"
                    else f"one word of at most {MAX_TOKEN_CHARS} characters: --tokens word splits text "
                         "at spaces")
            raise ImportFileError(f"{file.path} line {i + 1}: {token!r} is not {what}")
    try:
        return Vocab(file.tokens, found.pad, found.bos, found.eos, found.unk, level or "word")
    except ValueError as e:  # Vocab checks nothing more today; kept one line if it ever does
        raise ImportFileError(f"{file.path}: {e}") from None


def _check_vocab_rows(mapped: MappedState, path: Path, name: str, file: VocabFile, what: str) -> None:
    rows = mapped.tensors[name].shape[0]
    if rows != len(file.tokens):
        raise ImportFileError(f"{file.path} has {len(file.tokens)} tokens (lines), but the {what} "
                              f"{_key(mapped, name)!r} of {path.name} has {rows} rows")


def _spellings(vocab: Vocab) -> dict[str, str | None]:
    ids = dict(zip(ROLES, (vocab.pad, vocab.sos, vocab.eos, vocab.unk)))
    return {role: None if i is None else vocab.tokens[i] for role, i in ids.items()}


# ---------------------------------------------------------------------------------------------
# Origin and pairs


def file_facts(path: Path) -> dict[str, Any]:
    """The file's name, size and sha256: what says which file a model came from."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as e:
        raise ImportFileError(f"cannot read {path}: {e.strerror or e}") from None
    return {"file": path.name, "size": path.stat().st_size, "sha256": digest.hexdigest()}


def _positions_origin(model: Seq2Seq) -> str:
    """Where the positional table came from, in words (it is always the file's own)."""
    cfg = model.cfg
    if cfg.position_encoding != "sinusoidal":
        return cfg.position_encoding
    table = model.positional
    same = torch.allclose(table, sinusoidal_table(cfg.max_len, cfg.d_model), atol=1e-6)
    return ("the file's table (the standard sinusoids)" if same
            else "the file's own table (not the standard sinusoids)")


def kept_pairs(task: ImportedTask, path: Path, positions: int) -> tuple[ImportedTask, list[str]]:
    """The task with the pairs of `path` (the first STORED_HELDOUT that fit) as its examples."""
    kept = with_pairs(task, path, positions, limit=STORED_HELDOUT)
    counts = kept.counts
    fitting = counts["read"] - counts["skipped_too_long"]
    notes = []
    if counts["skipped_too_long"]:
        n = counts["skipped_too_long"]
        notes.append(f"skipped {counted(n, 'pair')} longer than the model's {positions} "
                     "positions")
    if fitting > STORED_HELDOUT:
        notes.append(f"kept the first {STORED_HELDOUT:,} of {fitting:,} pairs")
    if counts["unknown_heldout_tokens"]:
        notes.append(f"{counts['unknown_heldout_tokens']:,} tokens of {path.name} are not in the "
                     "vocabularies; they read as <unk>")
    return kept, notes
