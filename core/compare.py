"""Two models side by side: configs, sizes, accuracy on the same sequences, how often they
agree, which heads learned the alignment, and how far apart their weights are.

Model analysis, so it lives in core (checkpoints/ only finds and lists files). Everything
returned is plain data (numbers, names, short strings) so the CLI can print tables or `--json`
and the app can fill a summary table without any model maths of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

import torch

from minitx.core.checkpoint import Checkpoint
from minitx.core.data.batch import Batch, padded
from minitx.core.data.imported_task import ImportedTask
from minitx.core.data.task import Task
from minitx.core.interp.alignment import alignment_scores, best_head, head_sharpness
from minitx.core.interp.decode import accuracy_by_length, exact_match, greedy_decode, padded_to
from minitx.core.model.transformer import parameter_breakdown
from minitx.core.training.fine_tune import folder_dropout

SUMMARY_FIELDS = ("steps", "loss", "accuracy", "seed", "bug")  # training facts worth diffing


@dataclass
class ModelReport:
    name: str
    task: str
    params: int
    accuracy: float  # exact match on the shared sequences, against this model's own task
    by_length: dict[int, float]  # source length -> accuracy
    alignment: list[list[float]]  # (layers, heads) alignment scores (or sharpness), rows are layers
    head_measure: str = "alignment"  # "alignment", or "sharpness" when the task expects no pattern

    @property
    def best_head(self) -> tuple[int, int, float]:
        """(layer, head, score) of the head that best shows the task's alignment (0-based)."""
        layer, head = best_head(self.alignment)
        return layer, head, self.alignment[layer][head]


@dataclass
class WeightDistance:
    name: str  # parameter name, e.g. "decoder.0.cross_attn.q_proj.weight"
    shape: list[int]
    l2: float  # ||a - b||
    relative: float  # ||a - b|| / ||a|| (0 when a is all zeros)
    norm_a: float  # ||a||


@dataclass
class Comparison:
    a: ModelReport
    b: ModelReport
    config_diff: list[tuple[str, object, object]]  # (field, value in a, value in b), differences only
    n: int  # shared sequences (fresh ones, or the pairs of A's task both models hold)
    seed: int
    agreement: float  # fraction of sequences on which both greedy outputs are identical
    weights: list[WeightDistance] = field(default_factory=list)  # parameters whose shapes match
    unmatched: list[str] = field(default_factory=list)  # parameters only one side has (or reshaped)
    examples: str = ""  # what the n were, in words (Task.examples_words), and the seed of a draw

    @property
    def weight_distance(self) -> float | None:
        """||a - b|| / ||a|| over all parameters, or None when some have no counterpart of the
        same shape: a number over a few matching tensors would pass for the whole model's."""
        if self.unmatched or not self.weights:
            return None
        total = sum(w.norm_a**2 for w in self.weights) ** 0.5
        return (sum(w.l2**2 for w in self.weights) ** 0.5) / total if total else 0.0

    @property
    def weights_compared(self) -> str:
        """'88 of 88 tensors': how much of the models the weight distances cover."""
        return f"{len(self.weights)} of {len(self.weights) + len(self.unmatched)} tensors"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["weight_distance"] = self.weight_distance
        data["weights_compared"] = self.weights_compared
        for side in ("a", "b"):  # JSON object keys must be strings
            data[side]["by_length"] = {str(k): v for k, v in data[side]["by_length"].items()}
        data["config_diff"] = [{"field": f, "a": x, "b": y} for f, x, y in self.config_diff]
        return data


# ---------------------------------------------------------------------------------------------


def _flat(prefix: str, data: dict) -> dict[str, object]:
    return {f"{prefix}.{k}": v for k, v in data.items()}


def _task_fields(task: Task) -> dict[str, object]:
    """The task's fields, without the ids of kept pairs; where pairs came from as the file's
    name, an imported model's origin as its layout and weights file (the rest of them, hashes
    and spellings, is inspect's)."""
    data = task.to_dict()
    data.pop("heldout", None)
    if isinstance(data.get("provenance"), dict):
        data["provenance"] = (data["provenance"].get("data") or {}).get("file")
    origin = data.pop("origin", None)
    if isinstance(origin, dict):
        data["layout"] = origin.get("layout") or origin.get("mapping")
        data["weights"] = (origin.get("weights") or {}).get("file")
    return data


def _model_fields(ckpt: Checkpoint) -> dict[str, object]:
    """The model config's fields; a Hugging Face folder's dropout as its config.json gives it
    (the folder opens for inference, at 0, but trains at its config's rate)."""
    data = ckpt.model_config.to_dict()
    dropout = folder_dropout(ckpt.task)
    if dropout is not None:
        data["dropout"] = dropout
    return data


def config_differences(a: Checkpoint, b: Checkpoint) -> list[tuple[str, object, object]]:
    """Model config, task and training-summary fields whose values differ."""
    left = {**_flat("model", _model_fields(a)), **_flat("task", _task_fields(a.task)),
            **_flat("training", {k: a.summary.get(k) for k in SUMMARY_FIELDS})}
    right = {**_flat("model", _model_fields(b)), **_flat("task", _task_fields(b.task)),
             **_flat("training", {k: b.summary.get(k) for k in SUMMARY_FIELDS})}
    return [(k, left.get(k), right.get(k)) for k in sorted(set(left) | set(right))
            if left.get(k) != right.get(k)]


