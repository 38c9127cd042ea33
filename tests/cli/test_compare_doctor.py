"""`minitx compare`, `minitx doctor` and the alignment scores in `minitx inspect`."""

from __future__ import annotations

import json

import pytest

from minitx import checkpoints
from minitx.core.doctor.code_checks import CAUSES
from tests.blind_files import mentions, strip_bug_hints
from tests.cli.conftest import TINY, assert_one_line_error, run_cli

BUNDLED = set(checkpoints.bundled_names())


def needs(*names: str):
    missing = [n for n in names if n not in BUNDLED]
    return pytest.mark.skipif(bool(missing), reason=f"bundled checkpoints missing: {missing}")


@pytest.fixture(scope="session")
def four_heads_ckpt(tmp_path_factory) -> str:
    """Like tiny_ckpt but with 4 heads and another seed: same parameter count, other weights."""
    path = tmp_path_factory.mktemp("tiny4") / "tiny4.safetensors"
    run = run_cli("train", *TINY, "--heads", "4", "--seed", "1", "--steps", "30", "--out", str(path))
    assert run.exit_code == 0, run.stderr
    return str(path)


def compare_json(*args: str) -> dict:
    run = run_cli("compare", *args, "--json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


# ---------------------------------------------------------------------------------------------
# compare


def test_compare_of_a_checkpoint_with_itself_agrees_fully_at_zero_weight_distance(tiny_ckpt):
    data = compare_json(tiny_ckpt, tiny_ckpt, "--n", "40", "--seed", "3")
    assert data["n"] == 40 and data["seed"] == 3
    assert data["agreement"] == 1.0
    assert data["weight_distance"] == 0.0 and data["weights"]
    assert all(w["l2"] == 0.0 for w in data["weights"]) and data["unmatched"] == []
    assert data["config_diff"] == []
    assert data["a"]["accuracy"] == data["b"]["accuracy"]
    assert data["a"]["by_length"] == data["b"]["by_length"] and set(data["a"]["by_length"]) <= {
        "3",
        "4",
        "5",
        "6",
    }
    assert data["a"]["alignment"] == data["b"]["alignment"]
    assert len(data["a"]["alignment"]) == 1 and len(data["a"]["alignment"][0]) == 2  # 1 layer, 2 heads
    assert data["decode"] is None


def test_compare_json_reports_config_differences_and_alignment_per_head(tiny_ckpt, four_heads_ckpt):
    data = compare_json(tiny_ckpt, four_heads_ckpt, "--n", "40")
    diff = {row["field"]: (row["a"], row["b"]) for row in data["config_diff"]}
    assert diff["model.n_heads"] == (2, 4) and diff["training.seed"] == (0, 1)
    assert data["a"]["params"] == data["b"]["params"]  # heads split the width, they add nothing
    assert [len(row) for row in data["a"]["alignment"]] == [2]
    assert [len(row) for row in data["b"]["alignment"]] == [4]
    assert data["weight_distance"] > 0.1  # other seed: other weights
    assert 0.0 <= data["agreement"] <= 1.0


def test_compare_text_shows_every_table(tiny_ckpt, four_heads_ckpt):
    run = run_cli("compare", tiny_ckpt, four_heads_ckpt, "--n", "30")
    assert run.exit_code == 0, run.stderr
    out = run.stdout
    for heading in (
        "summary",
        "config differences",
        "exact match by source length",
        "alignment score",
        "weight distance",
    ):
        assert heading in out
    assert "model.n_heads" in out and "identical outputs on" in out
    row = next(line for line in out.splitlines() if line.startswith("│ L1 H4"))  # alignment table
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells[1] == "-" and cells[2][0].isdigit()  # B's extra head has a row; A has no score


@needs("reverse", "copy")
def test_compare_with_a_source_decodes_it_with_both_models():
    data = compare_json("reverse", "copy", "--n", "20", "--source", "3 1 4 1 5")
    assert data["decode"] == {
        "source": "3 1 4 1 5",
        "a": "5 1 4 1 3",
        "expected_a": "5 1 4 1 3",
        "b": "3 1 4 1 5",
        "expected_b": "3 1 4 1 5",
        "agree": False,
    }
    assert data["a"]["accuracy"] == 1.0 and data["b"]["accuracy"] == 1.0  # each on its own task
    text = run_cli("compare", "reverse", "copy", "--n", "20", "--source", "3 1 4 1 5").stdout
    assert "5 1 4 1 3" in text and "predictions differ" in text


@pytest.mark.parametrize(
    "args",
    [
        ["nope", "reverse"],
        ["reverse", "missing/file.safetensors"],
        ["reverse", "reverse", "--source", "3 x 1"],
    ],
    ids=["unknown-name", "missing-file", "bad-source"],
)
def test_compare_errors_are_one_line(args):
    assert_one_line_error(run_cli("compare", *args, "--n", "5"))


# ---------------------------------------------------------------------------------------------
# doctor


def doctor_json(*args: str) -> tuple[int, dict]:
    run = run_cli("doctor", *args, "--json")
    assert run.exit_code in (0, 1), run.stderr
    return run.exit_code, json.loads(run.stdout)


def without_bug_hint(name: str, folder) -> str:
    """A copy of a bundled checkpoint with every bug field gone (model config, train config,
    training summary: tests/blind_files.py), under a neutral file name. Its model variant, if it
    had one, now rebuilds correct: the doctor has only the weights left."""
    out = strip_bug_hints(checkpoints.resolve(name), folder / "model.safetensors")
    assert not mentions(out, name.removeprefix("reverse-"))
    return str(out)


def _passes_every_check(quick: bool) -> None:
    code, data = doctor_json("reverse", *(["--quick"] if quick else []))
    statuses = {c["name"]: c["status"] for c in data["checks"]}
    assert code == 0 and data["passed"] is True, statuses
    skipped = {c["name"] for c in data["checks"] if c["status"] == "skip"}
    # the bundled file keeps its run's history: every history check runs
    assert skipped == ({"overfit-one-batch"} if quick else set()), skipped
    assert data["verdict"] == "no problems found" and data["fails_task"] is False
    assert {
        "initial-loss",
        "future-leakage-values",
        "future-leakage-gradients",
        "overfit-one-batch",
        "attention-saturation",
        "rows-sum-to-one",
        "fused-agreement",
        "accuracy",
        "alignment",
        "training-progress",
        "still-falling",
        "warmup",
    } <= set(statuses)
    assert data["causes"] == []


@pytest.mark.slow  # tier 2: the full run, overfit-one-batch included (~10 s); tier 1 the quick one
@needs("reverse")
def test_doctor_passes_the_bundled_reverse_model_on_every_check():
    _passes_every_check(quick=False)


@needs("reverse")
def test_the_quick_doctor_passes_the_bundled_reverse_model_on_every_check_it_runs():
    _passes_every_check(quick=True)


@pytest.mark.parametrize(
    "name, cause, failing_check",
    [  # tier 1: a model bug and an attention bug; tier 2 the rest
        ("reverse-no-shift", "no-shift", "trained-unshifted"),
        pytest.param("reverse-no-causal-mask", "no-causal-mask", "trained-without-mask",
                     marks=pytest.mark.slow),
        pytest.param("reverse-no-reverse", "no-reverse", "trained-on-copies", marks=pytest.mark.slow),
        ("reverse-swap-cross", "swap-cross", "source-use"),
        pytest.param("reverse-no-scale", "no-scale", "trained-unscaled", marks=pytest.mark.slow),
    ],
)
def test_doctor_names_the_cause_of_a_bug_checkpoint_stripped_of_its_bug_metadata(
    name, cause, failing_check, tmp_path_factory
):
    if name not in BUNDLED:
        pytest.skip(f"no bundled {name}")
    path = without_bug_hint(name, tmp_path_factory.mktemp("ckpt"))
    code, data = doctor_json(path, "--quick")
    assert code == 1 and data["passed"] is False
    assert data["causes"][0] == CAUSES[cause]  # the most likely cause comes first
    classic = {CAUSES[b] for b in ("no-shift", "no-causal-mask", "no-reverse", "swap-cross", "no-scale")}
    assert classic & set(data["causes"]) == {CAUSES[cause]}  # and no other classic bug is blamed
    first = data["evidence"][0]
    assert first["key"] == cause and "weights" in first["kinds"]  # the code is correct now
    assert first["evidence"][0]["check"] == failing_check and first["evidence"][0]["figure"]
    check = next(c for c in data["checks"] if c["name"] == failing_check)
    assert check["status"] == "fail" and check["cause"] == CAUSES[cause] and check["kind"] == "weights"
    assert data["fails_task"] is True and data["verdict"].startswith("fails its task")

    text = run_cli("doctor", path, "--quick")
    assert text.exit_code == 1
    out = " ".join(text.stdout.split())  # Rich may wrap lines
    assert "FAIL" in text.stdout and "likely cause" in out and "verdict: fails its task" in out
    assert "code checks: does minitx's forward pass" in out and "weight checks: were these weights" in out
    assert CAUSES[cause].split(":")[0] in out
    assert f"weights {failing_check}:" in out  # the evidence kind and check behind the cause
    assert "no problems found" not in out


def test_a_model_that_fails_its_task_is_never_reported_as_having_no_problems(tiny_ckpt):
    # 30 steps of a tiny model: nothing learned, no bug. It used to read "no problems found".
    code, data = doctor_json(tiny_ckpt, "--quick")
    assert code == 1 and data["fails_task"] is True
    assert data["verdict"].startswith("fails its task") and data["verdict"] != "no problems found"
    assert data["causes"] or data["suspects"]  # a cause, or what to look at in order
    text = run_cli("doctor", tiny_ckpt, "--quick").stdout
    assert "no problems found" not in text and "likely cause" in text


FRESH = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--quick"]


def test_doctor_without_a_checkpoint_passes_a_fresh_model_and_skips_the_trained_checks():
    run = run_cli("doctor", *FRESH)
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "a fresh (untrained) model" in run.stdout and "no problems found" in run.stdout
    code, data = doctor_json(*FRESH)
    assert code == 0 and data["checkpoint"] is None and data["model_config"]["d_model"] == 16
    statuses = {c["name"]: c["status"] for c in data["checks"]}
    assert statuses["accuracy"] == "skip" and statuses["initial-loss"] == "pass"


def test_doctor_finds_a_missing_attention_scale_in_a_fresh_model():
    code, data = doctor_json(*FRESH, "--bug", "no-scale")
    assert code == 1 and data["causes"][0] == CAUSES["no-scale"]
    assert next(c for c in data["checks"] if c["name"] == "attention-saturation")["status"] == "fail"


@pytest.mark.parametrize(
    "args",
    [["nope"], ["reverse", "--heads", "2"], ["--d-model", "16", "--heads", "3"]],
    ids=["unknown-checkpoint", "options-with-checkpoint", "bad-config"],
)
def test_doctor_cannot_run_is_one_line_and_exit_code_2(args):
    run = run_cli("doctor", *args)
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "Error: CheckpointError" not in message


def test_doctor_help_documents_the_exit_codes_with_an_example():
    out = run_cli("doctor", "--help").stdout
    assert "Exit codes:" in out and "1  at least one check failed" in out and "minitx doctor reverse" in out
    assert "code checks" in out and "weight checks" in out


# ---------------------------------------------------------------------------------------------
# inspect


@needs("reverse")
def test_inspect_shows_the_alignment_score_of_every_layer_and_head():
    data = json.loads(run_cli("inspect", "reverse", "--json").stdout)
    scores = data["alignment"]["scores"]
    assert data["alignment"]["expected"] == "anti-diagonal"
    assert [len(row) for row in scores] == [4, 4]  # 2 decoder layers, 4 heads
    assert max(scores[1]) > 0.8  # the trained model's second layer attends anti-diagonally
    text = run_cli("inspect", "reverse").stdout
    assert "alignment score" in text and "H4" in text and "L2" in text
