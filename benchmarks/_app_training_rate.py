"""The app's training speed, for benchmarks/busy_machine.py: open minitx-tui headless (Textual's
run_test), start the Train form's run as a person would (t, then space), and print the steps/s
of its worker over a window. Run as a separate process, so each measurement gets the thread
settings of its own environment (OMP_NUM_THREADS sets the app's count, as a person would).

    .venv/bin/python benchmarks/_app_training_rate.py SECONDS [--tiny]
"""

from __future__ import annotations

import asyncio
import sys
import time

TINY = {"d_model": "16", "heads": "2", "layers": "1", "batch_size": "16"}  # --tiny: smoke runs


async def wait_until(condition, timeout: float = 120.0) -> None:
    """Let the app run until condition() holds; TimeoutError after `timeout` seconds."""
    start = time.perf_counter()
    while not condition():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(0.02)


async def open_train_form(app, pilot, timeout: float = 120.0):
    """Wait for the app's model, switch to Train and wait for its form: the Train screen."""
    await wait_until(lambda: app.model_ready, timeout)
    await pilot.press("t")
    train = app.screen
    await wait_until(lambda: getattr(train, "state", "") == "idle", timeout)
    return train


async def rate(seconds: float, tiny: bool) -> float:
    from textual.widgets import Input

    from minitx.tui.app.main import create_app

    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        train = await open_train_form(app, pilot)
        for key, value in {**(TINY if tiny else {}), "steps": "10000000", "until": "0"}.items():
            train.query_one(f"#{key}", Input).value = value
        await pilot.pause()
        await pilot.press("space")
        await wait_until(lambda: train.trainer is not None and train.trainer.step_count >= 5)
        start, first = time.perf_counter(), train.trainer.step_count
        await asyncio.sleep(seconds)
        steps, elapsed = train.trainer.step_count - first, time.perf_counter() - start
        await pilot.press("x")
        await wait_until(lambda: train.state in ("stopped", "finished", "failed"))
    return steps / elapsed


if __name__ == "__main__":
    from minitx.core.training.threads import prepare_environment

    prepare_environment()  # as minitx-tui's entry point does, before the app loads torch
    print(f"steps/s {asyncio.run(rate(float(sys.argv[1]), '--tiny' in sys.argv)):.3f}")
