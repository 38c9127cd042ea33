"""The built wheel installs under the one name `minitx` and works outside the checkout."""

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
