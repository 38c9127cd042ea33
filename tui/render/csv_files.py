"""The numbers behind a picture as CSV text, one way for the command line and the app: a run's
curves (`minitx curves --format csv`, and the app's export key on a chart), an attention grid
as a matrix, and a table of rows."""

from __future__ import annotations

import csv
import io


def rows_csv(header: list[str], rows) -> str:
    """A header line, then one line per row."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def matrix_csv(weights, row_labels: list[str], columns: list[str], corner: str) -> str:
    """A grid as it is drawn: the column labels across the top, a row's label first on its line;
    `corner` names the two axes ('output\\source')."""
    return rows_csv([corner, *columns],
                    ([label, *(f"{w:.6f}" for w in row)] for label, row in zip(row_labels, weights)))


def curves_csv(runs) -> str:
    """One row per recorded point of (label, History) runs: run, series, step, training seconds at
    that step, value."""
    from minitx.core.history import GUIDED_SERIES, SCORE_SERIES, SERIES, WATCH_SERIES

    def points():
        for label, history in runs:
            for name in (*SERIES, *SCORE_SERIES, *WATCH_SERIES, *GUIDED_SERIES):
                steps, values = history.series(name)
                for step, seconds, value in zip(steps, history.seconds_at(steps), values):
                    yield [label, name, step, f"{seconds:.6g}", f"{value:.8g}"]
            yield from numerics(label, history)

    def numerics(label, history):  # a watched fine-tune's 'max decoder 2 feed-forward', 'grad_norm encoder 1'
        w = history.watched
        if w is None or not w.activation_max:
            return
        seconds = history.seconds_at(w.steps)
        named = [(f"max {stack} {layer} {sublayer}", [row[i] for row in w.activation_max])
                 for i, (stack, layer, sublayer) in enumerate(w.points)]
        named += [(f"grad_norm {stack} {layer}", [row[i] for row in w.grad_norm])
                  for i, (stack, layer) in enumerate(w.layers) if w.grad_norm]
        for name, values in named:
            for step, at, value in zip(w.steps, seconds, values):
                yield [label, name, step, f"{at:.6g}", f"{value:.8g}"]

    return rows_csv(["run", "series", "step", "seconds", "value"], points())
