"""How the app writes numbers: one formatter per kind of number, shared by every screen."""

from __future__ import annotations


def format_loss(value: float) -> str:
    """0.152, or 3.1e-05 once three decimals would read 0.000."""
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def rate(value: float) -> str:
    """1,234, 42, 3.5, 0.35: a speed (steps or examples a second), two significant digits below
    ten, so a slow run never reads 0."""
    if value >= 9.5:
        return f"{value:,.0f}"
    return f"{value:.2g}" if value > 0 else "0"


def short_count(n: int) -> str:
    """235M, 11M, 236k, 4.1k, 812: a parameter count that fits a title bar (three digits at most)."""
    if n < 1000:
        return str(n)
    text = str(n)
    for size, unit in ((1000, "k"), (1_000_000, "M"), (1_000_000_000, "B")):
        value = n / size
        text = (f"{value:.0f}" if value >= 9.95 else f"{value:.1f}") + unit
        if value < 999.5:  # 999,950 is 1.0M, not 1000k
            break
    return text


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


def accuracy_text(accuracy: float, n: int, complete: bool, until: float, short: bool = False) -> str:
    """'acc 97.3%', or for an evaluation that stopped once --until was out of reach, what it
    showed: 'acc <99.9% (7 of the first 100 wrong)' (short, for the app's one stats line:
    'acc <99.9% (7/100 wrong)'), the failures that put the target out of reach; its accuracy
    over those few is no measurement."""
    if complete:
        return f"acc {accuracy:.1%}"
    wrong = round((1 - accuracy) * n)
    return f"acc <{until:.1%} ({wrong:,}/{n:,} wrong)" if short else \
        f"acc <{until:.1%} ({wrong:,} of the first {n:,} wrong)"


# A fine-tune's held-out scores (core.training.trainer.scores_of): key, name, digits.
FINE_TUNE_SCORES = (("loss", "loss", ".4f"), ("bleu", "BLEU", ".1f"), ("chrf", "chrF", ".1f"))


def scores_change(base: dict | None, now: dict | None, short: bool = False,
                  keys: tuple[str, ...] = ("loss", "bleu", "chrf")) -> str | None:
    """'loss 5.2100 -> 1.0300 · BLEU 3.1 -> 25.4 · chrF 20.1 -> 48.2': a fine-tune's base against
    its weights now on its held-out pairs, for `keys`; `short` (the app): 'BLEU 3.1→25.4'. None
    without both."""
    if not (base and now):
        return None
    parts = []
    for key, name, digits in (score for score in FINE_TUNE_SCORES if score[0] in keys):
        if base.get(key) is not None and now.get(key) is not None:
            arrow = "→" if short else " -> "
            parts.append(f"{name} {base[key]:{digits}}{arrow}{now[key]:{digits}}")
    return " · ".join(parts)