def weight_distances(a: torch.nn.Module, b: torch.nn.Module) -> tuple[list[WeightDistance], list[str]]:
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    distances, unmatched = [], []
    for name in sorted(set(pa) | set(pb)):
        if name not in pa or name not in pb or pa[name].shape != pb[name].shape:
            unmatched.append(name)
            continue
        x, y = pa[name].detach().float().cpu(), pb[name].detach().float().cpu()
        l2 = float((x - y).norm())
        norm = float(x.norm())
        distances.append(WeightDistance(name, list(x.shape), l2, l2 / norm if norm else 0.0, norm))
    return distances, unmatched


def _report(name: str, ckpt: Checkpoint, batch: Batch, generated: torch.Tensor,
            lengths: torch.Tensor) -> ModelReport:
    """One model's numbers on its batch; `lengths` (n,) are the sources' lengths as A counts
    them, so both models' rows of the by-length table line up."""
    task: Task = ckpt.task
    labels = task.relabel(batch).labels  # (n, T + 1) this model's own targets
    cfg = ckpt.model_config
    ok = exact_match(generated.cpu(), labels, eos=cfg.eos_id, pad=cfg.pad_id)  # (n,)
    by_length = accuracy_by_length(ok, lengths)
    measure, scores = "alignment", alignment_scores(ckpt.model, task, batch)  # (layers, heads)
    if scores is None:
        measure, scores = "sharpness", head_sharpness(ckpt.model, batch)
    return ModelReport(name, task.name, parameter_breakdown(ckpt.model)["total"],
                       float(ok.float().mean()), by_length,
                       [[round(float(s), 4) for s in row] for row in scores], measure)


def same_tokens(a: Checkpoint, b: Checkpoint) -> bool:
    """Whether both models read and write the same ids for the same tokens, sources fed alike:
    then one batch of ids serves both. Otherwise each model gets A's sources as text, read by
    its own task (an imported model and one minitx trained on the same task)."""
    ta, tb = a.task, b.task
    return ta.vocab == tb.vocab and ta.src_vocab == tb.src_vocab and ta.wraps_source == tb.wraps_source


def sharing_pairs(a: Checkpoint, b: Checkpoint) -> tuple[Checkpoint, Checkpoint]:
    """A and B as a comparison measures them: a model that keeps no example pairs (a Hugging
    Face folder, an imported model) beside one of the same tokens that keeps held-out pairs
    (its fine-tune) is measured on those pairs, whichever side it is on."""
    def given(bare: Checkpoint, keeper: Checkpoint) -> Checkpoint:
        task, kept = bare.task, keeper.task
        if not isinstance(task, ImportedTask) or task.heldout is not None or kept.heldout is None \
                or not same_tokens(bare, keeper):
            return bare
        shared = task.with_pairs(kept.heldout, kept.provenance, kept.counts, kept.min_len, kept.max_len,
                                 kept.max_target_len)
        return dataclasses.replace(bare, task=shared)

    return given(a, b), given(b, a)


def check_comparable(a: Checkpoint, b: Checkpoint) -> None:
    """ValueError unless B can read A's sources: the same tokens, or vocabularies in which A's
    example source reads as text."""
    if same_tokens(a, b):
        return
    try:
        b.task.parse(a.task.example(), max_len=b.task.source_limit(b.model_config.max_len))
    except ValueError as e:
        raise ValueError(f"the models read different vocabularies ({a.task.src_vocab.size} and "
                         f"{b.task.src_vocab.size} source tokens), and B cannot read A's sources: "
                         f"{e}") from None


def _as_text_for(b: Checkpoint, a: Checkpoint, batch: Batch) -> Batch:
    """A's batch as B's task reads it: each source and target through text (ValueError, one
    line, for a token B does not have)."""
    ta, tb = a.task, b.task
    sources = [ta.format_source(row) for row in batch.src.tolist()]
    targets = [ta.format(row) for row in batch.labels.tolist()]
    vocab = tb.vocab
    src_rows, tgt_rows = [], []
    for source, target in zip(sources, targets):
        try:
            src_rows.append(tb.parse(source, max_len=tb.source_limit(b.model_config.max_len)))
            ids, _ = vocab.encode(vocab.split(target), unknown="unk")
        except ValueError as e:
            raise ValueError(f"B cannot read A's example {source!r} -> {target!r}: {e}") from None
        tgt_rows.append([vocab.sos, *ids, vocab.eos])
    return Batch(padded(src_rows, tb.src_vocab.pad), padded(tgt_rows, vocab.pad),
                 torch.tensor([tb.source_length(r) for r in src_rows]))


def source_limit_of_both(a: Checkpoint, b: Checkpoint) -> int:
    """The longest source both models hold (each task's source limit under its positions)."""
    return min(a.task.source_limit(a.model_config.max_len), b.task.source_limit(b.model_config.max_len))


