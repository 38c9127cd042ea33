"""How the app writes numbers: one formatter per kind of number, shared by every screen."""

from __future__ import annotations


def format_loss(value: float) -> str:
    """0.152, or 3.1e-05 once three decimals would read 0.000."""
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def short_count(n: int) -> str:
    """236k, 4.1k, 812: a parameter count that fits a title bar."""
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)
