"""The app fine-tunes the model it opened (`train --init` in the Train screen): the form starts
from core's fine-tuning defaults for the model's family and keeps its architecture; the live run
shows held-out BLEU and chrF, the probes' outputs with the words changed from the base's marked,
the forgetting alarm in red and a numerics table; q's save resumes. Tier 1 tests the form's rules
and the drawings without the app; the run in the app is tier 2."""

from __future__ import annotations

import pytest
from rich.text import Text

from minitx.tui.app.form_fields import FIELDS, field_texts, fine_tune_locked, fine_tune_train
from minitx.tui.app.messages import ProbeLine, Watching
from minitx.tui.app.widgets.train_views import watching_text
from minitx.tui.render.charts import numerics_text
from minitx.tui.render.numbers import scores_change


def styled_words(text: Text, style: str) -> list[str]:
    return [text.plain[span.start:span.end] for span in text.spans if str(span.style) == style]


@pytest.mark.parametrize(("family", "optimizer", "lr", "decay"), [
    ("marian", "adamw", 2e-5, 0.01), ("bart", "adamw", 2e-5, 0.01), ("t5", "adamw", 1e-4, 0.01),
    ("t5", "adafactor", 1e-3, 0.0)])
def test_the_fine_tune_form_starts_from_cores_defaults_for_the_family_and_optimizer(family, optimizer, lr,
                                                                                   decay):
    from minitx.core.config import ModelConfig
    from minitx.core.training.fine_tune import fine_tune_defaults

    train = fine_tune_train(family, optimizer)
    assert train.lr == lr and train.weight_decay == decay and train.optimizer == optimizer
    # the rest as the docs give them (transformers' Seq2SeqTrainer's: a flat rate from step 1,
    # clipping at 1.0, Adam's betas and eps), not as the dict the form was built from says
    assert (train.warmup, train.schedule, train.clip_grad_norm, train.batch_size) == (0, "flat", 1.0, 16)
    if optimizer == "adamw":
        assert (train.beta1, train.beta2, train.eps) == (0.9, 0.999, 1e-8)
    texts = field_texts(ModelConfig(), train)  # what the form shows
    assert texts["lr"] == f"{lr:g}" and texts["optimizer"] == optimizer and texts["batch_size"] == "16"
    assert texts["warmup"] == "0" and texts["schedule"] == "flat"
    assert fine_tune_defaults(family, optimizer)["lr"] == lr  # the CLI's --init starts from the same


def test_a_fine_tune_keeps_its_bases_architecture_and_task_but_not_how_it_trains():
    locked = fine_tune_locked()
    assert {"d_model", "heads", "kv_heads", "layers", "norm", "activation", "position_encoding", "task",
            "lengths", "tokens"} <= locked
    assert not locked & {"dropout", "lr", "steps", "batch_size", "optimizer", "data", "valid", "general",
                         "probe_source", "device", "seed"}
    assert locked <= set(FIELDS)


def test_the_status_line_says_bleu_and_chrf_base_to_now_and_the_cli_says_all_three():
    base, now = {"loss": 5.21, "bleu": 3.14, "chrf": 20.1}, {"loss": 1.03, "bleu": 25.4, "chrf": 48.25}
    assert scores_change(base, now, True, ("bleu", "chrf")) == "BLEU 3.1→25.4 · chrF 20.1→48.2"
    assert scores_change(base, now) == "loss 5.2100 -> 1.0300 · BLEU 3.1 -> 25.4 · chrF 20.1 -> 48.2"
    assert scores_change(None, now) is None
    assert scores_change(base, {"loss": 1.0, "bleu": None, "chrf": None}, True, ("bleu", "chrf")) == ""


