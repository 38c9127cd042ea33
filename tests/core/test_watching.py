"""Watching a fine-tune (core/training/watching.py): at each evaluation the probes' outputs beside
the base's with their cross-attention, the general-domain loss and KL to the base with the
forgetting alarm, and each sublayer's activation range and each layer's gradient norm, kept in
the file's history and given by `minitx curves --format json` and `train --json`; bad input is
one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from minitx import checkpoints
from minitx.core.history import History, ProbeRecord
from minitx.core.interp.numerics import measure_numerics
from minitx.core.model import transformer
from minitx.core.number_formats import FORMATS, FP16_MAX
from minitx.core.training.fine_tune import fine_tune_task, general_pairs
from minitx.core.training.forgetting import general_loss, general_loss_and_kl, kl_to_base
from minitx.core.training.watching import NUMERICS_PAIRS, Watcher, changed_words, marked, watcher_for
from minitx.tui.cli.main import main
from tests.core.digit_pair_files import digit_pairs


def run(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("watch")
    return {"copy": digit_pairs(folder / "copy.tsv", 40, 0, reverse=False),
            "reverse": digit_pairs(folder / "reverse.tsv", 12, 1, reverse=True)}


def fine_tune(files, out: Path, *extra) -> tuple[int, str]:
    """The bundled reverse model taught to copy, two steps, evaluated at each."""
    return run("train", "--init", "reverse", "--data", files["copy"], "--steps", 2, "--eval-every", 1,
               "--eval-size", 4, "--batch-size", 4, "--out", out, "--threads", 1, *extra)


def test_a_model_taught_another_task_raises_the_alarm_and_its_file_keeps_every_watched_figure(files,
                                                                                             tmp_path):
    out = tmp_path / "ft.safetensors"
    code, text = fine_tune(files, out, "--general", files["reverse"], "--forget-alarm", 0, "--lr", 3e-3,
                           "--probe", "3 1 4 1 5", "--probe", "2 7 1 8", "--json")
    assert code == 0, text
    result = json.loads(text)
    forgetting = result["forgetting"]
    assert set(forgetting) >= {"general_loss_base", "general_loss_end", "kl_to_base_end", "alarm",
                               "alarm_step"}
    # reversing is forgotten as copying is learned: the general loss rises, the alarm goes off
    assert forgetting["general_loss_end"] > forgetting["general_loss_base"] and forgetting["alarm"]
    assert forgetting["alarm_step"] == 1 and forgetting["kl_to_base_end"] > 0
    assert [p["source"] for p in result["probes"]] == ["3 1 4 1 5", "2 7 1 8"]
    assert result["probes"][0]["base_output"] == "5 1 4 1 3"  # the bundled model reverses

    code, text = run("curves", out, "--format", "json")
    assert code == 0, text
    history = json.loads(text)["runs"][0]["history"]
    probes = history["probes"]
    assert [(p["step"], p["source"]) for p in probes] == [(s, src) for s in (0, 1, 2)
                                                          for src in ("3 1 4 1 5", "2 7 1 8")]
    assert all(isinstance(p["output"], str) for p in probes)
    assert probes[0]["output"] == probes[0]["base_output"] and probes[0]["changed"] == []  # step 0: the base
    series = history["series"]
    assert series["general_loss"]["step"] == series["kl_to_base"]["step"] == [0, 1, 2]
    assert series["general_loss"]["value"][0] == pytest.approx(forgetting["general_loss_base"], rel=1e-5)
    assert series["kl_to_base"]["value"][0] == pytest.approx(0, abs=1e-6)  # the base against itself
    assert series["kl_to_base"]["on"] == "general"
    numerics = history["numerics"]
    assert numerics["step"] == [0, 1, 2]
    cfg = checkpoints.load(str(out)).model_config
    # two points (the sublayer's output, the stream after it) per sublayer, forward order
    assert len(numerics["activations"]) == 2 * (2 * cfg.n_encoder_layers + 3 * cfg.n_decoder_layers)
    first = numerics["activations"][0]
    assert (first["stack"], first["layer"], first["sublayer"]) == ("encoder", 1, "self-attention")
    assert first["headroom_fp16"][0] == pytest.approx(FP16_MAX / first["max"][0], rel=1e-4)
    assert [g["stack"] for g in numerics["gradients"]].count("decoder") == cfg.n_decoder_layers
    assert all(n > 0 for g in numerics["gradients"] for n in g["norm"])
    code, text = run("curves", out, "--chart", "general_loss", "--chart", "kl_to_base", "--height", 3)
    assert code == 0 and "general-domain loss" in text and "KL to the base model" in text, text
    code, text = run("curves", out, "--format", "csv")
    assert code == 0 and "ft,max encoder 1 self-attention,0," in text and "ft,kl_to_base,2," in text
    # the attention stays in the file: every layer and head, one row per output token
    record = checkpoints.load(str(out)).history.watched.probes[-1]
    assert record.attention.shape == (cfg.n_decoder_layers, cfg.n_heads, len(record.output_tokens),
                                      len(record.source_tokens))
    assert torch.allclose(record.attention.sum(-1), torch.ones(record.attention.shape[:-1]), atol=1e-4)


def test_without_general_pairs_the_kl_on_the_probes_stands_in_and_no_alarm_can_fire(files, tmp_path):
    code, text = fine_tune(files, tmp_path / "b.safetensors", "--json")
    assert code == 0, text
    result = json.loads(text)
    forgetting = result["forgetting"]
    assert forgetting["kl_on"] == "probes" and forgetting["general_loss_end"] is None
    held_out = {line.split("\t")[0] for line in files["copy"].read_text().splitlines()}
    # the probes are held-out sources: three, or as many as are held out (2 of these 40 pairs)
    assert len(result["probes"]) == 2 and all(p["source"] in held_out for p in result["probes"])
    assert forgetting["kl_to_base_end"] is not None and not forgetting["alarm"]


def test_the_alarm_is_a_cli_line_and_a_resumed_run_goes_on_watching_and_keeps_it(files, tmp_path):
    out = tmp_path / "ft.safetensors"
    code, text = fine_tune(files, out, "--general", files["reverse"], "--forget-alarm", 0, "--lr", 3e-3,
                           "--log-every", 1)
    assert code == 0, text
    alarm = next(line for line in text.splitlines() if line.startswith("forgetting: general-domain loss "))
    assert alarm.endswith("at step 1") and "%) at step" in alarm
    code, text = run("train", "--resume", out, "--steps", 3, "--data", files["copy"], "--threads", 1,
                     "--json")
    assert code == 0, text
    forgetting = json.loads(text)["forgetting"]
    assert forgetting["alarm"] and forgetting["alarm_step"] == 1  # the alarm of the first part stays
    watched = checkpoints.load(str(out)).history.watched
    assert watched.steps == [0, 1, 2, 3] and watched.general_loss[0] == pytest.approx(
        forgetting["general_loss_base"])
    assert watched.general_loss[-1] == pytest.approx(forgetting["general_loss_end"])


@pytest.mark.parametrize("args, message", [
    (["--general", "BAD"], "line 1: 'a' is not a token of this model"),
    (["--probe", "1 " * 300], "this model takes at most"),
    (["--forget-alarm", "2000"], "must be a rise of 0% to 1000%"),
    (["--forget-alarm", "-1"], "must be a rise of 0% to 1000%"),
])
def test_bad_watching_input_is_one_line_exit_2_and_nothing_written(files, tmp_path, args, message):
    bad = tmp_path / "letters.tsv"
    bad.write_text("a b c\tx y z\n", encoding="utf-8")
    out = tmp_path / "x.safetensors"
    code, text = fine_tune(files, out, *[str(bad) if a == "BAD" else a for a in args])
    assert code == 2, text
    assert message in text and len(text.strip().splitlines()) == 1
    assert not out.exists()


def test_watching_finds_a_damaged_model_blind_and_an_unchanged_one_quiet(files):
    base = checkpoints.load("reverse")
    task = fine_tune_task(base.task, str(files["copy"]), "", 0, base.model_config.max_len, 0)
    pairs = general_pairs(str(files["reverse"]), task, base.model_config.max_len, 0, 100)
    general = [task.pairs_batch(pairs, torch.arange(len(pairs)))]
    damaged = checkpoints.load("reverse").model
    with torch.no_grad():  # a change the watcher is not told of
        damaged.decoder[0].ff[3].weight.mul_(40)
    history = History()
    watcher = Watcher(damaged, base.model, task, (), general, alarm_rise=0.2)
    assert watcher.watch(7, history)  # the alarm, at the step it was measured
    assert watcher.forgetting.alarm_step == 7 and history.watched.kl_to_base[-1] > 0.1
    same = Watcher(base.model, base.model, task, (), general, alarm_rise=0.2)
    assert not same.watch(7, History()) and same.forgetting.kl_to_base_end == pytest.approx(0, abs=1e-6)
    # the one pass a watched evaluation takes gives forgetting.py's two figures
    loss, kl = general_loss_and_kl(damaged, base.model, general)
    assert loss == pytest.approx(general_loss(damaged, general)[0], rel=1e-6)
    assert kl == pytest.approx(kl_to_base(damaged, base.model, general), rel=1e-6)


def test_the_formats_largest_values_are_torchs():
    assert FORMATS == {"fp16": torch.finfo(torch.float16).max, "bf16": torch.finfo(torch.bfloat16).max}


def test_changed_words_are_the_ones_the_base_did_not_write_there():
    assert changed_words("das rote Haus ist klein", "das Haus ist klein") == [1]
    assert changed_words("same words", "same words") == []
    assert marked("das rote Haus", [1]) == "das [rote] Haus"


def test_a_long_runs_probe_attention_is_thinned_to_the_files_limit_first_and_last_kept():
    history = History()
    for step in range(0, 3000, 10):
        attention = torch.full((2, 4, 20, 20), 0.05)  # (layers, heads, output, source)
        record = ProbeRecord(step, 0, "s", "o", "o", [], ["a"] * 20, ["b"] * 20, attention)
        history.record_watch(step, 0.0, None, "probes", probes=[record])
    tensors = history.to_tensors()
    info = json.loads(bytes(tensors["watch_info"].tolist()))
    steps = [p["step"] for p in info["probes"]]
    assert len(steps) <= 100 and steps[0] == 0 and steps[-1] == 2990
    assert len(tensors["watch_steps"]) == 300  # the series stay whole
    shared = history.for_sharing().watched  # export --history: 256 KB of attention at most
    assert sum(r.attention.numel() * 4 for r in shared.probes) <= 256 * 1024
    assert shared.probes[0].step == 0 and shared.probes[-1].step == 2990
    assert len(history.watched.probes) == 300  # a copy: the run's own history keeps every record
    again = History.from_tensors(tensors, 2, 4, 64, 10, None)
    assert [r.step for r in again.watched.probes] == steps
    tensors["watch_probe_attention"] = tensors["watch_probe_attention"][:-1]
    with pytest.raises(ValueError, match="watch_info does not describe"):
        History.from_tensors(tensors, 2, 4, 64, 10, None)


def test_a_file_of_more_evaluations_than_a_series_keeps_reads_back_with_its_probes():
    history = History()
    for step in range(2600):  # the series thin to 2,000 points, the probes to 100 evaluations apart
        records = [ProbeRecord(step, 0, "s", "o", "o", [], ["a"], ["b"], torch.ones(1, 1, 1, 1))] \
            if step % 7 == 0 else []
        history.record_watch(step, 0.1, None, "probes", probes=records)
    again = History.from_tensors(history.to_tensors(), 1, 1, 64, 10, None)
    assert len(again.watched.steps) == 2000 and len(again.watched.probes) == 100


def test_the_numerics_pass_takes_no_more_pairs_than_a_training_step(files):
    """Watching never holds more activations than a step of the run does: the numerics' forward
    and backward pass goes over NUMERICS_PAIRS held-out pairs, or the run's batch if smaller."""
    base = checkpoints.load("reverse")
    task = fine_tune_task(base.task, str(files["copy"]), str(files["reverse"]), 0,
                          base.model_config.max_len, 0)
    assert len(task.heldout) > 3
    small = watcher_for(base.model, base.model, task, (), "", 0.2, 0, 100, batch_size=3)
    assert len(small.numerics_batch) == 3
    big = watcher_for(base.model, base.model, task, (), "", 0.2, 0, 100, batch_size=64)
    assert len(big.numerics_batch) == min(NUMERICS_PAIRS, len(task.heldout))


def test_the_numerics_of_a_run_with_gradient_checkpointing_go_through_it_and_are_the_same(files,
                                                                                           monkeypatch):
    """--gradient-checkpointing holds in every pass with gradients, the numerics' too: each layer
    through torch.utils.checkpoint, the same ranges and gradient norms."""
    base = checkpoints.load("reverse")
    model = base.model
    batch = fine_tune_task(base.task, str(files["copy"]), "", 0, model.cfg.max_len, 0).example_batch()
    plain = measure_numerics(model, batch.src, batch.decoder_input, batch.labels)
    calls = []
    real = transformer.checkpoint
    monkeypatch.setattr(transformer, "checkpoint", lambda *a, **k: calls.append(1) or real(*a, **k))
    model.checkpoint_layers = True
    checked = measure_numerics(model, batch.src, batch.decoder_input, batch.labels)
    assert len(calls) == model.cfg.n_encoder_layers + model.cfg.n_decoder_layers
    assert [a.max for a in checked.activations] == pytest.approx([a.max for a in plain.activations], rel=1e-6)
    assert [g.norm for g in checked.gradients] == pytest.approx([g.norm for g in plain.gradients], rel=1e-5)
