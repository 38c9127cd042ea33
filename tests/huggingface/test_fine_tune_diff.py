"""Base against fine-tuned (core/fine_tune_diff.py): a tiny Marian folder and a copy of it with
one layer's weights changed by a known amount and one cross-attention head's queries changed,
opened blind (nothing says what changed); the report must name that layer, with |dW| / |W|
computed from transformers' own tensors, and that head, with every other head unmoved."""

from __future__ import annotations

import io
import json

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file

from minitx import checkpoints
from minitx.core.data.given_pairs import with_pairs
from minitx.core.fine_tune_diff import fine_tune_diff
from minitx.core.training.text_scores import corpus_scores
from minitx.tui.render.fine_tune_tables import changes_summary
from tests.cli.conftest import run_cli
from tests.huggingface.changed_folders import changed_copy, pairs_file
from tests.huggingface.tiny_folders import save_model
from tests.huggingface.tiny_tokenisers import corpus

LAYER = "model.decoder.layers.1."  # the decoder's second (last) layer
HEAD, HEADS, D_MODEL = 2, 4, 32  # its third cross-attention head (0-based 2): rows 16..23 of q_proj


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("fine-tune-diff")
    base = save_model(root / "base", "marian")
    width = D_MODEL // HEADS

    def change(weights) -> None:
        weights[LAYER + "fc2.weight"] = weights[LAYER + "fc2.weight"] * 1.5  # the feed-forward: +50%
        q = weights[LAYER + "encoder_attn.q_proj.weight"].clone()
        q[HEAD * width : (HEAD + 1) * width] *= 4.0  # sharper scores for that head alone
        weights[LAYER + "encoder_attn.q_proj.weight"] = q

    tuned = changed_copy(base, root / "tuned", change)
    pairs = pairs_file(root / "pairs.tsv", 12, seed=4)
    return base, tuned, pairs, root


@pytest.fixture(scope="module")
def measured(folders):
    """(A, B, their FineTuneDiff): the base and the changed copy on the 12 pairs, measured once."""
    base, tuned, pairs, _ = folders
    a, b = _opened(base, pairs), _opened(tuned, pairs)
    return a, b, fine_tune_diff(a, b)


def _opened(folder, pairs):
    ckpt = checkpoints.load(str(folder))
    ckpt.task = with_pairs(ckpt.task, pairs, ckpt.model_config.max_len)
    return ckpt


def _expected_relative(base, tuned) -> float:
    """|dW| / |W| of the changed layer, from the folders' own tensors."""
    a, b = load_file(str(base / "model.safetensors")), load_file(str(tuned / "model.safetensors"))
    names = [n for n in a if n.startswith(LAYER)]
    moved = sum(float((b[n] - a[n]).norm()) ** 2 for n in names)
    return (moved / sum(float(a[n].norm()) ** 2 for n in names)) ** 0.5


def test_the_report_names_the_layer_and_the_head_a_fine_tune_moved(folders, measured):
    base, tuned, _, _ = folders
    diff = measured[2]
    moved = diff.moved_layers(1)[0]
    assert moved.layer == "decoder layer 2"
    assert moved.relative == pytest.approx(_expected_relative(base, tuned), rel=1e-5)
    assert all(c.relative == 0.0 for c in diff.layers if c.layer != "decoder layer 2")
    head = diff.moved_heads(1)[0]
    assert (head.layer, head.head) == (2, HEAD + 1) and head.change > 0.05
    # no other head moved: its queries, keys and inputs are the base's
    assert all(c.change < 1e-6 for c in diff.heads if (c.layer, c.head) != (2, HEAD + 1))
    assert len(diff.heads) == 2 * HEADS and diff.layers_skipped is None and diff.heads_skipped is None


