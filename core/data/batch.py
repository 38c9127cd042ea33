"""A batch of examples as tensors, and how source lengths are drawn: what every task makes and
every trainer, evaluation and check reads.

Shapes: B batch, S longest source, T output length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Batch:
    src: torch.Tensor  # (B, S) source ids, right-padded with PAD
    tgt: torch.Tensor  # (B, T + 2) SOS, output, EOS, then PAD (digit tasks: T = S)
    lengths: torch.Tensor  # (B,) source lengths
    alignment: torch.Tensor | None = None  # (B, T + 1, S) bool, when the data knows it (dates)
    references: tuple[str, ...] | None = None  # (B,) the targets as a data file holds them, where kept

    @property
    def decoder_input(self) -> torch.Tensor:  # (B, S + 1): teacher forcing, shifted right
        return self.tgt[:, :-1]

    @property
    def labels(self) -> torch.Tensor:  # (B, T + 1)
        return self.tgt[:, 1:]

    def __len__(self) -> int:
        return self.src.shape[0]


def padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    """(len(rows), longest) ids, right-padded with `pad`."""
    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def draw_lengths(count: int, lo: int, hi: int, generator: torch.Generator,
                 power: float = 0.0) -> torch.Tensor:
    """(count,) source lengths in lo..hi: each equally likely (power 0: torch.randint, the stream
    every earlier run drew), or length L with probability proportional to L ** power."""
    if not power:
        return torch.randint(lo, hi + 1, (count,), generator=generator)
    weights = torch.arange(lo, hi + 1, dtype=torch.float64) ** power  # (hi - lo + 1,)
    return lo + torch.multinomial(weights, count, replacement=True, generator=generator)


def beyond(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B,) lengths -> (B, width) bool, True at positions >= length."""
    return torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]
