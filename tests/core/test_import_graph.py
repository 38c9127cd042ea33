"""minitx's modules import one another in one direction: no cycle between core's modules, none
between its folders (training and the checkpoint format, say), none among the app's modules even
through type-only imports, and no import of another core module hidden inside a function (the
usual way a cycle is dodged)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import minitx.checkpoints
import minitx.core
import minitx.tui

CORE = Path(minitx.core.__file__).parent
TUI = Path(minitx.tui.__file__).parent
CHECKPOINTS = Path(minitx.checkpoints.__file__).parent


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every test of the file."""
    return ast.parse(path.read_text())


def _module_name(path: Path, root: Path = CORE) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((f"minitx.{root.name}", *parts))


def _imports(tree: ast.Module, module: str, top_level_only: bool, prefix: str = "minitx.core",
             type_only: bool = False):
    """(node, imported module under `prefix`) for the module's imports: at module level (outside
    `if TYPE_CHECKING:` unless type_only), or only those inside functions when top_level_only is
    False."""
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
                if (function != top_level_only) and (type_only or not checking):
                    found.extend((child, n) for n in names if n.startswith(prefix))
            elif isinstance(child, ast.Import):
                if (function != top_level_only) and (type_only or not checking):
                    found.extend((child, a.name) for a in child.names if a.name.startswith(prefix))
            visit(child, function, checking)

    visit(tree, False, False)
    return found


def _graph(root: Path = CORE, type_only: bool = False) -> dict[str, set[str]]:
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        tree = _tree(path)
        found = _imports(tree, name, True, f"minitx.{root.name}", type_only)
        graph[name] = {target for _, target in found if target in modules and target != name}
    return graph


def _folders(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between core's folders and top-level modules (minitx.core.training, ...)."""
    def folder(name: str) -> str:
        return ".".join(name.split(".")[:3])

    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        mine = folder(name)
        folders.setdefault(mine, set()).update(folder(t) for t in targets if folder(t) != mine)
    return folders


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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
        if start not in state and (cycle := walk(start)):
            return cycle
    return None


def test_the_import_graph_of_minitx_core_has_no_cycle():
    graph = _graph()
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    assert len(graph) > 30  # the walk saw the whole package, subpackages included


def test_the_folders_of_minitx_core_import_one_way():
    """Training saves through the checkpoint format, so the format imports nothing of training:
    what both need (a run's history) lives below them."""
    folders = _folders(_graph())
    cycle = _cycle(folders)
    assert cycle is None, "import cycle between folders: " + " -> ".join(cycle)
    assert {"minitx.core.training", "minitx.core.checkpoint", "minitx.core.history"} <= set(folders)


def test_the_modules_of_the_app_import_one_way_even_for_types():
    """A type named only for annotations still ties two modules together: none may close a
    circle (a message naming the widget that posts it, say)."""
    graph = _graph(TUI, type_only=True)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    assert len(graph) > 60


def test_no_module_of_minitx_core_imports_another_inside_a_function():
    hidden = []
    for path in CORE.rglob("*.py"):
        name = _module_name(path)
        for node, target in _imports(_tree(path), name, top_level_only=False):
            hidden.append(f"{path.relative_to(CORE.parent)}:{node.lineno} imports {target}")
    assert hidden == []


def test_no_import_of_minitx_inside_a_function_closes_a_cycle():
    """The command line and the app import much of minitx inside functions, so that `minitx --help`
    and a command's threads are set before torch loads (docs/architecture.md). Counted as
    if they were at the top, every import of the three packages still goes one way."""
    modules = {_module_name(p, root): p for root in (CORE, CHECKPOINTS, TUI) for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        tree = _tree(path)
        found = (_imports(tree, name, True, "minitx.") + _imports(tree, name, False, "minitx."))
        graph[name] = {target for _, target in found if target in modules and target != name}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle through an import inside a function: " + " -> ".join(cycle)
    assert sum(len(targets) for targets in graph.values()) > 500  # the function-level ones too
