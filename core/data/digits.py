"""The digit tasks: reverse (the default), copy and sort, on the 13-token digits vocabulary
(digits 0-9 are ids 0-9, then PAD, SOS, EOS)."""

from __future__ import annotations

import torch

from minitx.core.data.batch import beyond
from minitx.core.data.task import Task


class ReverseTask(Task):
    name = "reverse"
    description = "output the source backwards"
    alignment_name = "anti-diagonal"

    def transform(self, digits, lengths):
        B, S = digits.shape
        pos = torch.arange(S)[None, :]  # (1, S)
        source_index = (lengths[:, None] - 1 - pos).clamp(min=0)  # (B, S): n-1-i
        out = digits.gather(1, source_index)
        return out.masked_fill(beyond(lengths, S), self.vocab.pad)

    def alignment(self, src, lengths):
        B, S = src.shape
        i = torch.arange(S)[None, :, None]  # output position
        j = torch.arange(S)[None, None, :]  # source position
        valid = ~beyond(lengths, S)[:, :, None]  # (B, S, 1)
        return (j == lengths[:, None, None] - 1 - i) & valid


class CopyTask(Task):
    name = "copy"
    description = "output the source unchanged"
    alignment_name = "diagonal"

    def transform(self, digits, lengths):
        return digits.masked_fill(beyond(lengths, digits.shape[1]), self.vocab.pad)

    def alignment(self, src, lengths):
        B, S = src.shape
        eye = torch.eye(S, dtype=torch.bool)[None].expand(B, S, S)
        return eye & ~beyond(lengths, S)[:, :, None]


class SortTask(Task):
    name = "sort"
    description = "output the source digits in ascending order"
    alignment_name = "permutation"

    def transform(self, digits, lengths):
        # PAD (10) is larger than every digit, so an ascending sort leaves it at the end.
        return digits.masked_fill(beyond(lengths, digits.shape[1]), self.vocab.pad).sort(dim=1).values

    def alignment(self, src, lengths):
        # Output i may come from any source position holding the same digit (ties are equal).
        out = self.transform(src, lengths)  # (B, S)
        valid = ~beyond(lengths, src.shape[1])
        return (out[:, :, None] == src[:, None, :]) & valid[:, :, None] & valid[:, None, :]
