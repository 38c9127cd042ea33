"""`minitx serve` without a browser: its options, what it prints, whom it answers, and what each
way of losing the browser does to a run in progress, spoken to as the page speaks to it (HTTP, a
websocket of JSON key packets in and terminal bytes out). tests/tui/test_serve_browser.py drives
the same server from Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

import aiohttp
import pytest

from minitx.tui.app.web.server import is_loopback
from minitx.tui.cli.commands.serve import app_command
from tests.huggingface.tiny_folders import save_model
from tests.tui.served import MINITX, Served, Terminal, app_environment, free_port

TIMEOUT = 60.0
CHECKPOINT = "reverse-run1.safetensors"


def minitx(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([MINITX, *args], cwd=cwd, env=app_environment(), capture_output=True,
                          text=True, timeout=60)


def get(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def served(tmp_path):
    server = Served(tmp_path)
    yield server
    server.stop()


# -- the command line -------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "gpu-box.example"])
def test_a_host_other_machines_can_reach_is_refused_without_public_in_one_line(tmp_path, host):
    port = free_port()
    result = minitx("serve", "--host", host, "--port", str(port), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error:") and host in line and "--public" in line


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
def test_loopback_hosts_need_no_public(host):
    assert is_loopback(host)


def test_public_serves_to_other_hosts_after_a_one_line_warning(tmp_path):
    server = Served(tmp_path, "--host", "0.0.0.0", "--public")
    try:
        status, page = get(f"http://127.0.0.1:{server.port}/", Host=f"gpu-box.example:{server.port}")
        assert status == 200 and "ws://gpu-box.example:" in page  # the address the browser used
    finally:
        assert server.stop() == 0
    warnings = [line for line in server.lines if line.startswith("Warning:")]
    assert len(warnings) == 1 and "no login" in warnings[0]


def test_it_prints_the_address_and_the_tunnel_in_two_lines_that_fit_80_columns_and_ctrl_c_stops_it(
        tmp_path):
    server = Served(tmp_path)
    started = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - started < 10
    assert server.lines == [
        f"minitx serve: the app is at http://127.0.0.1:{server.port} (Ctrl-C stops)",
        f"tunnel: ssh -L {server.port}:localhost:{server.port} HOST, then open "
        f"http://localhost:{server.port}",
    ]
    assert all(len(line) <= 80 for line in server.lines)


def test_the_app_it_serves_is_this_installations_with_the_checkpoints_given():
    command = app_command(["reverse", "my run.safetensors"])
    assert shlex.split(command) == ["exec", sys.executable, "-m", "minitx.tui.app.web.entry", "reverse",
                                    "my run.safetensors"]
    help_text = subprocess.run(app_command(["--help"]), shell=True, capture_output=True, text=True,
                               timeout=60)
    assert help_text.returncode == 0 and "minitx-tui" in help_text.stdout


# -- whom it answers --------------------------------------------------------------------------
def test_the_page_is_served_to_loopback_names_and_refused_to_any_other(served):
    for host in ("127.0.0.1", "localhost", "[::1]"):
        status, page = get(served.url, Host=f"{host}:9999")  # a tunnel may use any local port
        assert status == 200 and f"ws://{host}:9999/ws" in page
        assert "googleapis" not in page and "https://" not in page  # nothing from elsewhere
    status, body = get(served.url, Host="attacker.example:8000")  # DNS rebinding
    assert status == 403 and "attacker.example" in body


@pytest.mark.asyncio
async def test_a_websocket_from_another_site_is_refused(served):
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"{served.url}ws", origin="http://attacker.example")
        assert refused.value.status == 403


# -- losing the browser mid-training ----------------------------------------------------------
class Socket:
    """The page's side of the websocket: keys out, the screen in."""

    def __init__(self, websocket) -> None:
        self.websocket = websocket
        self.terminal = Terminal(100, 30)

    async def keys(self, *keys: str) -> None:
        for key in keys:
            await self.websocket.send_str(json.dumps(["stdin", key]))

    async def wait_for(self, text: str) -> None:
        end = time.monotonic() + TIMEOUT
        while text not in self.terminal.text:
            left = end - time.monotonic()
            assert left > 0, f"timed out waiting for {text!r}; the screen:\n{self.terminal.text}"
            try:
                message = await self.websocket.receive(timeout=min(left, 1.0))
            except asyncio.TimeoutError:
                continue
            assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message
            if message.type == aiohttp.WSMsgType.BINARY:
                self.terminal.feed(message.data)


async def training(session, served) -> Socket:
    websocket = await session.ws_connect(f"{served.url}ws?width=100&height=30",
                                         origin=served.url.rstrip("/"))
    tab = Socket(websocket)
    await tab.wait_for("post-norm")
    await tab.keys("t")
    await tab.wait_for("w will save the next run to")
    await tab.keys(" ")
    await tab.wait_for("steps/s")
    return tab


def wait_for_file(path) -> None:
    end = time.monotonic() + TIMEOUT
    while not path.exists():
        assert time.monotonic() < end, f"no {path.name} after {TIMEOUT:.0f} s"
        time.sleep(0.05)


