"""The app's export key (E, on every screen): the screen as an SVG picture and the numbers behind
the view on it as CSV or JSON, in one go.

In a terminal both files go into ./minitx-exports/ (EXPORT_FOLDER, under the folder the app
started in: a server rarely has a Downloads folder), written at once so the note can name files
that exist, or say at once why they could not be written. Under `minitx serve` the browser
downloads them, as one zip: a page may start only one download per key press without asking
(Textual's deliver_binary sends it; tui/app/web/server.py's page fetches it).

A screen says what its numbers are with `export_numbers() -> Numbers | None` (None: the picture
alone, e.g. while nothing is measured yet); the builders here read them from what the screen
draws: a decode session (tui/app/decode_session.py), a chart's histories, a timeline's snapshot,
a measured result. Nothing here imports torch at module level.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding

from minitx.tui.render.csv_files import curves_csv, matrix_csv, rows_csv

EXPORT_FOLDER = "minitx-exports"
# The app's key, off the footer (full at 80x24; the help lists it with the keys that work
# anywhere). A dialog over a screen (patching, the circuit, the doctor) lists it too: Textual
# keeps the app's own keys from a modal screen.
EXPORT_BINDING = Binding("E", "app.export_view", "export", show=False,
                         tooltip=f"save this screen as SVG and its numbers as CSV/JSON in ./{EXPORT_FOLDER}/")
CORNERS = {"cross": "output\\source", "self": "output\\input", "enc": "query\\key"}


@dataclass(frozen=True)
class Numbers:
    """The numbers behind a view: `name` says which view in the file names."""

    name: str  # "explore-cross-L2-H2"
    suffix: str  # "csv" or "json"
    text: str


def json_numbers(name: str, data: dict) -> Numbers:
    return Numbers(name, "json", json.dumps(data, indent=2, allow_nan=False, default=_plain) + "\n")


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else str(value)


# -- the key --------------------------------------------------------------------------------------
def export_view(app) -> list[str]:
    """Save (or, in a browser, download) the top screen's picture and numbers; the note names
    the files. Returns their names."""
    screen = app.screen
    numbers = screen.export_numbers() if hasattr(screen, "export_numbers") else None
    name = numbers.name if numbers is not None else type(screen).__name__.removesuffix("Screen").lower()
    stem = f"minitx-{_safe(name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    files = [(f"{stem}.svg", app.export_screenshot())]
    if numbers is not None:
        files.append((f"{stem}.{numbers.suffix}", numbers.text))
    what = "the picture and its numbers" if numbers is not None else "the picture (no numbers shown here yet)"
    if app.is_web:
        app.deliver_binary(io.BytesIO(zipped(files)), save_filename=f"{stem}.zip",
                           mime_type="application/zip", name="export")
        app.notify(f"downloading {stem}.zip: {what} ({', '.join(n for n, _ in files)})", markup=False)
        return [f"{stem}.zip"]
    folder = Path(app.export_dir)
    try:
        saved = save(files, folder)
    except OSError as e:
        app.notify(f"cannot save the export in {folder}: {e.strerror or e}", severity="error",
                   markup=False, timeout=10)
        return []
    shown = f"./{EXPORT_FOLDER}/" if folder == Path.cwd() / EXPORT_FOLDER else f"{folder}/"
    app.notify(f"saved {what} in {shown}: {', '.join(p.name for p in saved)}", markup=False, timeout=8)
    return [p.name for p in saved]


def save(files: list[tuple[str, str]], folder: Path) -> list[Path]:
    """Write the files into `folder` (made if needed), never over an earlier export: names taken
    already get -2, -3, ... before their suffix (two exports in the same second)."""
    folder.mkdir(parents=True, exist_ok=True)

    def paths(n: int) -> list[Path]:
        mark = f"-{n}" if n > 1 else ""
        return [folder / (f"{stem}{mark}.{ext}") for stem, ext in (name.rsplit(".", 1) for name, _ in files)]

    n = 1
    while any(path.exists() for path in paths(n)):
        n += 1
    for path, (_, text) in zip(paths(n), files):
        path.write_text(text, encoding="utf-8")
    return paths(n)


def zipped(files: list[tuple[str, str]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files:
            archive.writestr(name, text)
    return buffer.getvalue()


def _safe(name: str) -> str:
    """A view's name as a file name: letters, digits, - and _ only."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-") or "view"


