"""A task says what it has through its type (the house's rule; issue 49): nowhere in minitx does
code ask a task, or an imported task's origin, whether it has an attribute with getattr or
hasattr. The walk reads every module of the three rooms and names each probe it finds."""

from __future__ import annotations

import ast
from pathlib import Path

import minitx.checkpoints
import minitx.core
import minitx.tui

ROOMS = [Path(m.__file__).parent for m in (minitx.core, minitx.tui, minitx.checkpoints)]
PROBES = ("getattr", "hasattr")


def _probed(node: ast.expr) -> str:
    """The probed object's spelling, e.g. "task", "self.task", "ckpt.task.origin"."""
    return ast.unparse(node)


def probes_of_tasks(source: str) -> list[tuple[int, str]]:
    """(line, call) for each getattr/hasattr whose object is a task or an origin."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES \
                and node.args:
            what = _probed(node.args[0])
            last = what.rsplit(".", 1)[-1]
            if last in ("task", "base_task", "origin") or last.endswith("_task"):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_walk_finds_a_probe_of_a_task_written_as_minitx_once_had_them():
    old = 'family = getattr(task, "origin", {}).get("family") if hasattr(task, "origin") else None\n' \
          'folder = (getattr(self.task, "origin", None) or {}).get("folder")\n'
    assert [line for line, _ in probes_of_tasks(old)] == [1, 1, 2]


def test_no_module_probes_a_task_or_its_origin_with_getattr_or_hasattr():
    found = [f"{path.relative_to(room.parent)}:{line}: {call}"
             for room in ROOMS for path in sorted(room.rglob("*.py"))
             for line, call in probes_of_tasks(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)
