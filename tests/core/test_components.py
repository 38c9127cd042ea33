"""The component switches: RMSNorm, learned / rotary / no positions, SwiGLU and grouped-query
attention. Each keeps the model correct (counts, fused agreement, overfitting, causality) and has
the property that defines it."""

import pytest
import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS
from minitx.core.interp.decode import Stepper
from minitx.core.model.attention import attention
from minitx.core.model.components import VARIANTS, RMSNorm, rms_norm, rotary_angles, rotate_pairs
from minitx.core.model.transformer import MultiHeadAttention, Seq2Seq, parameter_breakdown
from tests.core.core_helpers import fit
from tests.tiers import tiered


def batch_of(n=8, seed=0):
    return get_task("reverse").batch(n, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("changes, total, row, row_count", [
    ({"norm_kind": "rms"}, 235_341, "encoder layers", 99_968 - 4 * 64),  # 4 norms lose their bias
    ({"position_encoding": "learned"}, 244_173, "learned positions", 2 * 64 * 64),
    ({"position_encoding": "rope"}, 235_981, "embeddings", 1_664),  # rotations have no weights
    ({"position_encoding": "none"}, 235_981, "embeddings", 1_664),
    ({"activation": "swiglu"}, 302_541, "encoder layers", 99_968 + 2 * 16_640),  # a third linear
    ({"kv_heads": 2}, 211_021, "decoder layers", 133_504 - 4 * 4_160),  # K, V half as wide
])
def test_each_switch_gives_its_documented_parameter_count(changes, total, row, row_count):
    counts = parameter_breakdown(Seq2Seq(ModelConfig(**changes)))
    assert counts["total"] == total
    assert counts[row] == row_count


def test_block_counts_of_the_swaps_and_the_modern_recipe():
    from minitx.core.config import recipe
    from minitx.core.model.transformer import block_parameters

    gqa = block_parameters(Seq2Seq(ModelConfig(kv_heads=2)))
    assert (gqa["attention block"], gqa["queries and output"], gqa["keys and values"]) == (
        12_480, 8_320, 4_160)
    assert block_parameters(Seq2Seq(ModelConfig(activation="swiglu")))["feed-forward block"] == 49_728
    # d_ff 170 keeps SwiGLU at about the reference block's 33,088
    narrow = Seq2Seq(ModelConfig(activation="swiglu", d_ff=170))
    assert block_parameters(narrow)["feed-forward block"] == 33_044
    assert block_parameters(Seq2Seq(ModelConfig(norm_kind="rms")))["norm"] == 64
    assert parameter_breakdown(Seq2Seq(recipe("modern").model))["total"] == 277_069


def test_rms_norm_ignores_the_scale_of_its_input_but_not_a_shift():
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(0))
    weight = torch.rand(64) + 0.5
    for scale in (0.5, 3.0, 40.0):
        assert torch.allclose(rms_norm(scale * x, weight), rms_norm(x, weight), atol=1e-5)
    # No mean subtraction: unlike LayerNorm, adding a constant changes the output.
    assert not torch.allclose(rms_norm(x + 1.0, weight), rms_norm(x, weight), atol=1e-2)
    layer = F.layer_norm(x + 1.0, (64,))
    assert torch.allclose(layer, F.layer_norm(x, (64,)), atol=1e-5)


def test_rms_norm_is_the_formula_with_a_weight_and_no_bias():
    norm = RMSNorm(4)
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    x = torch.tensor([[1.0, -2.0, 3.0, -4.0]])
    expected = x / torch.sqrt((x**2).mean() + 1e-6) * norm.weight
    assert torch.allclose(norm(x), expected)
    model = Seq2Seq(ModelConfig(norm="pre", norm_kind="rms"))
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())


