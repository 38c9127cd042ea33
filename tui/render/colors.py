"""Colour maps: viridis for attention weights, black-to-red for differences between two models.

Colours are given as true-colour hex; Rich and Textual downgrade them to 256 colours well, but
16 colours keep almost nothing of a gradient and NO_COLOR keeps nothing at all. There the
pictures put the value into the characters instead: shade blocks (or the numbers, with #).
"""

from __future__ import annotations

FULL, FEW, NONE = "full", "16", "none"  # colour depths: 256 or more, 16, none (NO_COLOR)
SHADES = " ░▒▓█"  # 0 -> blank, 1 -> full block: a value a person can read without colour


def colour_depth(no_color: bool, color_system: str | None) -> str:
    """FULL, FEW or NONE, from Textual's NO_COLOR flag and Rich's detected colour system
    ('truecolor', '256', 'standard', 'windows', or None for a terminal without colour)."""
    if no_color or color_system is None:
        return NONE
    return FULL if color_system in ("truecolor", "256") else FEW


def depth_of(widget) -> str:
    """The colour depth the app found (FULL in a bare test app)."""
    return getattr(widget.app, "colour_depth", FULL)


def shade(value: float, width: int = 1) -> str:
    """`width` shade characters for a value in [0, 1]."""
    v = 0.0 if value != value else min(1.0, max(0.0, float(value)))
    return SHADES[round(v * (len(SHADES) - 1))] * width

# 16 evenly spaced samples of matplotlib's viridis (0.0 dark purple -> 1.0 yellow).
_VIRIDIS = [
    (68, 1, 84), (72, 26, 108), (71, 47, 125), (65, 68, 135), (57, 86, 140), (49, 104, 142),
    (42, 120, 142), (35, 137, 142), (31, 154, 138), (34, 170, 133), (53, 183, 121),
    (84, 197, 104), (122, 209, 81), (165, 219, 54), (210, 226, 27), (253, 231, 37),
]


def viridis_rgb(value: float) -> tuple[int, int, int]:
    """value in [0, 1] (clamped) -> (r, g, b), linearly interpolated between samples."""
    v = 0.0 if value != value else min(1.0, max(0.0, float(value)))  # NaN -> 0
    x = v * (len(_VIRIDIS) - 1)
    i = min(int(x), len(_VIRIDIS) - 2)
    t = x - i
    a, b = _VIRIDIS[i], _VIRIDIS[i + 1]
    return tuple(round(a[k] + (b[k] - a[k]) * t) for k in range(3))  # type: ignore[return-value]


def viridis_hex(value: float) -> str:
    r, g, b = viridis_rgb(value)
    return f"#{r:02x}{g:02x}{b:02x}"


def text_colour_on(value: float) -> str:
    """Readable text colour for a number printed on a cell of this value."""
    r, g, b = viridis_rgb(value)
    return "#000000" if (0.299 * r + 0.587 * g + 0.114 * b) > 128 else "#ffffff"


def diff_hex(value: float) -> str:
    """|A-B| of two attention weights: 0 -> near black (the same), 1 -> bright red (as different
    as attention can be)."""
    v = 0.0 if value != value else min(1.0, max(0.0, value))  # NaN -> 0
    dark, hot = (28, 28, 36), (255, 70, 50)
    r, g, b = (round(d + (h - d) * v) for d, h in zip(dark, hot))
    return f"#{r:02x}{g:02x}{b:02x}"


# How a check's outcome reads in Rich markup, in the CLI's doctor and the app's doctor alike.
STATUS_MARKUP = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "skip": "[dim]skip[/]"}
