"""Forcing tokens, teacher-forced stepping, the logit lens and the next-token distribution."""

import math

import pytest
import torch

from minitx import checkpoints
from minitx.core.data.vocab import DIGITS
from minitx.core.interp.decode import Stepper, first_wrong_step
from minitx.core.interp.interventions import ablation
from minitx.core.interp.lens import logit_lens

EOS, SOS = DIGITS.eos, DIGITS.sos  # the digit tasks' ids

SOURCE = [3, 1, 4, 1, 5]


@pytest.fixture(scope="module")
def reverse():
    return checkpoints.load("reverse")


def greedy_continuation(model, src, prefix, steps):
    """Greedy tokens after `prefix` (outputs so far), one full forward per step."""
    tokens = list(prefix)
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([src]), torch.tensor([[SOS] + tokens]))[0, -1]
            tokens.append(int(logits.argmax()))
            if tokens[-1] == EOS:
                break
    return tokens


def test_a_forced_token_is_kept_and_decoding_continues_greedily_from_it(reverse):
    stepper = Stepper(reverse.model, SOURCE, vocab=DIGITS)
    stepper.run()
    stepper.position = 2  # at output position 1 (the '1' of 5 1 4 1 3)
    forced = stepper.force(7)
    assert forced.token == 7 and forced.predicted == 1 and forced.forced
    stepper.run()
    assert stepper.tokens[:2] == [5, 7]
    assert stepper.tokens == greedy_continuation(reverse.model, SOURCE, [5, 7], 10)
    assert stepper.forced == {1: 7}


def test_forcing_before_the_first_step_or_outside_the_vocabulary_is_refused(reverse):
    stepper = Stepper(reverse.model, SOURCE, vocab=DIGITS)
    with pytest.raises(ValueError, match="step once"):
        stepper.force(3)
    stepper.step()
    with pytest.raises(ValueError, match="not in the vocabulary"):
        stepper.force(99)


def test_teacher_forcing_feeds_the_target_and_records_what_the_model_would_say(reverse):
    target = [9, 9, 9, 9, 9, EOS]  # wrong on purpose: every step is fed a 9
    stepper = Stepper(reverse.model, SOURCE, teacher=target, vocab=DIGITS)
    results = stepper.run()
    assert stepper.tokens == target and stepper.finished
    with torch.no_grad():
        logits = reverse.model(torch.tensor([SOURCE]), torch.tensor([[SOS] + target[:-1]]))[0]
    assert [r.predicted for r in results] == logits.argmax(-1).tolist()
    assert results[0].predicted == 5 and results[0].forced


def test_the_last_layers_lens_is_the_models_own_prediction(reverse):
    lens = logit_lens(reverse.model, SOURCE)
    with torch.no_grad():
        logits = reverse.model(torch.tensor([SOURCE]), torch.tensor([lens.decoder_input]))[0]
    assert torch.allclose(lens.log_probs[-1], logits.log_softmax(-1), atol=1e-6)
    stepper = Stepper(reverse.model, SOURCE, vocab=DIGITS)
    for result, row in zip(stepper.run(), lens.log_probs[-1]):
        assert torch.allclose(result.lens[-1], result.log_probs, atol=1e-6)
        assert torch.allclose(result.log_probs, row, atol=1e-5)  # cached steps, the same lens
    assert [top[0][0] for top in lens.top(1)[-1]] == [5, 1, 4, 1, 3, EOS]


def test_the_first_layers_lens_differs_from_the_last(reverse):
    lens = logit_lens(reverse.model, SOURCE)
    assert not torch.allclose(lens.log_probs[0], lens.log_probs[-1], atol=1e-2)


def test_interventions_reach_the_steppers_lens_and_grids(reverse):
    plain = Stepper(reverse.model, SOURCE, vocab=DIGITS)
    blind = Stepper(reverse.model, SOURCE, interventions=ablation(reverse.model, ["cross:L2"]), vocab=DIGITS)
    plain.run(), blind.run()
    assert plain.tokens != blind.tokens
    assert not torch.allclose(plain.results[0].lens, blind.results[0].lens)


def test_entropy_and_log_probabilities_describe_the_whole_distribution(reverse):
    result = Stepper(reverse.model, SOURCE, vocab=DIGITS).step()
    assert torch.allclose(result.log_probs.exp().sum(), torch.tensor(1.0))
    assert 0.0 <= result.entropy < 0.1  # a trained model is sure
    assert math.log(result.top_k[0][1]) == pytest.approx(float(result.log_probs[5]), abs=1e-6)
    stepper = Stepper(reverse.model, SOURCE, interventions=ablation(reverse.model, ["cross"]), vocab=DIGITS)
    assert stepper.step().entropy > 0.5  # blind to the source: unsure


def test_encoder_self_attention_is_recorded_once_per_source(reverse):
    stepper = Stepper(reverse.model, SOURCE, vocab=DIGITS)
    grid = stepper.encoder_attention_grid(1, 2)
    assert grid.shape == (5, 5)
    assert torch.allclose(grid.sum(-1), torch.ones(5), atol=1e-5)


@pytest.mark.parametrize("generated, expected, step", [
    ([5, 1, 4, 1, 3, EOS], [5, 1, 4, 1, 3, EOS], None),
    ([5, 1, 9, 1, 3, EOS], [5, 1, 4, 1, 3, EOS], 2),
    ([5, 1, 4, EOS], [5, 1, 4, 1, 3, EOS], 3),
    ([5, 1, 4, 1, 3, 3], [5, 1, 4, 1, 3, EOS], 5),
    ([5, 1, 4, 1, 3], [5, 1, 4, 1, 3, EOS], 5)])
def test_the_first_wrong_step_is_where_the_output_first_differs(generated, expected, step):
    assert first_wrong_step(generated, expected, EOS) == step


def test_a_step_the_generation_settings_force_says_where_and_keeps_the_models_own_distribution(reverse):
    import dataclasses

    own = reverse.model.generation
    reverse.model.generation = dataclasses.replace(own, forced_eos=EOS, max_length=4)  # 3 tokens at most
    try:
        results = Stepper(reverse.model, SOURCE, vocab=DIGITS).run()
    finally:
        reverse.model.generation = own
    assert [r.token for r in results] == [5, 1, EOS]
    assert [r.settings_forced for r in results] == ["", "", "last step"]
    last = results[-1]
    assert not last.forced  # not a token a person forced: the settings' own rule
    assert int(last.log_probs.argmax()) == 4 and last.log_probs[EOS] < -5  # the model wanted its 4
    assert last.entropy == pytest.approx(float(-(last.log_probs.exp() * last.log_probs).sum()))


def test_entropy_is_never_below_zero_where_rounding_makes_a_certain_step_slightly_negative():
    from minitx.core.interp.decode import StepResult

    certain = StepResult(0, 5, "5", [(5, 1.0)], torch.zeros(0), torch.zeros(0), False,
                         log_probs=torch.tensor([1e-7, -40.0]))  # float32's log_softmax can give +1e-7
    assert certain.entropy == 0.0 and f"{certain.entropy:.3f}" == "0.000"
