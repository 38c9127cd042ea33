"""The cached one-position-at-a-time decoder (core/model/kv_cache.py) against the modules' full
forward pass: same logits and same attention rows, for every configuration it supports."""

from dataclasses import replace

import pytest
import torch

from minitx.core.config import LORA_TARGETS, ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS
from minitx.core.interp import decode
from minitx.core.interp.decode import greedy_decode
from minitx.core.model import kv_cache, lora
from minitx.core.model.components import VARIANTS
from minitx.core.model.kv_cache import IncrementalDecoder
from minitx.core.model.transformer import AttentionMaps, Seq2Seq
from tests.core.core_helpers import fit
from tests.tiers import tiered

EOS, PAD = DIGITS.eos, DIGITS.pad  # the digit tasks' ids
SRC_PAD = 15  # a separate source vocabulary's PAD: an id the digit targets do not have

SRC = torch.tensor([[3, 1, 4, 1, 5], [2, 7, PAD, PAD, PAD]])  # the second row is padded
PREFIX = torch.tensor([[11, 5, 1, 4, 1], [11, 7, 2, EOS, PAD]])  # decoder inputs, SOS first

CONFIGS = {
    **VARIANTS,  # the reference (baseline), pre-norm, gelu and every component swap
    "pre-norm rmsnorm": {"norm": "pre", "norm_kind": "rms"},
    "unscaled attention": {"bug": "no-scale"},
    "swapped cross-attention": {"bug": "swap-cross"},
    "swapped cross-attention, rope, gqa": {"bug": "swap-cross", "position_encoding": "rope", "kv_heads": 2},
    # The options of imported models (docs/import.md)
    "post-norm with final norms (nn.Transformer)": {"final_norms": True, "activation": "relu"},
    "pre-norm std norm, log-softmax (Annotated)": {"norm": "pre", "norm_kind": "std", "activation": "relu",
                                                   "log_softmax": True},
    "post-norm std norm with final norms": {"norm_kind": "std", "final_norms": True},
    "layer norm eps 1e-2": {"norm_eps": 1e-2, "final_norms": True},
    "rms norm eps 1e-2": {"norm": "pre", "norm_kind": "rms", "norm_eps": 1e-2},
    "separate source vocabulary": {"src_vocab_size": 17, "src_pad_id": SRC_PAD},
    # The Hugging Face families' components (docs/huggingface.md)
    "T5 v1.0: relative positions, no biases, unscaled, tied output rescaled": {
        "norm": "pre", "norm_kind": "rms", "activation": "relu", "position_encoding": "relative",
        "bias": False, "scale_scores": False, "embed_scale": False, "relative_buckets": 8,
        "relative_max_distance": 16, "tie_embeddings": True, "tie_output": True, "scale_output": True},
    "T5 v1.1: gated GELU, heads narrower than d_model / h": {
        "norm": "pre", "norm_kind": "rms", "activation": "geglu", "position_encoding": "relative",
        "bias": False, "scale_scores": False, "embed_scale": False, "d_head": 8, "n_heads": 6},
    "BART: learned positions, embedding norm, gelu, tied": {
        "position_encoding": "learned", "embedding_norm": True, "activation": "gelu", "embed_scale": False,
        "tie_embeddings": True, "tie_output": True},
    "Marian: silu, scaled embeddings": {"activation": "silu"},
    "gelu tanh": {"activation": "gelu-tanh"},
    "UMT5: a relative bias per layer, T5's gated-relu": {
        "norm": "pre", "norm_kind": "rms", "activation": "reglu", "position_encoding": "relative",
        "relative_per_layer": True, "bias": False, "scale_scores": False, "embed_scale": False,
        "relative_buckets": 8, "relative_max_distance": 16},
    "mBART-like: pre-norm, embedding norm, a decoder feed-forward of its own width, odd d_model": {
        "norm": "pre", "position_encoding": "learned", "embedding_norm": True, "activation": "gelu",
        "decoder_d_ff": 40, "d_model": 63, "n_heads": 3},
}


def source_for(model, src: torch.Tensor) -> torch.Tensor:
    """The digit sources with the model's own source PAD id (another one when it has its own)."""
    return src.masked_fill(src == PAD, model.cfg.source_pad_id)


def fresh(**overrides) -> Seq2Seq:
    torch.manual_seed(3)
    return Seq2Seq(ModelConfig(**overrides)).eval()


