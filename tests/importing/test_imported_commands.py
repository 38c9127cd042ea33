"""Every command works on an imported model (the checkpoints of tests/importing/conftest.py's
`imported`, made by `minitx import` from the reference models and their held-out pairs): decode
(sources wrapped and labelled as the model's code fed them), inspect (the imported options),
eval (kept pairs and --data), heads, patch, lens, compare with a minitx model, doctor, export,
and --ablate; and the doctor on a model trained without the causal mask."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from minitx.tui.cli.main import main
from tests.reference_models import toy

LAYOUTS = (toy.TUTORIAL, toy.ANNOTATED)


def run(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def ok_json(*args: str) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decode_wraps_the_typed_source_and_labels_its_start_and_end(imported, layout):
    trace = ok_json("decode", imported[layout], "3 1 4 1")["results"][0]
    spec = toy.LAYOUTS[layout]
    assert trace["source"] == "3 1 4 1" and trace["prediction"] == "1 4 1 3"
    assert trace["source_tokens"] == [spec.bos, "3", "1", "4", "1", spec.eos]
    assert trace["steps"][-1]["text"] == spec.eos
    assert len(trace["cross_attention"][0][0][0]) == 6  # a weight for every position fed
    assert trace["within_training_lengths"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inspect_reports_the_imported_options_wrapping_and_both_vocabularies(imported, layout):
    info = ok_json("inspect", imported[layout])
    facts = info["imported"]
    assert facts["layout"] == layout and facts["weights"]["format"] == "torch"
    assert facts["source_wrapping"].startswith(toy.LAYOUTS[layout].bos)
    assert facts["pairs"]["kept"] == 200 and facts["positions"].startswith("the file's table")
    expected = {toy.TUTORIAL: ["post-norm + final norms", "LayerNorm eps 1e-05", "relu"],
                toy.ANNOTATED: ["pre-norm", "std LayerNorm eps 1e-06", "relu", "log-softmax"]}[layout]
    assert facts["options"][: len(expected)] == expected
    assert info["src_vocabulary"] == list(toy.vocabulary(layout, "reverse", "src"))
    assert info["vocabulary"] == list(toy.vocabulary(layout, "reverse", "tgt"))
    text = " ".join(run("inspect", imported[layout]).stdout.split())  # lines wrap at 80 columns
    assert "source vocabulary" in text and "target vocabulary" in text and "sources fed" in text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_eval_measures_the_kept_pairs_and_a_pairs_file(imported, layout, tutorial_files):
    kept = ok_json("eval", imported[layout])
    assert kept["n"] == 200 and kept["accuracy"] >= 0.9
    assert set(kept["by_length"]) == {"3", "4", "5"}  # the sources' own tokens, not the wrapping
    pairs = tutorial_files.pairs.parent / "more.tsv"
    toy.write_pairs("reverse", pairs, n=60, seed=5)
    given = ok_json("eval", imported[layout], "--data", str(pairs), "--failures", "3")
    assert given["n"] == 60 and given["accuracy"] >= 0.9
    for failure in given["failures"]:
        assert failure["source_text"].replace(" ", "").isdigit()  # the source, as typed


def test_heads_patch_lens_and_ablation_run_on_an_imported_model(imported):
    path = imported[toy.ANNOTATED]
    heads = ok_json("heads", path, "--n", "64")
    assert len(heads["heads"]) == 6 and heads["baseline"]["accuracy"] >= 0.9
    patch = ok_json("patch", path, "--method", "exact")  # a pair drawn from the kept pairs
    clean = patch["clean"]
    spec = toy.LAYOUTS[toy.ANNOTATED]
    src_vocab = toy.vocabulary(toy.ANNOTATED, "reverse", "src")
    assert clean[0] == src_vocab.index(spec.bos) and clean[-1] == src_vocab.index(spec.eos)  # wrapped, whole
    assert len(patch["streams"]["enc:L1.resid"]) == len(clean)  # every source position fed
    # Typed text has no answer the task can tell: the model's own outputs are the answers.
    typed = ok_json("patch", path, "--clean", "3 1 4 1", "--corrupt", "2 7 5 8", "--method", "exact")
    for source, answer in (("3 1 4 1", typed["clean_answer"]), ("2 7 5 8", typed["corrupted_answer"])):
        said = ok_json("decode", path, source)["results"][0]["steps"]
        assert answer == [step["token"] for step in said]
    assert typed["by_model"] and typed["steps"] == [0, 1, 2, 3]  # "1 4 1 3" against "8 5 7 2"
    assert typed["clean_difference"] > 0 > typed["corrupted_difference"]
    shown = run("patch", path, "--clean", "3 1 4 1", "--corrupt", "2 7 5 8", "--method", "exact")
    assert "answers: the model's own outputs" in shown.output
    same = run("patch", path, "--clean", "3 1 4 1", "--corrupt", "3 1 4 1")
    assert same.exit_code == 2 and "the model says the same for both sources" in same.output
    lens = ok_json("lens", path, "3 1 4")
    assert lens["decoder_input"][0] == "<s>" and lens["layers"][0][0][0]["token"] == "4"
    ablated = ok_json("eval", path, "--ablate", "cross", "--ablate-kind", "mean")
    assert ablated["accuracy"] < 0.5 and ablated["ablated"] == ["cross:L1.H1", "cross:L1.H2"]


def test_compare_an_imported_model_with_one_minitx_trained_on_the_same_task(imported):
    data = ok_json("compare", imported[toy.TUTORIAL], "reverse", "--n", "100", "--source", "3 1 4 1 5")
    assert data["a"]["task"] == "imported" and data["b"]["task"] == "reverse"
    assert data["a"]["accuracy"] >= 0.9 and data["agreement"] > 0.5  # the same answers, as text
    assert data["decode"]["a"] == data["decode"]["b"] == "5 1 4 1 3"
    both = ok_json("compare", imported[toy.TUTORIAL], imported[toy.ANNOTATED], "--n", "100")
    assert both["agreement"] >= 0.85 and {"model.norm", "model.norm_kind"} <= {
        d["field"] for d in both["config_diff"]}


def test_export_keeps_an_imported_model_and_its_trace_labels_the_wrapping(imported, tmp_path):
    out = tmp_path / "small.safetensors"
    assert run("export", imported[toy.TUTORIAL], "--out", str(out), "--dtype", "float16").exit_code == 0
    assert ok_json("decode", str(out), "3 1 4 1")["results"][0]["prediction"] == "1 4 1 3"
    trace = run("export", imported[toy.TUTORIAL], "--trace", "3 1 4", "--format", "csv").stdout
    tokens = {row["source_token"] for row in csv.DictReader(io.StringIO(trace))}
    assert tokens == {"<bos>", "3", "1", "4", "<eos>"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_doctor_passes_a_healthy_imported_model(imported, layout):
    result = run("doctor", imported[layout], "--quick", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, [c for c in report["checks"] if c["passed"] is False]
    assert report["task"] == "imported"


def test_the_doctor_names_the_missing_causal_mask_of_a_model_trained_without_it(imported):
    result = run("doctor", imported["no-causal-mask"], "--quick", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert report["causes"] and "causal mask" in report["causes"][0]


def test_head_roles_count_a_wrapped_source_from_its_own_first_token(imported):
    """A reverse model's cross-attention reads the mirrored source token: with the start token at
    position 0, that is anti-diagonal over the source's own tokens, not over the positions fed."""
    roles = ok_json("heads", imported[toy.ANNOTATED], "--roles")
    strongest = {h["head"]: h["strongest"] for h in roles["heads"]}
    assert "anti-diagonal" in {strongest["cross:L1.H1"], strongest["cross:L1.H2"]}
    cross = next(h for h in roles["heads"] if h["head"] == "cross:L1.H1")
    assert cross["scores"]["identity"] is None  # source and target ids are two vocabularies


