"""core/safetensors_file.py writes safetensors.torch.save's bytes, tensor by tensor, and takes
what safetensors refuses: views of one buffer (a training model's weights and Adam moments); it
reads what safetensors reads, into memory of its own rather than a mapping of the file."""

from __future__ import annotations

import io
import json

import pytest
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load, save, save_file

from minitx.core.safetensors_file import read_tensors, write_tensors


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


def every_kind() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {"w": torch.randn(3, 5, generator=g), "half": torch.randn(7, generator=g).half(),
            "bf": torch.randn(2, 2, generator=g).bfloat16(), "ids": torch.arange(5),
            "step": torch.tensor(3.0), "empty": torch.zeros(0, 4), "flags": torch.tensor([True, False]),
            "f8": torch.randn(6, generator=g).to(torch.float8_e4m3fn)}  # a dtype minitx never writes


def test_reading_gives_safetensors_own_tensors_and_metadata(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file(every_kind(), path, metadata={"format": "minitx"})
    tensors, metadata = read_tensors(path)
    with safe_open(str(path), framework="pt") as f:
        assert list(tensors) == list(f.keys()) and metadata == f.metadata()
        for name, t in tensors.items():
            theirs = f.get_tensor(name)
            assert t.dtype == theirs.dtype and t.shape == theirs.shape
            assert torch.equal(t.reshape(-1).view(torch.uint8), theirs.reshape(-1).view(torch.uint8))


def test_what_is_read_is_its_own_memory_not_a_view_of_the_file(tmp_path):
    # a mapped file's tensors change with the file (and keep every page read resident); these don't
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(1024, 256), "b": torch.zeros(3)}, path)
    tensors, _ = read_tensors(path)
    save_file({"a": torch.ones(1024, 256), "b": torch.ones(3)}, tmp_path / "other.safetensors")
    with open(path, "r+b") as f:  # the same bytes' places, other values: written in place
        f.write((tmp_path / "other.safetensors").read_bytes())
    assert not tensors["a"].any() and not tensors["b"].any()


def test_a_corrupt_file_raises_safetensors_own_error(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(8)}, path)
    path.write_bytes(path.read_bytes()[:-4])  # shorter than its header says
    with pytest.raises(SafetensorError):
        read_tensors(path)


def test_views_of_one_buffer_are_written_as_their_values():
    flat = torch.arange(10, dtype=torch.float32)
    a, b = flat[:4].view(2, 2), flat[4:]
    back = load(written({"a": a, "b": b}))
    assert torch.equal(back["a"], a) and torch.equal(back["b"], b)
