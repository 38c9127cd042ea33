"""The reference layouts are real: named as the originals, computing what the originals compute,
and trainable on the toy task with their own greedy decoding."""

from __future__ import annotations

import math
import pickle

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from tests.reference_models import annotated_transformer as annotated
from tests.reference_models import nn_transformer_tutorial as tutorial
from tests.reference_models import toy


def test_the_tutorial_model_is_torch_nn_transformer_under_the_tutorials_names(tutorial_reverse):
    model = tutorial_reverse.model
    assert isinstance(model.transformer, nn.Transformer)
    state = model.state_dict()
    d = tutorial_reverse.shape.d_model
    assert state["transformer.encoder.layers.0.self_attn.in_proj_weight"].shape == (3 * d, d)
    assert state["transformer.decoder.layers.0.multihead_attn.in_proj_bias"].shape == (3 * d,)
    for key in ("transformer.encoder.norm.weight", "transformer.decoder.norm.bias",
                "transformer.decoder.layers.0.norm3.weight", "generator.weight",
                "src_tok_emb.embedding.weight", "tgt_tok_emb.embedding.weight"):
        assert key in state
    assert state["positional_encoding.pos_embedding"].shape == (5000, 1, d)


def test_the_annotated_model_has_the_originals_names(annotated_reverse):
    state = annotated_reverse.model.state_dict()
    d = annotated_reverse.shape.d_model
    for key in ("encoder.layers.0.sublayer.1.norm.a_2", "encoder.norm.b_2", "decoder.norm.a_2",
                "decoder.layers.0.src_attn.linears.3.weight", "decoder.layers.0.feed_forward.w_1.bias",
                "src_embed.0.lut.weight", "tgt_embed.0.lut.weight", "generator.proj.weight"):
        assert key in state
    # each side has its own copy of the sinusoid buffer
    assert state["src_embed.1.pe"].shape == state["tgt_embed.1.pe"].shape == (1, 5000, d)


def test_a_tiny_tutorial_model_learns_to_reverse_by_its_own_greedy_decoding(tutorial_reverse):
    assert toy.exact_match(tutorial_reverse) >= 0.9


def test_a_tiny_annotated_model_learns_to_reverse_by_its_own_greedy_decoding(annotated_reverse):
    assert toy.exact_match(annotated_reverse) >= 0.9


def test_trained_without_a_causal_mask_the_loss_is_low_but_greedy_decoding_fails(
        annotated_no_causal_mask, annotated_reverse):
    # The decoder saw the very token it had to predict: it copies it, and the loss falls below
    # the healthy model's, but at decoding time that token does not exist yet.
    assert annotated_no_causal_mask.final_loss < 0.15
    assert annotated_no_causal_mask.final_loss < annotated_reverse.final_loss
    assert toy.exact_match(annotated_no_causal_mask) < 0.1


def test_without_the_causal_mask_earlier_outputs_depend_on_later_decoder_inputs(
        annotated_no_causal_mask, annotated_reverse):
    batch = toy.make_batch(toy.ANNOTATED, "reverse", annotated_reverse.src_vocab,
                           annotated_reverse.tgt_vocab, 4, torch.Generator().manual_seed(5), 4, 4)
    tgt_in = batch.tgt[:, :-1]  # (4, 5): <s> and four digits (ids 4-13)
    changed = tgt_in.clone()
    changed[:, -1] = 4 + (tgt_in[:, -1] - 4 + 1) % 10  # another digit at the last position

    def first_positions(trained, decoder_input):
        out = toy.teacher_forced(toy.ANNOTATED, trained.model, batch.src, decoder_input, trained.causal)
        return out[:, :-1]  # (B, T - 1, V): every position before the one changed

    healthy = first_positions(annotated_reverse, tgt_in) - first_positions(annotated_reverse, changed)
    assert healthy.abs().max() < 1e-5
    broken = first_positions(annotated_no_causal_mask, tgt_in) - first_positions(annotated_no_causal_mask,
                                                                                 changed)
    assert broken.abs().max() > 1e-3


def test_the_tutorials_batched_decoding_equals_its_one_sentence_translate(tutorial_reverse):
    sources = toy.random_sources(12, torch.Generator().manual_seed(9), 3, 5)
    batched = toy.decode_digits(tutorial_reverse, sources)
    vocab = tutorial_reverse.tgt_vocab
    alone = [[vocab[i] for i in tutorial.translate_ids(tutorial_reverse.model,
                                                       [tutorial_reverse.src_vocab.index(t) for t in s])]
             for s in sources]
    assert batched == alone


def test_the_annotated_layer_norm_divides_by_the_unbiased_std_plus_eps_unlike_torchs():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    expected = (x - 2.5) / (math.sqrt(5 / 3) + 1e-6)  # unbiased: sum of squares 5 over n - 1 = 3
    assert torch.allclose(annotated.LayerNorm(4)(x), expected, atol=1e-7)
    assert not torch.allclose(nn.LayerNorm(4)(x), expected, atol=1e-3)  # torch's: biased, eps inside


def test_the_tutorials_causal_mask_is_float_with_minus_infinity_above_the_diagonal():
    inf = float("-inf")
    expected = torch.tensor([[0.0, inf, inf], [0.0, 0.0, inf], [0.0, 0.0, 0.0]])
    assert torch.equal(tutorial.generate_square_subsequent_mask(3), expected)
    assert torch.equal(annotated.subsequent_mask(3)[0], expected == 0)  # the same pattern, True = allowed


@pytest.mark.parametrize("layout", [toy.TUTORIAL, toy.ANNOTATED])
def test_each_layout_puts_its_own_specials_first_and_each_side_orders_the_digits_its_way(layout):
    src, tgt = toy.vocabulary(layout, "reverse", "src"), toy.vocabulary(layout, "reverse", "tgt")
    specials = toy.LAYOUTS[layout].specials
    assert src[:4] == tgt[:4] == specials
    assert sorted(src[4:]) == sorted(tgt[4:]) == list(toy.DIGITS)
    assert src[4:] != tgt[4:]  # so an importer that swaps the vocabularies decodes wrong
    assert src[4:] != toy.DIGITS  # not minitx's digit ids


def test_sources_and_targets_are_wrapped_in_the_layouts_start_and_end(annotated_reverse):
    vocab = annotated_reverse.src_vocab
    ids = toy.encode(["3", "1"], vocab, toy.ANNOTATED)
    assert ids == [annotated.BOS_ID, vocab.index("3"), vocab.index("1"), annotated.EOS_ID]


def test_the_reference_files_hold_the_state_dict_the_vocabularies_and_a_pickled_model(tutorial_reverse,
                                                                                   tutorial_files):
    state = tutorial_reverse.model.state_dict()
    from_pt = torch.load(tutorial_files.pt, weights_only=True)
    from_safetensors = load_file(str(tutorial_files.safetensors))
    assert from_pt.keys() == from_safetensors.keys() == state.keys()
    assert all(torch.equal(from_pt[k], state[k]) and torch.equal(from_safetensors[k], state[k])
               for k in state)
    lines = tutorial_files.src_vocab.read_text(encoding="utf-8").splitlines()
    assert tuple(lines) == tutorial_reverse.src_vocab  # line number = id
    with pytest.raises(pickle.UnpicklingError):  # a whole module: the safe loader refuses it
        torch.load(tutorial_files.pickled, weights_only=True)
