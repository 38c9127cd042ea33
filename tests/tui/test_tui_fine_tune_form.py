"""The Train form's fine-tune fields: a LoRA fine-tune, the course's workflow (keep best,
patience), the pair's languages and guided alignment start from the app as `train --init` does
from the command line, in the cells of the fields the base decides."""

from __future__ import annotations

import pytest
import torch
from textual.widgets import Input

from minitx.tui.app.form_fields import FIELDS, FINE_TUNE_FIELDS, fine_tune_locked
from minitx.tui.app.main import create_app
from tests.core.digit_pair_files import digit_pairs
from tests.tui.tui_helpers import notifications, on_fine_tune_form, on_train_screen, screen_text, wait_for


@pytest.mark.parametrize("columns", [4, 3])
@pytest.mark.parametrize("fine_tune", [False, True])
def test_every_row_of_the_form_is_full_with_or_without_a_fine_tunes_fields(columns, fine_tune):
    from minitx.tui.app.form_fields import SOURCE
    from minitx.tui.app.widgets.train_form import FINE_TUNE_SPANS, ROW_SPANS

    hidden = fine_tune_locked() if fine_tune else set(FINE_TUNE_FIELDS)
    spans = {**ROW_SPANS[columns], **(FINE_TUNE_SPANS[columns] if fine_tune else {})}
    used = 0  # cells of the row being filled: a field that does not fit would leave a hole
    for name in (SOURCE, *FIELDS):
        if name not in hidden:
            assert used + spans.get(name, 1) <= columns, f"{name} leaves a hole before it"
            used = (used + spans.get(name, 1)) % columns
    assert used == 0  # the last row is full


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (100, 32)])
async def test_a_fine_tunes_own_fields_take_the_cells_of_those_its_base_decides(size):
    app = create_app(["reverse"])
    async with app.run_test(size=size) as pilot:
        screen = await on_train_screen(pilot)
        plain_rows = screen.form.styles.grid_size_rows
        assert not any(screen.query_one(f"#field-{name}").display for name in FINE_TUNE_FIELDS)
        screen = await on_fine_tune_form(pilot)
        await pilot.pause()
        # one row more at most (LoRA, precision and checkpointing): the chart keeps its other lines
        rows = screen.form.styles.grid_size_rows
        assert rows <= plain_rows + 1
        form_rows = "\n".join(screen_text(app).splitlines()[1:1 + rows])
        shown = [label for name, label in FIELDS.items() if name not in fine_tune_locked()]
        assert all(f" {label} " in form_rows for label in shown)
        assert " d_model " not in form_rows and " lora " in form_rows
        assert all(screen.query_one(f"#field-{name}").tooltip for name in FIELDS)  # each says what it is
        # keyboard only: Tab's round reaches every fine-tune field, and none of the base's
        chain = {widget.id for widget in screen.focus_chain}
        assert set(FINE_TUNE_FIELDS) <= chain and not chain & fine_tune_locked()


