"""Every app test sees the same terminal: 24-bit colour and no NO_COLOR, so the pictures (and the
snapshots) do not depend on the terminal the suite happens to run in. Tests of the colourless
and 16-colour paths set their own environment."""

import pytest


@pytest.fixture(autouse=True)
def _true_colour_terminal(monkeypatch):
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.delenv("NO_COLOR", raising=False)
