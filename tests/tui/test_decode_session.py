"""The decode state Explore and Compare drive, as a plain object: stepped, changed and read
without the app (the panels only draw it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minitx.core.interp.interventions import Head
from minitx.tui.app.decode_session import DecodeSession
from minitx.tui.app.loaded import load_named

SOURCE = [3, 1, 4, 1, 5]
REVERSED = [5, 1, 4, 1, 3]


@pytest.fixture(scope="module")
def reverse():
    return load_named("reverse")


@pytest.fixture
def session(reverse):
    session = DecodeSession()
    session.set_model(reverse)
    session.set_source(SOURCE)
    return session


def test_a_new_model_starts_on_the_head_that_does_the_work(reverse):
    session = DecodeSession()
    session.set_model(reverse)
    scores = reverse.scores
    assert scores[session.layer_index][session.head_index] == max(max(row) for row in scores)
    assert (session.kind, session.view_mode, session.ablated) == ("cross", "grid", frozenset())


def test_stepping_forward_back_and_to_the_end_moves_over_recorded_steps(session):
    session.goto(3)
    assert session.position == 3 and session.stepper.tokens == REVERSED[:3] and not session.finished
    first_result = session.stepper.results[0]
    session.goto(1)
    assert session.stepper.results[0] is first_result  # stepping back replays, never recomputes
    session.run_to_end()
    assert session.finished and session.correct and session.expected == "5 1 4 1 3"
    assert session.target == session.position == 6  # the five digits and <eos>


def test_knocking_a_head_out_redecodes_to_the_same_step_and_restoring_brings_it_back(session):
    session.goto(2)
    session.select_head(1, 0)
    session.toggle_ablation()
    assert session.ablated == {Head("cross", 1, 0)} and session.off_heads() == {(1, 0)}
    assert session.stepper.interventions.zero == session.ablated and session.position == 2
    session.kind = "enc"
    assert session.off_heads() == set()  # the encoder's own heads are all there
    session.kind = "cross"
    session.clear_ablations()
    assert not session.ablated and session.stepper.tokens == REVERSED[:2]


def test_teacher_forcing_feeds_the_answer_and_keeps_what_the_model_would_say(session):
    session.set_teacher(True)
    session.run_to_end()
    assert session.stepper.tokens == REVERSED + [session.record.task.vocab.eos]
    assert session.predictions == session.stepper.tokens and session.correct


def test_a_forced_token_is_output_and_greedy_decoding_goes_on_from_it(session):
    session.goto(1)
    session.force(7)
    assert session.stepper.tokens[0] == 7 and session.finished and session.forced == {0: 7}
    assert session.correct is False


def test_another_attention_kind_keeps_the_selected_layer_where_that_kind_has_it(session):
    session.select_head(1, 3)
    session.set_kind("enc")
    assert (session.kind, session.layer_index, session.head_index) == ("enc", 1, 3)
    session.set_kind("nonsense")
    assert session.kind == "cross"
    session.set_view("lens")
    assert session.view_mode == "lens"
    session.set_view("nonsense")
    assert session.view_mode == "grid"


def test_the_session_module_needs_no_textual():
    code = ("import sys, minitx.tui.app.decode_session; "
            "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "False"