@pytest.mark.parametrize("layout", LAYOUTS)
def test_attribute_reads_the_wrapped_source_in_its_own_vocabulary(imported, layout):
    """Attribution's columns are the ids fed, start and end included; occlusion finds the token
    each reversed output copies one column to the right of the mirror (the start token is first)."""
    spec = toy.LAYOUTS[layout]
    result = ok_json("attribute", imported[layout], "3 1 4 1 2", "--method", "occlusion")["results"][0]
    assert result["source_tokens"] == [spec.bos, "3", "1", "4", "1", "2", spec.eos]
    assert result["prediction"] == "2 1 4 1 3"
    for step in result["steps"][:5]:
        assert len(step["attribution"]) == 7
        peak = max(range(7), key=step["attribution"].__getitem__)
        assert peak == 5 - step["index"], (step["text"], step["attribution"])
    ig = ok_json("attribute", imported[layout], "3 1 4 1 2", "--target", spec.eos)["results"][0]
    assert ig["target"] == spec.eos and all(len(s["attribution"]) == 7 for s in ig["steps"])


# -- a model that keeps no pairs (imported without --pairs, as a Hugging Face folder is) ----------

HOW = "give --pairs FILE"


def test_the_doctor_runs_its_code_checks_on_a_model_without_pairs_and_exits_by_its_verdict(imported):
    result = run("doctor", imported["no-pairs"], "--quick", "--json")
    assert result.exit_code == 0, result.output  # its verdict (every check that ran passed), not 2
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    ran = [name for name, c in checks.items() if c["kind"] == "code" and c["status"] != "skip"]
    assert {"initial-loss", "future-leakage-values", "future-leakage-gradients", "rows-sum-to-one",
            "fused-agreement", "permutation", "source-dependence"} <= set(ran)
    assert all(checks[name]["status"] == "pass" for name in ran)
    for name in ("accuracy", "trained-without-mask", "copies-source", "alignment", "source-use"):
        assert checks[name]["status"] == "skip" and "no example pairs" in checks[name]["detail"]
    text = run("doctor", imported["no-pairs"], "--quick")
    assert text.exit_code == 0 and "Error" not in text.output
    said = " ".join(text.stdout.split())
    assert said.count(HOW) == 1 and "keeps no example pairs" in said  # once, one line, at the end
    assert "checks on inputs made of its vocabularies" in said  # not "held-out pairs" it has none of


