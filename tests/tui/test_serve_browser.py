"""`minitx serve` in a real browser: headless Chromium, driven by Playwright, opens the page, types
keys and closes the tab. The page draws the terminal on a canvas, so the tests read the screen
from the websocket frames the browser receives, through a terminal emulator (tests/tui/served.py).

Needs Playwright (`pip install -e '.[dev]'`) and Chromium (`apt-get install chromium`); without
either the tests skip and say so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.tui.served import Served, Terminal

# Tier 2 (pytest -m slow): a real browser end to end; tests/tui/test_serve.py holds the same
# behaviours over the served app's own websocket in tier 1.
pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("MINITX_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT = 60.0  # seconds for anything the app does, on a busy 2-core machine
CHECKPOINT = "reverse-run1.safetensors"  # where the first Train run of a folder saves

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed: pip install -e '.[dev]'")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set MINITX_TEST_CHROMIUM)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: Chromium's sandbox refuses to run as root, which CI is; a container's
        # /dev/shm is often too small for it.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM,
                                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


@pytest.fixture
def served(tmp_path):
    server = Served(tmp_path)
    yield server
    server.stop()


class Tab:
    """A browser tab on the served app, with the screen its websocket delivered."""

    def __init__(self, browser, url: str, block_other_hosts: bool = False) -> None:
        self.context = browser.new_context(viewport={"width": 1000, "height": 600})
        self.elsewhere: list[str] = []  # requests for anything but the server
        if block_other_hosts:
            self.context.route("**/*", self._only_localhost)
        self.page = self.context.new_page()
        self.terminal = Terminal()
        self.page.on("websocket", self._attach)
        self.page.goto(url)

    def _only_localhost(self, route) -> None:
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            self.elsewhere.append(route.request.url)
            route.abort("internetdisconnected")

    def _attach(self, websocket) -> None:
        size = parse_qs(urlsplit(websocket.url).query)
        self.terminal.resize(int(size["width"][0]), int(size["height"][0]))
        websocket.on("framereceived", self._received)
        websocket.on("framesent", self._sent)

    def _received(self, payload) -> None:
        if isinstance(payload, bytes):  # the app's output; text frames are the server's own
            self.terminal.feed(payload)

    def _sent(self, payload) -> None:
        if isinstance(payload, str) and payload.startswith('["resize"'):
            size = json.loads(payload)[1]
            self.terminal.resize(size["width"], size["height"])

    @property
    def text(self) -> str:
        return self.terminal.text

    def wait_until(self, condition, what: str, timeout: float = TIMEOUT) -> None:
        """Until condition(screen text) holds (Playwright delivers frames while it waits)."""
        end = time.monotonic() + timeout
        while not condition(self.text):
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{self.text}")
            self.page.wait_for_timeout(50)

    def wait_for(self, *texts: str) -> None:
        self.wait_until(lambda text: all(t in text for t in texts), f"{texts} on the screen")

    def wait_until_gone(self, text: str) -> None:
        self.wait_until(lambda screen: text not in screen, f"{text!r} to go")

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)

    def close(self) -> None:
        self.page.close()
        self.context.close()


def wait_for_file(path, timeout: float = TIMEOUT) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"no {path.name} after {timeout:.0f} s"
        time.sleep(0.05)


def resumable_steps(path) -> int:
    from minitx import checkpoints

    ckpt = checkpoints.load(path)
    assert ckpt.resumable
    return ckpt.summary["steps"]


def start_training(tab: Tab, steps: str = "5000") -> None:
    """Train, with the steps typed into the form: Tab walks from `from` past task and lengths to
    steps, typing replaces the value, esc leaves the form and space starts the run."""
    tab.press("t")
    tab.wait_for("w will save the next run to")  # the form is filled and takes keys
    tab.press("Tab", "Tab", "Tab", "Tab")
    # As a person would, type once the field is marked as the one being edited (its label
    # reversed): keys typed in the same instant as the Tab that focuses it can go astray.
    tab.wait_until(lambda _: "steps" in tab.terminal.reversed_text(), "the steps field in focus")
    tab.page.keyboard.type(steps)
    tab.wait_until(lambda text: re.search(rf"steps +{steps} ", text), f"steps {steps} in the form")
    tab.press("Escape")
    # The terminal reads esc then a key at once as alt+key: wait until the form lets go.
    tab.wait_until(lambda _: "steps" not in tab.terminal.reversed_text(), "the form left")
    tab.press("Space")
    tab.wait_for(f"/{steps} · loss", "steps/s")


def test_the_served_app_draws_its_first_screen_and_answers_keys(browser, served):
    tab = Tab(browser, served.url)
    try:
        tab.wait_for("reverse · post-norm", "Source ▸ 3 1 4 1 5", "✓ correct", "t train")
        tab.press("x")  # reset the decode, then step it one token at a time: → and n
        tab.wait_for("step 0/6")
        tab.press("ArrowRight")
        tab.wait_for("step 1/6")
        tab.press("n")
        tab.wait_for("step 2/6")
        tab.press("?")  # the help dialog opens, and esc closes it
        tab.wait_for("esc, ? or q closes this help")
        tab.press("Escape")
        tab.wait_until_gone("esc, ? or q closes this help")
        tab.press("t")
        tab.wait_for("press space to start training", "space start/pause")
        assert "Source ▸" not in tab.text
        tab.press("Control+c")  # quits, as in a terminal (no run to ask about)
        tab.page.wait_for_selector("body.-closed .ended", timeout=TIMEOUT * 1000)
    finally:
        tab.close()


def test_a_tab_closed_mid_training_saves_the_run_in_the_served_folder(browser, served):
    tab = Tab(browser, served.url)
    tab.wait_for("reverse · post-norm")
    start_training(tab)
    tab.close()
    path = served.folder / CHECKPOINT
    wait_for_file(path)
    line = served.wait_for_line(lambda line: "saved at step" in line, "the save")
    steps = resumable_steps(path)
    assert steps >= 1 and f"saved at step {steps} to {path}" in line


def test_ctrl_c_on_the_server_mid_training_saves_the_run_and_ends_the_tab(browser, served):
    tab = Tab(browser, served.url)
    try:
        tab.wait_for("reverse · post-norm")
        start_training(tab)
        served.ctrl_c()
        assert served.stop() == 0
        assert not any("Traceback" in line for line in served.lines), served.lines
        path = served.folder / CHECKPOINT
        assert resumable_steps(path) >= 1
        assert any(f"to {path}" in line for line in served.lines)
        tab.page.wait_for_selector("body.-closed .ended", timeout=TIMEOUT * 1000)  # says it ended
    finally:
        tab.close()


def test_the_page_works_with_every_other_host_unreachable(browser, served):
    tab = Tab(browser, served.url, block_other_hosts=True)
    try:
        tab.wait_for("reverse · post-norm", "✓ correct")
        assert tab.elsewhere == []
        # The terminal's font is the copy the server ships, not a font host's.
        assert tab.page.evaluate(
            "[...document.fonts].some(f => f.family.includes('Roboto Mono') && f.status == 'loaded')")
    finally:
        tab.close()


def test_the_export_key_downloads_the_screen_and_its_numbers_without_opening_a_window(browser, served,
                                                                                      tmp_path):
    import zipfile

    tab = Tab(browser, served.url)
    try:
        tab.wait_for("✓ correct")
        tab.press("a")  # every head at once: the numbers are each head's grid
        tab.wait_for("all heads")
        with tab.page.expect_download(timeout=TIMEOUT * 1000) as started:
            tab.press("E")
        download = started.value
        path = tmp_path / download.suggested_filename
        download.save_as(path)
        tab.wait_for("downloading")
        assert tab.context.pages == [tab.page]  # a link of the page, no popup or blank tab
    finally:
        tab.close()
    assert path.name.startswith("minitx-explore-cross-all-heads-") and path.suffix == ".zip"
    archive = zipfile.ZipFile(path)
    (numbers,) = [n for n in archive.namelist() if n.endswith(".csv")]
    lines = archive.read(numbers).decode().splitlines()
    assert lines[0] == "kind,layer,head,alignment,row,row_token,column,column_token,weight"
    assert {line.split(",")[1] + line.split(",")[2] for line in lines[1:]} == {
        f"{layer}{head}" for layer in (1, 2) for head in (1, 2, 3, 4)}
    assert any(n.endswith(".svg") for n in archive.namelist())
