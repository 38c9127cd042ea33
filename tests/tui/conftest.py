"""Every app test sees the same terminal: 24-bit colour and no NO_COLOR, so the pictures (and the
snapshots) do not depend on the terminal the suite happens to run in. Tests of the colourless
and 16-colour paths set their own environment."""

import dataclasses

import pytest

from minitx.tui.app import main as app_main
from minitx.tui.app.main import MinitxApp

_LOADED: dict = {}  # bundled name -> its LoadedModel, loaded once for the whole session


@pytest.fixture(autouse=True)
def _bundled_models_load_once(monkeypatch):
    """Every app of the suite opens the bundled models from one preloaded record each (reading
    the file and scoring its heads once, not in each of some two hundred app launches). Paths
    and failures load as usual. A record is never changed by the app: what is done to a model
    lives in a DecodeSession."""
    from minitx import checkpoints

    real = app_main.load_named

    def load_named(name: str, progress=None):
        if name not in checkpoints.bundled_names():
            return real(name, progress)
        if name not in _LOADED:
            _LOADED[name] = real(name, progress)
        return dataclasses.replace(_LOADED[name])  # a record of its own, as each load gives

    monkeypatch.setattr(app_main, "load_named", load_named)


@pytest.fixture(autouse=True)
def _record_notifications(monkeypatch):
    """Every message an app notifies, kept on it as `notified` (what tui_helpers.notifications
    reads): through the public notify, not Textual's private list."""
    real = MinitxApp.notify

    def notify(self, message, *args, **kwargs):
        self.__dict__.setdefault("notified", []).append(str(message))
        return real(self, message, *args, **kwargs)

    monkeypatch.setattr(MinitxApp, "notify", notify)


@pytest.fixture(autouse=True)
def _true_colour_terminal(monkeypatch):
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture(scope="session")
def without_history(tmp_path_factory) -> str:
    """The bundled reverse model as a file with no training history (an export without --history,
    or a file from before minitx kept histories): what the app says when there is nothing to replay."""
    from minitx import checkpoints
    from minitx.core.checkpoint import save_checkpoint

    ckpt = checkpoints.load("reverse")
    path = tmp_path_factory.mktemp("no-history") / "reverse.safetensors"
    return str(save_checkpoint(path, ckpt.model, ckpt.task, ckpt.summary))
