"""A teacher-forced look at one source: the cross-attention a model pays while producing the
task's correct output. Used to watch an alignment (reverse: the anti-diagonal) form during
training, where greedy decoding of a half-trained model would give rows of varying count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.task import Task
from minitx.core.interp.alignment import cross_attention, scores_from_cross
from minitx.core.model.transformer import Seq2Seq


@dataclass(frozen=True)
class Probe:
    src: list[int]
    target: list[int]  # the task's output followed by EOS: one grid row each
    cross_attention: torch.Tensor  # (layers, heads, len(target), S), rows sum to one
    scores: torch.Tensor | None  # (layers, heads) alignment score on this one source (None: no pattern)


def probe_example(task: Task, text: str = "") -> Batch:
    """A batch of one to probe with: `text` parsed by the task with the task's output, or the
    task's own example (Task.example_batch: six digits that repeat none of their neighbours, a
    fixed date, the first held-out pair)."""
    if text:
        try:
            ids = task.parse(text)
        except ValueError as e:  # the setting to blame, in the words of a config's error
            raise ValueError(f"probe_source: {e}") from None
        if task.expected_output(ids) is None:
            raise ValueError(f"probe_source: the {task.name} task cannot tell the output of a typed "
                             "source; leave it empty for the task's own example")
        return task.batch_from_sources(torch.tensor([ids]), torch.tensor([len(ids)]))
    return task.example_batch()


@torch.no_grad()
def probe(model: Seq2Seq, task: Task, example: Batch) -> Probe:
    """The cross-attention `model` pays on a batch of one while producing its correct output."""
    cross = cross_attention(model, example)
    n = int((example.labels[0] == task.vocab.eos).int().argmax()) + 1  # outputs and EOS
    S = int(example.lengths[0])
    grid = torch.stack([w[0, :, :n, :S] for w in cross]).cpu()  # (L, h, n, S)
    expected = task.expected_alignment(example)  # (1, S_out, S)
    scores = None if expected is None else scores_from_cross([w.cpu() for w in cross], expected)
    return Probe(example.src[0, :S].tolist(), example.labels[0, :n].tolist(), grid, scores)
