"""More than one process: torch.distributed under torchrun (docs/training.md, "More than one
process"), never anything home-made.

`torchrun --nproc_per_node N -m minitx train ...` starts N copies with RANK, WORLD_SIZE and the
rendezvous in their environment; `Processes.from_environment()` joins them (gloo on a CPU, nccl
on GPUs, each process its own GPU: LOCAL_RANK). Every process draws the same step's pairs from
the same seeded stream and keeps its shard of them (`shard`), so a step takes the same pairs
however many processes share it; DistributedDataParallel averages the gradients, and only the
first process prints and writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Processes:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """The process that prints and writes."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @classmethod
    def from_environment(cls, device: torch.device) -> Processes:
        """One process, or the group torchrun started (joined here, once)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """The sum of `value` over every process (itself with one)."""
        if self.distributed:
            value = value.clone()
            dist.all_reduce(value)
        return value

    def any(self, flag: bool, device: torch.device) -> bool:
        """True when any process says so: every process then stops at the same step."""
        if not self.distributed:
            return flag
        return bool(self.sum(torch.tensor([int(flag)], device=device)).item())


def shard(rows: int, processes: Processes, accumulate: int) -> list[slice]:
    """The rows of a step's batch (`rows` of them, every process's) that this process trains on,
    as `accumulate` micro-batches: the batch cut in order into world x accumulate near-equal
    parts, process r taking parts r x accumulate onwards. ValueError when a step has fewer
    pairs than parts."""
    parts = processes.world * accumulate
    if rows < parts:
        raise ValueError(f"batch_size: a step's {rows} pairs cannot be shared by {processes.world} "
                         f"processes x {accumulate} micro-batches")
    first = processes.rank * accumulate
    return [slice((first + i) * rows // parts, (first + i + 1) * rows // parts) for i in range(accumulate)]