def saved_steps(path) -> int:
    from minitx import checkpoints

    ckpt = checkpoints.load(path)
    assert ckpt.resumable
    return ckpt.summary["steps"]


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_a_dropped_connection_mid_training_saves_the_run(served):
    async with aiohttp.ClientSession() as session:
        tab = await training(session, served)
        await tab.websocket.close()
    path = served.folder / CHECKPOINT
    wait_for_file(path)
    line = served.wait_for_line(lambda line: "saved at step" in line, "the save")
    assert f"saved at step {saved_steps(path)} to {path}" in line


@pytest.mark.slow  # tier 2 (~8 s), with SIGKILL at random moments; tier 1: a dropped connection saves
@pytest.mark.asyncio
async def test_a_killed_server_mid_training_still_leaves_the_run_saved(served):
    async with aiohttp.ClientSession() as session:
        await training(session, served)
        served.process.kill()  # the app's stdin ends and its stdout breaks: no one is left
        served.process.wait(10)
    path = served.folder / CHECKPOINT
    wait_for_file(path)
    assert saved_steps(path) >= 1
    end = time.monotonic() + TIMEOUT
    while app_left(served.process.pid):  # and the app, with no one to serve, has exited
        assert time.monotonic() < end, "the app outlived its server"
        time.sleep(0.05)


def app_left(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


# -- the export key through the browser -------------------------------------------------------
async def downloaded_export(tab, session, served):
    """Press E and fetch the zip the page is offered: (its name, the archive)."""
    import io
    import zipfile

    await tab.keys("E")
    end, key = time.monotonic() + TIMEOUT, None
    while key is None:  # the page is told a file is ready, and its address
        assert time.monotonic() < end, f"no download offered; the screen:\n{tab.terminal.text}"
        message = await tab.websocket.receive(timeout=TIMEOUT)
        if message.type == aiohttp.WSMsgType.BINARY:
            tab.terminal.feed(message.data)
        elif message.type == aiohttp.WSMsgType.TEXT and message.data.startswith('["deliver_file_start"'):
            key = json.loads(message.data)[1]
    await tab.wait_for("downloading")  # and the app says so on screen
    address = f"{served.url}download/{key}"
    async with session.get(address, headers={"Host": "attacker.example"}) as refused:
        assert refused.status == 403  # the download answers under the page's rules
    async with session.get(address) as response:
        assert response.status == 200
        assert "attachment" in response.headers["Content-Disposition"]
        name = response.headers["Content-Disposition"].split("filename=")[1]
        return name, zipfile.ZipFile(io.BytesIO(await response.read()))


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_the_export_key_downloads_the_picture_and_numbers_as_one_zip_through_the_page(served):
    async with aiohttp.ClientSession() as session:
        websocket = await session.ws_connect(f"{served.url}ws?width=100&height=30",
                                             origin=served.url.rstrip("/"))
        tab = Socket(websocket)
        await tab.wait_for("✓ correct")
        name, archive = await downloaded_export(tab, session, served)
        await tab.keys("Y")  # the attribution matrix beside the head, as in a terminal
        await tab.wait_for("ig (- against)")
        attribution_name, attribution = await downloaded_export(tab, session, served)
        await websocket.close()
    assert re.match(r"minitx-explore-cross-L\d-H\d-", name) and name.endswith(".zip")  # the head shown
    names = sorted(archive.namelist())
    assert [n.rsplit(".", 1)[1] for n in names] == ["csv", "svg"]
    assert names[0].rsplit(".", 1)[0] == names[1].rsplit(".", 1)[0] == name.removesuffix(".zip")
    csv_text = archive.read(names[0]).decode()
    assert csv_text.startswith("output\\source,3,1,4,1,5\n5,")  # the grid on screen, row by row
    assert "<svg" in archive.read(names[1]).decode()
    assert attribution_name.startswith("minitx-explore-attribution-ig-")
    numbers = json.loads(attribution.read(sorted(attribution.namelist())[0]).decode())
    assert numbers["method"] == "ig"
    assert [s["text"] for s in numbers["steps"]] == ["5", "1", "4", "1", "3", "<eos>"]
    assert not (served.folder / "minitx-exports").exists()  # in a browser nothing is left on the server


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_a_hugging_face_folder_is_served_and_steps_in_the_page(tmp_path):
    """`minitx serve FOLDER`: the page's app opens the folder's model (its family in the title)
    and a typed sentence decodes in its own pieces."""
    folder = save_model(tmp_path / "opus-tiny", "marian")
    server = Served(tmp_path, str(folder))
    try:
        async with aiohttp.ClientSession() as session:
            websocket = await session.ws_connect(f"{server.url}ws?width=100&height=30",
                                                 origin=server.url.rstrip("/"))
            tab = Socket(websocket)
            await tab.wait_for("opus-tiny · marian")
            await tab.keys("i")
            await tab.wait_for("esc done editing")  # the source field has the keys now
            await tab.keys(*" in Zürich", "\r")
            await tab.wait_for("·Z")  # the source's pieces label the grid's columns
            await websocket.close()
    finally:
        server.stop()
