"""Interventions: knock out a head, replace its attention pattern, patch activations, record them.

Heads are named `KIND:Ll.Hh`, counted from 1 as the app shows them: KIND `enc` (encoder
self-attention), `self` (decoder self-attention) or `cross`. A head's output is its d_k slice of
the concatenated head outputs, before the output projection. The residual stream leaving a layer
is `enc:Ll.resid` or `dec:Ll.resid`.

- zero ablation: the head's output is 0 at every position;
- mean ablation: it is its mean over a seeded reference batch (`head_means`);
- pattern override: the head's attention weights become uniform over the keys it may see, or the
  task's expected alignment (cross-attention only; rows the task expects nothing of are kept);
- patching: a head's output or a residual stream, at some or all positions, is replaced by values
  recorded in another run (core/interp/patching.py runs the clean/corrupted experiment); so may
  what one head's query projection reads (`HeadInput` side "q") or its key and value projections
  ("kv"), the other heads of the block reading what they always do (path patching,
  core/interp/path_patching.py); input patches act in full forwards only;
- recording: every head output and residual stream is kept (logit lens, means, patching), and
  with `inputs` what every block's heads read.

An Interventions object is applied with `with interventions.applied(model): ...`; everything the
model computes inside (full forward, greedy_decode, a Stepper created there) is changed, the same
way in the full forward and in cached decoding (core/model/hooks.py has the hook points).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from minitx.core.model.hooks import HeadHook, hooks_active
from minitx.core.model.transformer import Seq2Seq, eval_mode

KINDS = ("enc", "self", "cross")
SIDES = ("kv", "q")  # a head's key and value input (what it reads from), its query input (what it asks)
SIDE_NAMES = {"kv": "K/V", "q": "Q"}
KIND_NAMES = {"enc": "encoder self-attention", "self": "decoder self-attention",
              "cross": "cross-attention"}
ABLATIONS = ("zero", "mean")
PATTERNS = ("uniform", "expected")
MEAN_SEED = 7919  # the reference batch of mean ablation: the same means on every run
MEAN_SEQUENCES = 256


@dataclass(frozen=True, order=True)
class Head:
    kind: str  # "enc" | "self" | "cross"
    layer: int  # 0-based
    head: int  # 0-based

    def __str__(self) -> str:
        return f"{self.kind}:L{self.layer + 1}.H{self.head + 1}"


@dataclass(frozen=True, order=True)
class Stream:
    """The residual stream leaving one layer."""

    stack: str  # "enc" | "dec"
    layer: int  # 0-based

    def __str__(self) -> str:
        return f"{self.stack}:L{self.layer + 1}.resid"


@dataclass(frozen=True, order=True)
class HeadInput:
    """What one head's query projection (side "q") or key and value projections ("kv") read: the
    block's input (B, T, d), which every other head of the block keeps reading."""

    head: Head
    side: str  # "kv" | "q"

    def __str__(self) -> str:
        return f"{self.head} {SIDE_NAMES[self.side]}"


def layer_count(model: Seq2Seq, kind: str) -> int:
    return len(model.encoder) if kind == "enc" else len(model.decoder)


def all_heads(model: Seq2Seq, kinds: tuple[str, ...] = KINDS) -> list[Head]:
    h = model.cfg.n_heads
    return [Head(k, layer, head) for k in kinds for layer in range(layer_count(model, k))
            for head in range(h)]


_HEAD_NAME = re.compile(r"^(enc|self|cross)(?::L(\d+)(?:\.H(\d+))?)?$", re.IGNORECASE)


def parse_heads(spec: str, model: Seq2Seq) -> list[Head]:
    """'cross:L2.H3' -> that head; 'cross:L2' -> every head of that layer; 'cross' -> every
    cross-attention head. ValueError (one sentence) for anything else or a head the model lacks."""
    text = spec.strip().replace(" ", "")
    match = _HEAD_NAME.match(text)
    if not match:
        raise ValueError(f"{spec!r} is not a head: write KIND:Ll.Hh, e.g. cross:L2.H3 "
                         "(KIND enc, self or cross; layers and heads from 1)")
    kind, layer, head = match.group(1).lower(), match.group(2), match.group(3)
    layers, heads = layer_count(model, kind), model.cfg.n_heads
    if layer is not None and not 1 <= int(layer) <= layers:
        raise ValueError(f"{spec}: this model's {KIND_NAMES[kind]} has layers 1-{layers}")
    if head is not None and not 1 <= int(head) <= heads:
        raise ValueError(f"{spec}: this model has heads 1-{heads}")
    chosen_layers = range(layers) if layer is None else [int(layer) - 1]
    chosen_heads = range(heads) if head is None else [int(head) - 1]
    return [Head(kind, la, he) for la in chosen_layers for he in chosen_heads]


