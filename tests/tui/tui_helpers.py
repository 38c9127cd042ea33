"""Shared helpers for the TUI tests (a plain module: tests/ already has a top-level conftest)."""

from __future__ import annotations

import time

# Where the tests save checkpoints, and how long anything may take on a busy 2-core machine.
TIMEOUT = 60.0


def reverse_checkpoint() -> str:
    """The bundled reverse model's name, after checking it is there (the snapshots show it)."""
    from minitx import checkpoints
    checkpoints.resolve("reverse")  # a clear CheckpointError if the bundle is missing
    return "reverse"


async def wait_for(pilot, condition, what: str = "condition", timeout: float = TIMEOUT) -> float:
    """Pause the pilot until condition() holds, then until the messages it brought are handled
    and the screen laid out as its next refresh would (a test reads what a person would see);
    returns the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.02)
    await pilot.pause(0)
    return time.monotonic() - start


async def model_ready(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.model_ready, "the model to load")
    await pilot.pause()


async def on_train_screen(pilot):
    """Switch to Train and wait until the form holds the default recipe."""
    await model_ready(pilot)
    await pilot.press("t")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "state", "") == "idle", "train form")
    return pilot.app.screen


async def on_fine_tune_form(pilot):
    """The Train screen with `from` on the fine-tune of the open model."""
    screen = await on_train_screen(pilot)
    source = screen.query_one("#from")
    for _ in range(len(source.choices)):  # a model minitx trained: its recipe first
        if screen.form.start.init:
            break
        source.action_move(1)
        await pilot.pause()
    assert screen.form.start.init, "no fine-tune offered"
    return screen


def key_while_busy(pilot, key: str) -> None:
    """Send `key` as a person types it, without pilot.press's wait for the process to go quiet:
    a run training in the background, or a worker the key starts, never lets it (each such press
    waited 2 s for nothing). The caller waits for what the key does (wait_for)."""
    pilot.app.simulate_key(key)


# A run that takes a couple of seconds on two busy cores (d_model 16, one layer).
TINY = {"d_model": "16", "heads": "2", "layers": "1", "batch_size": "16", "warmup": "5",
        "dropout": "0", "lr": "0.003", "lengths": "4-8"}


def fill_form(screen, **values: str) -> None:
    from textual.widgets import Input

    for key, value in {**TINY, **values}.items():
        screen.query_one(f"#{key}", Input).value = value


def notifications(app) -> list[str]:
    """What the app has notified so far, in order (tests/tui/conftest.py records each notify)."""
    return list(getattr(app, "notified", []))


def screen_lines(app) -> list[str]:
    """The screen as text, line by line: the strips the app's compositor draws (what a person
    sees), every layer and dialog included."""
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def screen_text(app) -> str:
    return "\n".join(screen_lines(app))


def tiny_trainer(**train):
    """A Trainer of a model small enough to save in milliseconds (d_model 16, one layer)."""
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.training.trainer import Trainer

    return Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                               max_len=16, dropout=0.0),
                   TrainConfig(**{"steps": 2, "batch_size": 8, "max_source_len": 6, "device": "cpu",
                                  **train}))
