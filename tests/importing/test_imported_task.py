"""The imported model's task (core/data/imported_task.py) and its checkpoint: two vocabularies,
sources wrapped as the original fed them, example pairs or none, and every field of a file
checked on load (a file is untrusted)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from minitx.core.checkpoint import CheckpointError, load_checkpoint
from minitx.core.data.imported_task import NO_PAIRS, ImportedTask, MissingPairs
from minitx.core.data.origin import Origin
from minitx.core.data.vocab import Vocab
from tests.importing.conftest import import_args, run_import
from tests.reference_models import toy

SRC = Vocab(("<unk>", "<pad>", "<bos>", "<eos>", "7", "3", "1"), pad=1, sos=2, eos=3, unk=0, level="word")
TGT = Vocab(("<s>", "</s>", "<blank>", "1", "3", "7", "9"), pad=2, sos=0, eos=1, unk=None, level="word")


def task(wraps: bool = True) -> ImportedTask:
    return ImportedTask(TGT, SRC, wraps, Origin({"layout": "annotated"}), max_len=10)


def test_sources_are_read_in_the_source_vocabulary_and_wrapped_outputs_in_the_target_one():
    t = task()
    assert t.parse("3 1 7") == [2, 5, 6, 4, 3]  # <bos> 3 1 7 <eos>, in the source's ids
    assert t.format_source([2, 5, 6, 4, 3, 1, 1]) == "3 1 7"  # wrapping and padding left out
    assert t.source_labels([2, 5, 3]) == ["<bos>", "3", "<eos>"]
    assert t.format([5, 4, 3, 1, 2]) == "7 3 1"  # stops at the target's </s>
    assert t.source_length(t.parse("3 1 7")) == 3
    assert task(wraps=False).parse("3 1 7") == [5, 6, 4]
    assert t.model_fields() == {"vocab_size": 7, "pad_id": 2, "sos_id": 0, "eos_id": 1,
                                "src_vocab_size": 7, "src_pad_id": 1}


def test_a_source_is_written_in_the_target_vocabulary_by_its_text_for_the_copies_check():
    """Two vocabularies number the same digits differently: "the model copies its source" is
    compared by token text, the wrapping left out; a token the targets lack cannot be copied."""
    src = Vocab((*SRC.tokens, "8"), pad=1, sos=2, eos=3, unk=0, level="word")
    t = ImportedTask(TGT, src, True, Origin({"layout": "annotated"}), max_len=10)
    from minitx.core.data.batch import Batch

    fed = torch.tensor([t.parse("3 1 7") + [1], t.parse("7 8")  + [1, 1]])  # (2, 6) PAD after
    batch = Batch(src=fed, tgt=torch.zeros(2, 5, dtype=torch.long), lengths=torch.tensor([3, 2]))
    written, writable = t.sources_as_outputs(batch)
    assert written[0].tolist() == [TGT.tokens.index(x) for x in ("3", "1", "7")]
    assert written[1, 1].item() == -1 and written[1, 2].item() == TGT.pad
    assert writable.tolist() == [True, False]


def test_the_decoding_budget_is_the_tutorials_wrapped_length_plus_four():
    assert task().decode_cap(5, positions=64) == 9
    assert task(wraps=False).decode_cap(3, positions=64) == 9  # the same source, fed unwrapped
    assert task().decode_cap(60, positions=64) == 63  # within the positions


def test_without_example_pairs_the_commands_that_need_examples_say_so_and_typed_text_works():
    t = task()
    assert not t.has_examples
    with pytest.raises(MissingPairs, match="keeps no example pairs"):
        t.batch(8, torch.Generator())
    with pytest.raises(MissingPairs, match="no example pairs"):
        next(iter(t.evaluation_batches(8, 0)))
    assert t.example() == "7 3 1" and t.parse(t.example())  # the source vocabulary's first tokens
    assert "\n" not in NO_PAIRS and "--" not in NO_PAIRS  # how to give pairs is each caller's to say


def test_without_example_pairs_the_checks_that_need_no_answers_get_inputs_of_both_vocabularies():
    t = task()
    batch = t.input_batch(16, torch.Generator().manual_seed(0))
    src_vocab, vocab = t.src_vocab, t.vocab
    for row, n in zip(batch.src.tolist(), batch.lengths.tolist()):
        assert 3 <= n <= 8 and row[0] == src_vocab.sos and row[n + 1] == src_vocab.eos  # wrapped as fed
        assert set(row[1 : n + 1]) <= set(src_vocab.real_ids())
        assert set(row[n + 2 :]) <= {src_vocab.pad}
    assert batch.tgt[:, 0].eq(vocab.sos).all()
    same = t.input_batch(4, torch.Generator().manual_seed(0), length=5)
    assert same.lengths.tolist() == [5, 5, 5, 5]


def _with_metadata(path, tmp_path, **changes):
    """A copy of the checkpoint at `path` with metadata keys replaced (None: removed)."""
    with safe_open(str(path), framework="pt") as f:
        metadata, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    for key, value in changes.items():
        if value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
    out = tmp_path / "changed.safetensors"
    save_file(tensors, str(out), metadata=metadata)
    return out


@pytest.fixture(scope="module")
def imported_file(annotated_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("task") / "ann.safetensors"
    assert run_import(*import_args(annotated_files, toy.ANNOTATED, out)).exit_code == 0
    return out


def _task_json(path) -> dict:
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["task"])


@pytest.mark.parametrize("change, fragment", [
    ({"src_vocab": None}, "needs its source and target vocabularies"),
    ({"task": {"wraps_source": "yes"}}, "whether sources are wrapped"),
    ({"task": {"origin": {"a": {"b": {"c": {"d": 1}}}}}}, "origin is not an object"),
    ({"task": {"colour": 1}}, "unknown field 'colour'"),
    ({"task": {"min_len": 9, "max_len": 3}}, "min_len is above its max_len"),
    ({"task": {"heldout": {"source": [[99]], "target": [[4]], "lines": [1]}}}, "not ordinary tokens"),
])
def test_a_tampered_imported_checkpoint_is_refused_in_one_line(imported_file, tmp_path, change, fragment):
    changes = {}
    if "task" in change:
        changes["task"] = json.dumps({**_task_json(imported_file), **change["task"]})
    else:
        changes.update(change)
    with pytest.raises(CheckpointError, match=fragment) as info:
        load_checkpoint(_with_metadata(imported_file, tmp_path, **changes))
    assert "\n" not in str(info.value)


def test_a_minitx_task_with_a_second_vocabulary_is_refused(imported_file, tmp_path):
    from minitx import checkpoints

    reverse = checkpoints.resolve("reverse")
    with safe_open(str(imported_file), framework="pt") as f:
        src_vocab = f.metadata()["src_vocab"]
    with pytest.raises(CheckpointError, match="reads one vocabulary"):
        load_checkpoint(_with_metadata(reverse, tmp_path, src_vocab=src_vocab))
