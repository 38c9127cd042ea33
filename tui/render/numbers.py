"""How the app writes numbers: one formatter per kind of number, shared by every screen."""

from __future__ import annotations


def format_loss(value: float) -> str:
    """0.152, or 3.1e-05 once three decimals would read 0.000."""
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def short_count(n: int) -> str:
    """236k, 4.1k, 812: a parameter count that fits a title bar."""
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def percent(value: float) -> str:
    """99.6%, 0.4%: one decimal, and never 100.0% or 0.0% unless it is exactly so."""
    text = f"{value:.1%}"
    if text == "100.0%" and value < 1:
        return ">99.9%"
    if text == "0.0%" and value > 0:
        return "<0.1%"
    return text


def short_path(path) -> str:
    """./run1.safetensors inside the working folder, ~/… in the home folder, else the full path."""
    from pathlib import Path

    path = Path(path).resolve()
    for base, shown in ((Path.cwd().resolve(), "."), (Path.home().resolve(), "~")):
        try:
            return f"{shown}/{path.relative_to(base)}"
        except ValueError:
            continue
    return str(path)
