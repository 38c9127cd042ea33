import math

import pytest
import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS
from minitx.core.model.attention import attention, masked_fill_value, padding_mask
from minitx.core.model.components import sinusoidal_table
from minitx.core.model.transformer import EncoderLayer, Seq2Seq, parameter_breakdown
from tests.core.core_helpers import fit

PAD = DIGITS.pad  # the digit tasks' padding id


def reference_batch(n=2, seed=0):
    return get_task("reverse").batch(n, torch.Generator().manual_seed(seed))


def test_default_model_has_235981_parameters_split_as_the_spec_says():
    counts = parameter_breakdown(Seq2Seq(ModelConfig()))
    assert counts == {"embeddings": 1664, "encoder layers": 99968, "decoder layers": 133504,
                      "output": 845, "total": 235981}


def test_attention_and_feed_forward_block_sizes():
    layer = EncoderLayer(ModelConfig())
    assert sum(p.numel() for p in layer.self_attn.parameters()) == 16640
    assert sum(p.numel() for p in layer.ff.parameters()) == 33088


def test_width_512_pre_norm_block_has_3152384_parameters_two_thirds_feed_forward():
    layer = EncoderLayer(ModelConfig(d_model=512, n_heads=8, d_ff=2048, norm="pre"))
    total = sum(p.numel() for p in layer.parameters())
    ff = sum(p.numel() for p in layer.ff.parameters())
    assert (total, ff) == (3152384, 2099712)
    assert round(ff / total, 3) == 0.666


def test_pre_norm_adds_final_layer_norms():
    counts = parameter_breakdown(Seq2Seq(ModelConfig(norm="pre")))
    assert counts["final norms"] == 2 * 2 * 64
    assert counts["total"] == 235981 + 256


def test_forward_pass_gives_every_expected_shape():
    model = Seq2Seq(ModelConfig()).eval()
    batch = reference_batch(2)
    S, T = batch.src.shape[1], batch.decoder_input.shape[1]
    logits, maps = model(batch.src, batch.decoder_input, return_attention=True)
    assert logits.shape == (2, T, 13)
    memory, src_mask = model.encode(batch.src)
    assert memory.shape == (2, S, 64) and src_mask.shape == (2, 1, 1, S)
    assert [w.shape for w in maps.encoder_self] == [(2, 4, S, S)] * 2
    assert [w.shape for w in maps.decoder_self] == [(2, 4, T, T)] * 2
    assert [w.shape for w in maps.cross] == [(2, 4, T, S)] * 2


def test_attention_maps_are_not_computed_unless_asked():
    model = Seq2Seq(ModelConfig())
    batch = reference_batch(2)
    out = model(batch.src, batch.decoder_input)
    assert isinstance(out, torch.Tensor)


def test_sinusoidal_table_starts_with_sin_zero_cos_one_and_is_a_buffer():
    table = sinusoidal_table(64, 64)
    assert torch.equal(table[0, 0::2], torch.zeros(32)) and torch.equal(table[0, 1::2], torch.ones(32))
    assert table[3, 2] == pytest.approx(math.sin(3 / 10000 ** (2 / 64)))
    model = Seq2Seq(ModelConfig())
    assert "positional" in model.state_dict()
    assert "positional" not in dict(model.named_parameters())


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = Seq2Seq(ModelConfig(dropout=0.0))
    tokens = torch.tensor([[3]])
    x = model.embed(tokens, "src")
    expected = model.src_embed.weight[3] * 8.0 + model.positional[0]
    assert torch.allclose(x[0, 0], expected)


def test_initial_loss_is_healthy():
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig())
    batch = get_task("reverse").batch(64, torch.Generator().manual_seed(0))
    logits = model(batch.src, batch.decoder_input)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=PAD)
    assert 2.5 < loss.item() < 3.5


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_changing_a_future_token_leaves_earlier_logits_unchanged(norm):
    model = Seq2Seq(ModelConfig(norm=norm)).eval()
    batch = reference_batch(2)
    tgt = batch.decoder_input.clone()
    changed = tgt.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 10
    with torch.no_grad():
        a, b = model(batch.src, tgt), model(batch.src, changed)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)
    assert not torch.allclose(a[:, -1], b[:, -1], atol=1e-6)


def test_earlier_outputs_have_zero_gradient_with_respect_to_future_inputs():
    model = Seq2Seq(ModelConfig(dropout=0.0)).eval()
    batch = reference_batch(1)
    tgt = batch.decoder_input
    captured = {}

    def keep(module, inputs, output):
        output.retain_grad()
        captured["emb"] = output

    handle = model.tgt_embed.register_forward_hook(keep)
    logits = model(batch.src, tgt)
    handle.remove()
    logits[0, :4].sum().backward()
    grad = captured["emb"].grad[0]  # (T, d)
    assert grad[4:].abs().max() == 0
    assert grad[:4].abs().max() > 0