def parse_head_list(specs, model: Seq2Seq) -> list[Head]:
    """Several specs (each as parse_heads) -> their heads, each once, in order."""
    heads: list[Head] = []
    for spec in specs:
        heads += [h for h in parse_heads(spec, model) if h not in heads]
    return heads


def describe_heads(heads, n_heads: int | None = None) -> str:
    """'cross:L2.H1, enc:L1.H3', or with n_heads a whole layer as one name: 'cross:L2'."""
    heads = sorted(set(heads))
    names = []
    for h in heads:
        layer = [x for x in heads if (x.kind, x.layer) == (h.kind, h.layer)]
        if n_heads is not None and len(layer) == n_heads:
            name = f"{h.kind}:L{h.layer + 1}"
            if name not in names:
                names.append(name)
        else:
            names.append(str(h))
    return ", ".join(names) or "none"


def without_heads(name: str, heads, n_heads: int | None = None, kind: str = "") -> str:
    """'reverse', or 'reverse without cross:L2' (with kind: '... (zero)'): what every report and
    title calls a model with heads knocked out."""
    if not heads:
        return name
    return f"{name} without {describe_heads(heads, n_heads)}" + (f" ({kind})" if kind else "")


# ---------------------------------------------------------------------------------------------
# What to record and what to patch


@dataclass
class Recording:
    """Activations seen while it was active, in the order computed (cached decoding adds one
    position per step): head outputs per attention block, residual streams per layer."""

    heads: bool = True  # False: streams only (what the logit lens needs)
    inputs: bool = False  # True: also what each head of every block reads (full forwards only)
    outputs: dict[tuple[str, int], list[torch.Tensor]] = field(default_factory=dict)  # (B, h, t, k)
    streams: dict[tuple[str, int], list[torch.Tensor]] = field(default_factory=dict)  # (B, t, d)
    read: dict[tuple[str, int, str], torch.Tensor] = field(default_factory=dict)  # (B, h, T, d) per side

    def head_outputs(self, kind: str, layer: int) -> torch.Tensor:
        """(B, h, T, d_k): every position recorded, in order."""
        return torch.cat(self.outputs[(kind, layer)], dim=2)

    def stream(self, stack: str, layer: int) -> torch.Tensor:
        """(B, T, d)."""
        return torch.cat(self.streams[(stack, layer)], dim=1)

    def head_input(self, site: HeadInput) -> torch.Tensor:
        """(B, T, d): what that head's projections read (recorded with inputs=True)."""
        return self.read[(site.head.kind, site.head.layer, site.side)][:, site.head.head]

    def clear(self) -> None:
        self.outputs.clear()
        self.streams.clear()
        self.read.clear()


