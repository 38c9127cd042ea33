"""The circuit: the smallest set of heads, and of sender -> receiver edges, that keeps the answer.

A circuit is a set of heads and a set of edges between them (core/interp/path_patching.py: an
encoder or decoder self-attention head feeding one cross-attention head's K/V or Q input).
Running the circuit alone, on the clean sources, teacher-forced on their answers:
- every head outside it is mean-ablated (its output is its mean over the task's reference batch,
  core/interp/interventions.py), or zero-ablated when asked (`ablation="zero"`);
- an edge left out (both heads kept) is mean-ablated along that path only: the receiving head
  reads, on that side, what its block would read if the sender output its mean and every other
  head output what it outputs in this run. The other head of a kept edge keeps its full effect
  elsewhere. Connections that are not edges (a head feeding a later head of its own stack, a
  cross-attention head feeding the decoder stream) stay as they are between kept heads.

Faithfulness is the logit difference of core/interp/patching.py (clean answer minus corrupted
answer, over the steps where a pair's answers differ), normalised between the empty circuit (every
head mean-ablated: 0) and the whole model (1):
    F = (LD_circuit - LD_empty) / (LD_model - LD_empty).
The pruning is greedy, in the manner of ACDC (Conmy et al. 2023): heads are tried for removal in
order of their exact patching effect, smallest first, and each stays out when F stays at least
`keep`; then the edges among the kept heads likewise, in order of their path-patching effect.
Every F it reports is measured by running the circuit, never estimated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minitx.core.interp.decode import exact_match
from minitx.core.interp.interventions import (
    ABLATIONS,
    Head,
    HeadInput,
    Interventions,
    Patch,
    Recording,
    all_heads,
    head_means,
)
from minitx.core.interp.pairs import Pair
from minitx.core.interp.patching import Patcher
from minitx.core.interp.path_patching import Edge, PathPatching, edges_among, path_patching
from minitx.core.model.transformer import Seq2Seq, eval_mode

KEEP = 0.9
ACCURACY_SEQUENCES = 200  # fresh sequences the circuit alone decodes for its exact match
ACCURACY_SEED = 4321


@dataclass(frozen=True)
class Circuit:
    heads: frozenset[Head]
    edges: frozenset[Edge]  # the kept edges; only between heads of the circuit

    @classmethod
    def whole(cls, model: Seq2Seq, heads=None) -> Circuit:
        """`heads` (default: every head) with every edge among them."""
        heads = frozenset(all_heads(model) if heads is None else heads)
        return cls(heads, frozenset(edges_among(model, heads)))

    def without_head(self, head: Head) -> Circuit:
        return Circuit(self.heads - {head},
                       frozenset(e for e in self.edges if head not in (e.sender, e.receiver.head)))

    def with_head(self, model: Seq2Seq, head: Head) -> Circuit:
        """`head` added with every edge it has to the circuit's heads."""
        heads = self.heads | {head}
        new = {e for e in edges_among(model, heads) if head in (e.sender, e.receiver.head)}
        return Circuit(heads, self.edges | new)