@pytest.mark.asyncio
async def test_keep_best_patience_languages_and_memory_reach_the_runs_config_and_a_bad_head_is_one_line(
        tmp_path):
    pairs = digit_pairs(tmp_path / "reverse.tsv", 40, seed=1, reverse=True)
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_fine_tune_form(pilot)
        screen.query_one("#data", Input).value = str(pairs)
        keep_best = screen.query_one("#keep_best")
        while keep_best.value != "loss":
            keep_best.action_move(1)
        screen.query_one("#patience", Input).value = "2"
        await pilot.pause()
        _, train = screen.validate_form()
        assert (train.keep_best, train.patience, train.init) == ("loss", 2, screen.form.start.init)
        screen.query_one("#src_lang", Input).value = "en"
        screen.query_one("#tgt_lang", Input).value = "fr"
        await pilot.pause()
        assert (screen.form_configs[1].src_lang, screen.form_configs[1].tgt_lang) == ("en", "fr")
        # how a step holds its memory, as --precision bf16 --gradient-checkpointing set it
        assert (train.precision, train.gradient_checkpointing) == ("fp32", False)
        for name, label in (("precision", "bf16"), ("gradient_checkpointing", "on")):
            field = screen.query_one(f"#{name}")
            while field.choices[field.index][1] != label:
                field.action_move(1)
        await pilot.pause()
        memory = screen.form_configs[1]
        assert (memory.precision, memory.gradient_checkpointing) == ("bf16", True)
        screen.query_one("#guided_head", Input).value = "x"
        await pilot.pause()
        assert screen.form_configs is None
        assert screen.form_error.startswith("guided_head: expected LAYER:HEAD")
        assert screen.query_one("#guided_head").has_class("-invalid")
        note = str(screen.query_one("#form-note").render())
        assert note.startswith("✗ guided_head:") and "\n" not in note.strip()
        # a head the model does not have: the run's check says so (the bundled reverser: 2x4)
        links = tmp_path / "links.txt"
        links.write_text("0-0\n" * 40, encoding="utf-8")
        screen.query_one("#alignments", Input).value = str(links)
        screen.query_one("#guided_head", Input).value = "9:1"
        await pilot.pause()
        await wait_for(pilot, screen.check_holds, "the check of the guided run")
        assert screen.form_error.startswith("guided_head:") and "9" in screen.form_error
        assert screen.query_one("#guided_head").has_class("-invalid")
        screen.query_one("#guided_head", Input).value = "2:1"
        await pilot.pause()
        await wait_for(pilot, screen.check_holds, "the check of the guided run")
        assert screen.form_error == "" and screen.form_configs[1].guided_head == "2:1"


@pytest.mark.asyncio
async def test_a_lora_fine_tune_started_from_the_form_trains_only_its_adapters_in_bf16_said_slow_here(
        tmp_path, monkeypatch):
    from minitx.core.training import memory_estimate
    from minitx.core.training.fine_tune import LORA_LR, fine_tune_defaults

    monkeypatch.setattr(memory_estimate, "bf16_is_fast", lambda device: False)  # any machine: this one
    pairs = digit_pairs(tmp_path / "reverse.tsv", 40, seed=1, reverse=True)
    app = create_app(["reverse"])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_fine_tune_form(pilot)
        lr = screen.query_one("#lr", Input)
        full_lr = lr.value
        for name, value in {"data": str(pairs), "steps": "3", "lora_rank": "4"}.items():
            screen.query_one(f"#{name}", Input).value = value
        await pilot.pause()
        assert lr.value == f"{LORA_LR:g}" != full_lr  # core's LoRA lr, not the family's
        assert float(full_lr) == fine_tune_defaults(screen.form.start.family)["lr"]
        precision = screen.query_one("#precision")
        precision.value = "bf16"
        await pilot.pause()
        await wait_for(pilot, screen.check_holds, "the check of the bf16 run")
        assert not notifications(app)
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state in ("finished", "failed"), "the LoRA run")
        assert screen.state == "finished", notifications(app)
        assert memory_estimate.BF16_EMULATED in notifications(app)  # said as it started
        run = screen.current_run
        assert run.train_cfg.lora_rank == 4 and run.trainer.lora is not None
        assert run.train_cfg.precision == "bf16"
        # ended, the base is float32 again, its own weights (the model on screen), for Explore
        model, base = run.trainer.model, dict(app.current.model.named_parameters())
        assert {p.dtype for p in model.parameters()} == {torch.float32}
        frozen = {n.replace(".base_layer", ""): p for n, p in model.named_parameters() if not p.requires_grad}
        assert frozen.keys() <= base.keys() and all(torch.equal(p, base[n]) for n, p in frozen.items())
        trained = {n for n, p in run.trainer.model.named_parameters() if p.requires_grad}
        assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)
        screen.query_one("#lora_rank", Input).value = ""  # off again: the full fine-tune's lr
        await pilot.pause()
        assert lr.value == full_lr
