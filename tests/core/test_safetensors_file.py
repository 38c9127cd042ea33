"""core/safetensors_file.py writes safetensors.torch.save's bytes, tensor by tensor, and takes
what safetensors refuses: views of one buffer (a training model's weights and Adam moments)."""

from __future__ import annotations

import io
import json

import torch
from safetensors.torch import load, save

from minitx.core.safetensors_file import write_tensors


def written(tensors, metadata=None) -> bytes:
    out = io.BytesIO()
    write_tensors(out, tensors, metadata)
    return out.getvalue()


def test_the_bytes_are_safetensors_own_for_every_dtype_and_shape():
    g = torch.Generator().manual_seed(0)
    tensors = {"w": torch.randn(3, 5, generator=g), "half": torch.randn(7, generator=g).half(),
               "bf": torch.randn(2, 2, generator=g).bfloat16(), "ids": torch.arange(5),
               "step": torch.tensor(3.0), "bytes": torch.arange(11, dtype=torch.uint8),
               "empty": torch.zeros(0, dtype=torch.uint8), "flags": torch.tensor([True, False]),
               "t": torch.randn(4, 3, generator=g).t()}  # not contiguous: copied alone
    for metadata in (None, {"format": "minitx", "name": "Zoë's run"}):
        mine = written(tensors, metadata)
        theirs = save({k: v.contiguous() for k, v in tensors.items()}, metadata=metadata)
        # the same header (safetensors orders the metadata's keys differently from run to run)
        # and, after it, byte for byte the same data
        size = int.from_bytes(theirs[:8], "little")
        assert mine[:8] == theirs[:8] and json.loads(mine[8: 8 + size]) == json.loads(theirs[8: 8 + size])
        assert mine[8 + size:] == theirs[8 + size:]


def test_views_of_one_buffer_are_written_as_their_values():
    flat = torch.arange(10, dtype=torch.float32)
    a, b = flat[:4].view(2, 2), flat[4:]
    back = load(written({"a": a, "b": b}))
    assert torch.equal(back["a"], a) and torch.equal(back["b"], b)
