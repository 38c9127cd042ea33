"""The app's house rules, checked on its source: each would quietly erode otherwise."""

from __future__ import annotations

import ast
from pathlib import Path

TUI = Path(__file__).resolve().parents[2] / "tui" / "app"
APP_MODULES = sorted([*TUI.glob("*.py"), *TUI.glob("screens/*.py"), *TUI.glob("widgets/*.py")])


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_screen_imports_another_screen():
    for path in TUI.glob("screens/*.py"):
        others = {m for m in imported_modules(path) if m.startswith("minitx.tui.app.screens")}
        assert not others, f"{path.name} imports {sorted(others)}: shared pieces belong in widgets/"


def test_messages_are_defined_only_in_messages_py():
    for path in APP_MODULES:
        if path.name == "messages.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                assert "Message" not in bases, f"{path.name} defines the message {node.name}"


def test_workers_hand_results_over_with_post_message_only():
    for path in APP_MODULES:
        assert "call_from_thread(" not in path.read_text(), f"{path.name} uses call_from_thread"


def test_every_app_module_stays_under_about_400_lines():
    for path in APP_MODULES:
        lines = len(path.read_text().splitlines())
        assert lines <= 420, f"{path.relative_to(TUI.parent)} has {lines} lines"


def test_the_app_cites_no_document_outside_the_product():
    """The user's reference is docs/; the team's SPEC is not shipped (help, doctor, messages)."""
    for path in APP_MODULES:
        text = path.read_text()
        assert "SPEC" not in text and "shared/" not in text, path.name