def test_every_command_that_measures_says_how_to_give_pairs_and_takes_them(imported, tutorial_files):
    model, pairs = imported["no-pairs"], str(tutorial_files.pairs)
    measuring = {
        "eval": ["eval", model, "--n", "50"],
        "heads": ["heads", model, "--n", "40"],
        "roles": ["heads", model, "--roles", "--n", "40"],
        "patch": ["patch", model, "--method", "exact"],
        "circuit": ["circuit", model, "--n-pairs", "4", "--n", "20"],
        "mean ablation": ["decode", model, "3 1 4", "--ablate", "cross", "--ablate-kind", "mean"],
        "lens, mean ablation": ["lens", model, "3 1 4", "--ablate", "cross", "--ablate-kind", "mean"],
    }
    for name, args in measuring.items():
        without = run(*args)
        lines = [line for line in without.stderr.splitlines() if line.strip()]
        assert without.exit_code == 2 and len(lines) == 1, (name, without.output)
        assert "keeps no example pairs" in lines[0] and HOW in lines[0], (name, lines)
        assert "Error" not in lines[0][len("Error:"):], (name, lines)  # no exception's name
        given = run(*args, "--pairs", pairs)
        assert given.exit_code == 0, (name, given.output)
    # compare beside a model of the same tokens that keeps pairs measures both on those pairs
    beside = run("compare", model, imported[toy.TUTORIAL], "--n", "40")
    assert beside.exit_code == 0 and "keeps no example pairs" not in beside.output, beside.output
    measured = ok_json("eval", model, "--pairs", pairs)
    assert measured["n"] == 200 and measured["accuracy"] >= 0.9
    report = ok_json("doctor", model, "--quick", "--pairs", pairs)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["accuracy"]["status"] == "pass" and checks["copies-source"]["status"] == "pass"
    bad = run("heads", model, "--pairs", str(tutorial_files.src_vocab))
    assert bad.exit_code == 2 and "--pairs:" in bad.stderr and "line 1" in bad.stderr


def test_the_doctors_hints_are_doable_for_an_imported_model(imported):
    """An imported model cannot be trained with --expect: the alignment check says how to score
    one here, and the doctor's --expect does it."""
    checks = {c["name"]: c for c in ok_json("doctor", imported[toy.ANNOTATED], "--quick")["checks"]}
    assert "train with" not in checks["alignment"]["detail"]
    assert "doctor --expect" in checks["alignment"]["detail"]
    scored = ok_json("doctor", imported[toy.ANNOTATED], "--quick", "--expect", "anti-diagonal")
    alignment = next(c for c in scored["checks"] if c["name"] == "alignment")
    assert alignment["status"] == "pass" and alignment["value"] >= 0.5  # counted past the start token
    wrong = ok_json_failing("doctor", imported[toy.ANNOTATED], "--quick", "--expect", "diagonal")
    assert next(c for c in wrong["checks"] if c["name"] == "alignment")["status"] == "fail"
    refused = run("doctor", "reverse", "--quick", "--expect", "diagonal")
    assert refused.exit_code == 2 and "has its own expected pattern" in refused.stderr


def ok_json_failing(*args: str) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_the_doctor_names_a_model_that_copies_its_source_by_the_text_of_two_vocabularies(
        annotated_copy_files, tmp_path):
    """Trained to copy, imported with reverse pairs (no label of minitx's anywhere): its source
    and target vocabularies number the digits differently, so the copy is seen by token text."""
    from tests.importing.conftest import import_args

    out = tmp_path / "copies.safetensors"
    args = import_args(annotated_copy_files, toy.ANNOTATED, out, pairs=False)
    reverse_pairs = annotated_copy_files.pairs.with_name("reverse.pairs.tsv")
    assert run(*args, "--pairs", str(reverse_pairs)).exit_code == 0
    report = ok_json_failing("doctor", str(out), "--quick")
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["copies-source"]["status"] == "fail" and checks["copies-source"]["value"] > 0.9
    assert checks["trained-on-copies"]["status"] == "fail"
    assert report["causes"] and "forgot to reverse" in report["causes"][0]
