"""minitx.core's modules import one another in one direction: no cycle, and no import of another
core module hidden inside a function (the usual way a cycle is dodged)."""

from __future__ import annotations

import ast
from pathlib import Path

import minitx.core

CORE = Path(minitx.core.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("minitx.core", *parts))


def _imports(tree: ast.Module, module: str, top_level_only: bool):
    """(node, imported core module) for the module's imports: at module level (outside
    `if TYPE_CHECKING:`), or only those inside functions when top_level_only is False."""
    package = module.rpartition(".")[0]
    found = []

    def visit(node, in_function: bool, in_type_checking: bool):
        for child in ast.iter_child_nodes(node):
            function = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            checking = in_type_checking or (isinstance(child, ast.If)
                                            and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + [base])
                names = [f"{base}.{a.name}" for a in child.names] + [base]
                if (function != top_level_only) and not checking:
                    found.extend((child, n) for n in names if n.startswith("minitx.core"))
            elif isinstance(child, ast.Import):
                if (function != top_level_only) and not checking:
                    found.extend((child, a.name) for a in child.names if a.name.startswith("minitx.core"))
            visit(child, function, checking)

    visit(tree, False, False)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        graph[name] = {target for _, target in _imports(tree, name, top_level_only=True) if target in modules
                       and target != name}
    return graph


def test_the_import_graph_of_minitx_core_has_no_cycle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = walk(start)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)
    assert len(graph) > 30  # the walk saw the whole package, subpackages included


def test_no_module_of_minitx_core_imports_another_inside_a_function():
    hidden = []
    for path in CORE.rglob("*.py"):
        name = _module_name(path)
        for node, target in _imports(ast.parse(path.read_text()), name, top_level_only=False):
            hidden.append(f"{path.relative_to(CORE.parent)}:{node.lineno} imports {target}")
    assert hidden == []
