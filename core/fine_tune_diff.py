"""Base against fine-tuned: what a fine-tune changed, on two models of one architecture.

- on the pairs: each model's greedy output beside the other's and the reference, each model's
  loss per target token (core/training/evaluation.py's target_loss) and, on text pairs, corpus
  BLEU and chrF (sacrebleu: core/training/text_scores.py);
- which layers moved: each layer's relative weight change |dW| / |W| (the Frobenius norms over
  all of the layer's parameters; the embeddings, positions, final norms and output layer each
  count as one), from core/compare.py's per-tensor distances;
- a LoRA fine-tune's adapters (B a LoRA file): each adapted layer's update size
  ||scale B A|| / ||W|| on A's weight (core/model/lora.py);
- which heads moved: each decoder layer's cross-attention heads, teacher-forced on the same
  pairs (same sources, same decoder input) in both models; a head's change is the total
  variation distance between its two attention rows, 1/2 sum_s |A(s) - B(s)| (0: the same
  distribution over the source, 1: disjoint), averaged over the target positions that are not
  padding.

Two models of different architectures have no layer or head to match: those parts are skipped
with the reason in one line, and the outputs and scores are still compared. Plain data out
(numbers, names, short strings), as core/compare.py's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import torch

from minitx.core.checkpoint import Checkpoint
from minitx.core.compare import greedy_outputs, held_by_both, same_tokens, weight_distances
from minitx.core.data.batch import Batch
from minitx.core.interp.alignment import cross_attention
from minitx.core.model.lora import file_update_sizes
from minitx.core.training.evaluation import target_loss
from minitx.core.training.text_scores import corpus_scores

# Config fields that change no tensor and no head: two models differing only in these are of one
# architecture (max_len: a folder's position limit, a bundled model's own).
NOT_SHAPES = ("dropout", "attention", "bug", "pad_id", "sos_id", "eos_id", "max_len")


@dataclass(frozen=True)
class SideScores:
    """One model's figures on the pairs."""

    loss: float | None  # mean cross-entropy per target token (end token included, padding not)
    target_tokens: int
    bleu: float | None  # corpus BLEU, None when the pairs are not text (a generated task)
    chrf: float | None


@dataclass(frozen=True)
class OutputRow:
    source: str
    reference: str
    a: str  # A's greedy output
    b: str  # B's


@dataclass(frozen=True)
class LayerChange:
    layer: str  # "encoder layer 1", "decoder layer 2", or a top-level part: "src_embed", "output", ...
    relative: float  # |dW| / |W| over the layer's parameters
    tensors: int


@dataclass(frozen=True)
class HeadChange:
    layer: int  # decoder layer, from 1
    head: int  # from 1
    change: float  # mean total variation distance of its cross-attention rows, 0 to 1


@dataclass(frozen=True)
class AdapterChange:
    module: str  # the adapted layer: "decoder.1.cross_attn.q_proj"
    size: float  # ||scale B A|| / ||W||: its update as a share of A's weight


@dataclass
class FineTuneDiff:
    n: int  # pairs compared
    a: SideScores
    b: SideScores
    outputs: list[OutputRow]
    layers: list[LayerChange] = field(default_factory=list)  # in the model's order
    heads: list[HeadChange] = field(default_factory=list)  # layer by layer
    adapters: list[AdapterChange] = field(default_factory=list)  # B's LoRA adapters, if it has them
    layers_skipped: str | None = None  # why there are no layer changes, in one line
    heads_skipped: str | None = None
    text_skipped: str | None = None  # why there is no BLEU or chrF

    def moved_layers(self, top: int = 3) -> list[LayerChange]:
        """The layers that moved most, largest first."""
        return sorted(self.layers, key=lambda c: -c.relative)[:top]

    def moved_heads(self, top: int = 3) -> list[HeadChange]:
        return sorted(self.heads, key=lambda c: -c.change)[:top]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["moved_layers"] = [asdict(c) for c in self.moved_layers()]
        data["moved_heads"] = [asdict(c) for c in self.moved_heads()]
        return data


def architecture_difference(a: Checkpoint, b: Checkpoint) -> str | None:
    """None when both models are of one architecture (the same config but for what changes no
    tensor: dropout, the attention path, a bug preset, special ids) and the same tensors of the
    same shapes, else one line naming what differs. Heads split the same projections, so their
    count matters even where every shape agrees."""
    ca, cb = a.model_config, b.model_config
    differing = [f.name for f in fields(ca)
                 if f.name not in NOT_SHAPES and getattr(ca, f.name) != getattr(cb, f.name)]
    if differing:
        name = differing[0]
        return f"the models' architectures differ ({name} {getattr(ca, name)} and {getattr(cb, name)})"
    shapes = [{n: tuple(p.shape) for n, p in ckpt.model.named_parameters()} for ckpt in (a, b)]
    if shapes[0] != shapes[1]:
        return "the models' architectures differ (their tensors do not match one for one)"
    return None


