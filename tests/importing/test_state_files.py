"""Reading a user's weights: a state_dict from .safetensors or .pt, and nothing else, ever
unpickled; every refusal one line naming the file (and key)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.state_files import SAFETENSORS, TORCH, file_kind, read_state_dict
from minitx.core.tensor_checks import all_finite

SAVE_LINE = "torch.save(model.state_dict(), "


def assert_same_tensors(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_state_dict_reads_the_same_from_pt_and_from_safetensors(tutorial_reverse, tutorial_files):
    state = tutorial_reverse.model.state_dict()
    assert file_kind(tutorial_files.pt) == TORCH and file_kind(tutorial_files.safetensors) == SAFETENSORS
    assert_same_tensors(read_state_dict(tutorial_files.pt), state)
    assert_same_tensors(read_state_dict(tutorial_files.safetensors), state)


def test_the_kind_of_file_comes_from_its_bytes_not_its_name(annotated_reverse, annotated_files, tmp_path):
    renamed = tmp_path / "weights.pt"  # a safetensors file under a torch name
    renamed.write_bytes(annotated_files.safetensors.read_bytes())
    assert file_kind(renamed) == SAFETENSORS
    assert_same_tensors(read_state_dict(renamed), annotated_reverse.model.state_dict())


def test_torch_saves_older_pickle_format_reads_too(tmp_path):
    state = {"w": torch.randn(3, 2), "b": torch.arange(3.0)}
    path = tmp_path / "old.pth"
    torch.save(state, path, _use_new_zipfile_serialization=False)
    assert_same_tensors(read_state_dict(path), state)


class Trap:
    """Unpickling this would write a file: the proof that nothing in a user's file runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code from the file ran"))


def test_a_pickled_object_is_refused_and_none_of_its_code_runs(tmp_path):
    marker = tmp_path / "ran.txt"
    path = tmp_path / "trap.pt"
    torch.save({"weight": torch.zeros(2), "payload": Trap(marker)}, path)
    with pytest.raises(ImportFileError) as caught:
        read_state_dict(path)
    assert not marker.exists()
    message = str(caught.value)
    assert str(path) in message and "pickled" in message and SAVE_LINE in message


def test_a_whole_pickled_model_is_refused_with_how_to_save_its_state_dict(annotated_files):
    with pytest.raises(ImportFileError) as caught:
        read_state_dict(annotated_files.pickled)
    message = str(caught.value)
    assert str(annotated_files.pickled) in message
    assert "annotated_transformer.EncoderDecoder" in message  # the class it would have built
    assert SAVE_LINE in message


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit's own, when the archive is made
def test_a_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(ImportFileError, match="TorchScript archive"):
        read_state_dict(path)


def test_a_training_checkpoint_is_refused_naming_the_entry_that_holds_the_weights(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save({"epoch": 3, "model_state_dict": {"w": torch.zeros(2)},
                "optimizer_state_dict": {"state": {}, "param_groups": []}}, path)
    with pytest.raises(ImportFileError) as caught:
        read_state_dict(path)
    assert "torch.save(checkpoint['model_state_dict'], " in str(caught.value)


def _write(path: Path, obj) -> None:
    torch.save(obj, path)


def _truncated_safetensors(path: Path) -> None:
    save_file({"w": torch.zeros(64)}, str(path))
    path.write_bytes(path.read_bytes()[:-40])


def _bad_safetensors_header(path: Path) -> None:
    header = b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 99]}}'
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)


def _truncated_zip(path: Path) -> None:
    torch.save({"w": torch.zeros(64)}, path)
    path.write_bytes(path.read_bytes()[:200])


def _truncated_old_pickle(path: Path) -> None:
    torch.save({"w": torch.zeros(64)}, path, _use_new_zipfile_serialization=False)
    path.write_bytes(path.read_bytes()[:60])


# case -> (how to make the file, what the message must say besides the file's name)
BAD_FILES = {
    "missing": (lambda p: None, "no such file"),
    "folder": (lambda p: p.mkdir(), "is a folder"),
    "text": (lambda p: p.write_text("encoder.weight 0.1 0.2\n"), "neither a safetensors file nor a torch"),
    "empty file": (lambda p: p.write_bytes(b""), "neither a safetensors file nor a torch"),
    "truncated safetensors": (_truncated_safetensors, "not a valid safetensors file"),
    "corrupt safetensors header": (_bad_safetensors_header, "not a valid safetensors file"),
    "header beyond the end": (lambda p: p.write_bytes(struct.pack("<Q", 10**6) + b'{"w": {}}'),
                              "a truncated safetensors file (its header claims 1000000 bytes of 17)"),
    "truncated zip": (_truncated_zip, "not a valid torch file"),
    "truncated old pickle": (_truncated_old_pickle, "not a valid torch file"),
    "single tensor": (lambda p: _write(p, torch.zeros(3)), "a single tensor"),
    "list": (lambda p: _write(p, [torch.zeros(3)]), "holds a list"),
    "empty dict": (lambda p: _write(p, {}), "holds no tensors"),
    "number value": (lambda p: _write(p, {"w": torch.zeros(2), "step": 7}),
                     "key 'step' holds a value of type int"),
    "text value": (lambda p: _write(p, {"w": torch.zeros(2), "name": "x"}),
                   "key 'name' holds a value of type str"),
    "non-string key": (lambda p: _write(p, {3: torch.zeros(2)}), "key 3 is not a name"),
    "nested dict": (lambda p: _write(p, {"w": torch.zeros(2), "config": {"lr": 0.1}}),
                    "key 'config' holds a nested dict"),
    "sparse tensor": (lambda p: _write(p, {"w": torch.eye(3).to_sparse()}),
                      "key 'w' holds a torch.sparse_coo"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_each_bad_weights_file_gets_one_line_naming_the_file(case, tmp_path):
    make, expected = BAD_FILES[case]
    path = tmp_path / "weights.pt"
    make(path)
    with pytest.raises(ImportFileError) as caught:
        read_state_dict(path)
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message
    assert expected in message


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_one_nan_or_infinity_anywhere_in_a_tensor_makes_it_not_finite(dtype):
    """The check reads a minimum and a maximum: one bad value in any lane of the vectorised
    kernel, or in the tail past the last full vector, must still show."""
    big = torch.finfo(dtype).max
    edges = torch.tensor([[big, -big], [0.0, 1.0]], dtype=dtype)
    assert all_finite(edges) and all_finite(torch.empty(0, 3, dtype=dtype))
    for bad in (float("nan"), float("inf"), float("-inf")):
        for size, positions in ((1, [0]), (37, range(37)), (4099, [0, 1, 2048, 4096, 4098])):
            for i in positions:
                t = torch.randn(size).to(dtype)
                t[i] = bad
                assert not all_finite(t), (bad, size, i)
                assert not all_finite(t.view(1, size).expand(2, size).t())  # a view that is not contiguous
