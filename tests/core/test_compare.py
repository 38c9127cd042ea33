"""Comparing two checkpoints gives the table a person expects: what differs in the configs, how
big each is, how accurate on the same sequences, how often they agree, which heads align, and
how far apart their weights are."""

import json

import pytest
import torch

from minitx.core.checkpoint import load_checkpoint, save_checkpoint
from minitx.core.compare import compare_loaded, decode_both
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.interp.decode import greedy_decode
from minitx.core.model.transformer import parameter_breakdown
from minitx.core.training.evaluation import evaluate
from minitx.core.training.trainer import Trainer

TINY = ModelConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                   max_len=16, dropout=0.0)


def train_and_save(path, model_cfg, seed, steps=150):
    cfg = TrainConfig(steps=steps, batch_size=64, lr=3e-3, warmup=20, min_source_len=2, max_source_len=4,
                      eval_every=0, device="cpu", seed=seed)
    trainer = Trainer(model_cfg, cfg)
    trainer.run()
    save_checkpoint(path, trainer.model, trainer.task, trainer.summary())
    return load_checkpoint(path)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two small checkpoints that differ in d_ff and seed, and the second's path."""
    folder = tmp_path_factory.mktemp("compare")
    a = train_and_save(folder / "a.safetensors", TINY, seed=0)
    b = train_and_save(folder / "b.safetensors", TINY.replace(d_ff=48), seed=1, steps=60)
    return a, b, folder


def test_config_differences_list_exactly_the_fields_that_differ(pair):
    a, b, _ = pair
    result = compare_loaded(a, b, n=50)
    diff = {field: (x, y) for field, x, y in result.config_diff}
    assert diff["model.d_ff"] == (64, 48)
    assert diff["training.seed"] == (0, 1)
    assert diff["training.steps"] == (150, 60)
    assert not [f for f in diff if f.startswith("model.") and f != "model.d_ff"]
    assert not [f for f in diff if f.startswith("task.")]


def test_parameter_counts_are_each_models_own(pair):
    a, b, _ = pair
    result = compare_loaded(a, b, n=50)
    assert result.a.params == parameter_breakdown(a.model)["total"]
    # d_ff 48 instead of 64, in one encoder and one decoder feed-forward: 16 fewer hidden units
    # each with 32 weights in, 32 out and one bias.
    assert result.b.params == result.a.params - 2 * (16 * 32 + 16 * 32 + 16)


def test_accuracy_is_measured_on_the_same_sequences_as_evaluate(pair):
    a, b, _ = pair
    result = compare_loaded(a, b, n=200, seed=7)
    assert result.a.accuracy == pytest.approx(evaluate(a.model, a.task, 200, seed=7).accuracy)
    assert result.b.accuracy == pytest.approx(evaluate(b.model, b.task, 200, seed=7).accuracy)
    assert result.a.accuracy > 0.2  # trained enough that the comparison means something
    assert sorted(result.a.by_length) == [2, 3, 4]


def test_agreement_counts_sequences_whose_greedy_outputs_are_identical(pair):
    a, b, _ = pair
    result = compare_loaded(a, b, n=100, seed=3)
    batch = a.task.batch(100, torch.Generator().manual_seed(3))
    out_a = [a.task.format(row) for row in greedy_decode(a.model, batch.src).tolist()]
    out_b = [b.task.format(row) for row in greedy_decode(b.model, batch.src).tolist()]
    expected = sum(x == y for x, y in zip(out_a, out_b)) / 100
    assert result.agreement == pytest.approx(expected)
    assert 0.0 <= result.agreement < 1.0


def test_a_checkpoint_compared_with_itself_agrees_fully_at_zero_distance(pair):
    a, _, _ = pair
    result = compare_loaded(a, a, n=50)
    assert result.config_diff == [] and result.unmatched == []
    assert result.agreement == 1.0
    assert result.a.alignment == result.b.alignment
    assert all(w.l2 == 0.0 for w in result.weights) and result.weight_distance == 0.0


def test_weight_distance_only_where_shapes_match(pair):
    a, b, _ = pair
    result = compare_loaded(a, b, n=20)
    distances = {w.name: w for w in result.weights}
    assert "decoder.0.ff.0.weight" in result.unmatched  # (64, 32) vs (48, 32)
    assert result.weight_distance is None  # a number over some tensors would pass for the whole
    total = len(dict(a.model.named_parameters()))
    assert len(result.unmatched) == 6  # ff.0 weight and bias, ff.3 weight, in both layers
    assert result.weights_compared == f"{total - 6} of {total} tensors"
    name = "decoder.0.cross_attn.q_proj.weight"
    x = dict(a.model.named_parameters())[name].detach()
    y = dict(b.model.named_parameters())[name].detach()
    assert distances[name].l2 == pytest.approx(float((x - y).norm()), rel=1e-5)
    assert distances[name].relative == pytest.approx(float((x - y).norm() / x.norm()), rel=1e-5)


def test_alignment_scores_have_one_row_per_layer_and_one_entry_per_head(pair):
    a, _, _ = pair
    report = compare_loaded(a, a, n=30).a
    assert len(report.alignment) == 1 and len(report.alignment[0]) == 2
    layer, head, score = report.best_head
    assert score == max(report.alignment[0]) and 0.0 <= score <= 1.0


def test_comparison_serialises_to_json(pair):
    a, b, folder = pair
    result = compare_loaded(a, b, n=30, names=(str(folder / "a.safetensors"), "b"))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["a"]["name"].endswith("a.safetensors")
    assert {"field": "model.d_ff", "a": 64, "b": 48} in data["config_diff"]
    assert set(data["a"]["by_length"]) <= {"2", "3", "4"}
    assert data["weight_distance"] is None and data["weights_compared"] == result.weights_compared


def test_decode_both_shows_each_output_next_to_its_expected_one(pair):
    a, b, _ = pair
    row = decode_both(a, b, "1 2 3")
    assert row["source"] == "1 2 3" and row["expected_a"] == row["expected_b"] == "3 2 1"
    assert set(row) == {"source", "a", "b", "expected_a", "expected_b"}
