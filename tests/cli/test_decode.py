"""`minitx decode`: predictions, attention grids, JSON, stdin, and bad inputs."""

from __future__ import annotations

import json
import random
import re

import pytest

from minitx import checkpoints
from tests.cli.conftest import assert_one_line_error, run_cli

needs_bundled = pytest.mark.skipif(
    "reverse" not in checkpoints.bundled_names(), reason="bundled reverse checkpoint missing"
)


@needs_bundled
def test_bundled_reverse_decodes_fresh_random_sequences_correctly():
    rng = random.Random()  # unseeded on purpose: fresh sequences on every run
    sources = [[rng.randrange(10) for _ in range(rng.randint(4, 10))] for _ in range(100)]
    run = run_cli("decode", "reverse", *(" ".join(map(str, s)) for s in sources))
    assert run.exit_code == 0, run.stderr
    expected = [" ".join(map(str, reversed(s))) for s in sources]
    shown = run.stdout.splitlines()
    assert len(shown) == len(expected)
    # The model is 99.9% right on fresh sequences (a run of one digit, '3 1 1 1', can trip it):
    # a line per source, and at most a few of a hundred wrong.
    wrong = [(a, b) for a, b in zip(shown, expected) if a != b]
    assert len(wrong) <= 3, wrong


@needs_bundled
def test_decode_without_a_checkpoint_uses_the_bundled_reverse_model():
    run = run_cli("decode", "3 1 4 1 5")
    assert run.exit_code == 0, run.stderr
    assert run.stdout == "5 1 4 1 3\n"


def test_decode_prints_one_prediction_per_source(tiny_ckpt):
    run = run_cli("decode", tiny_ckpt, "3 1 4", "2 7 1 8")
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 2
    assert all(token.isdigit() for line in lines for token in line.split())


def test_decode_reads_one_source_per_line_from_stdin(tiny_ckpt):
    piped = run_cli("decode", tiny_ckpt, input="3 1 4\n2 7 1 8\n")
    direct = run_cli("decode", tiny_ckpt, "3 1 4", "2 7 1 8")
    assert piped.exit_code == 0, piped.stderr
    assert piped.stdout == direct.stdout


def test_decode_json_has_source_prediction_top_k_and_cross_attention(tiny_ckpt):
    run = run_cli("decode", tiny_ckpt, "3 1 4 1", "--json", "--top-k", "3")
    assert run.exit_code == 0, run.stderr
    result = json.loads(run.stdout)["results"][0]
    assert result["source"] == "3 1 4 1" and result["expected"] == "1 4 1 3"
    steps = result["steps"]
    assert all(len(step["top_k"]) == 3 for step in steps)
    assert all(step["top_k"][0]["token"] == step["token"] for step in steps)  # greedy
    cross = result["cross_attention"]  # [layer][head][step][source position]
    assert len(cross) == 1 and len(cross[0]) == 2
    for grid in cross[0]:
        assert len(grid) == len(steps)
        for row in grid:
            assert len(row) == 4 and abs(sum(row) - 1.0) < 1e-4


def test_decode_attention_draws_a_grid_for_every_layer_and_head(tiny_ckpt):
    run = run_cli("decode", tiny_ckpt, "3 1 4 1", "--attention", "--numbers")
    assert run.exit_code == 0, run.stderr
    assert "L1 H1" in run.stdout and "L1 H2" in run.stdout and "L2" not in run.stdout
    assert "source" in run.stdout and "prediction" in run.stdout
    assert "." in run.stdout  # the weights, printed as .NN


def test_decode_outside_the_training_lengths_warns_but_decodes(tiny_ckpt):
    run = run_cli("decode", tiny_ckpt, "1 2 3 4 5 6 7 8 9")  # trained on 3-6
    assert run.exit_code == 0, run.stderr
    assert "outside the lengths 3-6" in run.stderr and run.stdout.strip()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["no-such-model", "1 2 3"], "unknown checkpoint"),
        (["missing/file.safetensors", "1 2 3"], "no such file"),
        (["3 x 1"], "'x' is not a token"),
        (["3 <eos> 1"], "special token"),
        (["   "], "empty"),
        (["\t\n"], "empty"),
        (["３ １ ４"], "not a token"),  # full-width digits are not the vocabulary's digits
        (["1" * 10_000], "far too long"),
        (["1 2 " * 3000], "far too long"),
    ],
)
def test_bad_decode_inputs_give_a_one_line_error(args, fragment):
    message = assert_one_line_error(run_cli("decode", *args))
    assert fragment in message and len(message) < 320


