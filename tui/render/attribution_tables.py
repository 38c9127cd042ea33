"""Source attribution (core/interp/source_attribution.py) as plain data and as Rich renderables:
the same JSON, grids and agreement table in `minitx attribute` and in the app.

A grid shows each step's shares, |a| / sum |a| over the source (attention's scale: a row sums to
one), in the attention grid's palette (tui/render/grid.py), a '-' marking an attribution
against the token; the numbers (JSON, CSV) are the attributions themselves.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from minitx.tui.render.colors import FULL
from minitx.tui.render.csv_files import rows_csv
from minitx.tui.render.grid import CELL, Layout, fit, grid_lines, legend

UNIT = "share"  # what a cell's colour is, in the legend
AXES = "rows: output tokens · columns: source tokens"


def attribution_data(result, task, source_text: str | None = None, prediction: str | None = None) -> dict:
    """A core SourceAttribution of one decode as plain data: what `minitx attribute --json`
    prints for each source (steps with token id, text and the attribution over source tokens;
    ig adds each step's delta and change). Of one step alone (core attribute_step), that step,
    with `value`, the objective itself."""
    vocab = task.vocab
    steps = []
    for row, t in enumerate(result.attributed_steps()):
        token = result.tokens[t]
        step = {"index": t, "token": token, "text": vocab.label(token),
                "attribution": [float(v) for v in result.scores[row]]}
        if result.delta is not None:
            step["delta"], step["change"] = float(result.delta[row]), float(result.change[row])
        if result.value is not None:
            step["value"] = float(result.value[row])
        steps.append(step)
    data = {"source": source_text if source_text is not None else task.format_source(result.src),
            "source_tokens": task.source_labels(result.src),
            "prediction": prediction if prediction is not None else task.format(result.tokens),
            "method": result.method, "description": result.describe(vocab),
            "target": None if result.target is None else vocab.label(result.target)}
    if result.method == "ig":
        data["ig_steps"] = result.ig_steps
    if result.method == "occlusion":
        data["filler"] = result.filler
    if result.method == "attention":
        data["attention"] = result.view
    data["steps"] = steps
    return data


def shares(rows: list[list[float]]) -> list[list[float]]:
    """Each row as |a| / sum |a| with its sign kept (a row of zeros stays zeros)."""
    out = []
    for row in rows:
        total = sum(abs(v) for v in row)
        out.append([v / total if total > 0 else 0.0 for v in row])
    return out


def largest_gap(data: dict) -> float | None:
    """ig: the largest |completeness gap| over the steps (None for the other methods)."""
    gaps = [abs(s["delta"]) for s in data["steps"] if "delta" in s]
    return max(gaps) if gaps else None


def attribution_renderable(data: dict, numbers: bool, width: int = 100, depth: str = FULL):
    """One source's attribution (attribution_data): the source, the prediction, the method, then
    the steps x source tokens grid of shares, its legend and its axes."""
    header = Text()
    header.append("source      ", style="dim")
    header.append(data["source"] + "\n")
    header.append("prediction  ", style="dim")
    header.append(data["prediction"] + "\n")
    header.append("method      ", style="dim")
    header.append(data["description"])
    if all(v == 0 for step in data["steps"] for v in step["attribution"]) and data["method"] != "attention":
        header.append("\nevery attribution is 0: the output does not depend on the source", style="bold")
    gap = largest_gap(data)
    if gap is not None:
        header.append(f"\ncompleteness gap at most {gap:.2g} (sum of a row minus the change from the "
                      "baseline)", style="dim")
    rows = [s["text"] for s in data["steps"]]
    cols = data["source_tokens"]
    layout = fit(rows, len(cols), width)
    if layout.visible < len(cols):  # the command line prints whole grids: the narrowest cells
        layout = Layout(layout.label_width, 1, 0, len(cols), layout.mark, True)
    body = Text("\n").join(grid_lines(shares([s["attribution"] for s in data["steps"]]), cols, rows,
                                      layout, numbers=numbers, depth=depth))
    signed = data["method"] != "attention"
    key = legend(depth, width, numbers and layout.cell < CELL, UNIT, signed)
    return Group(header, body, key, Text(AXES, style="dim"))


def attribution_csv(results: list[dict]) -> str:
    """Every source's attribution, one row per (source, step, source position)."""
    lines = [[n, data["source"], data["method"], step["index"], step["text"], j, data["source_tokens"][j],
              f"{value:.8g}"]
             for n, data in enumerate(results) for step in data["steps"]
             for j, value in enumerate(step["attribution"])]
    return rows_csv(["source_index", "source", "method", "step", "token", "source_position", "source_token",
                     "attribution"], lines)


def agreement_table(table: dict, n_heads: int) -> Group:
    """The agreement of attention with an attribution method (core AgreementTable.to_dict()): a
    block per measure (argmax, rank correlation), a row per layer, a column per head, the
    layer's mean and the rollout beside; the reference rows below."""
    heads = {}
    means, rollout = {}, None
    for row in table["rows"]:
        name = row["name"]
        if name == "rollout":
            rollout = row
        elif ".H" in name:
            layer, head = name.removeprefix("cross:L").split(".H")
            heads[(int(layer), int(head))] = row
        else:
            means[int(name.removeprefix("cross:L"))] = row
    grid = Table(box=None, padding=(0, 1), header_style="bold")
    grid.add_column("cross-attention")
    for head in range(n_heads):
        grid.add_column(f"H{head + 1}", justify="right")
    grid.add_column("mean", justify="right")
    for measure, key, form in (("argmax", "argmax", "{:.0%}"), ("rank ρ", "rank", "{:+.2f}")):
        for layer in sorted(means):
            cells = [_cell(heads[(layer, h + 1)][key], form) for h in range(n_heads)]
            grid.add_row(f"{measure} L{layer}", *cells, _cell(means[layer][key], form))
    method = table["method"]
    expected = table.get("expected") or {}
    reference = Table(box=None, padding=(0, 1), header_style="bold")
    reference.add_column(f"against {method}")
    reference.add_column("argmax", justify="right")
    reference.add_column("rank ρ", justify="right")
    if expected:
        reference.add_column("task", justify="right")
    rows = [("attention rollout", "rollout", rollout)]
    if method != "occlusion":
        rows.append(("occlusion (reference)", "occlusion", table["reference"]))
    rows.append((f"{method} itself", method, None))
    for name, key, row in rows:
        if row is None and key not in expected:
            continue
        cells = [_cell(row["argmax"], "{:.0%}"), _cell(row["rank"], "{:+.2f}")] if row else ["", ""]
        if expected:
            cells.append(_cell(expected[key]["argmax"], "{:.0%}") if key in expected else "")
        reference.add_row(name, *cells)
    task_steps = next(iter(expected.values()))["steps"] if expected else 0
    note = Text("argmax: the share of steps where the two rows' largest entries are at the same source "
                "position; rank ρ: Spearman's correlation of the two rows, averaged over the steps"
                + (f"; task: the share of the {task_steps} steps the task expects an output of (not <eos>) "
                   "where the row's largest entry is where the task says that output comes from"
                   if expected else ""), style="dim")
    return Group(grid, Text(""), reference, note)


def _cell(value, form: str) -> str:
    return "-" if value is None else form.format(value)
