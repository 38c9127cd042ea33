"""The real `minitx-tui` program: a checkpoint it cannot open ends it with one line and exit 2,
before the app takes the screen."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()=>78]")


def run_in_a_terminal(*args: str, timeout: float = 90) -> tuple[int, bytes]:
    """Run minitx-tui in a pseudo-terminal (as a person would); (exit code, the bytes it wrote,
    escape sequences and all)."""
    program = Path(sys.executable).with_name("minitx-tui")
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(program), *args], stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:
            break  # the program closed the terminal: it has ended
        if not chunk:
            break
        out += chunk
    try:
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, out


def test_minitx_tui_on_a_checkpoint_that_does_not_exist_exits_2_with_one_line():
    code, raw = run_in_a_terminal("nosuch")
    assert code == 2  # a usage error, as in every command
    assert b"\x1b[?1049h" not in raw  # the app never took the screen (the alternate screen)
    printed = ANSI.sub("", raw.decode("utf-8", "replace"))
    # What it said after leaving the screen: the reason on one line, naming the checkpoint once.
    said = re.findall(r"minitx-tui: cannot open[^\r\n]*", printed)
    assert len(said) == 1, printed[-800:]
    assert said[0].startswith("minitx-tui: cannot open: unknown checkpoint 'nosuch'")
    assert said[0].rstrip().endswith("sort)") and said[0].count("nosuch") == 1