def test_rope_scores_depend_only_on_the_offset_between_positions():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    cos, sin = rotary_angles(torch.arange(40), 16)  # (40, 16) each

    def turned(x, position):  # R_position x
        return rotate_pairs(x[None], cos[position : position + 1], sin[position : position + 1])[0]

    for m, n in [(0, 5), (3, 8), (30, 35), (7, 2), (20, 15)]:
        # (R_m q) . (R_n k) = q . (R_(n-m) k): the same offset gives the same score anywhere
        lhs = turned(q, m) @ turned(k, n)
        if n >= m:
            assert torch.allclose(lhs, q @ turned(k, n - m), atol=1e-4)
        else:
            assert torch.allclose(lhs, turned(q, m - n) @ k, atol=1e-4)
    assert torch.allclose(turned(q, 0) @ turned(k, 5), turned(q, 30) @ turned(k, 35), atol=1e-4)
    assert not torch.allclose(turned(q, 0) @ turned(k, 5), turned(q, 0) @ turned(k, 6), atol=1e-3)
    assert torch.allclose(turned(q, 13).norm(), q.norm())  # a rotation keeps lengths


def test_rope_self_attention_of_repeated_content_is_a_function_of_the_offset():
    cfg = ModelConfig(position_encoding="rope")
    torch.manual_seed(0)
    module = MultiHeadAttention(cfg).eval()
    x = torch.randn(1, 1, 64).expand(1, 9, 64)  # the same vector at every position
    rotary = rotary_angles(torch.arange(9), cfg.d_k)
    q, (k, v) = module.queries(x, rotary), module.keys_values(x, rotary)
    scores = q @ k.transpose(-2, -1)  # (1, h, 9, 9)
    for offset in range(-8, 9):  # constant along every diagonal: only j - i matters
        diagonal = scores.diagonal(offset, dim1=-2, dim2=-1)
        assert torch.allclose(diagonal, diagonal[..., :1].expand_as(diagonal), atol=1e-4)
    assert torch.equal(v, module.keys_values(x)[1])  # values are never rotated


def test_gqa_with_one_kv_head_per_query_head_is_exactly_multi_head_attention():
    assert ModelConfig(kv_heads=4) == ModelConfig()
    torch.manual_seed(0)
    explicit = Seq2Seq(ModelConfig(kv_heads=4)).eval()
    torch.manual_seed(0)
    mha = Seq2Seq(ModelConfig()).eval()
    batch = batch_of(4)
    with torch.no_grad():
        assert torch.equal(explicit(batch.src, batch.decoder_input), mha(batch.src, batch.decoder_input))


def test_gqa_equals_multi_head_attention_whose_kv_heads_are_copied_per_group():
    torch.manual_seed(0)
    gqa = Seq2Seq(ModelConfig(kv_heads=2, dropout=0.0)).eval()
    mha = Seq2Seq(ModelConfig(dropout=0.0)).eval()
    state = gqa.state_dict()
    for name, tensor in list(state.items()):
        if ".k_proj." in name or ".v_proj." in name:  # (2 * 16, ...) -> heads 0,0,1,1 -> (4 * 16, ...)
            heads = tensor.unflatten(0, (2, 16))
            state[name] = heads.repeat_interleave(2, dim=0).flatten(0, 1)
    mha.load_state_dict(state)
    batch = batch_of(4)
    with torch.no_grad():
        a, maps_a = gqa(batch.src, batch.decoder_input, return_attention=True)
        b, maps_b = mha(batch.src, batch.decoder_input, return_attention=True)
    assert torch.allclose(a, b, atol=1e-5)
    assert maps_a.cross[0].shape == maps_b.cross[0].shape == (4, 4, *maps_a.cross[0].shape[2:])
    assert torch.allclose(maps_a.cross[1], maps_b.cross[1], atol=1e-6)


