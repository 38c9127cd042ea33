"""Mappings: which tensor of a user's state_dict becomes which minitx parameter, and how.

A mapping is JSON; `minitx import --print-mapping --layout L` prints a built-in one to edit:

    {
      "format": "minitx-import-mapping",
      "version": 1,
      "layout": "nn-transformer",                    (optional) what it maps
      "about": "...",                                (optional) free text
      "prefix": "module.",                           (optional) every file key starts with this
      "tensors": {
        "src_embed.weight": "src_tok_emb.embedding.weight",
        "positional": {"from": "positional_encoding.pos_embedding",
                       "ops": [{"squeeze": 1}, {"rows": "max_len"}]},
        "encoder.{i}.self_attn.q_proj.weight": {
            "from": "transformer.encoder.layers.{i}.self_attn.in_proj_weight",
            "ops": [{"chunk": [0, 3]}]},
        ...
      },
      "same_as": {"tgt_embed.1.pe": "src_embed.1.pe"},   (optional)
      "ignore": ["*.num_batches_tracked"]                (optional)
    }

- `tensors`: minitx's names (its Seq2Seq state_dict) on the left, the file's keys on the right,
  as a string or as {"from": key, "ops": [...]}. One file key may feed several names (tied
  weights).
- `{i}` stands for a layer index, on both sides or on neither; a name holding it starts with
  "encoder.{i}." or "decoder.{i}.". Each stack has as many layers as the file has consecutive
  indices for (0, 1, ... while any of that stack's keys exists), unless the caller says.
- `prefix`: the file's keys are read without it (DataParallel saves "module.encoder...");
  keys without it are unexpected.
- `same_as`: file keys not loaded because another key holds the same tensor, which is checked
  (the Annotated Transformer keeps a copy of its sinusoid buffer per side).
- `ignore`: file keys (or fnmatch patterns such as "*.num_batches_tracked") left out on purpose.
- Every other file key that no entry takes is reported as unexpected, and every file key an
  entry names that the file lacks as missing (MappedState).

Ops, applied in the order given:
- {"chunk": [k, n]}: the k-th (from 0) of n equal slices along the first axis.
  nn.MultiheadAttention packs queries, keys and values in in_proj_weight (3d, d) and
  in_proj_bias (3d,): q is [0, 3], k [1, 3], v [2, 3].
- {"squeeze": a}: drop axis a, which must have size 1 ((maxlen, 1, d) -> (maxlen, d)).
- {"transpose": [a, b]}: swap two axes (a weight stored (in, out); torch's Linear is (out, in)).
- {"reshape": [sizes]}: the same numbers in another shape; one size may be -1.
- {"rows": n}: the first n rows along the first axis; n is a number, or a name the importer
  gives a value ("max_len": how many positions the minitx model keeps).
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from minitx.core.importing.errors import ImportFileError

FORMAT = "minitx-import-mapping"
VERSION = 1
LAYER = "{i}"
STACKS = ("encoder", "decoder")
SIZE_NAMES = ("max_len",)  # the sizes a "rows" op may name; the importer gives their values
FIELDS = ("format", "version", "layout", "about", "prefix", "tensors", "same_as", "ignore")
MAX_MAPPING_BYTES = 4 * 1024 * 1024  # a mapping of every tensor of a 100-layer model is ~1 MB


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
# Ops


@dataclass(frozen=True)
class Op:
    name: str  # one of OPS
    arg: Any  # as validated for it (tuples for lists)

    def to_json(self) -> dict[str, Any]:
        return {self.name: list(self.arg) if isinstance(self.arg, tuple) else self.arg}

    def apply(self, t: torch.Tensor, sizes: dict[str, int]) -> torch.Tensor:
        """The op on t, or ValueError saying (in a phrase) why t does not fit it."""
        shape = tuple(t.shape)
        if self.name == "chunk":
            k, n = self.arg
            if t.dim() == 0 or shape[0] % n:
                raise ValueError(f"chunk {list(self.arg)} needs a first axis divisible by {n}; the shape is "
                                 f"{shape}")
            return t.chunk(n, dim=0)[k]
        if self.name == "squeeze":
            axis = self.arg
            if not -t.dim() <= axis < t.dim() or shape[axis] != 1:
                raise ValueError(f"squeeze {axis} needs an axis {axis} of size 1; the shape is {shape}")
            return t.squeeze(axis)
        if self.name == "transpose":
            a, b = self.arg
            if not all(-t.dim() <= x < t.dim() for x in (a, b)):
                raise ValueError(f"transpose {list(self.arg)} needs axes {a} and {b}; the shape is {shape}")
            return t.transpose(a, b)
        if self.name == "reshape":
            target = list(self.arg)
            known = math.prod(x for x in target if x != -1)  # sizes are >= 1, so known >= 1
            if t.numel() % known if -1 in target else known != t.numel():
                raise ValueError(f"reshape {target} does not fit {t.numel()} numbers of shape {shape}")
            return t.reshape(target)
        if self.name == "rows":
            n = sizes.get(self.arg) if isinstance(self.arg, str) else self.arg
            if n is None:
                raise ValueError(f"rows {self.arg!r} needs a value for {self.arg!r}, which was not given")
            if t.dim() == 0 or shape[0] < n:
                raise ValueError(f"rows {self.arg!r} needs at least {n} rows; the shape is {shape}")
            return t[:n]
        raise AssertionError(self.name)  # parse_op admits no other name


def _axis_pair(arg: Any) -> bool:
    return isinstance(arg, list) and len(arg) == 2 and all(_is_int(x) for x in arg)


# op name -> (is its argument valid, what a valid argument is)
OPS: dict[str, tuple[Any, str]] = {
    "chunk": (lambda a: _axis_pair(a) and a[1] >= 1 and 0 <= a[0] < a[1],
              "[index, count] with 0 <= index < count"),
    "squeeze": (_is_int, "an axis number"),
    "transpose": (_axis_pair, "two axis numbers [a, b]"),
    "reshape": (lambda a: isinstance(a, list) and bool(a) and a.count(-1) <= 1
                and all(_is_int(x) and (x >= 1 or x == -1) for x in a),
                "a list of sizes (each at least 1, or one -1)"),
    "rows": (lambda a: (_is_int(a) and a >= 1) or a in SIZE_NAMES,
             f"a number of rows or one of {', '.join(map(repr, SIZE_NAMES))}"),
}


def parse_op(data: Any, where: str) -> Op:
    if not isinstance(data, dict) or len(data) != 1:
        raise ImportFileError(f"{where} is not an op such as {{\"chunk\": [0, 3]}} (one name, one value)")
    ((name, arg),) = data.items()
    if name not in OPS:
        raise ImportFileError(f"{where}: unknown op {name!r}; the ops are {', '.join(OPS)}")
    valid, expected = OPS[name]
    if not valid(arg):
        raise ImportFileError(f"{where}: {name} takes {expected}, got {json.dumps(arg)}")
    return Op(name, tuple(arg) if isinstance(arg, list) else arg)


# ---------------------------------------------------------------------------------------------
# Mappings


@dataclass(frozen=True)
class Entry:
    target: str  # a minitx name, perhaps holding {i}
    source: str  # a file key, holding {i} when target does
    ops: tuple[Op, ...] = ()

    @property
    def stack(self) -> str | None:
        """"encoder" or "decoder" for a per-layer entry (one holding {i}), else None."""
        return self.target.split(".", 1)[0] if LAYER in self.target else None

    def at(self, layer: int) -> Entry:
        index = str(layer)
        return Entry(self.target.replace(LAYER, index), self.source.replace(LAYER, index), self.ops)

    def to_json(self) -> str | dict[str, Any]:
        if not self.ops:
            return self.source
        return {"from": self.source, "ops": [op.to_json() for op in self.ops]}


@dataclass(frozen=True)
class WeightMapping:
    entries: tuple[Entry, ...]
    same_as: tuple[tuple[str, str], ...] = ()  # (file key not loaded, the file key it must equal)
    ignore: tuple[str, ...] = ()  # file keys or fnmatch patterns
    prefix: str = ""
    layout: str = ""
    about: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, which parse_mapping reads back to an equal mapping."""
        data: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if self.layout:
            data["layout"] = self.layout
        if self.about:
            data["about"] = self.about
        if self.prefix:
            data["prefix"] = self.prefix
        data["tensors"] = {e.target: e.to_json() for e in self.entries}
        if self.same_as:
            data["same_as"] = dict(self.same_as)
        if self.ignore:
            data["ignore"] = list(self.ignore)
        return data

    def to_json(self) -> str:
        """to_dict() as JSON for a person to edit: one line per tensor."""
        def compact(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False)

        lines = []
        for name, value in self.to_dict().items():
            if isinstance(value, dict):
                items = [f"    {compact(k)}: {compact(v)}" for k, v in value.items()]
                lines.append(f"  {compact(name)}: {{\n" + ",\n".join(items) + "\n  }")
            else:
                lines.append(f"  {compact(name)}: {compact(value)}")
        return "{\n" + ",\n".join(lines) + "\n}\n"


