"""Every app test sees the same terminal: 24-bit colour and no NO_COLOR, so the pictures (and the
snapshots) do not depend on the terminal the suite happens to run in. Tests of the colourless
and 16-colour paths set their own environment."""

import pytest

from minitx.tui.app.main import MinitxApp


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