def held_by_both(a: Checkpoint, b: Checkpoint, batch: Batch) -> Batch:
    """The examples of A's batch that both models hold: a source within each model's source
    limit, a target whose SOS, tokens and EOS fit both models' positions (ValueError: none)."""
    sources = source_limit_of_both(a, b)
    targets = min(a.model_config.max_len, b.model_config.max_len) - 2
    target_lengths = (batch.labels == a.task.vocab.eos).int().argmax(dim=1)  # (n,)
    keep = (batch.lengths <= sources) & (target_lengths <= targets)  # (n,)
    if not bool(keep.any()):
        raise ValueError(f"none of the {len(batch)} examples fits both models (sources of at most "
                         f"{sources} tokens, targets of at most {targets})")
    if bool(keep.all()):
        return batch
    # the padding columns only the dropped examples needed go too: a model checks the width
    width, outputs = int(batch.lengths[keep].max()), int(target_lengths[keep].max()) + 2
    alignment = None if batch.alignment is None else batch.alignment[keep][:, : outputs - 1, :width]
    return Batch(batch.src[keep][:, :width], batch.tgt[keep][:, :outputs], batch.lengths[keep], alignment)


def compare_loaded(a: Checkpoint, b: Checkpoint, n: int = 500, seed: int = 1234,
                   names: tuple[str, str] = ("A", "B")) -> Comparison:
    """Compare two loaded checkpoints on the same n examples of A's task: fresh sources drawn
    from its lengths (capped so both models can hold them), or its held-out pairs. Models of
    other vocabularies get the same examples as text (same_tokens), and agree where they write
    the same text."""
    check_comparable(a, b)
    sources = source_limit_of_both(a, b)
    longest = min(a.task.max_len, sources)
    shortest = min(a.task.min_len, longest)
    batch = a.task.batch(n, torch.Generator().manual_seed(seed), shortest, longest)
    if not a.task.exact_lengths:  # examples of their own lengths: keep those both models hold
        batch = held_by_both(a, b, batch)
    n = len(batch)
    shared = same_tokens(a, b)
    batch_b = batch if shared else _as_text_for(b, a, batch)
    gen_a, gen_b = greedy_outputs(a, batch), greedy_outputs(b, batch_b)  # (n, ~T + 2)
    if shared:
        width = max(gen_a.shape[1], gen_b.shape[1])
        eos, pad = a.task.vocab.eos, a.task.vocab.pad
        agreement = float((padded_to(gen_a, width, eos=eos, pad=pad)
                           == padded_to(gen_b, width, eos=eos, pad=pad)).all(dim=1).float().mean())
    else:  # the same text, each ended by its own EOS
        said = [[(ckpt.task.format(row), ckpt.task.vocab.eos in row) for row in gen.tolist()]
                for ckpt, gen in ((a, gen_a), (b, gen_b))]
        agreement = sum(x == y for x, y in zip(*said)) / max(1, n)
    weights, unmatched = weight_distances(a.model, b.model)
    return Comparison(
        a=_report(names[0], a, batch, gen_a, batch.lengths),
        b=_report(names[1], b, batch_b, gen_b, batch.lengths),
        config_diff=config_differences(a, b),
        n=n,
        seed=seed,
        agreement=agreement,
        weights=weights,
        unmatched=unmatched,
        # fixed pairs are the same whatever the seed; fresh sequences are its draw
        examples=a.task.examples_words(n) + (f", seed {seed}" if a.task.heldout is None else ""),
    )


def greedy_outputs(ckpt: Checkpoint, batch: Batch) -> torch.Tensor:
    """(n, ~T + 2) the model's greedy outputs of the batch's sources, under its task's cap."""
    cap = ckpt.task.decode_cap(batch.src.shape[1], ckpt.model_config.max_len)
    return greedy_decode(ckpt.model, batch.src.to(ckpt.model.device), max_new_tokens=cap).cpu()


def decode_both(a: Checkpoint, b: Checkpoint, source: str) -> dict[str, str | None]:
    """One typed source through both models: {"source", "a", "b", "expected_a", "expected_b"}
    (an expected output is None when the task cannot tell). Raises core.tasks.TaskInputError
    for text the task cannot parse, ValueError for models of different vocabularies."""
    check_comparable(a, b)
    limit = source_limit_of_both(a, b)
    ids = a.task.parse(source, max_len=limit)
    out: dict[str, str | None] = {"source": a.task.format_source(ids)}
    for side, ckpt in (("a", a), ("b", b)):
        mine = ids if ckpt is a or same_tokens(a, b) else ckpt.task.parse(source, max_len=limit)
        example = Batch(torch.tensor([mine]), torch.zeros(1, 1, dtype=torch.long), torch.tensor([len(mine)]))
        out[side] = ckpt.task.format(greedy_outputs(ckpt, example)[0].tolist())
        expected = ckpt.task.expected_output(mine)
        out[f"expected_{side}"] = None if expected is None else ckpt.task.format(expected)
    return out