def test_the_probes_mark_the_changed_words_and_the_alarm_replaces_the_forgetting_line_in_red():
    probes = [ProbeLine("the cat", "die kleine Katze", "die Katze", [1]),
              ProbeLine("a house", "ein Haus", "ein Haus", [])]
    quiet = watching_text(Watching(200, probes, 0.042, "probes"))
    lines = quiet.plain.splitlines()
    assert lines[:2] == ["the cat → die kleine Katze", "a house → ein Haus"]
    assert styled_words(quiet, "bold reverse") == ["kleine"]
    assert lines[2] == "KL to base 0.042 (on the probes)"
    alarm = "forgetting: general-domain loss 1.92 -> 2.61 (+36%) at step 400"
    loud = watching_text(Watching(400, probes, 0.3, "general", (1.92, 2.61), alarm))
    assert loud.plain.splitlines()[-1] == f"⚠ {alarm}" and styled_words(loud, "bold red") == [f"⚠ {alarm}"]
    calm = watching_text(Watching(400, probes, 0.3, "general", (1.92, 2.0)))
    assert calm.plain.splitlines()[-1] == "KL to base 0.3 (on the general pairs) · general loss 1.92→2"


def test_the_numerics_table_names_each_layers_tightest_point_and_marks_an_fp16_overflow_red():
    layers = [("enc L1", [900.0, 300.0], "ff", [0.5, 0.25]),
              ("dec L1", [40.0, 0.5], "res ff", [2.0, 4.0])]  # 65504 / 131008: past fp16's range
    text = numerics_text(layers, [0, 200], 80, 10)
    lines = text.plain.splitlines()
    assert lines[0].startswith("fp16 headroom (tightest point) · gradient norm · 2 evaluations, step 0-200")
    assert lines[1].startswith("enc L1") and " 300 ff " in lines[1] and lines[1].rstrip().endswith("0.25")
    assert lines[2].startswith("dec L1") and " 0.5 res ff " in lines[2] and lines[2].rstrip().endswith("4")
    assert any("0.5 res ff" in word for word in styled_words(text, "bold red"))
    assert not any("300" in word for word in styled_words(text, "bold red"))
    short = numerics_text(layers * 3, [0, 200], 80, 4).plain.splitlines()
    assert len(short) == 4 and short[-1].startswith("… 4 more layers")
    assert "no numerics recorded" in numerics_text([], [], 80, 10).plain


# -- in the app (tier 2) -----------------------------------------------------------------------