def step_through(model, src, prefix, maps=None):
    """Feed prefix (B, T) one position at a time -> logits (B, T, V)."""
    with torch.no_grad():
        decoder = IncrementalDecoder(model, *model.encode(src))
        steps = [decoder.step(prefix[:, t], maps) for t in range(prefix.shape[1])]  # each (B, V)
    return torch.stack(steps, dim=1)


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_stepped_logits_equal_the_full_forward_pass(overrides):
    model = fresh(**overrides)
    src = source_for(model, SRC)
    with torch.no_grad():
        full = model(src, PREFIX)  # (B, T, V)
    stepped = step_through(model, src, PREFIX)
    # Rows after a sequence's EOS see PAD inputs the full pass masks out; nothing reads them.
    real = PREFIX != PAD
    assert torch.allclose(stepped[real], full[real], atol=1e-5)


@pytest.mark.parametrize("overrides", [CONFIGS["baseline"], CONFIGS["swapped cross-attention, rope, gqa"],
                                       CONFIGS["T5 v1.1: gated GELU, heads narrower than d_model / h"]],
                         ids=["baseline", "rope-gqa", "gated"])
def test_a_big_models_projections_read_side_by_side_without_a_stacked_copy_give_the_same_logits(
        overrides, monkeypatch):
    """Past STACK_BYTES (NLLB's, made so here by a limit of 0) Q, K, V and a gated feed-forward's
    two are each read from the model's own weights: nothing stacked, the same logits."""
    monkeypatch.setattr(kv_cache, "STACK_BYTES", 0)
    model = fresh(**overrides)
    src = source_for(model, SRC)
    with torch.no_grad():
        decoder = IncrementalDecoder(model, *model.encode(src))
        layer = decoder._layers[0]
        assert isinstance(layer.self_qkv, kv_cache._Parts)
        q_proj = model.decoder[0].self_attn.q_proj
        assert layer.self_qkv.parts[0].weight_t.data_ptr() == q_proj.weight.data_ptr()  # a view
        full = model(src, PREFIX)  # (B, T, V)
    stepped = step_through(model, src, PREFIX)
    real = PREFIX != PAD
    assert torch.allclose(stepped[real], full[real], atol=1e-5)


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_stepped_attention_rows_equal_the_full_forward_maps(overrides):
    model = fresh(**overrides)
    src, prefix = SRC[:1], PREFIX[:1]  # unpadded, so every row of the full maps is meaningful
    with torch.no_grad():
        _, full = model(src, prefix, return_attention=True)
    maps = AttentionMaps()
    step_through(model, src, prefix, maps)
    layers, T = model.cfg.n_decoder_layers, prefix.shape[1]
    for t in range(T):
        for layer in range(layers):
            self_row = maps.decoder_self[t * layers + layer]  # (1, h, 1, t + 1)
            cross_row = maps.cross[t * layers + layer]  # (1, h, 1, S), or (1, h, 1, t + 1) if swapped
            assert torch.allclose(self_row[0, :, 0], full.decoder_self[layer][0, :, t, : t + 1], atol=1e-5)
            keys = cross_row.shape[-1]
            assert torch.allclose(cross_row[0, :, 0], full.cross[layer][0, :, t, :keys], atol=1e-5)


# Tier 1 decodes a trained model of the reference, the modern recipe and two families' options;
# the stepped logits above check every configuration exactly in tier 1 already.
CACHED_TIER_ONE = ("baseline", "modern",
                   "T5 v1.0: relative positions, no biases, unscaled, tied output rescaled",
                   "mBART-like: pre-norm, embedding norm, a decoder feed-forward of its own width, "
                   "odd d_model")


@pytest.mark.parametrize("overrides", tiered(CONFIGS, CACHED_TIER_ONE))
def test_cached_greedy_decoding_gives_the_tokens_of_recomputation(overrides):
    # Two layers a side, as the reference, at half its width: the cache's bookkeeping is the same
    # at any width, and a tenth of the steps' time.
    model = fresh(**{"d_model": 32, "d_ff": 64, **overrides}, dropout=0.0)
    batch = get_task("reverse", 3, 7).batch(32, torch.Generator().manual_seed(1))
    batch = replace(batch, src=source_for(model, batch.src))
    fit(model, batch, steps=30, lr=3e-3)  # so the argmax is not a near-tie of fresh logits
    cached = greedy_decode(model, batch.src, max_new_tokens=12)
    recomputed = greedy_decode(model, batch.src, max_new_tokens=12, use_cache=False)
    assert torch.equal(cached, recomputed)


def test_rotary_positions_continue_from_the_cached_length():
    """Stepping from a prefix fed one token at a time turns the new query by its true position:
    the step at position t equals the full forward's row t, and differs from position 0's angles."""
    model = fresh(position_encoding="rope")
    with torch.no_grad():
        full = model(SRC[:1], PREFIX[:1])  # (1, T, V)
        decoder = IncrementalDecoder(model, *model.encode(SRC[:1]))
        for t in range(3):
            decoder.step(PREFIX[0, t : t + 1])
        assert decoder.position == 3
        step = decoder.step(PREFIX[0, 3:4])  # position 3
        restarted = IncrementalDecoder(model, *model.encode(SRC[:1])).step(PREFIX[0, 3:4])  # position 0
    assert torch.allclose(step, full[:, 3], atol=1e-5)
    assert not torch.allclose(restarted, full[:, 3], atol=1e-3)


