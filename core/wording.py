"""How minitx words a count in what it says (its errors, notes and screens): one rule, for core
and the app alike."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """'1 step', '2 steps', '1,000 steps': a count and its noun, singular for one."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
