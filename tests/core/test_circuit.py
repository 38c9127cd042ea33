"""Circuits (core/interp/circuit.py): the reported faithfulness is what running the circuit alone
gives, checked here with nothing but mean ablation and a forward; the whole model is 1 and the
empty circuit 0; a left-out edge is mean-ablated along its path only."""

import pytest
import torch

from minitx import checkpoints
from minitx.core.interp.circuit import Circuit, CircuitRunner, Faithfulness, find_circuit
from minitx.core.interp.interventions import (
    Head,
    HeadInput,
    Interventions,
    Patch,
    Recording,
    all_heads,
    head_means,
)
from minitx.core.interp.pairs import draw_pairs
from minitx.core.interp.patching import Patcher
from minitx.core.interp.path_patching import edges_among


@pytest.fixture(scope="module")
def reverse():
    torch.set_num_threads(1)
    return checkpoints.load("reverse")


@pytest.fixture(scope="module")
def found(reverse):
    pairs = draw_pairs(reverse.task, 8, 3, reverse.model.cfg.eos_id)
    means = head_means(reverse.model, reverse.task)
    result = find_circuit(reverse.model, reverse.task, pairs, keep=0.9, accuracy_n=20, means=means)
    return pairs, means, result


def ld_with_every_other_head_mean_ablated(model, pairs, heads, means) -> float:
    """The check the circuit must pass, with no circuit code: mean-ablate every head not in
    `heads`, run the clean sources teacher-forced, and normalise the logit difference."""
    patcher = Patcher.of_pairs(model, pairs)

    def difference(kept) -> float:
        out = [h for h in all_heads(model) if h not in kept]
        ablate = Interventions(mean={h: means[(h.kind, h.layer)][h.head] for h in out})
        with torch.no_grad(), ablate.applied(model):
            return patcher.difference(model(patcher.source("clean"), patcher.decoder_input))

    empty = difference(set())
    return (difference(set(heads)) - empty) / (patcher.clean_difference - empty)


def test_the_reported_heads_faithfulness_is_what_mean_ablating_every_other_head_gives(found, reverse):
    pairs, means, result = found
    independent = ld_with_every_other_head_mean_ablated(reverse.model, pairs, result.circuit.heads, means)
    assert result.heads_faithfulness == pytest.approx(independent, abs=1e-5)
    assert result.heads_faithfulness >= 0.9 and len(result.circuit.heads) < len(all_heads(reverse.model))


def test_the_reported_faithfulness_of_heads_and_edges_is_a_direct_run_of_the_circuit(found, reverse):
    pairs, means, result = found
    faithful = Faithfulness(CircuitRunner(reverse.model, means), Patcher.of_pairs(reverse.model, pairs))
    assert result.faithfulness == pytest.approx(faithful(result.circuit), abs=1e-6)
    assert result.faithfulness >= result.keep
    assert result.circuit.edges <= set(edges_among(reverse.model, result.circuit.heads))
    assert 0 <= result.accuracy <= result.model_accuracy <= 1 and result.accuracy_n == 20


def test_the_whole_model_is_faithful_1_and_the_empty_circuit_0(found, reverse):
    pairs, means, _ = found
    faithful = Faithfulness(CircuitRunner(reverse.model, means), Patcher.of_pairs(reverse.model, pairs))
    assert faithful(Circuit.whole(reverse.model)) == pytest.approx(1.0, abs=1e-5)
    assert faithful(Circuit(frozenset(), frozenset())) == pytest.approx(0.0, abs=1e-9)


def test_leaving_out_every_key_value_edge_of_a_head_feeds_it_the_memory_of_mean_encoder_heads(reverse):
    model = reverse.model
    means = head_means(model, reverse.task)
    runner = CircuitRunner(model, means)
    receiver = HeadInput(Head("cross", 1, 2), "kv")
    whole = Circuit.whole(model)
    circuit = Circuit(whole.heads, frozenset(e for e in whole.edges if e.receiver != receiver))
    src, dec = torch.tensor([[3, 1, 4, 1, 5]]), torch.tensor([[11, 5, 1, 4, 1, 3]])
    # Independently: the memory of an encoder whose every head outputs its mean, read by that one head.
    enc_mean = Interventions(mean={h: means[(h.kind, h.layer)][h.head] for h in all_heads(model, ("enc",))})
    read = Recording(heads=False, inputs=True)
    with torch.no_grad(), enc_mean.recording(read).applied(model):
        model(src, dec)
    with torch.no_grad(), Interventions(patches=(Patch(receiver, read.head_input(receiver)),)).applied(model):
        expected = model(src, dec)
    assert torch.allclose(runner.logits(circuit, src, dec), expected, atol=1e-5)
    assert not torch.allclose(expected, model(src, dec), atol=1e-3)  # the edge mattered


def test_a_head_knocked_back_in_brings_its_edges_and_out_takes_them(reverse):
    model = reverse.model
    circuit = Circuit.whole(model, [Head("enc", 1, 0), Head("cross", 1, 0)])
    assert len(circuit.edges) == 1
    out = circuit.without_head(Head("enc", 1, 0))
    assert out.heads == {Head("cross", 1, 0)} and not out.edges
    assert out.with_head(model, Head("enc", 1, 0)) == circuit


def test_keep_outside_0_to_1_is_refused(reverse):
    with pytest.raises(ValueError, match="keep"):
        find_circuit(reverse.model, reverse.task, draw_pairs(reverse.task, 2, 0, 12), keep=1.5)