def test_outputs_side_by_side_with_loss_bleu_and_chrf_for_both(measured):
    diff = measured[2]
    assert diff.n == 12 and len(diff.outputs) == 12
    references = [row.reference for row in diff.outputs]
    assert references[0] == corpus(12, seed=4)[0][1]  # the pairs' own targets, in file order
    for side in ("a", "b"):
        outputs = [getattr(row, side) for row in diff.outputs]
        scores = corpus_scores(outputs, references)
        assert getattr(diff, side).bleu == scores.bleu and getattr(diff, side).chrf == scores.chrf
        assert getattr(diff, side).loss > 0
    assert diff.a.loss != diff.b.loss  # the fine-tune changed what the model predicts


def test_both_sides_are_scored_against_the_files_targets_as_written(folders, tmp_path):
    """Targets with characters the tokeniser cannot write: the references are the file's text
    (its round trip would drop them), and BLEU and chrF are sacrebleu's against it."""
    import sacrebleu

    from tests.huggingface.changed_folders import write_pairs

    base, tuned, _, _ = folders
    given = [(s, t + " Straße 😀") for s, t in corpus(6, seed=5)]
    pairs = write_pairs(tmp_path / "odd.tsv", given)
    diff = fine_tune_diff(_opened(base, pairs), _opened(tuned, pairs))
    raw = [t for _, t in given]
    assert [row.reference for row in diff.outputs] == raw
    for side in ("a", "b"):
        outputs = [getattr(row, side) for row in diff.outputs]
        chrf = sacrebleu.corpus_chrf(outputs, [raw]).score
        assert getattr(diff, side).chrf == pytest.approx(chrf, abs=1e-9)


def test_models_of_other_architectures_say_in_one_line_why_layers_and_heads_are_skipped(folders):
    base, _, pairs, root = folders
    other = save_model(root / "t5", "t5")
    diff = fine_tune_diff(_opened(base, pairs), _opened(other, pairs))
    for why in (diff.layers_skipped, diff.heads_skipped):
        assert why and "\n" not in why and "architectures differ" in why
    assert diff.layers == [] and diff.heads == []
    assert diff.a.bleu is not None and diff.b.bleu is not None and len(diff.outputs) == diff.n


def test_head_change_is_the_total_variation_distance_of_the_attention_rows(measured):
    a, b, diff = measured
    batch = next(a.task.evaluation_batches(12, 0, batch_size=12))
    with torch.no_grad():
        maps = [ckpt.model(batch.src, batch.decoder_input, return_attention=True)[1].cross[1][:, HEAD]
                for ckpt in (a, b)]  # (B, T, S)
    real = batch.labels != a.model_config.pad_id
    expected = (0.5 * (maps[0] - maps[1]).abs().sum(-1))[real].mean()
    assert diff.moved_heads(1)[0].change == pytest.approx(float(expected), rel=1e-5)


@pytest.mark.slow  # two whole compare commands (about 1 s)
def test_compare_prints_and_gives_as_json_which_layer_and_head_moved(folders):
    base, tuned, pairs, _ = folders
    args = ("compare", str(base), str(tuned), "--pairs", str(pairs), "--n", "6", "--threads", "1")
    data = json.loads(run_cli(*args, "--json").stdout)["changes"]
    assert data["moved_layers"][0]["layer"] == "decoder layer 2"
    assert (data["moved_heads"][0]["layer"], data["moved_heads"][0]["head"]) == (2, HEAD + 1)
    assert data["a"]["bleu"] is not None and len(data["outputs"]) == 6
    run = run_cli(*args, env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    text = run.stdout
    for heading in ("loss, BLEU and chrF", "outputs side by side", "which layers moved", "which heads moved"):
        assert heading in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_the_apps_changes_table_names_the_moved_layer_and_head_in_five_lines_of_80_columns(measured):
    diff = measured[2]
    text = changes_summary(diff, ("base", "tuned"))
    lines = text.plain.splitlines()
    assert len(lines) == 5  # the summary box's five lines
    assert lines[3].split()[2:4] == ["decoder", "layer"] and lines[3].split()[4] == "2"
    assert lines[4].split()[2:4] == ["L2", f"H{HEAD + 1}"]
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(text)
    assert all(len(line) <= 80 for line in console.export_text().splitlines())
