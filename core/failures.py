"""The sequences a model gets wrong, each with the step where its output first goes wrong."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from minitx.core.decode import first_wrong_step


@dataclass(frozen=True)
class Failure:
    source: list[int]
    expected: list[int]  # the task's output, then EOS
    output: list[int]  # what the model produced (up to and including EOS, if it emitted one)
    first_wrong: int  # 0-based step of the first wrong token
    line: int | None = None  # the data file's line, when the pair came from one

    def to_dict(self) -> dict:
        return asdict(self)


def trimmed(ids: list[int], eos: int, pad: int) -> list[int]:
    """Up to and including the first EOS, without trailing PAD."""
    return [i for i in ids if i != pad] if eos not in ids else ids[: ids.index(eos) + 1]


def failure_of(source: list[int], generated: list[int], labels: list[int], eos: int, pad: int,
               line: int | None = None) -> Failure | None:
    """The Failure of one decoded example, or None when its output is right."""
    output, expected = trimmed(generated, eos, pad), trimmed(labels, eos, pad)
    step = first_wrong_step(output, expected, eos)
    return None if step is None else Failure(source, expected, output, step, line)


@torch.no_grad()
def find_failures(model, task, n: int = 500, seed: int = 1234, limit: int = 10,
                  min_len: int | None = None, max_len: int | None = None,
                  batch_size: int = 500) -> tuple[list[Failure], int]:
    """Decode the examples core.train.evaluate measures for this seed and batch size (fresh
    sequences, or a data file's held-out pairs) -> (the first `limit` failures, how many failed
    in all)."""
    from minitx.core.evaluation import score  # evaluation builds its failures from this module

    result = score(model, task, task.evaluation_batches(n, seed, batch_size, min_len, max_len), limit)
    return result.failures, result.wrong
