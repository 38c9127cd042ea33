"""Source attribution's speed: integrated gradients (32 steps) against occlusion on the same
source, and the app's attribution row after its key.

    .venv/bin/python benchmarks/attribution_speed.py [--repeats 15] [--rounds 10] [--smoke]

1. In process, the bundled reverse model, a 10-token source and every step of its greedy decode
   (11 steps: ten digits and <eos>): `attribute()` with each method (ig with its default 32
   steps, ixg, occlusion, the attention rollout), alternating within each repeat so a burst of
   load on a shared machine hits all of them; the medians, and ig's and ixg's ratio to
   occlusion. The decode itself (the Stepper) is timed too: every method needs it.
2. Whole processes, what a person meets: `minitx attribute reverse SRC --method M` from launch
   to exit, for ig and occlusion, alternating; the medians and their ratio.
3. The app (headless, Textual's run_test at 80x24, on the bundled reverse model decoded to its
   end): the key that shows a method's row (y), until the first frame drawn with that row under
   the step's; each round asks every method afresh (what was computed is forgotten first). The
   baseline is a key that only redraws the grid (#, numbers in the cells), in the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from _options import add_run_options, apply_run_options
from tui_latency import percentile

from minitx.checkpoints import load
from minitx.core.interp.source_attribution import METHODS, attribute, greedy

SOURCE = "3 1 4 1 5 9 2 6 5 3"
MINITX = str(Path(sys.executable).with_name("minitx"))


def in_process(repeats: int, device: str) -> None:
    ckpt = load("reverse")
    model, task = ckpt.model.to(device), ckpt.task
    src = task.parse(SOURCE)
    decode = greedy(model, task, src)
    times: dict[str, list[float]] = {"decode": [], **{m: [] for m in METHODS}}
    for i in range(repeats + 1):  # the first round warms up and is not counted
        start = time.perf_counter()
        greedy(model, task, src)
        elapsed = {"decode": time.perf_counter() - start}
        for method in METHODS:
            start = time.perf_counter()
            attribute(model, decode, method)
            elapsed[method] = time.perf_counter() - start
        if i:
            for name, seconds in elapsed.items():
                times[name].append(1000 * seconds)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"in process: reverse, source {SOURCE!r} ({len(src)} tokens), {len(decode.tokens)} steps, "
          f"torch {torch.__version__}, {device}, threads {torch.get_num_threads()}, {repeats} repeats")
    print(f"{'':>10} {'median ms':>10} {'ratio to occlusion':>19}")
    for name, ms in medians.items():
        ratio = f"{ms / medians['occlusion']:.2f}x" if name in ("ig", "ixg") else ""
        print(f"{name:>10} {ms:>10.1f} {ratio:>19}")
    print(f"ig (32 steps) / occlusion: {medians['ig'] / medians['occlusion']:.1f}x; ig with its decode "
          f"{(medians['ig'] + medians['decode']) / 1000:.3f} s in process")


def whole_processes(repeats: int, threads: int) -> None:
    times: dict[str, list[float]] = {"ig": [], "occlusion": []}
    extra = ["--threads", str(threads)] if threads else []
    for _ in range(repeats):
        for method in times:
            start = time.perf_counter()
            subprocess.run([MINITX, "attribute", "reverse", SOURCE, "--method", method, *extra],
                           check=True, capture_output=True)
            times[method].append(time.perf_counter() - start)
    ig, occlusion = (statistics.median(times[m]) for m in ("ig", "occlusion"))
    print(f"whole process `minitx attribute reverse {SOURCE!r} --method M`, {repeats} each: "
          f"ig {ig:.2f} s, occlusion {occlusion:.2f} s, ratio {ig / occlusion:.2f}x")


async def app_latency(rounds: int) -> None:
    from minitx.tui.app.decode_session import ATTRIBUTION_METHODS, METHOD_NAMES
    from minitx.tui.app.main import create_app

    app = create_app(["reverse"])
    frames: list[tuple[float, str | None]] = []  # (when, the method whose row the grid held)
    display = app._display

    def recording_display(screen, renderable):
        if renderable is not None:
            under = app.screen.panel.grid.under if hasattr(app.screen, "panel") else None
            frames.append((time.perf_counter(), under[2] if under else None))
        return display(screen, renderable)

    app._display = recording_display
    waits: dict[str, list[float]] = {m: [] for m in ATTRIBUTION_METHODS}
    redraws: list[float] = []  # the baseline: # (numbers in the cells), a key that only redraws
    async with app.run_test(size=(80, 24)) as pilot:
        while not app.model_ready:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        session = app.screen.session
        for _ in range(rounds):
            for method in ATTRIBUTION_METHODS:
                session.attributions.clear()  # as on a decode never attributed
                session.step_attributions.clear()
                mark = f"◂ {METHOD_NAMES[method]}"
                frames.clear()
                sent = time.perf_counter()
                await pilot.press("y")
                while not any(m == mark for _, m in frames):
                    await pilot.pause(0.002)
                drawn = next(t for t, m in frames if m == mark)
                waits[method].append(1000 * (drawn - sent))
            await pilot.press("y")  # off again
            await pilot.pause(0.05)
            for _ in range(2):  # numbers on, then off
                frames.clear()
                sent = time.perf_counter()
                await pilot.press("number_sign")
                while not frames:
                    await pilot.pause(0.002)
                redraws.append(1000 * (frames[0][0] - sent))
                await pilot.pause(0.05)
    said = [f"{METHOD_NAMES[m]} median {statistics.median(v):.0f} ms, p95 {percentile(v, 0.95):.0f} ms"
            for m, v in waits.items()]
    print(f"the app, y until the row is drawn (80x24, reverse, {rounds} rounds): {'; '.join(said)}; "
          f"baseline # (a redraw only) median {statistics.median(redraws):.0f} ms, "
          f"p95 {percentile(redraws, 0.95):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="in-process repeats of each method")
    parser.add_argument("--processes", type=int, default=5, help="whole processes of each method")
    parser.add_argument("--rounds", type=int, default=10, help="app rounds (each method once a round)")
    parser.add_argument("--smoke", action="store_true", help="one of each, to check the script runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    if args.smoke:
        args.repeats, args.processes, args.rounds = 1, 1, 1
    in_process(args.repeats, args.device)
    whole_processes(args.processes, args.threads)
    asyncio.run(app_latency(args.rounds))


if __name__ == "__main__":
    main()
