"""Source attribution (core/interp/source_attribution.py): ig and ixg equal captum's on the same
model function, occlusion equals a loop of plain forward passes, the objective is what the greedy
decode computed (a decoder without the causal mask too), and on the bundled reverse model the
methods find the mirrored source position where they do (ixg does not: docs/interventions.md)."""

from __future__ import annotations

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import ModelConfig
from minitx.core.data.vocab import DIGITS
from minitx.core.interp import source_attribution
from minitx.core.interp.decode import Stepper
from minitx.core.interp.source_attribution import (
    Cancelled,
    Decode,
    SourceFunction,
    agreement,
    attribute,
    attribute_step,
    batch_count,
    gauss_legendre,
    greedy,
    rollout,
    spearman,
    target_id,
    task_examples,
)
from minitx.core.model.hooks import hooks_active
from minitx.core.model.transformer import Seq2Seq

SOURCE = [3, 1, 4, 1, 5, 9]


def tiny(**options) -> Seq2Seq:
    torch.manual_seed(3)
    shape = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_encoder_layers": 1, "n_decoder_layers": 2,
             "max_len": 16}
    cfg = ModelConfig(**{**shape, **options})
    return Seq2Seq(cfg).eval()


def tiny_decode(model: Seq2Seq) -> Decode:
    stepper = Stepper(model, SOURCE, cap=5, vocab=DIGITS)
    stepper.run()
    return Decode.of_stepper(stepper)


@pytest.fixture(scope="module")
def reverse():
    return checkpoints.load("reverse")


# -- against captum --------------------------------------------------------------------------------
@pytest.mark.parametrize("one_row_a_batch", [False, True])
def test_integrated_gradients_equal_captums_with_the_same_steps_and_method(one_row_a_batch, monkeypatch):
    """Also when every row (a step at one point of the path) goes through the model alone, as a
    big model's long decode does."""
    from captum.attr import IntegratedGradients

    if one_row_a_batch:
        monkeypatch.setattr(source_attribution, "BATCH_FLOATS", 1)
    model = tiny()
    decode = tiny_decode(model)
    ours = attribute(model, decode, "ig", ig_steps=16)
    f = SourceFunction(model, decode.src, decode.tokens)
    inputs, baseline = f.token_vectors()[None], f.filled(model.cfg.source_pad_id)[None]  # (1, S, d)
    ig = IntegratedGradients(f)
    for t in range(len(decode.tokens)):
        theirs, gap = ig.attribute(inputs, baselines=baseline, target=t, n_steps=16, method="gausslegendre",
                                   return_convergence_delta=True)
        assert torch.allclose(ours.scores[t], theirs.sum(dim=-1)[0], atol=1e-4, rtol=0)
        assert abs(float(ours.delta[t]) - float(gap)) < 1e-4  # the same completeness gap
    assert ours.scores.abs().max() > 1e-3  # not trivially equal: something is attributed


def test_input_x_gradient_equals_captums():
    from captum.attr import InputXGradient

    model = tiny()
    decode = tiny_decode(model)
    ours = attribute(model, decode, "ixg")
    f = SourceFunction(model, decode.src, decode.tokens)
    ixg = InputXGradient(f)
    for t in range(len(decode.tokens)):
        theirs = ixg.attribute(f.token_vectors()[None].clone().requires_grad_(True), target=t)
        assert torch.allclose(ours.scores[t], theirs.sum(dim=-1)[0].detach(), atol=1e-5, rtol=0)


def test_gauss_legendre_integrates_polynomials_of_degree_up_to_2n_minus_1_on_0_1():
    alphas, weights = gauss_legendre(4)
    assert torch.all((alphas > 0) & (alphas < 1)) and abs(float(weights.sum()) - 1) < 1e-12
    for degree in range(8):  # exact for degree <= 7 with 4 points
        assert abs(float((weights * alphas ** degree).sum()) - 1 / (degree + 1)) < 1e-12


