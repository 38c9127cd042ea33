import pytest
import torch

from minitx import checkpoints
from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS, build_vocab
from minitx.core.interp.decode import Stepper, exact_match, greedy_decode
from minitx.core.model.kv_cache import IncrementalDecoder
from minitx.core.model.transformer import Seq2Seq

EOS, PAD = DIGITS.eos, DIGITS.pad


@pytest.fixture
def model():
    torch.manual_seed(3)
    return Seq2Seq(ModelConfig()).eval()


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_kv_cache_decoding_is_token_identical_to_full_recomputation(norm):
    torch.manual_seed(1)
    model = Seq2Seq(ModelConfig(norm=norm)).eval()
    batch = get_task("reverse").batch(64, torch.Generator().manual_seed(0))
    cached = greedy_decode(model, batch.src, max_new_tokens=30, use_cache=True)
    full = greedy_decode(model, batch.src, max_new_tokens=30, use_cache=False)
    assert torch.equal(cached, full)


def test_greedy_decoding_stops_at_eos_and_pads_after_it():
    model = Seq2Seq(ModelConfig()).eval()
    with torch.no_grad():  # bias the output layer so EOS always wins: decoding must stop at once
        model.output.bias.fill_(-100)
        model.output.bias[EOS] = 100
    out = greedy_decode(model, torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert out.tolist() == [[EOS], [EOS]]


def test_greedy_decoding_respects_the_length_cap(model):
    out = greedy_decode(model, torch.tensor([[1, 2, 3, 4]]), max_new_tokens=3)
    assert out.shape[1] <= 3


def test_stepper_produces_the_same_tokens_as_batched_greedy(model):
    g = torch.Generator().manual_seed(5)
    batch = get_task("reverse").batch(8, g)
    greedy = greedy_decode(model, batch.src)
    for row, n in zip(range(8), batch.lengths.tolist()):
        src_ids = batch.src[row, :n].tolist()
        stepper = Stepper(model, src_ids, vocab=DIGITS)
        stepped = [r.token for r in stepper.run()]
        single = greedy_decode(model, torch.tensor([src_ids]))[0].tolist()
        assert stepped == [t for t in single if t != PAD][: len(stepped)]
        assert len(greedy[row]) >= 1


def test_stepper_reports_topk_and_attention_rows(model):
    stepper = Stepper(model, [3, 1, 4, 1, 5], top_k=3, vocab=DIGITS)
    result = stepper.step()
    assert result.index == 0 and len(result.top_k) == 3
    probs = [p for _, p in result.top_k]
    assert probs == sorted(probs, reverse=True) and result.token == result.top_k[0][0]
    assert result.cross_attention.shape == (2, 4, 5)
    assert torch.allclose(result.cross_attention.sum(-1), torch.ones(2, 4), atol=1e-5)
    assert result.self_attention.shape == (2, 4, 1)
    second = stepper.step()
    assert second.self_attention.shape == (2, 4, 2)
    assert stepper.cross_attention_grid(1, 2).shape == (2, 5)


def test_stepping_back_replays_without_recomputation(model, monkeypatch):
    stepper = Stepper(model, [9, 8, 7], vocab=DIGITS)
    first, second = stepper.step(), stepper.step()
    assert stepper.back() and stepper.position == 1 and stepper.tokens == [first.token]
    calls = []
    monkeypatch.setattr(IncrementalDecoder, "step", lambda *a, **k: calls.append(1))
    assert stepper.step() is second
    assert calls == []
    stepper.reset()
    assert stepper.position == 0 and not stepper.back()


def test_stepper_stops_after_eos_or_cap(model):
    stepper = Stepper(model, [1, 2, 3, 4], vocab=DIGITS)
    results = stepper.run()
    assert stepper.finished and stepper.step() is None
    assert results[-1].is_end or len(results) == stepper.cap


def test_exact_match_counts_tokens_through_eos_only():
    expected = torch.tensor([[5, 1, EOS, PAD], [2, 2, EOS, PAD]])
    generated = torch.tensor([[5, 1, EOS, 7], [2, 3, EOS, PAD]])
    assert exact_match(generated, expected, eos=EOS, pad=PAD).tolist() == [True, False]
    short = exact_match(torch.tensor([[5, 1]]), torch.tensor([[5, 1, EOS]]), eos=EOS, pad=PAD)
    assert short.tolist() == [False]


def test_greedy_decode_returns_an_ordinary_tensor_and_restores_training_mode(model):
    model.train()
    out = greedy_decode(model, torch.tensor([[1, 2, 3]]))
    assert model.training
    assert not out.is_inference()  # usable later as input to anything, autograd included
    embedded = model.tgt_embed(out.clamp(max=model.cfg.vocab_size - 1)).sum()
    embedded.backward()  # would raise for an inference-mode tensor saved for backward


def test_decoding_uses_the_models_own_special_ids():
    # A character vocabulary puts PAD, SOS, EOS at 0, 1, 2: decoding must start from id 1 and
    # stop at id 2, never at the digit tasks' 11 and 12 (which are ordinary tokens here).
    vocab, _ = build_vocab({c: 1 for c in "abcdefghijklmnop"}, "char")
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(**vocab.model_fields())).eval()
    with torch.no_grad():
        model.output.bias.fill_(-100)
        model.output.bias[12] = 50  # the digits' EOS id: here the letter 'i', not the end
        model.output.bias[vocab.eos] = 100
    out = greedy_decode(model, torch.tensor([[5, 6, 7]]))
    assert out.tolist() == [[vocab.eos]]
    stepper = Stepper(model, [5, 6, 7], vocab=vocab)
    result = stepper.step()
    assert result.is_end and result.text == "<eos>" and stepper.finished


def test_a_stepper_refuses_a_vocabulary_of_another_size(model):
    vocab, _ = build_vocab({"a": 1}, "char")
    with pytest.raises(ValueError, match="vocabulary"):
        Stepper(model, [1, 2], vocab=vocab)


def test_a_model_whose_cross_attention_reads_the_decoder_steps_with_growing_rows():
    """The swap-cross bug's cross-attention reads the decoder so far: a row a position longer
    each step, shown zero-padded, never a crash (the app's Explore draws this grid)."""
    ckpt = checkpoints.load("reverse-swap-cross")
    stepper = Stepper(ckpt.model, ckpt.task.parse("3 1 4 1 5"), vocab=ckpt.task.vocab)
    results = stepper.run()
    grid = stepper.cross_attention_grid(0, 0)
    assert grid.shape == (len(results), max(5, len(results)))
    for i, r in enumerate(results):
        assert torch.equal(grid[i, : i + 1], r.cross_attention[0, 0]) and not grid[i, i + 1:].any()


def test_decoding_reports_each_step_and_stops_where_the_progress_answer_says(model):
    src = torch.tensor([[1, 2, 3, 4, 5, 6]])  # (1, S)
    whole = greedy_decode(model, src, max_new_tokens=8)
    heard = []
    greedy_decode(model, src, max_new_tokens=8, progress=lambda step, cap: heard.append((step, cap)))
    assert heard == [(t, 8) for t in range(1, whole.shape[1] + 1)]
    stopped = greedy_decode(model, src, max_new_tokens=8, progress=lambda step, cap: step == 3)
    assert stopped.shape[1] == 3 and torch.equal(stopped, whole[:, :3])
    stepper = Stepper(model, [1, 2, 3, 4, 5, 6], cap=8, vocab=DIGITS)
    assert len(stepper.run(progress=lambda step, cap: step == 2)) == 2
    assert [r.token for r in stepper.run()] == whole[0, : len(stepper.results)].tolist()