# -- what each view's numbers are ------------------------------------------------------------
def session_grid(session, layer: int | None = None, head: int | None = None):
    """(weights, row labels, columns) of a grid of the kind a decode session shows, at the steps
    shown: the selected head's, or `layer` and `head`'s."""
    s, kind = session.stepper, session.kind
    layer = session.layer_index if layer is None else layer
    head = session.head_index if head is None else head
    outputs = [r.text for r in s.results[: s.position]]
    tokens = session.record.task.source_labels(s.src_ids)
    if kind == "cross":
        return s.cross_attention_grid(layer, head).tolist(), outputs, tokens
    if kind == "self":
        inputs = s.vocab.labels(s.decoder_input([]))[:1] + outputs[:-1]  # the start token, then outputs
        return s.self_attention_grid(layer, head).tolist(), outputs, inputs
    return s.encoder_attention_grid(layer, head).tolist(), tokens, tokens


def session_numbers(session, prefix: str = "explore") -> Numbers | None:
    """The numbers of the view a decode session shows (Explore's panel)."""
    if session.record is None or session.stepper is None:
        return None
    view, kind = session.view_mode, session.kind
    where = f"L{session.layer_index + 1}-H{session.head_index + 1}"
    if view == "grid":
        weights, rows, columns = session_grid(session)
        return Numbers(f"{prefix}-{kind}-{where}", "csv", matrix_csv(weights, rows, columns, CORNERS[kind]))
    if view == "heads":
        return Numbers(f"{prefix}-{kind}-all-heads", "csv", _all_heads(session))
    if view == "lens":
        return _lens(session, prefix)
    if view == "importance":
        if session.importance is None:
            return None  # still being measured: the picture says how far
        return json_numbers(f"{prefix}-head-ranking", {"model": session.record.name,
                                                        **session.importance.to_dict()})
    if view == "positions":
        return _positions(session, prefix)
    if view == "attribution":
        return _attribution(session, prefix)
    return None


def _all_heads(session) -> str:
    """Every head of the kind shown, a line per cell, with its score where the view shows one."""
    scores = session.record.scores if session.kind == "cross" else None
    lines = []
    for layer in range(session.layer_count()):
        for head in range(session.record.heads):
            weights, rows, columns = session_grid(session, layer, head)
            score = f"{scores[layer][head]:.6f}" if scores else ""
            lines += [[session.kind, layer + 1, head + 1, score, i + 1, rows[i], j + 1, columns[j],
                       f"{w:.6f}"] for i, row in enumerate(weights) for j, w in enumerate(row)]
    header = ["kind", "layer", "head", session.record.measure if scores else "score", "row", "row_token",
              "column", "column_token", "weight"]
    return rows_csv(header, lines)


def attribution_numbers(session) -> dict | None:
    """The attribution of the steps a session shows (tui/render/attribution_tables.py's data, the
    rows cut at the step shown), and the selected head's cross-attention beside it; None until
    it is computed."""
    from minitx.tui.render.attribution_tables import attribution_data

    result = session.attribution
    if result is None:
        return None
    s, task = session.stepper, session.record.task
    data = attribution_data(result, task, task.format_source(s.src_ids))
    data["steps"] = data["steps"][: s.position]
    data["prediction"] = task.format([r.token for r in s.results[: s.position]])
    layer, head = session.layer_index, session.head_index
    if layer < session.layer_count("cross") and head < session.record.heads:  # Compare: B may lack it
        data["cross_attention"] = {"layer": layer + 1, "head": head + 1,
                                   "weights": s.cross_attention_grid(layer, head).tolist()}
    return data


def _attribution(session, prefix: str) -> Numbers | None:
    data = attribution_numbers(session)
    if data is None:
        return None  # still being measured: the picture says so
    return json_numbers(f"{prefix}-attribution-{data['method']}", {"model": session.record.name, **data})