def parse_mapping(data: Any, source: str = "mapping") -> WeightMapping:
    """A mapping from its JSON form, checked; ImportFileError naming `source` and the key."""
    if not isinstance(data, dict):
        raise ImportFileError(f"{source}: a mapping is a JSON object, not a {type(data).__name__}")
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise ImportFileError(f"{source}: unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
    if data.get("format") != FORMAT:
        raise ImportFileError(f"{source}: 'format' must be {FORMAT!r} (got {data.get('format')!r})")
    if data.get("version") != VERSION or not _is_int(data.get("version")):
        raise ImportFileError(f"{source}: this minitx reads mapping version {VERSION}, not "
                              f"{data.get('version')!r}")
    for name in ("layout", "about", "prefix"):
        if not isinstance(data.get(name, ""), str):
            raise ImportFileError(f"{source}: {name!r} must be text")
    tensors = data.get("tensors")
    if not isinstance(tensors, dict) or not tensors:
        raise ImportFileError(f"{source}: 'tensors' must be an object of minitx names to file keys")
    entries = tuple(_parse_entry(target, value, source) for target, value in tensors.items())
    same_as = data.get("same_as", {})
    if not isinstance(same_as, dict) or not all(isinstance(v, str) and v for v in same_as.values()):
        raise ImportFileError(f"{source}: 'same_as' must be an object of file keys to file keys")
    for key, other in same_as.items():
        if LAYER in key or LAYER in other or key == other or not key:
            raise ImportFileError(f"{source}: same_as[{key!r}] must name another file key, without {LAYER}")
    ignore = data.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(p, str) and p for p in ignore):
        raise ImportFileError(f"{source}: 'ignore' must be a list of file keys or patterns")
    return WeightMapping(entries, tuple(same_as.items()), tuple(ignore), data.get("prefix", ""),
                         data.get("layout", ""), data.get("about", ""))