def test_stepping_past_max_len_is_refused_with_a_clear_error():
    model = Seq2Seq(ModelConfig(max_len=3)).eval()
    with torch.no_grad():
        decoder = IncrementalDecoder(model, *model.encode(torch.tensor([[1, 2]])))
        for _ in range(3):
            decoder.step(torch.tensor([5]))
        with pytest.raises(ValueError, match="length 4 exceeds the model's max_len=3"):
            decoder.step(torch.tensor([5]))


ALL_VARIANTS = {**CONFIGS, "no causal mask": {"bug": "no-causal-mask"}}


@pytest.mark.parametrize("overrides", tiered(ALL_VARIANTS, (*CACHED_TIER_ONE, "no causal mask")))
def test_greedy_decoding_of_an_untrained_model_is_the_same_with_and_without_the_cache(overrides):
    # An untrained model often prefers <pad> or <sos>; decoding never emits either, so the full
    # forward never reads a generated token as padding, and the two paths agree on every source.
    from minitx.core.interp.decode import Stepper

    for seed in range(6):
        torch.manual_seed(seed)
        model = Seq2Seq(ModelConfig(**overrides)).eval()
        src = torch.randint(0, 10, (8, 6), generator=torch.Generator().manual_seed(seed))  # (B, S)
        cached, uncached = greedy_decode(model, src, 8), greedy_decode(model, src, 8, use_cache=False)
        assert torch.equal(cached, uncached), (overrides, seed)
        assert not torch.isin(cached, torch.tensor([DIGITS.sos])).any()
        assert not torch.isin(cached[cached != PAD].reshape(-1), torch.tensor([PAD])).any()
        stepped = Stepper(model, src[0].tolist(), cap=8, vocab=DIGITS).run()
        row = cached[0].tolist()
        assert [r.token for r in stepped] == row[: len(stepped)]
        assert all(r.top_k[0][0] == r.token for r in stepped)  # the choice heads its top-k


def test_many_sources_of_a_big_vocabulary_decode_a_few_rows_at_a_time_to_the_same_tokens(monkeypatch):
    """Past DECODE_BYTES a batch is decoded rows_at_once sources at a time (here 2 of 5, by a
    small limit): the same tokens as all at once, rows that end early padded as before."""
    model = fresh()
    src = torch.tensor([[3, 1, 4, 1, 5], [2, 7, PAD, PAD, PAD], [9, 9, 8, PAD, PAD], [1, 2, 3, 4, 5],
                        [6, PAD, PAD, PAD, PAD]])
    whole = greedy_decode(model, src, max_new_tokens=7)
    # the last source ends before the cap, alone in its part of the batch: that part is shorter
    assert (whole == model.cfg.eos_id).any(1).tolist() == [False, False, False, False, True]
    per_row = 4 * (3 * model.cfg.vocab_size + 2 * model.cfg.n_decoder_layers * model.cfg.d_model * (7 + 5))
    monkeypatch.setattr(decode, "DECODE_BYTES", 2 * per_row)
    assert decode.rows_at_once(model.cfg, 5, 7) == 2
    assert torch.equal(greedy_decode(model, src, max_new_tokens=7), whole)


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), LORA_TARGETS], ids=["default", "every"])
def test_lora_adapters_are_read_beside_the_base_and_off_when_switched_off(targets):
    """A LoRA model (peft's adapters in the projections) steps as peft's forward computes it,
    x W^T + scale (x A^T) B^T, reading the base's own weights (no merged copy); with its adapters
    off, as the base."""
    model = fresh()
    src = source_for(model, SRC)
    with torch.no_grad():
        base = model(src, PREFIX)  # (B, T, V)
    lora.add_adapters(model, lora.LoraSpec(4, 8.0, 0.0, targets))
    with torch.no_grad():
        for layer in lora.adapted_layers(model).values():  # B is zeros at first: make it change
            layer.lora_B[lora.ADAPTER].weight.normal_(0, 0.3)
        adapted = model(src, PREFIX)
    real = PREFIX != PAD
    assert not torch.allclose(adapted[real], base[real], atol=1e-3)
    stepped = step_through(model, src, PREFIX)
    assert torch.allclose(stepped[real], adapted[real], atol=1e-5)
    with lora.adapters_off(model):
        assert torch.allclose(step_through(model, src, PREFIX)[real], base[real], atol=1e-5)
