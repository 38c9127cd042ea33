"""Property: whatever is done to a valid checkpoint, loading it gives a working model or a
one-line CheckpointError, never another exception. Mutations: byte flips, truncations, edits of
the safetensors header JSON, and edits of the minitx metadata inside it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitx.core.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from minitx.core.interp.decode import greedy_decode
from minitx.core.training.trainer import Trainer, TrainingDiverged
from tests.reliability.corpus import join, split, valid_checkpoint

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.integers(-3, 70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
    | st.sampled_from(["post", "pre", "gelu", "relu", "fused", "explicit", "reverse", "sort",
                       "F32", "F16", "I64", "BOOL", "minitx-checkpoint", "1"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[bytes, Path]:
    folder = tmp_path_factory.mktemp("fuzz")
    return valid_checkpoint(folder).read_bytes(), folder / "mutant.safetensors"


def check_loader(path: Path) -> None:
    """The property, for load_checkpoint and for Trainer.resume."""
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        assert str(e) and "\n" not in str(e)
    else:
        assert_works(ckpt)
    try:
        trainer = Trainer.resume(path)
    except CheckpointError as e:
        assert str(e) and "\n" not in str(e)
    else:
        trainer.cfg = trainer.cfg.replace(steps=trainer.step_count + 1)
        try:
            trainer.train_step()  # the resumed state is usable: one more step runs
        except TrainingDiverged:
            pass  # a finite but wild state may diverge; that is reported clearly


def assert_works(ckpt: Checkpoint) -> None:
    state = ckpt.model.state_dict()
    assert all(bool(torch.isfinite(t).all()) for t in state.values())
    length = max(1, min(ckpt.task.max_len, ckpt.model_config.max_len - 2))
    out = greedy_decode(ckpt.model, torch.randint(0, 10, (2, length)))
    assert out.shape[0] == 2


def write(path: Path, blob: bytes) -> Path:
    path.write_bytes(blob)
    return path


@SETTINGS
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
                      min_size=1, max_size=6))
@pytest.mark.slow  # tier 2: edits of the header's JSON are tier 1's
def test_byte_flips_load_a_working_model_or_raise_checkpoint_error(base, flips):
    good, path = base
    blob = bytearray(good)
    for where, mask in flips:
        blob[int(where * len(blob))] ^= mask
    check_loader(write(path, bytes(blob)))


@SETTINGS
@given(keep=st.floats(0, 1, exclude_max=True))
def test_truncated_files_raise_checkpoint_error(base, keep):
    good, path = base
    write(path, good[: int(keep * len(good))])
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


@SETTINGS
@given(data=st.data())
def test_header_json_edits_load_a_working_model_or_raise_checkpoint_error(base, data):
    good, path = base
    header, payload = split(good)
    key = data.draw(st.sampled_from(sorted(header)), label="entry")
    entry = header[key]
    field = data.draw(st.sampled_from(sorted(entry) + ["(whole entry)", "(new field)"]))
    if field == "(whole entry)":
        header[key] = data.draw(json_values)
    elif field == "(new field)":
        entry[data.draw(st.text(max_size=8))] = data.draw(json_values)
    else:
        entry[field] = data.draw(json_values)
    check_loader(write(path, join(json.dumps(header).encode(), payload)))


@pytest.mark.slow  # tier 2: the header edits are tier 1's
@SETTINGS
@given(data=st.data())
def test_metadata_edits_load_a_working_model_or_raise_checkpoint_error(base, data):
    good, path = base
    header, payload = split(good)
    meta = header["__metadata__"]
    key = data.draw(st.sampled_from(sorted(meta) + ["(new key)"]), label="metadata key")
    if key == "(new key)":
        key = data.draw(st.text(max_size=8))
        meta[key] = json.dumps(data.draw(json_values))
    elif key in ("format", "format_version", "minitx_version"):
        meta[key] = data.draw(st.text(max_size=12) | st.sampled_from(["1", "minitx-checkpoint"]))
    else:  # a JSON document: change one field inside it, or replace it
        try:
            doc = json.loads(meta[key])
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc and data.draw(st.booleans()):
            doc[data.draw(st.sampled_from(sorted(doc)))] = data.draw(json_values)
        else:
            doc = data.draw(json_values)
        meta[key] = json.dumps(doc)
    check_loader(write(path, join(json.dumps(header).encode(), payload)))


def test_the_mutation_helpers_round_trip_a_valid_file(base):
    """The control: split/join without an edit gives a file that loads and resumes."""
    good, path = base
    header, payload = split(good)
    write(path, join(json.dumps(header).encode(), payload))
    assert load_checkpoint(path).resumable
    assert Trainer.resume(path).step_count == 3
    assert struct.unpack("<Q", good[:8])[0] < len(good)
