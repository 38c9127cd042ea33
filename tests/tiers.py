"""The parameters of a test split between the tiers: the README's test command (tier 1) runs the
ones that cover each behaviour once, tier 2 (pytest -m slow, which CI runs too) the rest, so the
first stays within its minutes while every case is still run."""

from __future__ import annotations

import pytest


def tiered(values, tier_one, ids=None) -> list:
    """`values` as pytest params, those not in `tier_one` marked slow (tier 2). `values` a dict:
    its keys are the ids and name the tier-1 ones; else `ids` (or the values) do."""
    if isinstance(values, dict):
        ids, values = list(values), list(values.values())
    names = list(ids) if ids is not None else list(values)
    return [pytest.param(value, id=str(name) if ids is not None else None,
                         marks=() if name in tier_one else pytest.mark.slow)
            for name, value in zip(names, values)]