class CircuitRunner:
    """Runs circuits alone (the module docstring) on any sources, with the means of one task."""

    def __init__(self, model: Seq2Seq, means: dict) -> None:
        self.model = model
        self.means = means  # (kind, layer) -> (h, d_k), as head_means gives them
        self.heads = all_heads(model)

    def mean_of(self, head: Head) -> torch.Tensor:
        return self.means[(head.kind, head.layer)][head.head]

    @torch.no_grad()
    def logits(self, circuit: Circuit, src: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        """(B, S), (B, T) -> (B, T, V) of the circuit alone."""
        ablated = {h: self.mean_of(h) for h in self.heads if h not in circuit.heads}
        left_out: dict[HeadInput, frozenset[Head]] = {}
        for edge in edges_among(self.model, circuit.heads):
            if edge not in circuit.edges:
                left_out[edge.receiver] = left_out.get(edge.receiver, frozenset()) | {edge.sender}
        inputs: dict[HeadInput, torch.Tensor] = {}  # what each receiver with edges left out reads

        def forward(interventions: Interventions) -> torch.Tensor:
            with eval_mode(self.model), interventions.applied(self.model):
                return self.model(src, decoder_input)

        def patched() -> tuple[Patch, ...]:
            return tuple(Patch(site, values) for site, values in inputs.items())

        # Layer by layer: a receiver's input depends on heads of earlier layers (and the decoder
        # self-attention of its own), whose outputs are final once the earlier receivers' inputs are.
        for layer in sorted({r.head.layer for r in left_out}):
            record = Recording()
            forward(Interventions(mean=ablated, patches=patched(), record=record))
            here = [r for r in left_out if r.head.layer == layer]
            for senders in {left_out[r] for r in here}:
                frozen = tuple(Patch(h, record.head_outputs(h.kind, h.layer)[:, h.head])
                               for h in self.heads if h not in senders)
                reads = Recording(heads=False, inputs=True)
                forward(Interventions(mean={h: self.mean_of(h) for h in senders}, patches=frozen,
                                      record=reads))
                for receiver in (r for r in here if left_out[r] == senders):
                    inputs[receiver] = reads.head_input(receiver)
        return forward(Interventions(mean=ablated, patches=patched()))

    @torch.no_grad()
    def greedy(self, circuit: Circuit, src: torch.Tensor, steps: int) -> torch.Tensor:
        """(B, S) -> (B, steps) tokens the circuit alone generates, fed its own outputs (full
        forwards: a left-out edge has no cached form); PAD after each EOS. Each step chooses as
        greedy decoding does, under the model's generation settings."""
        rules = self.model.generation
        B = src.shape[0]
        steps = rules.cap(steps, self.model.cfg.max_len)
        tokens = torch.full((B, 1), rules.start, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        for _ in range(steps):
            scores = rules.process(self.logits(circuit, src, tokens)[:, -1], tokens,
                                   max_length=steps + 1, src=src)
            nxt = scores.argmax(-1).masked_fill(done, rules.pad)  # (B,)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            done |= rules.ends(nxt)
            if bool(done.all()):
                break
        return tokens[:, 1:]


@dataclass
class Faithfulness:
    """F of circuits on one batch of pairs: the logit differences it is normalised between."""

    runner: CircuitRunner
    patcher: Patcher  # the pairs; its clean run is the whole model
    empty: float = 0.0  # LD with every head mean-ablated

    def __post_init__(self) -> None:
        self.empty = self.difference(Circuit(frozenset(), frozenset()))
        if abs(self.patcher.clean_difference - self.empty) < 1e-6:
            raise ValueError("ablating every head leaves the logit difference as it is: no circuit of "
                             "heads carries this answer")

    def difference(self, circuit: Circuit) -> float:
        p = self.patcher
        return p.difference(self.runner.logits(circuit, p.source("clean"), p.decoder_input))

    def __call__(self, circuit: Circuit) -> float:
        return (self.difference(circuit) - self.empty) / (self.patcher.clean_difference - self.empty)


@dataclass
class CircuitResult:
    circuit: Circuit
    faithfulness: float  # of the circuit (heads and kept edges), measured
    heads_faithfulness: float  # of its heads with every edge among them
    accuracy: float  # exact match of the circuit alone on fresh sequences
    model_accuracy: float  # of the whole model on the same sequences
    accuracy_n: int  # the examples exact match was measured on (a task of fixed pairs: at most all)
    keep: float
    n_pairs: int
    ablation: str = "mean"  # what a head outside the circuit outputs: its mean, or zero
    head_scores: dict[str, float] = field(default_factory=dict)  # exact patching, the pruning order
    paths: PathPatching = field(default_factory=PathPatching)
    model_difference: float = 0.0  # LD of the whole model on the pairs
    empty_difference: float = 0.0  # LD with every head mean-ablated
    total_heads: int = 0
    total_edges: int = 0
    candidate_edges: int = 0  # the edges among the kept heads, before the edges were pruned
    measure: Faithfulness | None = None  # F of any other circuit on the same pairs (the app's)
    accuracy_on: str = ""  # what the accuracy_n examples were, in words (Task.examples_words)

    def to_dict(self) -> dict:
        return {
            "keep": self.keep, "pairs": self.n_pairs, "ablation": self.ablation,
            "heads": sorted(str(h) for h in self.circuit.heads), "total_heads": self.total_heads,
            "edges": sorted(str(e) for e in self.circuit.edges), "total_edges": self.total_edges,
            "candidate_edges": self.candidate_edges,
            "faithfulness": self.faithfulness, "heads_faithfulness": self.heads_faithfulness,
            "accuracy": self.accuracy, "model_accuracy": self.model_accuracy, "accuracy_n": self.accuracy_n,
            "model_difference": self.model_difference, "empty_difference": self.empty_difference,
            "head_scores": self.head_scores, "paths": self.paths.to_dict(),
        }


def circuit_accuracy(runner: CircuitRunner, circuit: Circuit | None, task, n: int = ACCURACY_SEQUENCES,
                     seed: int = ACCURACY_SEED) -> float:
    """Exact match of the circuit alone (None: the whole model) on the task's first n evaluation
    examples from `seed` (fresh sequences; a data file's held-out pairs)."""
    model = runner.model
    cfg = model.cfg
    circuit = circuit if circuit is not None else Circuit.whole(model)
    right = total = 0
    for batch in task.evaluation_batches(n, seed):
        src = batch.src.to(model.device)
        generated = runner.greedy(circuit, src, task.decode_cap(src.shape[1], cfg.max_len))
        right += int(exact_match(generated.cpu(), batch.labels, eos=cfg.eos_id, pad=cfg.pad_id).sum())
        total += len(batch)
    return right / max(total, 1)


def ablated_values(model: Seq2Seq, task, ablation: str = "mean") -> dict:
    """(kind, layer) -> (h, d_k): what a head outside a circuit outputs: its mean over the task's
    reference batch, or zero."""
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation: must be one of {', '.join(ABLATIONS)}; got {ablation!r}")
    means = head_means(model, task)
    return means if ablation == "mean" else {k: torch.zeros_like(v) for k, v in means.items()}


def find_circuit(model: Seq2Seq, task, pairs: list[Pair], keep: float = KEEP,
                 accuracy_n: int = ACCURACY_SEQUENCES, means: dict | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 ablation: str = "mean") -> CircuitResult:
    """Score every head (exact patching) and edge (path patching) on the pairs, prune greedily to
    keep at least `keep` of the logit difference, and measure what is left (the module docstring).
    `means` (default: ablated_values of `ablation`) is what a head outside the circuit outputs.
    `progress(stage, done, total)` as it goes."""
    if not 0 < keep <= 1:
        raise ValueError(f"keep: must be above 0 and at most 1, got {keep}")
    tell = progress or (lambda stage, done, total: None)
    patcher = Patcher.of_pairs(model, pairs)
    runner = CircuitRunner(model, means if means is not None else ablated_values(model, task, ablation))
    faithful = Faithfulness(runner, patcher)
    heads = all_heads(model)
    scores = {}
    for i, head in enumerate(heads):
        scores[head] = patcher.recovered(patcher.patches([head]))
        tell("patching heads", i + 1, len(heads))
    paths = path_patching(patcher, progress=lambda done, total: tell("path patching", done, total))

    circuit = Circuit.whole(model)
    order = sorted(heads, key=lambda h: (abs(scores[h]), h))
    for i, head in enumerate(order):
        trial = circuit.without_head(head)
        if faithful(trial) >= keep:
            circuit = trial
        tell("pruning heads", i + 1, len(order))
    heads_faithfulness = faithful(circuit)
    edges = sorted(circuit.edges, key=lambda e: (abs(paths.edges.get(str(e), 0.0)), e))
    for i, edge in enumerate(edges):
        trial = Circuit(circuit.heads, circuit.edges - {edge})
        if faithful(trial) >= keep:
            circuit = trial
        tell("pruning edges", i + 1, len(edges))
    tell("exact match", 0, 1)
    accuracy_n = task.sample_size(accuracy_n)
    accuracy = circuit_accuracy(runner, circuit, task, accuracy_n)
    model_accuracy = circuit_accuracy(runner, None, task, accuracy_n)
    tell("exact match", 1, 1)
    return CircuitResult(
        circuit=circuit, faithfulness=faithful(circuit), heads_faithfulness=heads_faithfulness,
        accuracy=accuracy, model_accuracy=model_accuracy, accuracy_n=accuracy_n, keep=keep,
        n_pairs=len(pairs), ablation=ablation if means is None else "given",
        head_scores={str(h): s for h, s in scores.items()}, paths=paths,
        model_difference=patcher.clean_difference, empty_difference=faithful.empty,
        total_heads=len(heads), total_edges=len(edges_among(model, heads)), candidate_edges=len(edges),
        measure=faithful, accuracy_on=task.examples_words(accuracy_n))
