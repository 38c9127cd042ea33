"""The beam search drawn as a tree, a row per hypothesis (a leaf of the steps shown): its tokens in
step columns, the prefix it shares with the row above left blank and its branch marked └, its
running sum, its score and its fate. Pruned rows are faded, finished ones green with their rank in
the finished pool (under the what-if length penalty, if one is set), the running ones bold; the
cells on greedy's path are underlined, and greedy's own row on top marks the step where it parts
from the beam's best. When the steps do not fit, the latest ones are shown."""

from __future__ import annotations

from rich.text import Text

from minitx.tui.render.text_fit import end_cut

LABEL_WIDTH = 6  # a token's label at most (a subword piece is cut: '▁trans…')
END_MARK = "■"  # an end token in the tree (its label would widen every column)
LEFT = 2  # '▸ ' before the selected row
FATE_WIDTH = len("greedy")  # the widest mark of the fate column ('✓12', 'out 3', 'greedy')
RIGHT = 8 + 8 + 2 + FATE_WIDTH  # '     sum   score  greedy' after every row
STATE_STYLES = {"pruned": "dim", "out": "yellow dim", "finished": "green", "running": "bold"}
GREEDY_STYLE = "magenta"


def cell_label(vocab, token: int, eos: tuple[int, ...]) -> str:
    if token in eos:
        return END_MARK
    label = vocab.label(token)
    return end_cut(label, LABEL_WIDTH)


def fate(search, node) -> str:
    """'finished' (in the pool now), 'out' (finished, pushed out since), 'running', 'pruned'."""
    if node.state == "finished":
        return "finished" if node.id in search.pool else "out"
    if node.state == "kept" and node.id in search.running_at():
        return "running"
    return "pruned"


def beam_tree(search, rows: list, *, vocab, eos: tuple[int, ...], greedy: list[int], width: int,
              selected: int | None = None, what_if: float | None = None, parting: int | None = None,
              window: tuple[int, int] | None = None) -> Text:
    """The tree of `rows` (core Nodes of search.leaves()) at the search's position, in `width`
    cells, with greedy's row on top; `window` (first, count): only those rows are drawn (a long
    search has hundreds; what is not drawn costs nothing)."""
    shown = search.position
    start, count = window or (0, len(rows))
    before = search.tokens(rows[start - 1].id) if 0 < start <= len(rows) else []
    rows = rows[start : start + count]
    paths = [search.tokens(n.id) for n in rows]
    greedy_shown = greedy[:shown]
    labels = [[cell_label(vocab, t, eos) for t in path] for path in [greedy_shown, *paths]]
    widths = [max([1] + [len(lab[j]) for lab in labels if j < len(lab)]) for j in range(shown)]
    first = _first_column(widths, width - LEFT - RIGHT)
    rank = _ranks(search, what_if)

    out = Text(no_wrap=True, overflow="crop")
    out.append_text(_header(widths, first, parting))
    penalty = "score" if what_if is None or what_if == search.length_penalty else f"α={what_if:g}"
    out.append(f"{'sum':>8}{penalty:>8}  fate", style="dim")

    out.append("\n  ")
    for j in range(first, shown):
        cell = f" {labels[0][j]:<{widths[j]}}" if j < len(greedy_shown) else " " * (widths[j] + 1)
        out.append(cell, style=("bold reverse " if j == parting else "") + GREEDY_STYLE)
    out.append(f"{'':>16}  greedy", style=GREEDY_STYLE)

    previous = before  # the row above the first drawn: where that one branches
    for i, (node, path, label) in enumerate(zip(rows, paths, labels[1:]), start):
        branch = _shared(previous, path)
        previous = path
        state = fate(search, node)
        style = STATE_STYLES[state]
        out.append("\n")
        out.append("▸ " if node.id == selected else "  ", style="bold reverse" if node.id == selected else "")
        if len(path) <= first:  # it ended before the steps shown: say where
            gone = f" ◂ {label[-1]} at step {len(path)}"
            out.append(f"{gone:<{sum(w + 1 for w in widths[first:])}}"[: sum(w + 1 for w in widths[first:])],
                       style=style)
        for j in range(first if len(path) > first else shown, shown):
            if j >= len(path):
                out.append(" " * (widths[j] + 1))
            elif j < branch:
                out.append(" " * (widths[j] + 1))
            else:
                glyph = "└" if j == branch and i else " "
                on_greedy = path[: j + 1] == greedy[: j + 1]
                leaf = j == len(path) - 1
                cell_style = style + (" bold" if leaf and state != "pruned" else "") + \
                    (" underline" if on_greedy else "")
                out.append(glyph, style="dim")
                out.append(f"{label[j]:<{widths[j]}}", style=cell_style)
        score = node.score if what_if is None else node.total / node.length ** what_if
        mark = f"✓{rank[node.id]}" if node.id in rank and state == "finished" else \
            {"out": f"out {rank.get(node.id, '')}".strip(), "running": "run", "pruned": ""}.get(state, "")
        out.append(f"{node.total:>8.2f}{score:>8.2f}  {mark}", style=style)
    return out


def _header(widths: list[int], first: int, parting: int | None) -> Text:
    """The step numbers over their columns, each ending where its column ends; a number that
    would run into its left neighbour is left out (the parting step's never is)."""
    ends, at = {}, LEFT
    for j in range(first, len(widths)):
        at += widths[j] + 1
        ends[j] = at  # the cell after the column
    chars, styles = [" "] * at, ["dim"] * at
    if first:
        chars[0] = "…"
    taken: list[tuple[int, int]] = []
    for j in sorted(ends, key=lambda j: (j != parting, j)):
        number = str(j + 1)
        start = ends[j] - len(number)
        if any(start <= b and a <= ends[j] for a, b in taken):  # overlaps, or touches, a placed one
            continue
        taken.append((start, ends[j]))
        chars[start : ends[j]] = number
        styles[start : ends[j]] = ["bold reverse red" if j == parting else "dim"] * len(number)
    header = Text()
    for char, style in zip(chars, styles):
        header.append(char, style=style)
    return header


def _ranks(search, what_if: float | None) -> dict[int, int]:
    """node -> 1-based rank of each finished hypothesis (under the what-if penalty when given)."""
    if what_if is None or what_if == search.length_penalty:
        return {node: i for i, node in enumerate(search.pool, 1)}
    return {h.node: i for i, h in enumerate(search.rerank(what_if), 1)}


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def _first_column(widths: list[int], room: int) -> int:
    """The first step column shown: the latest steps that fit in `room` cells."""
    first, used = len(widths), 0
    while first > 0 and used + widths[first - 1] + 1 <= room:
        first -= 1
        used += widths[first] + 1
    return first