def test_bad_source_tokens_for_a_given_checkpoint_are_one_line_errors(tiny_ckpt):
    assert "not a token" in assert_one_line_error(run_cli("decode", tiny_ckpt, "1 2 a"))
    too_long = " ".join("7" * 70)
    assert "at most" in assert_one_line_error(run_cli("decode", tiny_ckpt, too_long))


def test_corrupt_checkpoint_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    assert "bad.safetensors" in assert_one_line_error(run_cli("decode", str(bad), "1 2 3"))
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(b"")
    assert "not a safetensors file" in assert_one_line_error(run_cli("eval", str(empty)))


def test_decode_attention_on_a_colour_terminal_paints_cells_without_numbers(tiny_ckpt):
    colour = {"FORCE_COLOR": "1", "COLORTERM": "truecolor"}
    run = run_cli("decode", tiny_ckpt, "3 1 4 1", "--attention", env=colour)
    assert run.exit_code == 0, run.stderr
    assert re.search(r"48;2;\d+;\d+;\d+m", run.stdout)  # true-colour cell backgrounds
    assert " .0" not in run.stdout and " .1" not in run.stdout  # the colour carries the value


def test_without_enough_colour_the_attention_grid_prints_its_numbers(tiny_ckpt):
    for env in ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, {"FORCE_COLOR": "1", "TERM": "xterm"}):
        run = run_cli("decode", tiny_ckpt, "3 1 4 1", "--attention", env=env)
        assert run.exit_code == 0, run.stderr
        assert re.search(r" \.\d\d| 1\.0", run.stdout), env  # the weights themselves


def test_a_mistyped_source_alone_is_told_it_is_neither_checkpoint_nor_source():
    run = run_cli("decode", "3,1,4")
    message = assert_one_line_error(run)
    assert "neither a checkpoint" in message and "not a token" in message
    assert run.exit_code == 2


def test_a_bad_source_is_a_usage_error(tiny_ckpt):
    assert run_cli("decode", tiny_ckpt, "1 2 a").exit_code == 2


def test_a_decode_that_reaches_the_length_cap_says_so(tmp_path):
    import torch

    from minitx.core.checkpoint import save_checkpoint
    from minitx.core.config import ModelConfig
    from minitx.core.data.tasks import get_task
    from minitx.core.model.transformer import Seq2Seq

    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=16))
    with torch.no_grad():  # a model that never ends: EOS is always the least likely token
        model.output.bias[model.cfg.eos_id] = -100
    path = save_checkpoint(tmp_path / "endless.safetensors", model, get_task("reverse"))
    run = run_cli("decode", str(path), "1 2 3 4")
    assert run.exit_code == 0 and "length cap" in run.stderr


def test_top_k_without_json_lists_each_steps_likeliest_tokens_under_the_output():
    run = run_cli("decode", "reverse", "31415", "--top-k", "3")
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "5 1 4 1 3" and lines[1].startswith("  step 1: 5 1.00 · ")
    assert len(lines) == 1 + 6 and all(line.count(" · ") == 2 for line in lines[1:])  # 5 digits, <eos>
    assert run_cli("decode", "reverse", "31415").stdout.splitlines() == ["5 1 4 1 3"]  # not asked for


@needs_bundled
def test_piped_blank_lines_each_get_an_empty_output_line_so_outputs_line_up_with_inputs():
    piped = "3 1 4 1\n\n2 7 1 8\n   \n5 6 7 9\n"
    run = run_cli("decode", "reverse", input=piped)
    assert run.exit_code == 0, run.stderr
    assert run.stdout.split("\n")[:5] == ["1 4 1 3", "", "8 1 7 2", "", "9 7 6 5"]
    data = json.loads(run_cli("decode", "reverse", "--json", input=piped).stdout)["results"]
    assert [(r["source"], r.get("blank", False), r["prediction"]) for r in data] == [
        ("3 1 4 1", False, "1 4 1 3"), ("", True, ""), ("2 7 1 8", False, "8 1 7 2"), ("", True, ""),
        ("5 6 7 9", False, "9 7 6 5")]
    beams = json.loads(run_cli("decode", "reverse", "--beams", "2", "--json", input=piped).stdout)["results"]
    assert [r.get("blank", False) for r in beams] == [False, True, False, True, False]
    only_blank = assert_one_line_error(run_cli("decode", "reverse", input="\n  \n"))
    assert "no sources on stdin" in only_blank