@pytest.mark.slow  # a fine-tune in the app, end to end, then its file resumed: several seconds
@pytest.mark.asyncio
async def test_the_app_fine_tunes_an_opened_folder_live_and_q_saves_a_file_that_resumes(tmp_path):
    from textual.widgets import Input, Static

    from minitx import checkpoints
    from minitx.core.training.trainer import Trainer
    from minitx.tui.app.main import create_app
    from minitx.tui.app.screens.dialogs import ChoiceDialog
    from tests.huggingface.changed_folders import write_pairs
    from tests.huggingface.test_fine_tune_folders import PAIRS
    from tests.huggingface.tiny_folders import save_model
    from tests.tui.tui_helpers import key_while_busy, model_ready, on_train_screen, wait_for

    folder = save_model(tmp_path / "opus-mt-tiny", "marian", layers=1, heads=2, d_model=16, d_ff=24)
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    app = create_app([str(folder)])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        form = screen.form
        assert form.start.label == "fine-tune opus-mt-tiny" and form.start.init == str(folder)
        assert screen.query_one("#lr", Input).value == "2e-05"  # Marian's, from core
        assert screen.query_one("#d_model", Input).disabled  # the base's architecture
        assert not screen.query_one("#dropout", Input).disabled  # how it trains
        assert form.error == "data: a fine-tune learns a file of pairs: name it here"
        for name, value in {"data": str(data), "steps": "100000", "batch_size": "4", "lr": "0.003",
                            "probe_source": "the cat | a red house"}.items():
            screen.query_one(f"#{name}", Input).value = value
        await pilot.pause()
        model_cfg, train_cfg = screen.form_configs
        assert train_cfg.init == str(folder) and train_cfg.data == str(data)
        assert train_cfg.probes == ("the cat", "a red house") and train_cfg.weight_decay == 0.01
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.query_one("#watching").display, "the first evaluation", 120)
        watching = str(screen.query_one("#watching", Static).render())
        assert watching.startswith("the cat → ") and "a red house → " in watching and "KL to base" in watching
        await wait_for(pilot, lambda: "BLEU" in str(screen.query_one("#stats", Static).render()), "BLEU")
        key_while_busy(pilot, "q")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the quit question")
        await pilot.press("s")
        await wait_for(pilot, lambda: app._exit, "the app to close")
        step = screen.current_run.saved_step
    path = tmp_path / "pairs-run1.safetensors"
    saved = checkpoints.load(str(path))
    assert saved.resumable and saved.summary["steps"] == step >= 200
    assert saved.summary["base"]["init"] == str(folder) and saved.history.watched.probes
    resumed = Trainer.resume(str(path), saved.train_config.replace(steps=step + 2, device="cpu"))
    assert resumed.step_count == step
    resumed.run()
    assert resumed.step_count == step + 2

    # Opened again, its Train form offers to resume it, and Explore's h replays its probes.
    app = create_app([str(path)])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("h")
        timeline = app.screen.timeline()
        await wait_for(pilot, lambda: timeline.display and timeline.steps, "the replay")
        records = saved.history.watched.probes
        assert len(timeline.steps) == len(records) and timeline.steps[0] == 0  # the base's output first
        assert timeline.bar().plain.splitlines()[-1].startswith("probe 1/2 · the cat → ")
        first = records[0]
        assert timeline.target == first.output_tokens and timeline.source == first.source_tokens
        await pilot.press("end")
        last = sorted(records, key=lambda r: (r.step, r.probe))[-1]  # evaluation by evaluation
        assert timeline.bar().plain.splitlines()[-1] == f"probe 2/2 · a red house → {last.output}"
        await pilot.press("t")
        screen = app.screen
        await wait_for(pilot, lambda: getattr(screen, "state", "") == "idle", "the train form")
        assert screen.form.start.resume_path == str(path)
        # Resumed, it goes on watching against its base (the folder is still there).
        screen.query_one("#steps", Input).value = str(step + 4)
        await pilot.pause()
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the resumed run", 60)
        assert screen.trainer.watcher is not None  # drawn during the run (hidden at its end at 80x24)
        assert str(screen.query_one("#watching", Static).render()).startswith("the cat → ")
        assert screen.trainer.history.watched.steps[-1] == step + 4


@pytest.mark.slow  # a fine-tune in the app until its first evaluation: a few seconds
@pytest.mark.asyncio
async def test_the_app_raises_the_forgetting_alarm_in_red_when_a_reverser_is_taught_to_copy(tmp_path):
    from textual.widgets import Input, Static

    from minitx.tui.app.main import create_app
    from tests.core.digit_pair_files import digit_pairs
    from tests.tui.tui_helpers import key_while_busy, notifications, on_train_screen, wait_for

    copy = digit_pairs(tmp_path / "copy.tsv", 400, seed=1, reverse=False)
    reverse = digit_pairs(tmp_path / "reverse.tsv", 64, seed=2, reverse=True)
    app = create_app(["reverse"])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        source = screen.query_one("#from")
        for _ in range(len(source.choices)):  # a model minitx trained: its recipe first, fine-tune offered
            if screen.form.start.init:
                break
            source.action_move(1)
            await pilot.pause()
        assert screen.form.start.label == "fine-tune reverse"
        values = {"data": str(copy), "general": str(reverse), "steps": "100000", "lr": "0.003"}
        for name, value in values.items():
            screen.query_one(f"#{name}", Input).value = value
        await pilot.pause()
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.query_one("#watching").display, "the first evaluation", 120)
        last = str(screen.query_one("#watching", Static).render()).splitlines()[-1]  # red: tier 1 tests it
        assert last.startswith("⚠ forgetting: general-domain loss ") and "%) at step 200" in last
        assert any(n.startswith("forgetting: general-domain loss ") for n in notifications(app))
        key_while_busy(pilot, "x")
        await wait_for(pilot, lambda: screen.state == "stopped", "the stop")