@dataclass(frozen=True)
class Patch:
    """Replace `site` at `positions` (None: every position) with `values` from another run:
    (B, T, d_k) for a head, (B, T, d) for a stream or a head's input; B may be 1 for any batch."""

    site: Head | Stream | HeadInput
    values: torch.Tensor
    positions: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Interventions:
    zero: frozenset[Head] = frozenset()
    mean: dict[Head, torch.Tensor] = field(default_factory=dict)  # head -> its mean output (d_k,)
    patterns: dict[Head, str] = field(default_factory=dict)  # head -> "uniform" | "expected"
    expected: torch.Tensor | None = None  # (B, T, S) bool: the task's alignment, for "expected"
    patches: tuple[Patch, ...] = ()
    record: Recording | None = None

    @property
    def ablated(self) -> list[Head]:
        return sorted(self.zero | set(self.mean))

    def __bool__(self) -> bool:
        return bool(self.zero or self.mean or self.patterns or self.patches or self.record)

    def recording(self, record: Recording) -> Interventions:
        """The same interventions, also recording into `record`."""
        return replace(self, record=record)

    def describe(self) -> str:
        """'zero cross:L2.H1, cross:L2.H2' (what the title bars and reports say)."""
        parts = []
        if self.zero:
            parts.append(f"zero {describe_heads(self.zero)}")
        if self.mean:
            parts.append(f"mean {describe_heads(self.mean)}")
        for how in PATTERNS:
            heads = [h for h, p in self.patterns.items() if p == how]
            if heads:
                parts.append(f"{how} pattern {describe_heads(heads)}")
        if self.patches:
            parts.append(f"{len(self.patches)} patches")
        return "; ".join(parts) or "none"

    @contextmanager
    def applied(self, model: Seq2Seq) -> Iterator[Seq2Seq]:
        """Apply these interventions to everything `model` computes in this block (this thread)."""
        self._validate(model)
        with hooks_active(self._hooks(model)):
            yield model

    # -- building the hooks ------------------------------------------------------------------------
    def _validate(self, model: Seq2Seq) -> None:
        names = {str(h) for h in all_heads(model)}
        inputs = [p.site.head for p in self.patches if isinstance(p.site, HeadInput)]
        for head in [*self.zero, *self.mean, *self.patterns, *inputs]:
            if str(head) not in names:
                raise ValueError(f"{head}: this model has no such head")
        for head, how in self.patterns.items():
            if how not in PATTERNS:
                raise ValueError(f"pattern: must be one of {', '.join(PATTERNS)}; got {how!r}")
            if how == "expected" and (head.kind != "cross" or self.expected is None):
                raise ValueError(f"{head}: the expected alignment is a cross-attention pattern "
                                 "and needs the task's alignment of the sources")

    def _hooks(self, model: Seq2Seq) -> dict:
        hooks: dict = {}
        blocks = [("enc", i, layer.self_attn) for i, layer in enumerate(model.encoder)]
        for i, layer in enumerate(model.decoder):
            blocks += [("self", i, layer.self_attn), ("cross", i, layer.cross_attn)]
        for kind, index, block in blocks:
            hook = self._head_hook(kind, index, model.cfg.n_heads)
            if hook is not None:
                hooks[block] = hook
        for stack, layers in (("enc", model.encoder), ("dec", model.decoder)):
            for index, layer in enumerate(layers):
                edit = self._stream_hook(stack, index)
                if edit is not None:
                    hooks[layer] = edit
        return hooks

    def _head_hook(self, kind: str, layer: int, n_heads: int) -> HeadHook | None:
        def here(heads):
            return sorted(h.head for h in heads if (h.kind, h.layer) == (kind, layer))

        zero = here(self.zero)
        mean = {h.head: m for h, m in self.mean.items() if (h.kind, h.layer) == (kind, layer)}
        patterns = {h.head: p for h, p in self.patterns.items() if (h.kind, h.layer) == (kind, layer)}
        patches = [p for p in self.patches if isinstance(p.site, Head)
                   and (p.site.kind, p.site.layer) == (kind, layer)]
        input_patches = [p for p in self.patches if isinstance(p.site, HeadInput)
                         and (p.site.head.kind, p.site.head.layer) == (kind, layer)]
        record = self.record if self.record is not None and self.record.heads else None
        record_inputs = self.record if self.record is not None and self.record.inputs else None
        if not (zero or mean or patterns or patches or record or input_patches or record_inputs):
            return None

        def output(out: torch.Tensor, offset: int) -> torch.Tensor:  # (B, h, Tq, k)
            if zero or mean or patches:
                out = out.clone()
                for h in zero:
                    out[:, h] = 0
                for h, m in mean.items():
                    out[:, h] = m.to(out)
                for patch in patches:
                    rows, values = _rows(patch, offset, out.shape[2])
                    out[:, patch.site.head, rows] = values.to(out)
            if record is not None:
                record.outputs.setdefault((kind, layer), []).append(out)
            return out

        expected = self.expected

        def weights(w: torch.Tensor, mask: torch.Tensor | None, offset: int) -> torch.Tensor:
            B, _, Tq, Tk = w.shape  # (B, h, Tq, Tk)
            w = w.clone()
            for h, how in patterns.items():
                if how == "uniform":
                    allowed = torch.ones(B, Tq, Tk, dtype=torch.bool, device=w.device) \
                        if mask is None else mask[:, 0].expand(B, Tq, Tk)
                    w[:, h] = allowed / allowed.sum(dim=-1, keepdim=True)
                else:
                    rows = _expected_rows(expected, offset, Tq, Tk).to(w.device)  # (B, Tq, Tk)
                    has = rows.any(dim=-1, keepdim=True)  # (B, Tq, 1)
                    w[:, h] = torch.where(has, rows / rows.sum(dim=-1, keepdim=True).clamp(min=1), w[:, h])
            return w

        def reads(side: str):
            mine = [p for p in input_patches if p.site.side == side]
            if not (mine or record_inputs):
                return None

            def edit(x: torch.Tensor, offset: int) -> torch.Tensor:  # (B, T, d) -> (B, h, T, d)
                B, T, d = x.shape
                per_head = x[:, None].expand(B, n_heads, T, d)
                if mine:
                    per_head = per_head.clone()
                    for patch in mine:
                        rows, values = _rows(patch, offset, T)
                        per_head[:, patch.site.head.head, rows] = values.to(per_head)
                if record_inputs is not None:
                    record_inputs.read[(kind, layer, side)] = per_head
                return per_head

            return edit

        return HeadHook(weights=weights if patterns else None, output=output,
                        query_input=reads("q"), key_value_input=reads("kv"))

    def _stream_hook(self, stack: str, layer: int):
        patches = [p for p in self.patches if isinstance(p.site, Stream)
                   and (p.site.stack, p.site.layer) == (stack, layer)]
        record = self.record
        if not (patches or record is not None):
            return None

        def edit(x: torch.Tensor, offset: int) -> torch.Tensor:  # (B, Tq, d)
            if patches:
                x = x.clone()
                for patch in patches:
                    rows, values = _rows(patch, offset, x.shape[1])
                    x[:, rows] = values.to(x)
            if record is not None:
                record.streams.setdefault((stack, layer), []).append(x)
            return x

        return edit