# -- occlusion and the objective --------------------------------------------------------------------
def direct_log_probs(model: Seq2Seq, src: list[int], tokens: list[int], vectors: torch.Tensor):
    """One plain teacher-forced forward with the source's token vectors replaced: (T, V) log p."""
    tgt_in = torch.tensor([[model.cfg.sos_id, *tokens[:-1]]])
    with torch.no_grad(), hooks_active({model.src_embed: lambda x, offset: vectors[None]}):
        return model(torch.tensor([src]), tgt_in).log_softmax(dim=-1)[0]


def occluded_loop(model: Seq2Seq, decode: Decode, filler: int, target: int | None = None) -> torch.Tensor:
    """(T, S): the drop of each step's objective, one forward pass per occluded position."""
    table, steps = model.src_embed.weight.detach(), torch.arange(len(decode.tokens))

    def objective(ids):
        lp = direct_log_probs(model, decode.src, decode.tokens, table[ids])
        chosen = lp[steps, torch.tensor(decode.tokens)]
        return chosen if target is None else chosen - lp[:, target]

    intact = objective(decode.src)
    columns = []
    for j in range(len(decode.src)):
        ids = list(decode.src)
        ids[j] = filler
        columns.append(intact - objective(ids))
    return torch.stack(columns, dim=1)


@pytest.mark.parametrize("filler", [10, 7])  # <pad>, and another token's vector
def test_occlusion_equals_a_loop_of_forward_passes_one_position_at_a_time(filler):
    model = tiny()
    decode = tiny_decode(model)
    ours = attribute(model, decode, "occlusion", filler=filler).scores  # (T, S)
    assert torch.allclose(ours, occluded_loop(model, decode, filler), atol=1e-5, rtol=0)


@pytest.mark.parametrize("bug", ["", "no-causal-mask"])
def test_the_objective_is_the_log_probability_the_greedy_decode_computed(bug):
    """Teacher-forced on the greedy output, each step's objective is what the Stepper saw at that
    step; a decoder that sees later positions is fed only the prefix it had."""
    model = tiny(bug=bug)
    stepper = Stepper(model, SOURCE, cap=5, vocab=DIGITS)
    results = stepper.run()
    f = SourceFunction(model, SOURCE, [r.token for r in results])
    with torch.no_grad():
        objective = f(f.token_vectors()[None])[0]  # (T,)
    decoded = torch.tensor([float(r.log_probs[r.token]) for r in results])
    assert torch.allclose(objective, decoded, atol=1e-5)


def test_a_contrast_target_attributes_the_difference_of_two_log_probabilities():
    model = tiny()
    decode = tiny_decode(model)
    contrast = attribute(model, decode, "occlusion", target=7).scores
    assert torch.allclose(contrast, occluded_loop(model, decode, 10, target=7), atol=1e-5, rtol=0)
    assert not torch.allclose(contrast, attribute(model, decode, "occlusion").scores, atol=1e-3)
    ig = attribute(model, decode, "ig", target=7)
    direct = direct_log_probs(model, decode.src, decode.tokens, model.src_embed.weight.detach()[decode.src])
    baseline = direct_log_probs(model, decode.src, decode.tokens,
                                model.src_embed.weight.detach()[[10] * len(decode.src)])
    steps, tokens = torch.arange(len(decode.tokens)), torch.tensor(decode.tokens)
    change = (direct[steps, tokens] - direct[:, 7]) - (baseline[steps, tokens] - baseline[:, 7])
    assert torch.allclose(ig.change, change, atol=1e-5)