def _parse_entry(target: Any, value: Any, source: str) -> Entry:
    where = f"{source}: tensors[{target!r}]"
    if not target or any(c.isspace() for c in target):
        raise ImportFileError(f"{where}: a minitx name is a non-empty name without spaces")
    if isinstance(value, str):
        key, ops = value, []
    elif isinstance(value, dict):
        extra = [k for k in value if k not in ("from", "ops")]
        if extra:
            raise ImportFileError(f"{where}: unknown field {extra[0]!r}; an entry has 'from' and 'ops'")
        key, ops = value.get("from"), value.get("ops", [])
        if not isinstance(ops, list):
            raise ImportFileError(f"{where}: 'ops' must be a list")
    else:
        raise ImportFileError(f"{where} must be a file key or {{\"from\": key, \"ops\": [...]}}")
    if not isinstance(key, str) or not key:
        raise ImportFileError(f"{where}: 'from' must name a file key")
    if target.count(LAYER) > 1 or key.count(LAYER) > 1 or (LAYER in target) != (LAYER in key):
        raise ImportFileError(f"{where}: {LAYER} must stand once on both sides or on neither "
                              f"(from {key!r})")
    if LAYER in target and not any(target.startswith(f"{stack}.{LAYER}.") for stack in STACKS):
        raise ImportFileError(f"{where}: a per-layer name starts with encoder.{LAYER}. or decoder.{LAYER}.")
    return Entry(target, key, tuple(parse_op(op, f"{where} op {n}") for n, op in enumerate(ops, start=1)))


