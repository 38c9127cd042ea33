"""Helpers for the tests of `minitx serve` (a plain module, like tui_helpers): a server process on
a free port, and a terminal emulator (pyte) that turns the app's output into the screen a person
would see, since the browser draws that screen on a canvas and not as page text."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyte

MINITX = str(Path(sys.executable).with_name("minitx"))
START_TIMEOUT = 30.0  # seconds for the server to print its address on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_environment() -> dict[str, str]:
    """The suite's rule of one torch thread, for the served apps too; and output buffered as
    Python buffers it into a pipe, whatever this environment says (PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MINITX_") and k != "PYTHONUNBUFFERED"}
    env["OMP_NUM_THREADS"] = "1"
    return env


class Served:
    """`minitx serve` in a folder of its own, in a session of its own, so that a Ctrl-C (SIGINT to
    the process group, as a terminal sends it) reaches the server and its apps and nothing else."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.folder, self.port = folder, free_port()
        self.process = subprocess.Popen(
            [MINITX, "serve", "--port", str(self.port), *args], cwd=folder, env=app_environment(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []  # what it printed, as far as a wait_for_line has read
        self.output: queue.Queue[str | None] = queue.Queue()
        self.ended = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.interrupted = False
        self.url = f"http://127.0.0.1:{self.port}/"
        try:
            self.wait_for_line(lambda line: "the app is at http://" in line, "the server's address")
        except AssertionError:
            os.killpg(self.process.pid, signal.SIGKILL)  # no test will stop it
            raise

    def _read(self) -> None:
        """The server's output, line by line, as it comes (a thread: select() on the pipe would
        miss a second line already read into the file's buffer)."""
        for line in self.process.stdout:
            self.output.put(line.rstrip("\n"))
        self.output.put(None)  # the server has exited

    def wait_for_line(self, found, what: str, timeout: float = START_TIMEOUT) -> str:
        end = time.monotonic() + timeout
        while not self.ended and (left := end - time.monotonic()) > 0:
            try:
                line = self.output.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.ended = True
                break
            self.lines.append(line)
            if found(line):
                return line
        raise AssertionError(f"no line with {what}; the server said: {self.lines}")

    def ctrl_c(self) -> None:
        self.interrupted = True
        os.killpg(self.process.pid, signal.SIGINT)

    def stop(self, timeout: float = 20.0) -> int:
        """Ctrl-C, then the exit code (a server that does not stop is killed and fails)."""
        if self.process.poll() is None and not self.interrupted:
            self.ctrl_c()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise AssertionError(f"the server did not stop within {timeout:.0f} s of Ctrl-C") from None
        self.reader.join(timeout)
        while not self.output.empty() and (line := self.output.get_nowait()) is not None:
            self.lines.append(line)
        try:  # an app that outlived the server (a failed test) must not outlive the test
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return code


class Terminal:
    """The app's screen, from the bytes of its output (pyte emulates the terminal)."""

    def __init__(self, columns: int = 80, rows: int = 24) -> None:
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)

    def feed(self, data: bytes) -> None:
        self.stream.feed(data)

    def resize(self, columns: int, rows: int) -> None:
        self.screen.resize(rows, columns)

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def reversed_text(self) -> list[str]:
        """The runs of reverse-video cells on the screen, e.g. the label of the field in focus."""
        runs, run = [], ""
        for y in range(self.screen.lines):
            row = self.screen.buffer[y]
            for x in range(self.screen.columns + 1):
                cell = row[x] if x < self.screen.columns else None
                if cell is not None and cell.reverse:
                    run += cell.data
                elif run.strip():
                    runs.append(run.strip())
                    run = ""
                else:
                    run = ""
        return runs