def layer_of(name: str) -> str:
    """'decoder.1.ff.w2.weight' -> 'decoder layer 2'; 'src_embed.weight' -> 'src_embed'."""
    parts = name.split(".")
    if parts[0] in ("encoder", "decoder"):
        return f"{parts[0]} layer {int(parts[1]) + 1}"
    return parts[0]


def layer_changes(a: torch.nn.Module, b: torch.nn.Module) -> list[LayerChange]:
    """Each layer's |B - A| / |A| over its parameters, in the order the model names them."""
    distances, _ = weight_distances(a, b)  # sorted by name; the model's order is kept below
    by_name = {d.name: d for d in distances}
    sums: dict[str, list[float]] = {}  # layer -> [sum |dW|^2, sum |W|^2, tensors]
    for name, _ in a.named_parameters():
        d = by_name[name]
        entry = sums.setdefault(layer_of(name), [0.0, 0.0, 0])
        entry[0] += d.l2**2
        entry[1] += d.norm_a**2
        entry[2] += 1
    return [LayerChange(layer, (moved / total) ** 0.5 if total else 0.0, int(count))
            for layer, (moved, total, count) in sums.items()]


@torch.no_grad()
def head_changes(a: Checkpoint, b: Checkpoint, batch: Batch) -> list[HeadChange]:
    """Each decoder layer's and head's mean total variation distance between A's and B's
    cross-attention, both teacher-forced on `batch` (the same ids)."""
    maps_a = cross_attention(a.model, batch)  # per layer (B, h, T, S)
    maps_b = cross_attention(b.model, batch)
    real = (batch.labels != a.model_config.pad_id).to(maps_a[0].device)  # (B, T): not padding
    count = real.sum().clamp(min=1)
    changes = []
    for layer, (x, y) in enumerate(zip(maps_a, maps_b), 1):
        distance = 0.5 * (x.float() - y.to(x.device).float()).abs().sum(dim=-1)  # (B, h, T)
        mean = (distance * real[:, None, :]).sum(dim=(0, 2)) / count  # (h,)
        changes += [HeadChange(layer, head, float(value)) for head, value in enumerate(mean.tolist(), 1)]
    return changes


def _side(ckpt: Checkpoint, batch: Batch, text: bool) -> tuple[SideScores, list[str], list[str], list[str]]:
    """(scores, outputs, references, sources) of one model on its batch."""
    task, model = ckpt.task, ckpt.model
    generated = greedy_outputs(ckpt, batch)
    outputs = [task.format(row) for row in generated.tolist()]
    references = [task.format(row) for row in batch.labels.tolist()]
    sources = [task.format_source(row) for row in batch.src.tolist()]
    summed, tokens = target_loss(model, batch)
    scores = corpus_scores(outputs, references) if text else None
    return (SideScores(summed / tokens if tokens else None, tokens,
                       scores.bleu if scores else None, scores.chrf if scores else None),
            outputs, references, sources)


def _pairs(ckpt: Checkpoint, n: int, seed: int) -> Batch:
    """n of the model's evaluation pairs (its held-out or --pairs pairs, else fresh sequences),
    in one batch."""
    batches = list(ckpt.task.evaluation_batches(n, seed, batch_size=n))
    if not batches:
        raise ValueError(f"{ckpt.path}: no pairs to compare on")
    return batches[0]


def fine_tune_diff(a: Checkpoint, b: Checkpoint, n: int = 100, seed: int = 1234) -> FineTuneDiff:
    """What changed from A (the base) to B (its fine-tune) on n of A's evaluation pairs, which
    B reads in its own vocabulary (each model's task gives them: the same pairs file gives
    both the same pairs)."""
    batch_a = held_by_both(a, b, _pairs(a, n, seed))
    batch_b = batch_a if same_tokens(a, b) else held_by_both(b, a, _pairs(b, n, seed))
    text = a.task.heldout is not None and b.task.heldout is not None
    side_a, out_a, refs, sources = _side(a, batch_a, text)
    side_b, out_b, _, _ = _side(b, batch_b, text)
    # side by side only where both read the same examples: one batch, or one file's pairs each
    same_examples = batch_b is batch_a or (text and len(batch_a) == len(batch_b))
    rows = [OutputRow(s, r, x, y) for s, r, x, y in zip(sources, refs, out_a, out_b)] if same_examples else []
    not_text = None if text else f"it is measured on {a.task.evaluated_on}, not text pairs"
    diff = FineTuneDiff(min(len(batch_a), len(batch_b)), side_a, side_b, rows, text_skipped=not_text)
    why = architecture_difference(a, b)
    if why is not None:
        diff.layers_skipped = f"no layer changes: {why}"
        diff.heads_skipped = f"no head changes: {why}"
        return diff
    diff.layers = layer_changes(a.model, b.model)
    if b.lora is not None:  # B is a LoRA fine-tune: its adapters' update sizes on A's weights
        diff.adapters = [AdapterChange(m, size) for m, size in file_update_sizes(b.lora, a.model)]
    if same_tokens(a, b):
        diff.heads = head_changes(a, b, batch_a)
    else:
        diff.heads_skipped = ("no head changes: the models read different vocabularies, so no one input "
                              "feeds both")
    return diff