def read_mapping(path: str | os.PathLike) -> WeightMapping:
    """A mapping file; ImportFileError naming the file and the line (bad JSON) or key."""
    path = Path(path)
    if not path.exists():
        raise ImportFileError(f"no such file: {path}")
    if path.is_dir():
        raise ImportFileError(f"{path} is a folder, not a mapping file")
    try:
        if path.stat().st_size > MAX_MAPPING_BYTES:
            raise ImportFileError(f"{path} is larger than a mapping ({MAX_MAPPING_BYTES:,} bytes at most)")
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise ImportFileError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ImportFileError(f"{path}: byte {e.start} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportFileError(f"{path} line {e.lineno} column {e.colno}: {e.msg} (not valid JSON)") from None
    except RecursionError:
        raise ImportFileError(f"{path}: JSON nested too deeply") from None
    return parse_mapping(data, str(path))


# ---------------------------------------------------------------------------------------------
# Applying a mapping to a state_dict


@dataclass
class MappedState:
    tensors: dict[str, torch.Tensor]  # minitx name -> tensor, for every entry found in the file
    missing: list[tuple[str, str]]  # (minitx name, file key) for file keys the file lacks
    unexpected: list[str]  # the file's keys that no entry, same_as or ignore accounts for
    layers: dict[str, int]  # layers per stack among the names produced
    sources: dict[str, str] = field(default_factory=dict)  # minitx name -> the file's key (for messages)

    def require_complete(self, source: str) -> None:
        """ImportFileError when anything is missing or unexpected, naming the first of each."""
        if self.missing:
            name, key = self.missing[0]
            more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
            raise ImportFileError(f"{source} has no tensor {key!r}, which minitx's {name!r} is read "
                                  f"from{more}")
        if self.unexpected:
            more = f" (and {len(self.unexpected) - 1} more)" if len(self.unexpected) > 1 else ""
            raise ImportFileError(f"{source} has tensor {self.unexpected[0]!r}{more}, which the mapping "
                                  f"does not take; map it, or list it under 'ignore'")


def count_layers(mapping: WeightMapping, keys: set[str] | dict[str, Any]) -> dict[str, int]:
    """Layers of each stack the file holds: consecutive indices from 0 for which any of that
    stack's per-layer keys exists (keys already without the mapping's prefix)."""
    counts = {}
    for stack in STACKS:
        per_layer = [e for e in mapping.entries if e.stack == stack]
        n = 0
        while per_layer and n <= len(keys) and any(e.at(n).source in keys for e in per_layer):
            n += 1
        counts[stack] = n
    return counts


def apply_mapping(mapping: WeightMapping, state: dict[str, torch.Tensor], *,
                  sizes: dict[str, int] | None = None, layers: dict[str, int] | None = None,
                  source: str = "the file") -> MappedState:
    """The file's tensors under minitx's names (each contiguous, in the file's dtype), with what
    is missing and unexpected. An op that does not fit its tensor, a same_as copy that differs,
    or two entries producing one name raise ImportFileError naming `source` and the key."""
    sizes = sizes or {}
    prefix = mapping.prefix
    # file key as the mapping names it -> the key in the file (the prefix put back, for messages)
    keys = {k[len(prefix):]: k for k in state if k.startswith(prefix)}
    layers = layers if layers is not None else count_layers(mapping, keys)
    tensors: dict[str, torch.Tensor] = {}
    sources: dict[str, str] = {}
    missing: list[tuple[str, str]] = []
    used: set[str] = set()
    produced: set[str] = set()
    for entry in _expanded(mapping, layers):
        if entry.target in produced:
            raise ImportFileError(f"{source}: the mapping gives {entry.target!r} twice")
        produced.add(entry.target)
        if entry.source not in keys:
            missing.append((entry.target, prefix + entry.source))
            continue
        key = keys[entry.source]
        used.add(key)
        t = state[key]
        for op in entry.ops:
            try:
                t = op.apply(t, sizes)
            except ValueError as e:
                raise ImportFileError(f"{source}: {key!r} (for {entry.target!r}): {e}") from None
        tensors[entry.target] = t.contiguous()
        sources[entry.target] = key
    for copy, original in mapping.same_as:
        if copy not in keys:
            continue
        used.add(keys[copy])
        if original in keys:
            a, b = state[keys[copy]], state[keys[original]]
            if a.shape != b.shape or not torch.equal(a, b):
                raise ImportFileError(f"{source}: {keys[copy]!r} differs from {keys[original]!r}, which "
                                      f"minitx loads in its place; map it on its own instead")
    ignored = {k for k in state if any(fnmatch.fnmatchcase(k, p) for p in mapping.ignore)}
    unexpected = [k for k in state if k not in used and k not in ignored]
    return MappedState(tensors, missing, unexpected, _layers_of(tensors, missing), sources)


def available_rows(mapping: WeightMapping, state: dict[str, torch.Tensor], target: str) -> int | None:
    """How many rows the tensor for minitx's `target` (a name without {i}) has before its
    "rows" op cuts it (a positional table's length, which the importer chooses max_len within);
    None when the mapping does not give `target` or the file lacks its key. An op that does not
    fit is left for apply_mapping to report."""
    entry = next((e for e in mapping.entries if e.target == target), None)
    key = None if entry is None else mapping.prefix + entry.source
    if key not in state:
        return None
    t = state[key]
    for op in entry.ops:
        if op.name == "rows":
            break
        try:
            t = op.apply(t, {})
        except ValueError:
            return None
    return int(t.shape[0]) if t.dim() else None


def _expanded(mapping: WeightMapping, layers: dict[str, int]):
    for entry in mapping.entries:
        if entry.stack is None:
            yield entry
        else:
            for i in range(layers.get(entry.stack, 0)):
                yield entry.at(i)


def _layers_of(tensors: dict[str, torch.Tensor], missing: list[tuple[str, str]]) -> dict[str, int]:
    """Layers per stack among minitx names ("encoder.3.ff.0.weight" is layer 3 of the encoder)."""
    counts = dict.fromkeys(STACKS, 0)
    for name in [*tensors, *(n for n, _ in missing)]:
        stack, _, rest = name.partition(".")
        index = rest.split(".", 1)[0]
        if stack in counts and index.isdigit():
            counts[stack] = max(counts[stack], int(index) + 1)
    return counts


# ---------------------------------------------------------------------------------------------
# The built-in layouts, as mappings


# Each layout as a table, in the order of minitx's state_dict. A row is one of
#   (TENSOR, minitx name, file key or {"from": ..., "ops": [...]})
#   (MODULE, minitx module, file module, the file's names for minitx's weight and bias)
#   (ATTENTION, minitx block, file block): q/k/v/out, packed (nn.MultiheadAttention) or as four
#   Linears (the Annotated Transformer), as the layout's attention function maps them.
# Per-layer names hold {i}.
TENSOR, MODULE, ATTENTION = "tensor", "module", "attention"
WB, AB = ("weight", "bias"), ("a_2", "b_2")  # the Annotated Transformer's norms call them a_2, b_2

_T_ENC, _T_DEC = "transformer.encoder.layers.{i}", "transformer.decoder.layers.{i}"
_TUTORIAL = [
    (TENSOR, "src_embed.weight", "src_tok_emb.embedding.weight"),
    (TENSOR, "tgt_embed.weight", "tgt_tok_emb.embedding.weight"),
    # (maxlen, 1, d), one table for both sides -> (max_len, d)
    (TENSOR, "positional", {"from": "positional_encoding.pos_embedding",
                            "ops": [{"squeeze": 1}, {"rows": "max_len"}]}),
    (ATTENTION, "encoder.{i}.self_attn", f"{_T_ENC}.self_attn"),
    (MODULE, "encoder.{i}.ff.0", f"{_T_ENC}.linear1", WB),
    (MODULE, "encoder.{i}.ff.3", f"{_T_ENC}.linear2", WB),
    (MODULE, "encoder.{i}.attn_res.norm", f"{_T_ENC}.norm1", WB),
    (MODULE, "encoder.{i}.ff_res.norm", f"{_T_ENC}.norm2", WB),
    (ATTENTION, "decoder.{i}.self_attn", f"{_T_DEC}.self_attn"),
    (ATTENTION, "decoder.{i}.cross_attn", f"{_T_DEC}.multihead_attn"),
    (MODULE, "decoder.{i}.ff.0", f"{_T_DEC}.linear1", WB),
    (MODULE, "decoder.{i}.ff.3", f"{_T_DEC}.linear2", WB),
    (MODULE, "decoder.{i}.self_res.norm", f"{_T_DEC}.norm1", WB),
    (MODULE, "decoder.{i}.cross_res.norm", f"{_T_DEC}.norm2", WB),
    (MODULE, "decoder.{i}.ff_res.norm", f"{_T_DEC}.norm3", WB),
    (MODULE, "encoder_norm", "transformer.encoder.norm", WB),
    (MODULE, "decoder_norm", "transformer.decoder.norm", WB),
    (MODULE, "output", "generator", WB),
]

_A_ENC, _A_DEC = "encoder.layers.{i}", "decoder.layers.{i}"
_ANNOTATED = [
    (TENSOR, "src_embed.weight", "src_embed.0.lut.weight"),
    (TENSOR, "tgt_embed.weight", "tgt_embed.0.lut.weight"),
    # (1, max_len, d) per side, the target's a copy (same_as) -> (max_len, d)
    (TENSOR, "positional", {"from": "src_embed.1.pe", "ops": [{"squeeze": 0}, {"rows": "max_len"}]}),
    (ATTENTION, "encoder.{i}.self_attn", f"{_A_ENC}.self_attn"),
    (MODULE, "encoder.{i}.ff.0", f"{_A_ENC}.feed_forward.w_1", WB),
    (MODULE, "encoder.{i}.ff.3", f"{_A_ENC}.feed_forward.w_2", WB),
    (MODULE, "encoder.{i}.attn_res.norm", f"{_A_ENC}.sublayer.0.norm", AB),
    (MODULE, "encoder.{i}.ff_res.norm", f"{_A_ENC}.sublayer.1.norm", AB),
    (ATTENTION, "decoder.{i}.self_attn", f"{_A_DEC}.self_attn"),
    (ATTENTION, "decoder.{i}.cross_attn", f"{_A_DEC}.src_attn"),
    (MODULE, "decoder.{i}.ff.0", f"{_A_DEC}.feed_forward.w_1", WB),
    (MODULE, "decoder.{i}.ff.3", f"{_A_DEC}.feed_forward.w_2", WB),
    (MODULE, "decoder.{i}.self_res.norm", f"{_A_DEC}.sublayer.0.norm", AB),
    (MODULE, "decoder.{i}.cross_res.norm", f"{_A_DEC}.sublayer.1.norm", AB),
    (MODULE, "decoder.{i}.ff_res.norm", f"{_A_DEC}.sublayer.2.norm", AB),
    (MODULE, "encoder_norm", "encoder.norm", AB),
    (MODULE, "decoder_norm", "decoder.norm", AB),
    (MODULE, "output", "generator.proj", WB),
]
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _packed_attention(target: str, source: str) -> dict[str, Any]:
    """nn.MultiheadAttention: q, k and v are the thirds of in_proj_weight and in_proj_bias, in
    that order; out_proj is a Linear of its own."""
    entries: dict[str, Any] = {}
    for index, projection in enumerate(_PROJECTIONS[:3]):
        for kind in WB:
            entries[f"{target}.{projection}.{kind}"] = {"from": f"{source}.in_proj_{kind}",
                                                        "ops": [{"chunk": [index, 3]}]}
    for kind in WB:
        entries[f"{target}.out_proj.{kind}"] = f"{source}.out_proj.{kind}"
    return entries


def _four_linears(target: str, source: str) -> dict[str, Any]:
    """The Annotated Transformer's MultiHeadedAttention: linears 0-3 are q, k, v and out."""
    return {f"{target}.{projection}.{kind}": f"{source}.linears.{index}.{kind}"
            for index, projection in enumerate(_PROJECTIONS) for kind in WB}


def _tensors(table: list[tuple], attention) -> dict[str, Any]:
    tensors: dict[str, Any] = {}
    for kind, target, source, *names in table:
        if kind == TENSOR:
            tensors[target] = source
        elif kind == MODULE:
            for mine, theirs in zip(WB, names[0]):
                tensors[f"{target}.{mine}"] = f"{source}.{theirs}"
        else:
            tensors.update(attention(target, source))
    return tensors


def _tutorial() -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "layout": "nn-transformer",
            "about": "PyTorch's tutorial 'Language Translation with nn.Transformer and torchtext' "
                     "(Seq2SeqTransformer): post-norm layers, a final LayerNorm after each stack",
            "tensors": _tensors(_TUTORIAL, _packed_attention)}


def _annotated() -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "layout": "annotated",
            "about": "Harvard NLP's Annotated Transformer (make_model's EncoderDecoder): pre-norm "
                     "layers, its own LayerNorm (a_2, b_2), a final norm after each stack",
            "tensors": _tensors(_ANNOTATED, _four_linears),
            "same_as": {"tgt_embed.1.pe": "src_embed.1.pe"}}


BUILTIN_LAYOUTS = {"nn-transformer": _tutorial, "annotated": _annotated}


def builtin_mapping(layout: str) -> WeightMapping:
    """The mapping of a layout minitx knows (BUILTIN_LAYOUTS), with {i} for the layer index."""
    if layout not in BUILTIN_LAYOUTS:
        raise ImportFileError(f"unknown layout {layout!r}; minitx knows {', '.join(BUILTIN_LAYOUTS)}")
    return parse_mapping(BUILTIN_LAYOUTS[layout](), f"the built-in {layout} mapping")