@pytest.mark.parametrize("bug", ["", "no-causal-mask"])
def test_one_step_after_a_prefix_is_attributed_against_a_contrast_token_as_the_log_probabilities_by_hand(bug):
    """A beam hypothesis where it parts from greedy: its token after the shared prefix against
    greedy's token there. The objective is the two log-probabilities by hand; ig's change is that
    minus the same with an all-<pad> source, occlusion is a loop of forward passes, and each method's
    row is the one the whole-decode attribution gives that step."""
    model = tiny(bug=bug)
    decode = tiny_decode(model)
    prefix, greedys = decode.tokens[:2], decode.tokens[2]
    token = next(t for t in (4, 5, 6) if t != greedys)  # a token greedy did not take there
    tokens = [*prefix, token]
    table = model.src_embed.weight.detach()
    direct = direct_log_probs(model, SOURCE, tokens, table[SOURCE])[2]  # (V,) at the step
    baseline = direct_log_probs(model, SOURCE, tokens, table[[10] * len(SOURCE)])[2]
    margin = float(direct[token] - direct[greedys])

    ig = attribute_step(model, SOURCE, prefix, token, "ig", target=greedys, ig_steps=16)
    assert ig.step == 2 and ig.scores.shape == (1, len(SOURCE)) and ig.tokens == tokens
    assert abs(float(ig.value[0]) - margin) < 1e-5
    assert abs(float(ig.change[0]) - (margin - float(baseline[token] - baseline[greedys]))) < 1e-5
    assert abs(float(ig.scores.sum() - ig.change[0] - ig.delta[0])) < 1e-5
    occluded = attribute_step(model, SOURCE, prefix, token, "occlusion", target=greedys)
    one_step = Decode(SOURCE, tokens, None, torch.zeros(0))
    by_hand = occluded_loop(model, one_step, 10, target=greedys)[2]
    assert torch.allclose(occluded.scores[0], by_hand, atol=1e-5)
    ixg = attribute_step(model, SOURCE, prefix, token, "ixg", target=greedys)
    for method, ours in (("ig", ig), ("ixg", ixg)):
        whole = attribute(model, one_step, method, target=greedys, ig_steps=16)
        assert torch.allclose(ours.scores[0], whole.scores[2], atol=1e-5, rtol=0)
    assert ig.scores.abs().max() > 1e-3  # something is attributed
    with pytest.raises(ValueError, match="attention rows are where heads look"):
        attribute_step(model, SOURCE, prefix, token, "attention", target=greedys)


def test_tied_source_and_target_embeddings_change_nothing():
    """A model whose two embedding tables share one weight (as some imported models do): the
    inputs are the source's looked-up vectors all the same."""
    model = tiny()
    decode = tiny_decode(model)
    untied = attribute(model, decode, "ixg").scores
    with torch.no_grad():
        model.tgt_embed.weight.copy_(model.src_embed.weight)
    same_values = attribute(model, decode, "ixg").scores
    model.tgt_embed.weight = model.src_embed.weight  # now one tensor
    tied = attribute(model, decode, "ixg").scores
    assert torch.allclose(same_values, tied, atol=1e-6)
    assert not torch.allclose(untied, tied)  # the tables' values do matter


# -- attention -------------------------------------------------------------------------------------
def test_rollout_follows_the_residual_through_each_sublayer():
    T, S = 2, 3
    self_rows = torch.tensor([[1.0, 0.0], [0.5, 0.5]])  # (T, T): causal rows over decoder inputs
    cross = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # (T, S)
    # one layer, one head: self-attention mixes nothing into an empty X, then X = 0.5 C
    one = rollout(cross[:, None, None], self_rows[:, None, None])
    assert torch.allclose(one, 0.5 * cross)
    # two layers, two heads whose mean is the rows above
    heads = lambda rows: torch.stack([rows + 0.1, rows - 0.1], dim=1)  # noqa: E731  (T, 2, k)
    two = rollout(torch.stack([heads(cross)] * 2, dim=1), torch.stack([heads(self_rows)] * 2, dim=1))
    A = 0.5 * torch.eye(T) + 0.5 * self_rows
    assert torch.allclose(two, 0.5 * (A @ (0.5 * cross)) + 0.5 * cross)
    assert torch.all(two.sum(-1) < 1)  # the rest of each row came from the decoder's inputs
    assert two.shape == (T, S)


