"""The app while it trains: key latency, training throughput, first paint and peak memory.

    .venv/bin/python benchmarks/tui_latency.py [--seconds 8] [--keys 60] [--smoke]
    .venv/bin/python benchmarks/tui_latency.py --fine-tune hf-tiny/marian [--keys 60]

1. Throughput. Inside the app (Textual's `run_test`, headless: the compositor renders every
   frame, nothing is written to a terminal) the Train form's configuration (the default recipe)
   trains in the Train screen's worker. With no keys, 4 windows of --seconds/2 alternate with
   equal windows in which the app's run is paused and a separate headless `Trainer` of the same
   configuration steps; the ratio of the two rates is the figure. Target: >= 85%. Rates while
   keys are pressed are compared with headless runs before and after the app (their mean).
   Both use the worker's thread count.
2. Key latency, while training, --keys presses each at random intervals (0.15-0.35 s, seeded):
   `?` opening and closing help (a whole-screen change), then `n`/`b` stepping Explore (the
   decode view redraws). "handled": the key was sent until its action ran; "rendered": until
   the compositor produced the first frame after it (App._display). Steps/s is also measured
   during each of these two phases. Target: p95 < 100 ms.
3. First paint of `minitx-tui`: the real program in a pseudo-terminal (80x24), from spawn to the
   first frame's text (the title bar's "Explore" tab) on the terminal. Target < 1 s.
4. Peak resident memory of the app while training: the same `minitx-tui` in a pty, t then space
   starts the default recipe, it trains for a few seconds, q quits; the peak comes from
   resource.getrusage(RUSAGE_CHILDREN) (and /proc VmHWM just before quitting). Target < 600 MB.

With --fine-tune FOLDER (a Hugging Face folder, such as tools/make_hf_folders.py's tiny ones) the
app opens that folder and its Train screen fine-tunes it (the form's `fine-tune` start, core's
defaults but lr 3e-3, on FINE_TUNE_PAIRS pairs written to a temporary file, evaluating and
watching its probes, forgetting and numerics every eval_every steps as a fine-tune does); only
part 2 runs, the keys timed while that fine-tune trains. Target: p95 < 150 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import random
import re
import resource
import select
import shutil
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PAIRED_ROUNDS = 4  # app / headless window pairs for the no-keys throughput
FINE_TUNE_PAIRS = 400  # --fine-tune: pairs written for it ("the cat 17<TAB>die katze 17", ...)
WORDS = [("the cat", "die katze"), ("a red house", "ein rotes haus"), ("good morning", "guten morgen"),
         ("the dog", "der hund"), ("where is it", "wo ist es"), ("thank you", "danke"),
         ("blue sky", "blauer himmel"), ("old town", "alte stadt")]
TINY = {"d_model": "16", "heads": "2", "layers": "1", "batch_size": "16", "warmup": "5",
        "dropout": "0", "lr": "0.003"}  # --smoke: the TUI tests' tiny run
ANSI = re.compile(rb"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (title)
                  rb"|\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def worker_threads() -> int:
    from minitx.core.training.threads import default_threads

    return default_threads()  # what the Train screen's worker sets


def headless_trainer(model_cfg, train_cfg):
    """A Trainer of the app's configuration outside the app, warmed up as the app's run is when
    measured, on the worker's thread count (torch's is per thread: set it in the calling one)."""
    import torch

    from minitx.core.training.trainer import Trainer

    torch.set_num_threads(worker_threads())
    trainer = Trainer(model_cfg, train_cfg.replace(steps=10**7))
    for _ in range(5):
        trainer.train_step()
    return trainer


def step_for(trainer, seconds: float) -> tuple[int, float]:
    """Train for about `seconds` -> (steps taken, seconds taken)."""
    start, first = time.perf_counter(), trainer.step_count
    while time.perf_counter() - start < seconds:
        trainer.train_step()
    return trainer.step_count - first, time.perf_counter() - start


def headless_rate(model_cfg, train_cfg, seconds: float) -> float:
    steps, elapsed = step_for(headless_trainer(model_cfg, train_cfg), seconds)
    return steps / elapsed


async def send_key(app, key: str, char: str | None) -> None:
    from textual import events

    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)


async def in_app(args) -> dict:
    """Run the app headless, train in it, measure its throughput and key latency."""
    from textual.widgets import Input

    from minitx.tui.app.help import HelpScreen
    from minitx.tui.app.main import create_app
    from minitx.tui.app.screens.explore import ExploreScreen

    app = create_app([args.fine_tune] if args.fine_tune else ["reverse"])
    # Event-driven timing (polling would compete with the training thread for the GIL): the
    # key's action pushing or popping a screen says it was handled, App._display that a frame
    # was rendered.
    changes: list[tuple[float, object]] = []
    frames: list[tuple[float, object]] = []
    arrived = asyncio.Event()
    display = app._display

    def recording_display(screen, renderable):
        if renderable is not None:
            frames.append((time.perf_counter(), screen))
            arrived.set()
        return display(screen, renderable)

    def timed(method, kind):
        def wrapper(*args, **kwargs):
            changes.append((time.perf_counter(), kind))
            return method(*args, **kwargs)
        return wrapper

    app._display = recording_display
    app.push_screen = timed(app.push_screen, "push")
    app.pop_screen = timed(app.pop_screen, "pop")
    out: dict = {}
    async with app.run_test(size=(80, 24)) as pilot:
        async def until(condition, timeout=120.0, step=0.001):
            start = time.perf_counter()
            while not condition():
                if time.perf_counter() - start > timeout:
                    raise TimeoutError("the app did not get there in time")
                await asyncio.sleep(step)

        await until(lambda: app.model_ready, step=0.02)
        await pilot.press("t")
        train = app.screen
        await until(lambda: getattr(train, "state", "") == "idle", step=0.02)
        values = TINY if args.smoke else {}
        if args.fine_tune:  # the form's fine-tune start, chosen for a folder
            assert train.form.start.init, "the Train form did not offer a fine-tune of the folder"
            values = {"data": args.pairs, "lr": "0.003"}
        for key, value in {**values, "steps": "10000000"}.items():
            train.query_one(f"#{key}", Input).value = value
        await pilot.pause()
        out["configs"] = train.form.configs()
        await send_key(app, "space", " ")
        await until(lambda: train.trainer is not None and train.trainer.step_count >= 5,
                    step=0.02)
        if args.fine_tune:
            out["idle_rate"] = out["paired_headless_rate"] = float("nan")  # no headless fine-tune

        # Throughput with nobody at the keyboard, in windows that alternate with a headless
        # Trainer of the same configuration stepping in this thread while the app's run is
        # paused: slow drift in the shared machine's speed then hits both alike.
        headless = None if args.fine_tune else headless_trainer(*out["configs"])
        window = args.seconds / 2
        totals = {"app": [0, 0.0], "headless": [0, 0.0]}  # steps, seconds
        for _ in range(0 if args.fine_tune else PAIRED_ROUNDS):
            start, first = time.perf_counter(), train.trainer.step_count
            await asyncio.sleep(window)
            totals["app"][0] += train.trainer.step_count - first
            totals["app"][1] += time.perf_counter() - start
            await send_key(app, "space", " ")
            await until(lambda: train.state == "paused")
            await asyncio.sleep(0.1)  # the worker finishes the step it was in
            steps, elapsed = step_for(headless, window)
            totals["headless"][0] += steps
            totals["headless"][1] += elapsed
            await send_key(app, "space", " ")
            await until(lambda: train.state == "running")
        if not args.fine_tune:
            out["idle_rate"] = totals["app"][0] / totals["app"][1]
            out["paired_headless_rate"] = totals["headless"][0] / totals["headless"][1]

        # Key latency (and throughput while keys arrive).
        rng = random.Random(7)
        handled, rendered = [], []
        start, first = time.perf_counter(), train.trainer.step_count
        for _ in range(args.keys):
            await asyncio.sleep(rng.uniform(0.15, 0.35))
            target = type(train) if isinstance(app.screen, HelpScreen) else HelpScreen
            seen_frames, seen_changes = len(frames), len(changes)
            arrived.clear()
            sent = time.perf_counter()
            await send_key(app, "question_mark", "?")
            while True:  # until a frame of the new screen is out
                await asyncio.wait_for(arrived.wait(), timeout=10)
                arrived.clear()
                painted = [t for t, s in frames[seen_frames:] if isinstance(s, target)]
                if painted:
                    break
            kind = "push" if target is HelpScreen else "pop"
            acted = [t for t, k in changes[seen_changes:] if k == kind]
            handled.append(acted[0] - sent)
            rendered.append(painted[0] - sent)
        out["keys_rate"] = (train.trainer.step_count - first) / (time.perf_counter() - start)
        out["handled"], out["rendered"] = handled, rendered
        if isinstance(app.screen, HelpScreen):
            await send_key(app, "escape", None)
            await until(lambda: not isinstance(app.screen, HelpScreen), timeout=10)

        # Stepping in Explore while training: n and b by turns (a redraw of the decode view).
        await send_key(app, "e", "e")
        await until(lambda: isinstance(app.screen, ExploreScreen) and app.screen.stepper, 10)
        explore = app.screen
        await send_key(app, "x", "x")  # back to the start, so n and b both have work to do
        await asyncio.sleep(0.3)
        acted: list[float] = []
        for name in ("step", "back"):
            setattr(explore, f"action_{name}", timed(getattr(explore, f"action_{name}"), None))
        explore_handled, explore_rendered = [], []
        start, first = time.perf_counter(), train.trainer.step_count
        for _ in range(args.keys):
            await asyncio.sleep(rng.uniform(0.15, 0.35))
            key = "n" if explore.stepper.position == 0 else "b"
            seen_changes = len(changes)
            arrived.clear()
            sent = time.perf_counter()
            await send_key(app, key, key)
            while True:  # until the action ran and a frame of Explore came after it
                await asyncio.wait_for(arrived.wait(), timeout=10)
                arrived.clear()
                acted = [t for t, _ in changes[seen_changes:]]
                painted = [t for t, s in frames if s is explore and acted and t >= acted[0]]
                if painted:
                    break
            explore_handled.append(acted[0] - sent)
            explore_rendered.append(painted[0] - sent)
        out["explore_rate"] = (train.trainer.step_count - first) / (time.perf_counter() - start)
        out["explore_handled"], out["explore_rendered"] = explore_handled, explore_rendered
        out["steps"] = train.trainer.step_count
        watched = train.trainer.history.watched
        out["evaluations"] = len(watched.steps) if watched is not None else 0
        await send_key(app, "t", "t")
        await until(lambda: app.screen is train, timeout=10)
        await send_key(app, "x", "x")
        await until(lambda: train.state in ("stopped", "finished", "failed"), step=0.02)
    return out


# -- the real program in a pseudo-terminal ----------------------------------------------------


class Pty:
    def __init__(self, argv: list[str], size=(80, 24)) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=ROOT, start_new_session=True, close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = b""

    def text(self) -> str:
        return ANSI.sub(b"", self.raw).decode("utf-8", "replace")

    def read_until(self, word: str, timeout: float, after: int = 0) -> float:
        """Seconds since spawn when `word` first shows in the output (from byte `after` on)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.005)
            if ready:
                try:
                    self.raw += os.read(self.master, 1 << 16)
                except OSError:
                    break
                if word in ANSI.sub(b"", self.raw[after:]).decode("utf-8", "replace"):
                    return time.perf_counter() - self.started
        raise TimeoutError(f"{word!r} did not appear within {timeout:.0f} s")

    def drain(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    self.raw += os.read(self.master, 1 << 16)
                except OSError:
                    return

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self, quit_key: bytes | None = b"q", wait: float = 15.0) -> None:
        if quit_key and self.proc.poll() is None:
            self.send(quit_key)
        end = time.perf_counter() + wait
        while self.proc.poll() is None and time.perf_counter() < end:
            self.drain(0.05)  # keep reading, or a blocked write keeps it from exiting
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.master)


