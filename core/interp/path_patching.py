"""Path patching for encoder-decoder models: a sender head's effect through one input of one
cross-attention head.

A sender is an encoder head or a decoder self-attention head; a receiver is what one
cross-attention head reads: its keys and values (side "kv": what the encoder gives it) or its
query (side "q": what the decoder asks). Which senders reach which receivers without passing
through another head (through the residual stream, the feed-forward blocks and the norms only):
- K/V: every encoder head (the memory is the encoder's output; with the swap-cross bug preset
  cross-attention reads the decoder stream instead, and the self-attention heads up to its layer
  reach it);
- Q: the decoder self-attention heads of the receiver's layer and every layer before.

The effect of sender s through receiver r, as a recovered fraction like activation patching's:
1. run the corrupted source with s's output copied from the clean run and every other head's
   output frozen at the corrupted run, so s's change travels only through paths without a head;
   record what r's block reads;
2. run the corrupted source with only r's input (that side of that one head) replaced by what
   step 1 recorded, everything else free, and measure the logit difference.
Patching every receiver of a sender together (step 2 with all of them at once) gives its effect
through all of them; for an encoder head of the last encoder layer that is exactly its whole
effect (the memory is the only way it reaches the answer, and no head stands after it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from minitx.core.interp.interventions import (
    SIDES,
    Head,
    HeadInput,
    Interventions,
    Patch,
    Recording,
    all_heads,
)
from minitx.core.interp.patching import Patcher
from minitx.core.model.transformer import Seq2Seq


@dataclass(frozen=True, order=True)
class Edge:
    sender: Head
    receiver: HeadInput

    def __str__(self) -> str:
        return f"{self.sender} -> {self.receiver}"


def receivers_of(model: Seq2Seq) -> list[HeadInput]:
    """Every cross-attention head's K/V input, then every Q input."""
    return [HeadInput(h, side) for side in SIDES for h in all_heads(model, ("cross",))]


def senders_of(model: Seq2Seq, receiver: HeadInput) -> list[Head]:
    """The heads that reach `receiver` without passing another head (the module docstring)."""
    layer = receiver.head.layer
    if receiver.side == "kv" and not model.decoder[layer].cross_reads_decoder:
        return all_heads(model, ("enc",))
    return [h for h in all_heads(model, ("self",)) if h.layer <= layer]


def all_edges(model: Seq2Seq) -> list[Edge]:
    return [Edge(s, r) for r in receivers_of(model) for s in senders_of(model, r)]


def edges_among(model: Seq2Seq, heads) -> list[Edge]:
    """The edges whose sender and receiving head are both in `heads`."""
    chosen = set(heads)
    return [e for e in all_edges(model) if e.sender in chosen and e.receiver.head in chosen]


@dataclass
class PathPatching:
    edges: dict[str, float] = field(default_factory=dict)  # "enc:L2.H3 -> cross:L2.H1 K/V" -> fraction
    through_all: dict[str, float] = field(default_factory=dict)  # sender -> every receiver at once
    total: dict[str, float] = field(default_factory=dict)  # sender -> its output patched alone

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def path_patching(patcher: Patcher, senders: list[Head] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> PathPatching:
    """Every sender (default: every encoder and decoder self-attention head) through each
    receiver it reaches, through all of them together, and its whole effect."""
    model = patcher.model
    heads = all_heads(model)
    senders = senders if senders is not None else all_heads(model, ("enc", "self"))
    reached = {s: [r for r in receivers_of(model) if s in senders_of(model, r)] for s in senders}
    total = sum(len(r) + 2 for r in reached.values())
    done = 0
    result = PathPatching()
    for sender in senders:
        frozen = tuple(Patch(h, patcher.clean_values(h) if h == sender else patcher.corrupted_values(h))
                       for h in heads)
        record = Recording(heads=False, inputs=True)
        patcher.run("corrupted", Interventions(patches=frozen, record=record))
        via = {r: Patch(r, record.head_input(r)) for r in reached[sender]}
        for receiver, patch in via.items():
            result.edges[str(Edge(sender, receiver))] = patcher.recovered(Interventions(patches=(patch,)))
            done += 1
            if progress is not None:
                progress(done, total)
        result.through_all[str(sender)] = patcher.recovered(Interventions(patches=tuple(via.values())))
        result.total[str(sender)] = patcher.recovered(patcher.patches([sender]))
        done += 2
        if progress is not None:
            progress(done, total)
    return result
