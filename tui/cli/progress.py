"""What a long command shows while it works, one way for every command but `train` (whose bar
carries its loss and accuracy: tui/cli/train_progress.py): a Rich bar on a terminal, plain lines
on stderr where there is none (a pipe, a log file, CI), nothing with --json or --quiet.

    with Progress("heads", enabled=not as_json, console=out) as progress:
        progress.stage("ablating heads", total=24)
        head_importance(..., progress=lambda done, total: progress.update(done, total))

The bar draws on the command's own console when that is a terminal, so what the command prints
meanwhile (doctor's rows) goes above it; otherwise on stderr, if that is a terminal. It goes when
the work is done. Plain lines are a heartbeat from a thread: the first after PLAIN_AFTER seconds
(a command done sooner prints none), then at most one every PLAIN_EVERY seconds, only when the
stage or its count moved (a captured log does not fill with the same line), and a last one when
work that took longer ends; each says the stage, how far it is and the seconds so far. A command
whose own output already says how far it is (the doctor's rows) asks for none (plain=False).
They go through QuietWhenClosed (tui/cli/output.py): a closed pipe quiets them and the work goes on.
"""

from __future__ import annotations

import sys
import threading
import time

PLAIN_AFTER = 2.0  # seconds of work before the first plain line
PLAIN_EVERY = 10.0  # seconds between plain lines


class Progress:
    def __init__(self, command: str, *, enabled: bool = True, console=None, plain: bool = True) -> None:
        from rich.console import Console

        from minitx.tui.cli.output import QuietWhenClosed

        self.command = command
        self.description, self.done, self.total = "", 0, None
        self.started = time.monotonic()
        self.bar = self._task = self._heartbeat = None
        self._stop = threading.Event()
        self._printed = False  # a plain line went out: the end gets one too
        self._said = None  # what the last plain line said (stage and count), so none repeats it
        self.mode = "off"
        if enabled:
            # stderr's console draws only the bar, on a terminal (common.console's padding rule
            # is for pipes, where no bar is drawn): Rich's own, so loading a checkpoint may show it
            terminal = console if console is not None and console.is_terminal else Console(file=sys.stderr)
            self.mode = "bar" if terminal.is_terminal else "plain" if plain else "off"
            self.console = terminal
            self.stream = QuietWhenClosed(sys.stderr)

    # -- the command's side -----------------------------------------------------------------
    def __enter__(self) -> Progress:
        if self.mode == "bar":
            from rich import progress as rich

            self.bar = rich.Progress(rich.TextColumn(f"[bold]{self.command}[/]"),
                                     rich.TextColumn("{task.description}", markup=False),
                                     rich.BarColumn(bar_width=20), rich.MofNCompleteColumn(),
                                     rich.TimeElapsedColumn(), console=self.console, transient=True)
            self._task = self.bar.add_task("", total=None)
            self.bar.start()
        elif self.mode == "plain":
            self._heartbeat = threading.Thread(target=self._beat, daemon=True)
            self._heartbeat.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
        if self._heartbeat is not None:
            self._stop.set()
            self._heartbeat.join()
            if exc[0] is None and (self._printed or time.monotonic() - self.started >= PLAIN_AFTER):
                self._line(done=True)

    def stage(self, description: str, total: int | None = None) -> None:
        """A new part of the work: what it is, and how many units it has (None: unknown)."""
        self.description, self.done, self.total = description, 0, total
        if self.bar is not None:
            self.bar.update(self._task, description=description, completed=0, total=total)

    def update(self, done: int, total: int | None = None, description: str | None = None) -> None:
        """`done` units of the stage so far (and its total or description, when they change)."""
        self.done = done
        self.total = total if total is not None else self.total
        self.description = description if description is not None else self.description
        if self.bar is not None:
            self.bar.update(self._task, completed=done, total=self.total, description=self.description)

    def track(self, items, description: str, total: int | None = None):
        """`items`, counted as a stage as they are used."""
        self.stage(description, total)
        for done, item in enumerate(items, 1):
            yield item
            self.update(done)

    def track_examples(self, batches, description: str, total: int):
        """`batches`, counted as a stage by the examples they hold (of `total`), not by batch:
        'decoding 200 held-out pairs 64/200'."""
        self.stage(description, total)
        done = 0
        for batch in batches:
            yield batch
            done += len(batch)
            self.update(done)

    def print(self, text: str) -> None:
        """A line worth keeping (a finished part of the work): above the bar, or plain on stderr;
        nothing when progress is off."""
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        elif self.mode == "plain":
            self.stream.write(text + "\n")

    # -- plain lines -------------------------------------------------------------------------
    def _beat(self) -> None:
        wait = PLAIN_AFTER
        while not self._stop.wait(wait):
            now = (self.description, self.done, self.total)
            if self.description and now != self._said:
                self._said = now
                self._line()
                self._printed = True
            wait = PLAIN_EVERY

    def _line(self, done: bool = False) -> None:
        count = f" {self.done}/{self.total}" if self.total else (f" {self.done}" if self.done else "")
        seconds = f"{'done in ' if done else ''}{time.monotonic() - self.started:.0f} s"
        self.stream.write(f"{self.command}: {self.description}{count} · {seconds}\n")
