"""The model options of imported models (ModelConfig: src_vocab_size, src_pad_id, final_norms,
norm_kind "std", norm_eps, log_softmax): what each computes, that each defaults to minitx's own
model and is then left out of the file, and that bad values are one-line errors. The KV cache's
agreement with them is tests/core/test_incremental.py; the bundled files' bit-identity
tests/core/test_bundled_compat.py."""

import pytest
import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig
from minitx.core.model.components import StdNorm, components, std_norm
from minitx.core.model.transformer import Seq2Seq, parameter_breakdown


def model_of(**changes) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(ModelConfig(**changes)).eval()


def test_std_norm_divides_by_the_unbiased_std_plus_eps():
    x = torch.tensor([[1.0, 2.0, 4.0, 9.0]])
    weight, bias = torch.tensor([1.0, 2.0, 0.5, 1.0]), torch.tensor([0.0, 1.0, 0.0, -1.0])
    mean = 4.0
    unbiased_std = (((x - mean) ** 2).sum() / 3).sqrt()  # divides by d - 1
    expected = weight * (x - mean) / (unbiased_std + 0.1) + bias
    assert torch.allclose(std_norm(x, weight, bias, 0.1), expected)
    # torch's LayerNorm divides by the biased std, with eps under the root: not the same numbers
    assert not torch.allclose(F.layer_norm(x, (4,), weight, bias, 0.1), expected, atol=1e-2)


def test_std_norm_keeps_layer_norm_parameter_names():
    norm = StdNorm(8, eps=1e-6)
    assert set(dict(norm.named_parameters())) == {"weight", "bias"}
    cfg = dict(norm="pre", norm_kind="std")
    assert set(model_of(**cfg).state_dict()) == set(model_of(norm="pre").state_dict())


def test_norm_eps_reaches_every_norm_and_zero_means_the_kinds_default():
    for kind, default in (("layer", 1e-5), ("rms", 1e-6), ("std", 1e-6)):
        assert ModelConfig(norm_kind=kind).norm_epsilon == default
        model = model_of(norm="pre", norm_kind=kind, norm_eps=3e-3)
        eps = {m.eps for m in model.modules() if hasattr(m, "eps") and m is not model}
        assert eps == {3e-3}


def test_final_norms_on_a_post_norm_model_normalise_the_memory_and_the_output():
    plain, final = model_of(), model_of(final_norms=True)
    assert isinstance(plain.encoder_norm, torch.nn.Identity)
    assert parameter_breakdown(final)["final norms"] == 2 * 2 * 64
    final.load_state_dict(plain.state_dict(), strict=False)  # the same layers, plus the final norms
    with torch.no_grad():  # norms that visibly act (a fresh one is nearly the identity after post-norm)
        for norm in (final.encoder_norm, final.decoder_norm):
            norm.weight.fill_(2.0)
            norm.bias.fill_(0.5)
    src, tgt = torch.tensor([[3, 1, 4, 1, 5]]), torch.tensor([[11, 5, 1, 4]])
    with torch.no_grad():
        memory, _ = final.encode(src)
        unnormed, _ = plain.encode(src)
        assert torch.allclose(memory, final.encoder_norm(unnormed), atol=1e-6)
        assert not torch.allclose(memory, unnormed, atol=0.1)
        y = torch.randn(1, 4, 64)
        assert torch.allclose(final.stream_logits(y), final.output(final.decoder_norm(y)))
        assert not torch.allclose(final(src, tgt), plain(src, tgt), atol=1e-3)
    assert ModelConfig(norm="pre").with_final_norms and not ModelConfig().with_final_norms


def test_log_softmax_output_gives_log_probabilities_with_the_same_argmax():
    logits_model, log_model = model_of(), model_of(log_softmax=True)
    log_model.load_state_dict(logits_model.state_dict())
    src, tgt = torch.tensor([[3, 1, 4, 1, 5]]), torch.tensor([[11, 5, 1, 4]])
    with torch.no_grad():
        logits, log_probs = logits_model(src, tgt), log_model(src, tgt)
    assert torch.allclose(log_probs.logsumexp(-1), torch.zeros(1, 4), atol=1e-5)
    assert torch.allclose(log_probs, logits.log_softmax(-1), atol=1e-6)
    assert torch.equal(log_probs.argmax(-1), logits.argmax(-1))


def test_a_separate_source_vocabulary_has_its_own_rows_and_its_own_padding():
    model = model_of(src_vocab_size=20, src_pad_id=17)
    assert model.src_embed.weight.shape == (20, 64) and model.tgt_embed.weight.shape == (13, 64)
    assert float(model.src_embed.weight[17].detach().abs().sum()) == 0.0  # its PAD row starts at zero
    tgt = torch.tensor([[11, 5, 1]])
    with torch.no_grad():
        alone = model(torch.tensor([[18, 3, 19]]), tgt)
        padded = model(torch.tensor([[18, 3, 19, 17, 17]]), tgt)  # the source's PAD is masked
    assert torch.allclose(alone, padded, atol=1e-5)
    with torch.no_grad(), pytest.raises(IndexError):
        model(torch.tensor([[20]]), tgt)  # beyond the source's 20 rows


def test_the_import_options_default_to_minitx_and_are_not_written_then():
    cfg = ModelConfig()
    assert (cfg.source_vocab_size, cfg.source_pad_id, cfg.separate_vocabularies) == (13, 10, False)
    data = cfg.to_dict()
    assert not {"src_vocab_size", "src_pad_id", "final_norms", "norm_eps", "log_softmax"} & set(data)
    imported = ModelConfig(src_vocab_size=20, src_pad_id=1, final_norms=True, norm_eps=1e-6,
                           log_softmax=True)
    assert ModelConfig.from_dict(imported.to_dict()) == imported
    written = set(imported.to_dict())
    assert {"src_vocab_size", "src_pad_id", "final_norms", "norm_eps", "log_softmax"} <= written


def test_the_components_describe_each_import_option():
    described = components(ModelConfig(norm="pre", norm_kind="std", norm_eps=1e-6, src_vocab_size=20,
                                       src_pad_id=2, log_softmax=True))
    assert "unbiased std" in described["norm"] and "eps 1e-06" in described["norm"]
    assert described["vocabularies"].startswith("separate: 20 source tokens (PAD 2), 13 target")
    assert "log-probabilities" in described["output"]
    assert "final norm" in components(ModelConfig(final_norms=True))["norm"]
    assert "vocabularies" not in components(ModelConfig())


@pytest.mark.parametrize("changes, field", [
    ({"src_vocab_size": -1}, "src_vocab_size"),
    ({"src_vocab_size": 5}, "src_pad_id"),  # the target's PAD id 10 is not a source id then
    ({"src_pad_id": 13}, "src_pad_id"),
    ({"norm_eps": -1e-6}, "norm_eps"),
    ({"norm_eps": float("nan")}, "norm_eps"),
    ({"final_norms": 1}, "final_norms"),
    ({"log_softmax": "yes"}, "log_softmax"),
    ({"norm_kind": "batch"}, "norm_kind"),
])
def test_bad_import_options_are_one_line_errors_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=f"^{field}:") as info:
        ModelConfig(**changes)
    assert "\n" not in str(info.value)
