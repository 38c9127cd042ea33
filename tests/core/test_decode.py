import pytest
import torch

from core.config import ModelConfig
from core.decode import Stepper, exact_match, greedy_decode
from core.model import Seq2Seq
from core.tasks import EOS, PAD, get_task


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


def test_kv_cache_logits_match_full_forward(model):
    src = torch.tensor([[3, 1, 4, 1, 5]])
    prefix = torch.tensor([[11, 5, 1, 4]])
    with torch.no_grad():
        full = model(src, prefix)[0]  # (T, V)
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.decode_step(prefix[:, t : t + 1], t, memory, src_mask, cache)[0]
                 for t in range(prefix.shape[1])]
    assert torch.allclose(torch.stack(steps), full, atol=1e-5)


def test_greedy_decoding_stops_at_eos_and_pads_after_it():
    model = Seq2Seq(ModelConfig()).eval()
    with torch.no_grad():  # bias the generator so EOS always wins: decoding must stop at once
        model.generator.bias.fill_(-100)
        model.generator.bias[EOS] = 100
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
        stepper = Stepper(model, src_ids)
        stepped = [r.token for r in stepper.run()]
        single = greedy_decode(model, torch.tensor([src_ids]))[0].tolist()
        assert stepped == [t for t in single if t != PAD][: len(stepped)]
        assert len(greedy[row]) >= 1


def test_stepper_reports_topk_and_attention_rows(model):
    stepper = Stepper(model, [3, 1, 4, 1, 5], top_k=3)
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
    stepper = Stepper(model, [9, 8, 7])
    first, second = stepper.step(), stepper.step()
    assert stepper.back() and stepper.position == 1 and stepper.tokens == [first.token]
    calls = []
    monkeypatch.setattr(model, "decode_step", lambda *a, **k: calls.append(1))
    assert stepper.step() is second
    assert calls == []
    stepper.reset()
    assert stepper.position == 0 and not stepper.back()


def test_stepper_stops_after_eos_or_cap(model):
    stepper = Stepper(model, [1, 2, 3, 4])
    results = stepper.run()
    assert stepper.finished and stepper.step() is None
    assert results[-1].is_end or len(results) == stepper.cap


def test_exact_match_counts_tokens_through_eos_only():
    expected = torch.tensor([[5, 1, EOS, PAD], [2, 2, EOS, PAD]])
    generated = torch.tensor([[5, 1, EOS, 7], [2, 3, EOS, PAD]])
    assert exact_match(generated, expected).tolist() == [True, False]
    assert exact_match(torch.tensor([[5, 1]]), torch.tensor([[5, 1, EOS]])).tolist() == [False]


def test_kv_cache_logits_match_full_forward_with_a_padded_source_batch(model):
    src = torch.tensor([[3, 1, 4, 1, 5], [2, 7, PAD, PAD, PAD]])  # second row is padded
    prefix = torch.tensor([[11, 5, 1, 4], [11, 7, 2, EOS]])
    with torch.no_grad():
        full = model(src, prefix)  # (B, T, V)
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.decode_step(prefix[:, t : t + 1], t, memory, src_mask, cache)
                 for t in range(prefix.shape[1])]  # each (B, V)
    assert torch.allclose(torch.stack(steps, dim=1), full, atol=1e-5)


def test_greedy_decode_returns_an_ordinary_tensor_and_restores_training_mode(model):
    model.train()
    out = greedy_decode(model, torch.tensor([[1, 2, 3]]))
    assert model.training
    assert not out.is_inference()  # usable later as input to anything, autograd included
    embedded = model.tgt_embed(out.clamp(max=model.cfg.vocab_size - 1)).sum()
    embedded.backward()  # would raise for an inference-mode tensor saved for backward


def test_stacked_qkv_projection_equals_three_separate_projections(model):
    attn = model.decoder[0].self_attn
    x = torch.randn(2, 5, model.cfg.d_model)
    with torch.no_grad():
        q, kv = attn.project_qkv(x, attn.stacked_qkv())
        k, v = kv
        expected = [attn.split_heads(p(x)) for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
    for got, want in zip((q, k, v), expected):
        assert torch.allclose(got, want, atol=1e-6)