def test_future_leaks_when_the_causal_mask_is_off():
    model = Seq2Seq(ModelConfig(bug="no-causal-mask")).eval()
    batch = reference_batch(2)
    changed = batch.decoder_input.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 10
    with torch.no_grad():
        a, b = model(batch.src, batch.decoder_input), model(batch.src, changed)
    assert not torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)


@pytest.mark.parametrize("masking", ["random", "causal", "padding+causal", "none"])
def test_explicit_and_fused_attention_agree_forward_and_backward(masking):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 4, 7, 16, generator=g, requires_grad=True) for _ in range(3))
    mask, causal = None, "causal" in masking
    if masking == "random":
        mask = torch.rand(3, 1, 7, 7, generator=g) > 0.3
        mask[..., 0] = True  # every row keeps a key
    elif masking == "padding+causal":
        mask = padding_mask(torch.tensor([[1] * 7, [1] * 4 + [PAD] * 3, [1] * 2 + [PAD] * 5]), PAD)
    out_e, _ = attention(q, k, v, mask, causal=causal, fused=False)
    grads_e = torch.autograd.grad(out_e.square().sum(), (q, k, v))
    out_f, _ = attention(q, k, v, mask, causal=causal, fused=True)
    grads_f = torch.autograd.grad(out_f.square().sum(), (q, k, v))
    assert torch.allclose(out_e, out_f, atol=1e-5)
    for ge, gf in zip(grads_e, grads_f):
        assert torch.allclose(ge, gf, atol=1e-5)
    if causal:  # the flag means exactly a lower-triangular mask on top of the given one
        tril = torch.ones(7, 7, dtype=torch.bool).tril()
        dense, _ = attention(q, k, v, tril if mask is None else mask & tril, fused=False)
        assert torch.allclose(out_e, dense, atol=1e-6)


def unpadded_batch(n=4, length=6):
    batch = get_task("reverse").batch(n, torch.Generator().manual_seed(0), length, length)
    assert not (batch.src == PAD).any() and not (batch.decoder_input == PAD).any()
    return batch


@pytest.mark.parametrize("padded", [True, False])
def test_explicit_and_fused_models_agree_in_training_forward_and_backward(padded):
    explicit = Seq2Seq(ModelConfig(dropout=0.0)).train()
    fused = Seq2Seq(ModelConfig(dropout=0.0, attention="fused")).train()
    fused.load_state_dict(explicit.state_dict())
    batch = reference_batch(4) if padded else unpadded_batch()
    assert (batch.src == PAD).any() == padded  # unpadded batches take the mask-free kernels
    out_e, out_f = explicit(batch.src, batch.decoder_input), fused(batch.src, batch.decoder_input)
    assert torch.allclose(out_e, out_f, atol=1e-5)
    out_e.square().sum().backward()
    out_f.square().sum().backward()
    for (name, pe), pf in zip(explicit.named_parameters(), fused.parameters()):
        assert torch.allclose(pe.grad, pf.grad, atol=1e-4), name


@pytest.mark.parametrize("padded", [True, False])
def test_inference_without_weights_equals_the_explicit_path_that_reports_them(padded):
    model = Seq2Seq(ModelConfig()).eval()  # explicit config: plain inference uses the fused kernel
    batch = reference_batch(4) if padded else unpadded_batch()
    with torch.no_grad():
        fast = model(batch.src, batch.decoder_input)
        explicit, _ = model(batch.src, batch.decoder_input, return_attention=True)
    assert torch.allclose(fast, explicit, atol=1e-5)


def test_attention_rows_sum_to_one_over_allowed_keys():
    model = Seq2Seq(ModelConfig()).train()  # dropout on: weights are reported before dropout
    batch = reference_batch(4)
    _, maps = model(batch.src, batch.decoder_input, return_attention=True)
    src_mask = padding_mask(batch.src, PAD)
    for w in maps.cross + maps.encoder_self:
        assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5)
        assert (w.masked_fill(src_mask, 0) == 0).all()  # nothing on padded keys
    for w in maps.decoder_self:
        assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5)
        assert (w.triu(diagonal=1) == 0).all()  # nothing on the future


def test_fully_masked_row_is_uniform_not_nan():
    q = k = v = torch.randn(1, 1, 3, 4)
    mask = torch.zeros(1, 1, 3, 3, dtype=torch.bool)
    out, w = attention(q, k, v, mask, need_weights=True)
    assert torch.allclose(w, torch.full_like(w, 1 / 3))
    assert torch.isfinite(out).all()
    out_f, _ = attention(q, k, v, mask, fused=True)
    assert torch.isfinite(out_f).all()


