"""A safetensors file tensor by tensor, written and read.

Written: the header, then each tensor's bytes straight from its storage, so saving never holds
the whole file in memory (safetensors.torch.save builds it as one bytes object, and needs tensors
that share no memory, which a training model's views of one flat buffer do: both cost a copy of
every tensor, a model and two Adam moments over at a fine-tune's save, docs/performance.md). The
file is safetensors.torch.save's: the same header (metadata first, tensors ordered by element
size, largest first, then by name; padded with spaces to 8 bytes) and the same data
(tests/core/test_safetensors_file.py compares them).

Read: safetensors' own parser checks the file (safe_open: header, dtypes, offsets, length), then
each tensor's bytes are read into memory of its own. safe_open's tensors are views of the file
mapped into memory, and every page of it that was read stays resident while any one of them
lives: a run that turns a model's float32 matrices into bf16 copies could free none of them until
the last (a LoRA + bf16 fine-tune's peak, docs/performance.md). Read this way, each is freed when
it is dropped.
"""

from __future__ import annotations

import json
import os
import struct
from typing import BinaryIO

import torch
from safetensors import safe_open

# torch dtype -> safetensors' name of it
DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
          torch.uint8: "U8", torch.bool: "BOOL"}
NAMED = {name: dtype for dtype, name in DTYPES.items()}  # safetensors' name -> torch dtype
CHUNK = 1 << 26  # bytes written at once: a big tensor's bytes go out in 64 MiB pieces


def header(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> tuple[bytes, list[str]]:
    """(the header as the file starts: its length, then its JSON padded to 8 bytes; the tensors'
    names in the order their bytes follow)."""
    order = sorted(tensors, key=lambda name: (-tensors[name].element_size(), name))
    entries: dict = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name in order:
        t = tensors[name]
        if t.dtype not in DTYPES:
            raise ValueError(f"{name}: safetensors cannot hold {t.dtype}")
        size = t.numel() * t.element_size()
        entries[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                         "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, order


def write_tensors(out: BinaryIO, tensors: dict[str, torch.Tensor],
                  metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` (on the CPU) with `metadata` to `out` in the safetensors format, one tensor
    at a time (a non-contiguous tensor is copied alone, then dropped)."""
    head, order = header(tensors, metadata)
    out.write(head)
    for name in order:
        t = tensors[name].detach()
        if t.device.type != "cpu":
            raise ValueError(f"{name}: write_tensors takes tensors on the CPU, not {t.device}")
        flat = t.contiguous().reshape(-1).view(torch.uint8)  # (bytes,)
        for start in range(0, flat.numel(), CHUNK):
            out.write(memoryview(flat[start: start + CHUNK].numpy()))


def read_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(every tensor of the safetensors file at `path`, by name as safe_open lists them, each in
    memory of its own; the file's metadata). Whatever safe_open refuses raises its error; an
    OSError where the file cannot be read."""
    with safe_open(str(path), framework="pt") as checked:  # parses and checks the whole header
        names, metadata = list(checked.keys()), dict(checked.metadata() or {})
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            entries = json.loads(f.read(length))
            tensors = {}
            for name in names:
                entry = entries[name]
                dtype = NAMED.get(entry["dtype"])
                if dtype is None:  # a dtype minitx never writes (float8, ...): safe_open's view, copied
                    tensors[name] = checked.get_tensor(name).clone()
                    continue
                begin, end = entry["data_offsets"]
                tensor = torch.empty(entry["shape"], dtype=dtype)
                f.seek(8 + length + begin)
                _read_into(f, tensor.reshape(-1).view(torch.uint8), end - begin, path)
                tensors[name] = tensor
    return tensors, metadata


def _read_into(f: BinaryIO, flat: torch.Tensor, size: int, path: str | os.PathLike) -> None:
    """Fill `flat` (bytes,) with the next `size` bytes of `f`, in CHUNK-sized reads."""
    view = memoryview(flat.numpy())
    done = 0
    while done < size:
        got = f.readinto(view[done: min(size, done + CHUNK)])
        if not got:
            raise OSError(f"{path} ended {size - done} bytes early")
        done += got