def tui_program() -> list[str]:
    exe = Path(sys.executable).with_name("minitx-tui")
    return [str(exe)] if exe.exists() else [shutil.which("minitx-tui") or "minitx-tui"]


def first_paint(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        term = Pty(tui_program())
        try:
            times.append(term.read_until("Explore", timeout=30))
        finally:
            term.close(quit_key=None, wait=0)  # killed: a quit would wait for torch to load
    return times


def peak_rss_while_training(seconds: float) -> dict:
    term = Pty(tui_program())
    try:
        term.read_until("Explore", timeout=30)
        term.drain(0.3)
        mark = len(term.raw)
        term.send(b"t")
        term.read_until("w will save", timeout=60, after=mark)  # the form holds the recipe
        term.drain(0.3)
        mark = len(term.raw)
        term.send(b" ")
        term.read_until("steps/s", timeout=60, after=mark)
        term.drain(seconds)
        hwm = None
        try:
            status = Path(f"/proc/{term.proc.pid}/status").read_text()
            hwm = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024
        except (OSError, AttributeError):
            pass
        text = term.text()
        steps = re.findall(r"step (\d+)/", text)
        term.send(b"q")  # quitting with an unsaved run asks first: d quits without it
        term.read_until("not saved", timeout=10, after=len(term.raw))
        term.send(b"d")
    finally:
        term.close(quit_key=None)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB on Linux
    return {"hwm_mb": hwm, "rusage_mb": children, "last_step": int(steps[-1]) if steps else None}


def print_keys(app: dict, target_ms: int) -> None:
    for label, prefix in (("? (help open/close)", ""), ("n/b (Explore step)", "explore_")):
        for name in ("handled", "rendered"):
            ms = [1000 * t for t in app[prefix + name]]
            print(f"key {label} -> {name:8}: p50 {percentile(ms, 0.5):5.1f} ms  "
                  f"p95 {percentile(ms, 0.95):5.1f} ms  max {max(ms):5.1f} ms  "
                  f"({len(ms)} presses)  target p95 < {target_ms} ms")


def fine_tune_keys(args) -> None:
    """Part 2 while the app fine-tunes a Hugging Face folder."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        args.pairs = str(Path(folder) / "pairs.tsv")
        lines = [f"{s} {i}\t{t} {i}\n" for i in range(FINE_TUNE_PAIRS // len(WORDS)) for s, t in WORDS]
        Path(args.pairs).write_text("".join(lines), encoding="utf-8")
        app = asyncio.run(in_app(args))
    model_cfg, train_cfg = app["configs"]
    print(f"{os.cpu_count()} CPUs visible, torch threads in the worker: {worker_threads()}")
    print(f"fine-tuning {args.fine_tune} in the app: d_model {model_cfg.d_model}, {model_cfg.n_heads} heads, "
          f"{model_cfg.n_decoder_layers} layers, batch {train_cfg.batch_size}, eval (and watching) every "
          f"{train_cfg.eval_every} steps; {app['steps']} steps and {app['evaluations']} watched evaluations")
    for label, rate in (("? toggling help", app["keys_rate"]),
                        ("n/b stepping Explore", app["explore_rate"])):
        print(f"in the app, {label} at ~4 keys/s: {rate:.1f} steps/s")
    print_keys(app, 150)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="each throughput window")
    parser.add_argument("--keys", type=int, default=60, help="key presses timed")
    parser.add_argument("--paints", type=int, default=3, help="first-paint runs")
    parser.add_argument("--smoke", action="store_true", help="tiny model, short windows")
    parser.add_argument("--fine-tune", metavar="FOLDER", help="time the keys while the app fine-tunes "
                        "this Hugging Face folder (parts 1, 3 and 4 are skipped)")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.keys, args.paints = 1.0, 6, 1
    if args.fine_tune:
        fine_tune_keys(args)
        return

    print(f"{os.cpu_count()} CPUs visible, torch threads in the worker and the baseline: "
          f"{worker_threads()}" + ("  (--smoke: tiny model, short windows)" if args.smoke else ""))

    paints = first_paint(args.paints)
    print(f"first paint of minitx-tui (pty 80x24): median {statistics.median(paints):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in paints)})  target < 1 s")

    app = asyncio.run(in_app(args))
    model_cfg, train_cfg = app["configs"]
    before = headless_rate(model_cfg, train_cfg, args.seconds)
    after = headless_rate(model_cfg, train_cfg, args.seconds)
    base = (before + after) / 2
    print(f"model d_model {model_cfg.d_model}, {model_cfg.n_heads} heads, "
          f"{model_cfg.n_decoder_layers} layers, batch {train_cfg.batch_size}, "
          f"{app['steps']} steps trained in the app")
    print(f"headless Trainer: {base:.1f} steps/s (runs: {before:.1f}, {after:.1f})")
    paired = app["paired_headless_rate"]
    print(f"in the app, no keys: {app['idle_rate']:.1f} steps/s = {app['idle_rate'] / paired:.0%} of "
          f"headless in alternating windows ({paired:.1f} steps/s)  target >= 85%")
    for label, rate in (("? toggling help", app["keys_rate"]),
                        ("n/b stepping Explore", app["explore_rate"])):
        print(f"in the app, {label} at ~4 keys/s: {rate:.1f} steps/s = {rate / base:.0%} of headless")
    print_keys(app, 100)

    rss = peak_rss_while_training(2.0 if args.smoke else 6.0)
    hwm = "" if rss["hwm_mb"] is None else f", VmHWM {rss['hwm_mb']:.0f} MB"
    print(f"peak RSS of minitx-tui training the default recipe (to step {rss['last_step']}): "
          f"{rss['rusage_mb']:.0f} MB (getrusage children{hwm})  target < 600 MB")


if __name__ == "__main__":
    main()