def test_mask_fill_value_does_not_overflow_float16():
    assert masked_fill_value(torch.float32) == -1e9
    fill = masked_fill_value(torch.float16)
    assert torch.isfinite(torch.tensor(fill, dtype=torch.float16) - 100)
    q = k = v = torch.randn(1, 1, 3, 4).half()
    mask = torch.tensor([[True, False, False]]).expand(3, 3)[None, None]
    _, w = attention(q.float(), k.float(), v.float(), mask, need_weights=True)
    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, fill)
    assert torch.isfinite(scores).all() and not torch.isnan(scores.float().softmax(-1)).any()
    assert torch.allclose(w[..., 0], torch.ones(1, 1, 3))


def test_masks_broadcast_with_unequal_batch_head_and_lengths():
    # batch 3, heads 2, 5 queries, 7 keys: no two axes share a size, so a wrong axis fails.
    q = torch.randn(3, 2, 5, 8)
    k = v = torch.randn(3, 2, 7, 8)
    keys = torch.tensor([[1, 2, 3, 4, 5, 6, 7], [1, 2, PAD, PAD, PAD, PAD, PAD],
                         [1, 2, 3, 4, PAD, PAD, PAD]])
    _, w = attention(q, k, v, padding_mask(keys, PAD), need_weights=True)
    assert w.shape == (3, 2, 5, 7)
    assert (w[1, :, :, 2:] == 0).all() and (w[2, :, :, 4:] == 0).all()
    assert (w[0] > 0).all()
    x = torch.randn(1, 2, 5, 8)  # causal on top of padding: query i sees real keys 0..i
    _, w = attention(x, x, x, padding_mask(torch.tensor([[1, 2, 3, PAD, PAD]]), PAD), causal=True,
                     need_weights=True)
    assert (w[0, :, 1] > 0).tolist() == [[True, True, False, False, False]] * 2
    assert (w[0, :, 4] > 0).tolist() == [[True, True, True, False, False]] * 2


def test_masks_follow_the_length_of_each_call():
    model = Seq2Seq(ModelConfig()).eval()
    short, long = reference_batch(2, seed=1), get_task("reverse", 20, 30).batch(2, torch.Generator())
    with torch.no_grad():
        assert model(short.src, short.decoder_input).shape[1] == short.decoder_input.shape[1]
        assert model(long.src, long.decoder_input).shape[1] == long.decoder_input.shape[1]


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned", "rope"])
def test_self_attention_is_permutation_equivariant_only_without_positions(encoding):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(position_encoding=encoding)).eval()
    plain = Seq2Seq(ModelConfig(position_encoding="none")).eval()
    plain.load_state_dict(model.state_dict(), strict=False)  # the same weights, no positions
    src = torch.tensor([[3, 1, 4, 1, 5, 9]])
    perm = torch.tensor([5, 2, 0, 4, 1, 3])
    with torch.no_grad():
        memory, _ = plain.encode(src)
        memory_perm, _ = plain.encode(src[:, perm])
        assert torch.allclose(memory[:, perm], memory_perm, atol=1e-5)
        memory, _ = model.encode(src)
        memory_perm, _ = model.encode(src[:, perm])
        assert not torch.allclose(memory[:, perm], memory_perm, atol=1e-3)


def test_sequence_longer_than_the_positional_table_is_refused():
    model = Seq2Seq(ModelConfig(max_len=8))
    with pytest.raises(ValueError, match="max_len=8"):
        model.encode(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.slow  # tier 2: the reference-size model, 400 steps (~8 s); tier 1 fits a small one
# (tests/core/test_diagnostics.py's overfit check, the same loop)
@pytest.mark.parametrize("dropout, limit", [(0.0, 0.01)])
def test_a_fresh_model_overfits_one_batch(dropout, limit):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(dropout=dropout))
    batch = get_task("reverse").batch(8, torch.Generator().manual_seed(0))
    assert fit(model, batch, steps=400) < limit


def test_dropout_acts_in_training_and_is_skipped_in_eval():
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(dropout=0.5))
    src, tgt = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[11, 4, 3, 2]])
    ff, x = model.decoder[0].ff, torch.randn(1, 4, model.cfg.d_model)
    model.train()
    assert not torch.equal(model(src, tgt), model(src, tgt))  # fresh dropout masks each call
    assert not torch.equal(ff(x), ff(x))
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(src, tgt), model(src, tgt))
        assert torch.equal(ff(x), ff[3](ff[1](ff[0](x))))  # eval: the plain two-layer MLP


def test_set_training_switches_every_module_as_train_and_eval_do():
    from minitx.core.model.transformer import eval_mode, set_training

    model = Seq2Seq(ModelConfig(dropout=0.5))
    src, tgt = torch.randint(0, 10, (4, 6)), torch.randint(0, 10, (4, 7))
    set_training(model, False)
    assert not any(m.training for m in model.modules())
    assert torch.equal(model(src, tgt), model(src, tgt))  # dropout is off
    set_training(model, True)
    assert all(m.training for m in model.modules())
    assert not torch.equal(model(src, tgt), model(src, tgt))  # and on again
    with eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert all(m.training for m in model.modules())
