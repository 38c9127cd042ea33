"""Repainting a picture widget without laying out the whole screen when nothing moved."""

from __future__ import annotations

from textual.widget import Widget


def redraw(widget: Widget) -> None:
    """Repaint a widget whose height is the line count of its render() (CSS height: auto).

    The screen is laid out again only when that count changes. A layout pass takes tens of
    milliseconds of the UI thread, and during training the live probe is redrawn every second
    at the same size: each pass would be GIL time taken from the training worker.
    """
    lines = widget.render().plain.count("\n") + 1
    widget.refresh(layout=lines != widget.size.height)
