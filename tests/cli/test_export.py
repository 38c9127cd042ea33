"""`minitx export`: inference-only checkpoints and decoding traces (json, csv, svg)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from minitx.core.checkpoint import load_checkpoint
from tests.cli.conftest import assert_one_line_error, run_cli


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_export_is_inference_only_and_loads_everywhere_the_original_does(tiny_ckpt, tmp_path, dtype):
    out = tmp_path / f"shared-{dtype}.safetensors"
    run = run_cli("export", tiny_ckpt, "--out", str(out), "--dtype", dtype)
    assert run.exit_code == 0, run.stderr
    ckpt = load_checkpoint(out)
    assert not ckpt.resumable and not ckpt.train_state and ckpt.dtype == dtype
    assert ckpt.model_config == load_checkpoint(tiny_ckpt).model_config
    assert json.loads(ckpt.metadata["vocab"])["tokens"][12] == "<eos>"  # decodes with no data at hand
    for command in (["decode", str(out), "1 2 3"], ["eval", str(out), "--n", "10"],
                    ["inspect", str(out)]):
        assert run_cli(*command).exit_code == 0, command
    if dtype == "float32":  # the same weights: the same predictions
        assert (run_cli("decode", str(out), "4 2 6 1").stdout
                == run_cli("decode", tiny_ckpt, "4 2 6 1").stdout)
    message = assert_one_line_error(run_cli("train", "--resume", str(out), "--steps", "40"))
    assert "no training state" in message


def test_export_trace_json_holds_every_layer_and_head_grid(tiny_ckpt, tmp_path):
    out = tmp_path / "trace.json"
    assert run_cli("export", tiny_ckpt, "--trace", "3 1 4", "--out", str(out)).exit_code == 0
    trace = json.loads(out.read_text())
    assert trace["source"] == "3 1 4" and len(trace["cross_attention"][0]) == 2
    assert len(trace["cross_attention"][0][1]) == len(trace["steps"])


def test_export_trace_csv_has_one_row_per_step_layer_head_and_source_position(tiny_ckpt):
    run = run_cli("export", tiny_ckpt, "--trace", "3 1 4", "--format", "csv")
    assert run.exit_code == 0, run.stderr
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    steps = len({row["step"] for row in rows})
    assert len(rows) == steps * 1 * 2 * 3  # steps x layers x heads x source positions
    assert {row["source_token"] for row in rows} == {"3", "1", "4"}
    first = [r for r in rows if r["step"] == "0" and r["head"] == "1"]
    assert abs(sum(float(r["weight"]) for r in first) - 1.0) < 1e-4


def test_export_trace_svg_is_a_labelled_picture(tiny_ckpt, tmp_path):
    out = tmp_path / "trace.svg"
    run = run_cli("export", tiny_ckpt, "--trace", "3 1 4", "--format", "svg", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    svg = out.read_text()
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "L1" in svg and "H2" in svg and "prediction" in svg
    assert "fill=\"#" in svg  # coloured cells


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([], "--out"),
        (["--trace", "1 2", "--out", "x.png"], "format"),
        (["--trace", "1 q"], "not a token"),
        (["--format", "csv", "--out", "x.safetensors"], "--trace"),
        (["--trace", "1 2", "--dtype", "float16"], "--dtype"),
    ],
)
def test_bad_export_requests_give_a_one_line_error(tiny_ckpt, tmp_path, args, fragment):
    args = [a if a != "x.png" else str(tmp_path / a) for a in args]
    assert fragment in assert_one_line_error(run_cli("export", tiny_ckpt, *args))


def test_unwritable_export_path_is_a_one_line_error(tiny_ckpt, tmp_path):
    missing = tmp_path / "no" / "such" / "dir.safetensors"
    assert "cannot write" in assert_one_line_error(run_cli("export", tiny_ckpt, "--out", str(missing)))
    trace = tmp_path / "no" / "trace.svg"
    run = run_cli("export", tiny_ckpt, "--trace", "1 2", "--out", str(trace))
    assert "cannot write" in assert_one_line_error(run)
