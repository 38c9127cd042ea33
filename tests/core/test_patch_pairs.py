"""Clean/corrupted pairs (core/interp/pairs.py) for every kind of task: the same source length,
known answers that differ, and a batched Patcher whose metric reads only those steps."""

import datetime

import pytest
import torch

from minitx import checkpoints
from minitx.core.data.dates import DatesTask, render
from minitx.core.data.pair_task import PairsTask
from minitx.core.data.tasks import get_task
from minitx.core.interp import pairs as pairs_module
from minitx.core.interp.decode import Stepper
from minitx.core.interp.pairs import PairBatch, draw_pairs, typed_pair
from minitx.core.interp.patching import Patcher, sweep
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


def test_typed_dates_take_the_models_own_outputs_as_answers_and_patching_explains_them(monkeypatch):
    ckpt = checkpoints.load("dates")
    model, task = ckpt.model, ckpt.task
    clean, corrupted = (task.parse(text) for text in ("12 March 2021", "19 March 2021"))
    said = []
    for source in (clean, corrupted):
        cap = task.decode_cap(len(source), model.cfg.max_len)
        stepper = Stepper(model, source, cap=cap, vocab=task.vocab)
        stepper.run()
        said.append(stepper.tokens)  # what it outputs, its end token included
    pair = typed_pair(task, clean, corrupted, model.cfg.eos_id, model)
    assert pair.by_model and [pair.clean_answer, pair.corrupted_answer] == said
    assert "".join(task.vocab.decode(pair.clean_answer[:-1])) == "2021-03-12"
    assert pair.steps == [9]  # the day's second digit: 2 against 9
    result = sweep(Patcher(model, task, clean, corrupted))
    assert result.by_model and result.clean_difference > 0 > result.corrupted_difference
    # what the model says depends on the day's digit: the encoder stream at that one position
    # carries almost all of it, the positions that read the same in both carry nothing
    day = next(i for i, (a, b) in enumerate(zip(clean, corrupted)) if a != b)
    stream = result.streams["enc:L2.resid"]
    assert stream[day] > 0.9 and all(abs(f) < 0.05 for i, f in enumerate(stream) if i != day)
    with pytest.raises(ValueError, match="the model says the same for both sources"):
        typed_pair(task, clean, clean, model.cfg.eos_id, model)
    # (the dates model always writes 11 tokens: a model that says one source's in fewer)
    outputs = {tuple(clean): said[0], tuple(corrupted): said[1][:5] + said[1][-1:]}
    monkeypatch.setattr(pairs_module, "model_output", lambda model, task, src: outputs[tuple(src)])
    with pytest.raises(ValueError, match=r"outputs for the two sources differ in length \(11 and 6 tokens\)"):
        typed_pair(task, clean, corrupted, model.cfg.eos_id, model)


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