def _lens(session, prefix: str) -> Numbers | None:
    s, vocab = session.stepper, session.record.task.vocab
    r = s.current
    if r is None:
        return None
    fed = vocab.label(s.decoder_input(s.results)[r.index])
    probabilities = session.record.model.generation.emittable(r.lens).exp()  # (layers, V)
    lines = []
    for layer, row in enumerate(probabilities.tolist()):
        ranked = sorted(((p, i) for i, p in enumerate(row) if p > 0), reverse=True)
        lines += [[s.position, fed, layer + 1, rank, vocab.label(i), f"{p:.6g}"]
                  for rank, (p, i) in enumerate(ranked, 1)]
    return Numbers(f"{prefix}-lens-step{s.position}", "csv",
                   rows_csv(["step", "fed", "layer", "rank", "token", "p"], lines))


def _positions(session, prefix: str) -> Numbers | None:
    from minitx.core.interp.positions import positional_table

    cfg = session.record.model.cfg
    n = min(cfg.max_len, max(8, len(session.stepper.src_ids) + 2))  # the positions the view draws
    table = positional_table(session.record.model, n)
    if table is None:
        return None
    rows = table.tolist()
    header = ["position", *(f"dim{d}" for d in range(len(rows[0])))]
    return Numbers(f"{prefix}-positions", "csv",
                   rows_csv(header, ([p, *(f"{v:.6f}" for v in row)] for p, row in enumerate(rows))))


def timeline_numbers(timeline, prefix: str) -> Numbers | None:
    """The snapshot a timeline shows: the probe's cross-attention at that step, for its head."""
    if not timeline.steps:
        return None
    layer, head = timeline.head
    weights = timeline.frames[timeline.index][layer][head]
    return Numbers(f"{prefix}-timeline-step{timeline.step}-L{layer + 1}-H{head + 1}", "csv",
                   matrix_csv(weights, timeline.target, timeline.source, CORNERS["cross"]))


def curves_numbers(chart, prefix: str) -> Numbers | None:
    """Every recorded point of the runs a chart draws (all its series, not only the one shown)."""
    runs = [(label, history) for label, history in chart.runs if not history.empty]
    if not runs:
        return None
    return Numbers(f"{prefix}-curves", "csv", curves_csv(runs))


def grid_numbers(grid, name: str, corner: str = CORNERS["cross"]) -> Numbers | None:
    """What an attention-grid widget draws (Train's live probe)."""
    if not grid.rows:
        return None
    return Numbers(name, "csv", matrix_csv(grid.rows, grid.row_labels, grid.columns, corner))


def pair_numbers(sessions: dict, comparison, step: int) -> Numbers | None:
    """Compare's two decodes: each side's grid of the selected head, their difference, and the
    summary once measured."""
    if any(s.stepper is None for s in sessions.values()):
        return None
    sides = {}
    for side, session in sessions.items():
        weights, rows, columns = session_grid(session)
        sides[side] = {"model": session.record.name, "output": rows, "columns": columns, "weights": weights}
        if session.attribution_shown and (attributed := attribution_numbers(session)) is not None:
            sides[side]["attribution"] = attributed
    a, b = sides["A"]["weights"], sides["B"]["weights"]
    difference = [[abs(x - y) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
    first = sessions["A"]
    data = {"source": first.record.task.format_source(first.stepper.src_ids), "step": step,
            "kind": first.kind, "layer": first.layer_index + 1, "head": first.head_index + 1, **sides,
            "difference": difference, "summary": comparison.to_dict() if comparison is not None else None}
    return json_numbers(f"compare-{first.kind}-L{first.layer_index + 1}-H{first.head_index + 1}", data)


def doctor_numbers(models: list[str], results: list[dict], order: list[str]) -> Numbers | None:
    """The doctor's checks done so far: a line per model and check (results: per model, check
    name -> core CheckResult; order: the check names as they came)."""
    lines = [[model, name, r.kind, r.status, "" if r.value is None else r.value, r.threshold, r.detail]
             for name in order for model, done in zip(models, results) if (r := done.get(name)) is not None]
    if not lines:
        return None
    return Numbers("doctor", "csv", rows_csv(["model", "check", "kind", "result", "measured", "threshold",
                                              "note"], lines))
