"""The sequences a model gets wrong, each with the step where its output first goes wrong."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from minitx.core.decode import first_wrong_step, greedy_decode
from minitx.core.tasks import EOS, PAD


@dataclass(frozen=True)
class Failure:
    source: list[int]
    expected: list[int]  # the task's output, then EOS
    output: list[int]  # what the model produced (up to and including EOS, if it emitted one)
    first_wrong: int  # 0-based step of the first wrong token

    def to_dict(self) -> dict:
        return asdict(self)


def _trimmed(ids: list[int]) -> list[int]:
    """Up to and including the first EOS, without trailing PAD."""
    ids = [i for i in ids if i != PAD] if EOS not in ids else ids[: ids.index(EOS) + 1]
    return ids


@torch.no_grad()
def find_failures(model, task, n: int = 500, seed: int = 1234, limit: int = 10,
                  min_len: int | None = None, max_len: int | None = None,
                  batch_size: int = 500) -> tuple[list[Failure], int]:
    """Decode n fresh sequences (the ones core.train.evaluate draws for this seed and batch size)
    -> (the first `limit` failures, how many failed in all)."""
    generator = torch.Generator().manual_seed(seed)
    failures, count, remaining = [], 0, n
    while remaining > 0:
        batch = task.batch(min(batch_size, remaining), generator, min_len, max_len)
        remaining -= batch.src.shape[0]
        generated = greedy_decode(model, batch.src.to(model.device)).cpu()
        for row in range(batch.src.shape[0]):
            source = batch.src[row, : int(batch.lengths[row])].tolist()
            expected = task.expected_output(source) + [EOS]
            output = _trimmed(generated[row].tolist())
            step = first_wrong_step(output, expected)
            if step is None:
                continue
            count += 1
            if len(failures) < limit:
                failures.append(Failure(source, expected, output, step))
    return failures, count
