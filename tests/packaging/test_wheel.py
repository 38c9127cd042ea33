"""The built wheel installs under the one name `minitx` and works outside the checkout: with no
repository next to it, `minitx decode`, `minitx export --format html`, `minitx serve` and the
app (`minitx-tui`) find the bundled checkpoints."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = (".venv", ".git", "build", "runs", "__pycache__", ".pytest_cache", ".hypothesis",
            ".ruff_cache", "*.egg-info")


def build_wheel(folder: Path) -> Path:
    """Build from a copy of the checkout: setuptools writes build/ and egg-info next to the
    sources it builds, and the checkout stays as it was."""
    source = folder / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(folder / "dist"), str(source)], check=True, capture_output=True)
    (wheel,) = (folder / "dist").glob("minitx-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A wheel built from this checkout, installed into a fresh venv whose only other packages
    are this venv's dependencies (torch, textual, ...), reached through a .pth line so nothing
    large is installed again. Returns the venv's bin folder."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--no-deps", "-q", str(wheel)], check=True, capture_output=True)
    return venv / "bin"


def run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_the_wheel_claims_only_the_minitx_top_level_name(installed):
    (wheel,) = (installed.parents[1] / "dist").glob("minitx-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"minitx"}
    assert "minitx/checkpoints/reverse.safetensors" in names  # bundled models are package data
    assert "minitx/tui/app/minitx.tcss" in names
    assert [n for n in names if "make_bu" in n] == []  # the scripts that make the bundled files stay home


def test_installed_minitx_decodes_with_the_bundled_model(installed, tmp_path):
    result = run(installed, "minitx", "decode", "3 1 4 1 5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "5 1 4 1 3"
    result = run(installed, "minitx", "decode", "3 1 4", cwd=tmp_path)  # shorter than it learned
    assert result.returncode == 0 and len(result.stdout.split()) >= 3, result.stderr
    assert "outside the lengths 4-10 the model was trained on" in result.stderr


def test_installed_minitx_exports_an_html_trace_that_needs_nothing_else(installed, tmp_path):
    result = run(installed, "minitx", "export", "reverse", "--trace", "3 1 4 1", "--format", "html",
                 "--out", "trace.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "trace.html").read_text(encoding="utf-8")
    assert "minitx · reverse.safetensors · reverse" in page and "1 4 1 3" in page
    assert "http://" not in page and "https://" not in page and " src=" not in page


def test_installed_minitx_tui_opens_the_bundled_model(installed, tmp_path):
    """The installed app, run headless in the wheel's interpreter (Textual's own test driver):
    it loads the bundled reverse model from the wheel and decodes on its first screen."""
    code = (
        "import asyncio\n"
        "from minitx.tui.app.main import create_app\n"
        "async def main():\n"
        "    app = create_app(['reverse'])\n"
        "    async with app.run_test(size=(80, 24)) as pilot:\n"
        "        while not app.model_ready:\n"
        "            await pilot.pause(0.05)\n"
        "        await pilot.pause()\n"
        "        print(app.current.path)\n"
        "        print(app.screen.session.record.task.format(app.screen.session.stepper.tokens))\n"
        "asyncio.run(main())\n"
    )
    result = run(installed, "python", "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path, decoded = result.stdout.splitlines()[-2:]
    assert path.startswith(str(installed.parent)) and path.endswith("minitx/checkpoints/reverse.safetensors")
    assert decoded.startswith("5 1 4 1 3")
    entry = run(installed, "minitx-tui", "--help", cwd=tmp_path)
    assert entry.returncode == 0 and "Usage: minitx-tui" in entry.stdout, entry.stderr


def test_installed_minitx_serve_serves_the_bundled_model_to_a_page(installed, tmp_path):
    """`minitx serve` of the wheel, spoken to as its page does: the first screen arrives over the
    websocket with the bundled model decoded, and Ctrl-C stops it."""
    import asyncio
    import os
    import signal
    import socket
    import urllib.request

    aiohttp = pytest.importorskip("aiohttp")
    pyte = pytest.importorskip("pyte")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(installed / "minitx"), "serve", "--port", str(port)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        first = server.stdout.readline()
        assert f"the app is at http://127.0.0.1:{port}" in first, first
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            assert response.status == 200 and "/static/js/textual.js" in response.read().decode()
        screen = pyte.Screen(100, 30)
        stream = pyte.ByteStream(screen)

        async def first_screen() -> str:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30",
                                              origin=f"http://127.0.0.1:{port}") as websocket:
                    text = ""
                    while "✓ correct" not in text:
                        message = await websocket.receive(timeout=120)
                        if message.type == aiohttp.WSMsgType.BINARY:
                            stream.feed(message.data)
                            text = "\n".join(screen.display)
                    return text

        text = asyncio.run(first_screen())
        assert "reverse · post-norm" in text and "5 1 4 1 3" in text
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            assert server.wait(30) == 0
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)


def test_python_dash_m_minitx_is_the_command_line(installed, tmp_path):
    result = run(installed, "python", "-m", "minitx", "decode", "2 7 1 8", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "8 1 7 2"


def test_installed_core_imports_no_ui_library_and_comes_from_the_wheel(installed, tmp_path):
    code = (
        "import sys, pkgutil, importlib, minitx.core\n"
        "for m in pkgutil.iter_modules(minitx.core.__path__):\n"
        "    importlib.import_module('minitx.core.' + m.name)\n"
        "print(minitx.core.__file__)\n"
        "print(sorted(n for n in ('textual', 'click', 'rich') if n in sys.modules))"
    )
    result = run(installed, "python", "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    location, ui = result.stdout.split("\n")[:2]
    assert str(installed.parent) in location  # not the checkout's core/
    assert ui == "[]"


def test_installed_minitx_serve_serves_the_installed_app(installed, tmp_path):
    """`minitx serve` starts each tab's app with its own interpreter, so a wheel install serves
    the wheel's app (and not whatever `minitx-tui` PATH finds first)."""
    code = "from minitx.tui.cli.commands.serve import app_command; print(app_command(['reverse']))"
    result = run(installed, "python", "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    command = shlex.split(result.stdout.strip())
    assert command[:2] == ["exec", str(installed / "python")] and command[-1] == "reverse"
    app = subprocess.run([*command[1:-1], "--help"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert app.returncode == 0 and "Usage: minitx-tui" in app.stdout, app.stderr