def test_spearman_gives_ties_their_average_rank():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 3.0], [2.0, 2.0, 2.0, 2.0]])
    b = torch.tensor([[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    rho = spearman(a, b)
    assert abs(float(rho[0]) + 1) < 1e-12
    # ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4): Pearson of the ranks
    assert abs(float(rho[1]) - 0.9486832980505138) < 1e-12
    assert torch.isnan(rho[2])  # a constant row has no order


def test_a_target_is_read_as_the_vocabulary_spells_it_and_refused_otherwise():
    assert target_id(DIGITS, "7") == 7 and target_id(DIGITS, "<eos>") == DIGITS.eos
    for bad in ("x", "<pad>", "<sos>", "12"):
        with pytest.raises(ValueError, match="not a token this model outputs"):
            target_id(DIGITS, bad)


# -- the bundled reverse model ---------------------------------------------------------------------
def mirrored_hits(model, task, examples, method: str, **options) -> tuple[int, int]:
    """(steps whose largest attribution is where the task says the output comes from, digit steps)."""
    hits = count = 0
    for example in examples:
        decode = greedy(model, task, example.src)
        scores = attribute(model, decode, method, **options).scores
        n = len(example.src)
        for step in range(min(n, len(decode.tokens))):  # the digit steps: output i copies n-1-i
            assert bool(example.expected[step, n - 1 - step])  # the task's alignment is the mirror
            hits += int(scores[step].argmax()) == n - 1 - step
            count += 1
    return hits, count


@pytest.mark.parametrize(("method", "options"), [("ig", {}), ("occlusion", {}),
                                                 ("attention", {"view": "rollout"})])
def test_on_the_bundled_reverse_model_the_mirrored_source_position_gets_the_largest_attribution(
        reverse, method, options):
    examples = task_examples(reverse.task, 12, seed=2024)
    hits, count = mirrored_hits(reverse.model, reverse.task, examples, method, **options)
    assert count >= 60 and hits / count >= 0.95, (method, hits, count)


def test_the_agreement_table_counts_what_a_direct_count_does(reverse):
    examples = task_examples(reverse.task, 6, seed=7)
    table = agreement(reverse.model, reverse.task, examples, "occlusion")
    hits, count = mirrored_hits(reverse.model, reverse.task, examples, "occlusion")
    assert set(table.expected) == {"occlusion", "rollout"}  # the method is occlusion itself
    assert table.expected["occlusion"].steps == count
    assert abs(table.expected["occlusion"].argmax - hits / count) < 1e-12
    names = [row.name for row in table.rows]
    assert names[:2] == ["cross:L1.H1", "cross:L1.H2"] and names[-3:] == ["cross:L1", "cross:L2", "rollout"]
    assert len(names) == 2 * 4 + 2 + 1
    assert table.reference.argmax == 1.0 and abs(table.reference.rank - 1.0) < 1e-9  # occlusion itself
    layer2 = next(r for r in table.rows if r.name == "cross:L2")
    layer1 = next(r for r in table.rows if r.name == "cross:L1")
    assert layer2.argmax > layer1.argmax  # the heads that do the copying agree more


def test_a_cross_attention_that_reads_the_decoder_leaves_nothing_to_attribute_and_no_attention_to_show():
    """The swap-cross variant: no path from the source to the output, so every attribution is
    exactly 0, and its cross-attention rows are over decoder positions, not the source."""
    from minitx.core.data.tasks import get_task

    model = tiny(bug="swap-cross")
    decode = tiny_decode(model)
    assert decode.cross is None
    for method in ("ig", "ixg", "occlusion"):
        assert torch.count_nonzero(attribute(model, decode, method).scores) == 0
    with pytest.raises(ValueError, match="reads the decoder, not the source"):
        attribute(model, decode, "attention")
    with pytest.raises(ValueError, match="reads the decoder, not the source"):
        agreement(model, get_task("reverse"), [], "ig")


# -- memory: rows in batches ---------------------------------------------------------------------------
LONG = 60  # steps of the long decode (a tiny model of 64 positions)


def long_decode(model: Seq2Seq, steps: int = LONG) -> Decode:
    """A teacher-forced decode of `steps` digits (no attention rows: the objective methods read none)."""
    torch.manual_seed(11)
    return Decode(SOURCE, torch.randint(0, 10, (steps,)).tolist(), None, torch.zeros(0))


def batch_shapes(model: Seq2Seq) -> tuple[list, object]:
    """The (rows, decoder positions) of every batch the model is called with, and the hook's handle."""
    seen: list[tuple[int, int]] = []
    handle = model.decoder[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[:2]))
    return seen, handle


@pytest.mark.parametrize("bug", ["", "no-causal-mask"])
def test_every_method_on_a_long_decode_calls_the_model_in_batches_that_fit_the_budget(bug, monkeypatch):
    """A long decode's rows (each step at each interpolation point, each occluded source) go
    through the model in batches no bigger than BATCH_FLOATS whatever the decode's length, and the
    attributions are those of one batch of every row."""
    model = tiny(bug=bug, max_len=64)
    decode = long_decode(model)
    budget = 6 * source_attribution.row_floats(model, len(SOURCE), LONG, 1)
    for method in ("ig", "ixg", "occlusion"):
        whole = attribute(model, decode, method, ig_steps=4)  # the default budget: one batch here
        assert batch_count(model, len(SOURCE), LONG, method, ig_steps=4) == 1
        monkeypatch.setattr(source_attribution, "BATCH_FLOATS", budget)
        seen, handle = batch_shapes(model)
        batched = attribute(model, decode, method, ig_steps=4)
        handle.remove()
        monkeypatch.undo()
        read = LONG if method == "occlusion" and model.causal else 1  # positions a row reads
        # every batch but the one-row ones fits: rows times each row's floats at its depth
        assert all(rows == 1 or rows * source_attribution.row_floats(model, len(SOURCE), positions, read)
                   <= budget for rows, positions in seen), seen
        assert max(rows for rows, _ in seen) >= 2  # batches of several rows, not one a batch
        per_source = 1 if model.causal else LONG  # rows of one vector row's every step
        assert len(seen) >= 2 and sum(rows for rows, _ in seen) == {
            "ig": 4 * LONG + 2 * per_source,  # each step at each point, then F(E) and F(E0)
            "ixg": LONG, "occlusion": (len(SOURCE) + 1) * per_source}[method]
        assert torch.allclose(batched.scores, whole.scores, atol=1e-5, rtol=0), method
        if method == "ig":
            assert torch.allclose(batched.delta, whole.delta, atol=1e-5, rtol=0)


def test_a_step_is_decoded_only_up_to_itself_and_only_the_positions_read_become_logits(monkeypatch):
    """The objective of step t feeds t + 1 decoder positions, and projects only the positions it
    reads onto the vocabulary (a big vocabulary's logits of every position are gigabytes)."""
    model = tiny(max_len=64)
    decode = long_decode(model)
    projected: list[tuple] = []
    model.output.register_forward_pre_hook(lambda module, args: projected.append(tuple(args[0].shape)))
    seen, handle = batch_shapes(model)
    attribute_step(model, decode.src, decode.tokens[:9], decode.tokens[9], "ixg")
    handle.remove()
    assert seen == [(1, 10), (1, 10)]  # the gradient's row, then F(E): ten positions, the step's prefix
    assert projected == [(1, 1, 16), (1, 1, 16)]  # one row, one position, d_model


def test_progress_counts_the_steps_and_a_true_answer_stops_at_the_next_batch(monkeypatch):
    model = tiny(max_len=64)
    decode = long_decode(model)
    monkeypatch.setattr(source_attribution, "BATCH_FLOATS",
                        4 * 4 * source_attribution.row_floats(model, len(SOURCE), LONG, 1))
    reports: list[tuple[int, int]] = []
    attribute(model, decode, "ig", ig_steps=4, progress=lambda done, total: reports.append((done, total)))
    assert reports[0] == (0, LONG) and reports[-1] == (LONG, LONG)
    assert [done for done, _ in reports] == sorted(done for done, _ in reports) and len(reports) > 5
    seen, handle = batch_shapes(model)
    with pytest.raises(Cancelled):
        attribute(model, decode, "ig", ig_steps=4, progress=lambda done, total: done > 0)
    handle.remove()
    assert len(seen) == 1  # the first batch, then it stopped
