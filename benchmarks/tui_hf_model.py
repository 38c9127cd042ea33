"""The app on a Hugging Face folder of opus-mt's shape (73.9M parameters, 58,101 pieces, 6+6
layers, 8 heads: 48 heads per kind) at 80x24, headless (Textual's run_test), as a person meets it:

    .venv/bin/python benchmarks/tui_hf_model.py [--keys 30] [--smoke]

The folder is made by the benchmark (benchmarks/_hf_folder.py). The app opens it in Explore, a
sentence of 40 pieces is typed, and then, each key pressed --keys times at random intervals:
1. stepping the decode one token forward (n, computing the step when it is new) and back (b);
2. every head at once (a) and back to one grid (a again, the view keys toggle it).
Each figure is the time from the key to the first frame rendered after its action ran, p50 and
p95, beside a key that only redraws (# toggles the numbers in the cells) in the same run: the
baseline a frame costs on this machine. Targets (issue 31): a step under 150 ms at p95, the
all-heads view under 300 ms.
--smoke: a tiny folder, few keys (checks the script runs).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _hf_folder import OPUS_MT, SMOKE, make_folder  # noqa: E402
from tui_big_model import timed_keys  # noqa: E402
from tui_latency import percentile  # noqa: E402

SOURCE_PIECES = 40


def source_of(task, pieces: int) -> str:
    """A sentence that the folder's tokeniser cuts into about `pieces` pieces."""
    words = "the committee adopted a resolution on the protection of minorities in the region".split()
    text = words[0]
    while len(task.parse(text, max_len=10_000)) < pieces:
        text += " " + words[len(text.split()) % len(words)]
    return text


async def measure(folder: Path, presses: int) -> dict:
    from textual.widgets import Input

    from minitx.tui.app.main import create_app

    app = create_app([str(folder)])
    rng = random.Random(0)
    async with app.run_test(size=(80, 24)) as pilot:
        opened = time.perf_counter()
        while not app.model_ready:
            await pilot.pause(0.05)
        load_seconds = time.perf_counter() - opened
        screen = app.screen
        source = source_of(app.current.task, SOURCE_PIECES)
        await pilot.press("i")
        screen.query_one("#source", Input).value = source
        await pilot.press("enter", "escape")
        await pilot.pause(0.5)
        pieces = len(screen.session.stepper.src_ids)
        steps = await timed_keys(app, screen, [("n", "step"), ("b", "back")], presses, rng,
                                 pick=lambda: 0 if rng.random() < 0.6 else 1)
        heads = await timed_keys(app, screen, [("a", "view")], presses, rng)
        redraw = await timed_keys(app, screen, [("number_sign", "numbers")], presses, rng)
    return {"load": load_seconds, "pieces": pieces, "step": steps, "heads": heads, "redraw": redraw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=30, help="presses of each key kind")
    parser.add_argument("--smoke", action="store_true", help="a tiny folder, few keys")
    args = parser.parse_args()
    from minitx.core.training.threads import set_threads

    set_threads()  # the app's own rule
    shape, presses = (SMOKE, 6) if args.smoke else (OPUS_MT, args.keys)
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(Path(tmp) / "opus-mt-shaped", shape, new_tokens=60, fixed_length=False)
        result = asyncio.run(measure(folder, presses))
    print(f"opened in the app in {result['load']:.1f} s; a source of {result['pieces']} pieces")
    print(f"{'key':<36} {'p50 ms':>8} {'p95 ms':>8}  target")
    rows = [("n/b step the decode (n computes it)", result["step"], "p95 < 150 ms"),
            ("a every head at once (48), and back", result["heads"], "p95 < 300 ms"),
            ("# only redraws (the baseline)", result["redraw"], "")]
    for name, times, target in rows:
        print(f"{name:<36} {percentile(times, 0.5):8.0f} {percentile(times, 0.95):8.0f}  {target}")


if __name__ == "__main__":
    main()
