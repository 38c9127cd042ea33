"""Head roles (core/interp/roles.py): each score measures its pattern, a forced pattern scores
1, and the bundled models' copying heads are named for how they find the token."""

import pytest
import torch

from minitx import checkpoints
from minitx.core.interp.interventions import Head, Interventions
from minitx.core.interp.roles import APPLIES, ROLE_SEED, ROLES, HeadRoles, head_roles


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(1)
    return {name: checkpoints.load(name) for name in ("reverse", "copy", "sort")}


def roles_of(ckpt, n=64):
    return {h.head: h for h in head_roles(ckpt.model, ckpt.task, n=n).heads}


def test_every_head_has_a_score_for_each_role_of_its_kind_and_none_for_the_others(models):
    for name, roles in roles_of(models["reverse"]).items():
        kind = name.split(":")[0]
        for role in ROLES:
            score = roles.scores[role]
            assert (score is None) == (role not in APPLIES[kind])
            assert score is None or -1e-6 <= score <= 1 + 1e-6


def test_a_head_forced_to_uniform_attention_is_broad_and_one_forced_to_the_alignment_is_expected(models):
    ckpt = models["reverse"]
    uniform, aligned = Head("enc", 0, 1), Head("cross", 0, 0)
    batch = ckpt.task.batch(64, torch.Generator().manual_seed(ROLE_SEED))
    forced = Interventions(patterns={uniform: "uniform", aligned: "expected"},
                           expected=ckpt.task.expected_alignment(batch))
    with forced.applied(ckpt.model):
        roles = roles_of(ckpt)
    assert roles[str(uniform)].scores["broad"] == pytest.approx(1.0, abs=1e-5)
    assert roles[str(uniform)].strongest()[0] == "broad"
    assert roles[str(aligned)].scores["expected"] == pytest.approx(1.0, abs=1e-5)
    assert roles[str(aligned)].scores["anti-diagonal"] == pytest.approx(1.0, abs=1e-5)  # reverse's own


def test_reverse_copies_by_position_copy_by_the_diagonal_and_sort_by_token_identity(models):
    reverse, copy, sort = (roles_of(models[n]) for n in ("reverse", "copy", "sort"))
    for h in range(1, 5):
        assert reverse[f"cross:L2.H{h}"].strongest()[0] == "anti-diagonal"
        assert copy[f"cross:L2.H{h}"].strongest()[0] == "diagonal"
        assert reverse[f"cross:L2.H{h}"].scores["identity"] < 0.05  # position explains it all
    assert max(sort[f"cross:L2.H{h}"].scores["identity"] for h in range(1, 5)) > 0.3


def test_the_strongest_role_prefers_a_pattern_to_broad_and_needs_the_floor():
    assert HeadRoles("x", {"broad": 0.9, "first": 0.6}).strongest() == ("first", 0.6)
    assert HeadRoles("x", {"broad": 0.9, "first": 0.2}).strongest() == ("broad", 0.9)
    assert HeadRoles("x", {"broad": 0.3, "first": 0.2, "last": None}).strongest() is None