def _rows(patch: Patch, offset: int, count: int) -> tuple[list[int], torch.Tensor]:
    """The query rows of this call (positions offset..offset+count-1) that `patch` replaces, and
    the values for them: (B, rows, ...)."""
    positions = range(offset, offset + count)
    wanted = positions if patch.positions is None else [p for p in positions if p in patch.positions]
    wanted = list(wanted)
    if wanted and wanted[-1] >= patch.values.shape[1]:
        raise ValueError(f"patch of {patch.site}: position {wanted[-1]} was not recorded")
    return [p - offset for p in wanted], patch.values[:, wanted]


def _expected_rows(expected: torch.Tensor, offset: int, count: int, keys: int) -> torch.Tensor:
    """(B, count, keys) bool rows of the expected alignment; False beyond what the task defines."""
    B, T, S = expected.shape
    rows = torch.zeros(B, count, keys, dtype=torch.bool)
    have = max(0, min(count, T - offset))
    if have:
        rows[:, :have, : min(S, keys)] = expected[:, offset : offset + have, :keys]
    return rows


# ---------------------------------------------------------------------------------------------
# Mean ablation


@torch.no_grad()
def head_means(model: Seq2Seq, task, n: int = MEAN_SEQUENCES, seed: int = MEAN_SEED) -> dict:
    """(kind, layer) -> (h, d_k): each head's output averaged over every real (non-padding) query
    position of n fresh sources of the task, teacher-forced on their correct outputs."""
    batch = task.batch(n, torch.Generator().manual_seed(seed))
    device, pad, src_pad = model.device, model.cfg.pad_id, model.cfg.source_pad_id
    src, tgt_in = batch.src.to(device), batch.decoder_input.to(device)
    record = Recording()
    with eval_mode(model), Interventions(record=record).applied(model):
        model(src, tgt_in)
    means = {}
    for (kind, layer) in record.outputs:
        out = record.head_outputs(kind, layer)  # (B, h, T, k)
        real = src != src_pad if kind == "enc" else tgt_in != pad  # (B, T)
        weight = real[:, None, :, None].to(out.dtype)
        means[(kind, layer)] = (out * weight).sum(dim=(0, 2)) / weight.sum(dim=(0, 2))  # (h, k)
    return means


def ablation(model: Seq2Seq, heads, kind: str = "zero", task=None,
             means: dict | None = None) -> Interventions:
    """Interventions that ablate `heads` (Head objects or spec strings): zero, or mean (over the
    task's reference batch; pass `means` from head_means to reuse them)."""
    if kind not in ABLATIONS:
        raise ValueError(f"ablation: must be one of {', '.join(ABLATIONS)}; got {kind!r}")
    chosen = [h for h in heads if isinstance(h, Head)]
    chosen += [h for h in parse_head_list([h for h in heads if not isinstance(h, Head)], model)
               if h not in chosen]
    if kind == "zero":
        return Interventions(zero=frozenset(chosen))
    if means is None:
        if task is None:
            raise ValueError("mean ablation needs the task whose fresh sources give the means")
        means = head_means(model, task)
    return Interventions(mean={h: means[(h.kind, h.layer)][h.head] for h in chosen})
