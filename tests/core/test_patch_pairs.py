"""Clean/corrupted pairs (core/interp/pairs.py) for every kind of task: the same source length,
known answers that differ, and a batched Patcher whose metric reads only those steps."""

import datetime

import pytest
import torch

from minitx import checkpoints
from minitx.core.data.dates import DatesTask, render
from minitx.core.data.pair_task import PairsTask
from minitx.core.data.tasks import get_task
from minitx.core.interp.pairs import PairBatch, draw_pairs, typed_pair
from minitx.core.interp.patching import Patcher
from tests.core.test_pairs import pairs_file

EOS = 12


@pytest.mark.parametrize("name", ["reverse", "copy", "sort"])
def test_drawn_digit_pairs_have_one_length_and_the_tasks_answers_which_differ(name):
    task = get_task(name)
    pairs = draw_pairs(task, 20, 0, EOS)
    assert len(pairs) == 20
    assert len({len(p.clean) for p in pairs}) > 1  # lengths vary across pairs
    for p in pairs:
        assert len(p.clean) == len(p.corrupted) and p.steps
        assert p.clean_answer == task.expected_output(p.clean) + [EOS]
        assert p.corrupted_answer == task.expected_output(p.corrupted) + [EOS]
    assert draw_pairs(task, 20, 0, EOS) == pairs != draw_pairs(task, 20, 1, EOS)


def test_dates_pairs_are_two_dates_written_with_as_many_characters():
    task = DatesTask()
    vocab = task.vocab
    pairs = draw_pairs(task, 10, 0, vocab.eos)
    assert pairs
    for p in pairs:
        assert len(p.clean) == len(p.corrupted)
        iso = vocab.join(vocab.decode(p.clean_answer))
        assert datetime.date.fromisoformat(iso)  # a real date, the task's own answer
        assert p.clean_answer != p.corrupted_answer
    example = render(datetime.date(2026, 12, 1), "{d} {mon} {yy}")
    with pytest.raises(ValueError, match="cannot tell the answer for a typed source"):
        typed_pair(task, vocab.encode(example.source)[0], vocab.encode(example.source)[0], vocab.eos)


def test_a_data_files_pairs_are_held_out_pairs_of_one_source_and_answer_length(tmp_path):
    task = PairsTask.from_files(str(pairs_file(tmp_path / "p.tsv", n=400)), seed=3)
    eos = task.vocab.eos
    held = {tuple(task.heldout.data.source.row(int(i))) for i in task.heldout.index}
    pairs = draw_pairs(task, 8, 0, eos)
    assert pairs
    for p in pairs:
        assert tuple(p.clean) in held and tuple(p.corrupted) in held
        assert len(p.clean) == len(p.corrupted) and len(p.clean_answer) == len(p.corrupted_answer)


def test_the_batched_metric_averages_the_differing_steps_of_every_pair():
    ckpt = checkpoints.load("reverse")
    pairs = draw_pairs(ckpt.task, 6, 2, EOS)
    together = Patcher.of_pairs(ckpt.model, pairs)
    alone = [Patcher.of_pairs(ckpt.model, [p]) for p in pairs]
    weights = [len(p.steps) for p in pairs]
    mean = sum(w * a.clean_difference for w, a in zip(weights, alone)) / sum(weights)
    assert together.clean_difference == pytest.approx(mean, rel=1e-5)
    batch = PairBatch.of(pairs, ckpt.model.cfg.pad_id, ckpt.model.cfg.sos_id)
    assert int(batch.steps.sum()) == sum(weights)
    assert torch.equal(batch.decoder_input[:, 0], torch.full((6,), ckpt.model.cfg.sos_id))