def test_grouped_attention_shares_each_kv_head_with_consecutive_query_heads():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=gen)
    k, v = torch.randn(2, 2, 6, 8, generator=gen), torch.randn(2, 2, 6, 8, generator=gen)
    out, weights = attention(q, k, v, None, need_weights=True)
    for head in range(4):  # query heads 0, 1 read K/V head 0; heads 2, 3 read head 1
        single, _ = attention(q[:, head : head + 1], k[:, head // 2 : head // 2 + 1],
                              v[:, head // 2 : head // 2 + 1], None)
        assert torch.allclose(out[:, head : head + 1], single, atol=1e-6)
    fused, _ = attention(q, k, v, None, fused=True)
    assert torch.allclose(out, fused, atol=1e-6) and weights.shape == (2, 4, 5, 6)


@pytest.mark.parametrize("changes", VARIANTS.values(), ids=VARIANTS.keys())
def test_explicit_and_fused_training_paths_agree_for_every_variant(changes):
    torch.manual_seed(0)
    explicit = Seq2Seq(ModelConfig(dropout=0.0, **changes)).train()
    fused = Seq2Seq(ModelConfig(dropout=0.0, attention="fused", **changes)).train()
    fused.load_state_dict(explicit.state_dict())
    batch = batch_of(4)  # padded: masks take part
    out_e, out_f = explicit(batch.src, batch.decoder_input), fused(batch.src, batch.decoder_input)
    assert torch.allclose(out_e, out_f, atol=1e-5)
    out_e.square().sum().backward()
    out_f.square().sum().backward()
    # Gradients of this sum reach ~500, and float32 rounding is relative to that size (a key
    # bias, whose true gradient is 0, carries rounding noise of the same absolute size).
    scale = max(float(p.grad.abs().max()) for p in explicit.parameters())
    for (name, pe), pf in zip(explicit.named_parameters(), fused.parameters()):
        assert (pe.grad - pf.grad).abs().max() <= 1e-5 * scale, name


# tier 1: the reference and the modern recipe (rope, rms, swiglu, gqa together); tier 2 each alone
@pytest.mark.parametrize("changes", tiered(VARIANTS, ("baseline", "modern")))
def test_every_variant_overfits_one_batch(changes):
    # A one-layer model at a higher rate than the doctor's check (which trains the default size
    # for 400 steps at 1e-3): the same property, every part learning, in a seventh of the time.
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                                dropout=0.0, **changes))
    assert fit(model, batch_of(8), steps=150, lr=3e-3) < 0.01


@pytest.mark.parametrize("changes", VARIANTS.values(), ids=VARIANTS.keys())
def test_no_variant_lets_the_decoder_see_the_future(changes):
    model = Seq2Seq(ModelConfig(**changes)).eval()
    batch = batch_of(2)
    changed = batch.decoder_input.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 10
    with torch.no_grad():
        a, b = model(batch.src, batch.decoder_input), model(batch.src, changed)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)


def test_learned_positions_are_one_trained_table_per_side():
    model = Seq2Seq(ModelConfig(position_encoding="learned", max_len=20))
    assert model.src_positions.weight.shape == model.tgt_positions.weight.shape == (20, 64)
    assert "positional" not in model.state_dict()
    batch = get_task("reverse").batch(4, torch.Generator().manual_seed(0), 10, 10)  # the longest
    model(batch.src, batch.decoder_input).sum().backward()
    src_rows = model.src_positions.weight.grad.abs().sum(-1)  # (20,)
    tgt_rows = model.tgt_positions.weight.grad.abs().sum(-1)
    assert (src_rows[:10] > 0).all() and (tgt_rows[:11] > 0).all()  # SOS + 10 digits
    # Rows past the longest training sequence never learn: they stay as initialised.
    assert src_rows[10:].sum() == 0 and tgt_rows[11:].sum() == 0


def test_the_stepper_shows_every_query_head_of_a_grouped_query_model():
    model = Seq2Seq(ModelConfig(kv_heads=1, position_encoding="rope")).eval()
    stepper = Stepper(model, [3, 1, 4, 1, 5], vocab=DIGITS)
    result = stepper.step()
    assert result.cross_attention.shape == (2, 4, 5)  # (layers, query heads, S)
    assert result.self_attention.shape == (2, 4, 1)
    assert stepper.cross_attention_grid(1, 3).shape == (1, 5)
