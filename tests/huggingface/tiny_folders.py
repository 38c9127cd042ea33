"""Tiny Hugging Face model folders, made offline with transformers' own config and model classes
and save_pretrained: random weights of each family's shape, every parameter drawn afresh so that
no bias is zero and no norm is the identity (a mapping that mixed two such tensors up would go
unnoticed otherwise), and a tokeniser trained for the folder (tests/huggingface/tiny_tokenisers.py).
Nothing is downloaded.

FAMILIES names what each folder is like:
- marian: opus-mt's layout (post-norm, SiLU "swish", scaled embeddings, sinusoids in halves, tied
  tables, final_logits_bias), and its generation settings (bad word PAD, forced EOS);
- t5: T5 v1.0 (ReLU, tied output rescaled by d_model^-0.5, relative position bias);
- flan-t5: T5 v1.1 / Flan-T5 (gated GELU, its own lm_head, heads narrower than d_model / h);
- bart: BART (learned positions with their offset of 2, layernorm_embedding, GELU, forced BOS).

NEW_FAMILIES, the families next door (tests/huggingface/test_families.py):
- mbart50: mBART (pre-norm BART, scaled embeddings, final norms) with mBART-50's tokeniser;
- nllb: M2M100's network (fairseq sinusoids, pre-norm, ReLU) with NLLB-200's tokeniser;
- pegasus: Pegasus (sinusoid tables saved per side, pre-norm) with PegasusTokenizer;
- umt5: UMT5 (T5 v1.1 with a relative position bias in every layer), T5's tokeniser;
- t5-gated-relu: T5 with feed_forward_proj "gated-relu";
- bart-unequal: BART whose decoder's feed-forward is narrower than the encoder's;
- marian-odd: Marian with an odd d_model (33, three heads of 11).

And SEPARATE_MARIAN ("marian-separate"): opus-mt's layout with a vocabulary per side
(share_encoder_decoder_embeddings false: a token table each, target_vocab.json), for export; and
"m2m100": M2M100's network (as nllb's) with M2M100Tokenizer's own files.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from tests.huggingface.tiny_tokenisers import DEFAULT_SIZES, SPECIAL_IDS, save_tokeniser

FAMILIES = ("marian", "t5", "flan-t5", "bart")
NEW_FAMILIES = ("mbart50", "nllb", "pegasus", "umt5", "t5-gated-relu", "bart-unequal", "marian-odd")
ALL_FAMILIES = FAMILIES + NEW_FAMILIES
SEPARATE_MARIAN = "marian-separate"
OTHER_FAMILIES = (SEPARATE_MARIAN, "m2m100")  # tested where they matter (export, M2M100's tokeniser)
TOKENISERS = {"flan-t5": "t5", "umt5": "t5", "t5-gated-relu": "t5", "bart-unequal": "bart",
              "marian-odd": "marian", "mbart-cc25": "mbart", SEPARATE_MARIAN: "marian"}  # family -> the tiny
# tokeniser its folder gets (else its own); folders whose tokeniser writes a target's language
# code after its </s>, and the network each shares
SUFFIX_CODE_FOLDERS = {"mbart-cc25": "mbart50", "nllb-legacy": "nllb"}


def tokeniser_family(family: str) -> str:
    return TOKENISERS.get(family, family)


def vocab_size(family: str) -> int:
    """The folder's pieces: its tokeniser's size, the model's table rows."""
    return DEFAULT_SIZES[tokeniser_family(family)]


def special_ids(family: str) -> dict[str, int]:
    """pad, eos, unk, the decoder's start and (BART) bos, as each family numbers them."""
    ids = SPECIAL_IDS[tokeniser_family(family)](vocab_size(family))
    return {"start": ids.pop("decoder_start"), **{k: v for k, v in ids.items() if v is not None}}


def hf_model(family: str, layers: int = 2, d_model: int = 32, heads: int = 4, d_ff: int = 48,
             positions: int = 64):
    """A transformers model of the family's shape (random weights)."""
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        MarianConfig,
        MarianMTModel,
        T5Config,
        T5ForConditionalGeneration,
    )

    ids, vocab = special_ids(family), vocab_size(family)
    family = SUFFIX_CODE_FOLDERS.get(family, family)
    if family in NEW_FAMILIES or family in OTHER_FAMILIES:
        return _new_family(family, ids, vocab, layers, d_model, heads, d_ff, positions)
    if family == "marian":
        config = MarianConfig(vocab_size=vocab, decoder_vocab_size=vocab, d_model=d_model,
                              encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=heads,
                              decoder_attention_heads=heads, encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff,
                              max_position_embeddings=positions, activation_function="swish",
                              scale_embedding=True, pad_token_id=ids["pad"], eos_token_id=ids["eos"],
                              decoder_start_token_id=ids["start"], bos_token_id=ids["eos"],
                              forced_eos_token_id=ids["eos"])
        return MarianMTModel(config)
    if family in ("t5", "flan-t5"):
        v11 = family == "flan-t5"
        config = T5Config(vocab_size=vocab, d_model=d_model, d_kv=d_model // heads if not v11 else 6,
                          d_ff=d_ff, num_layers=layers, num_decoder_layers=layers, num_heads=heads,
                          relative_attention_num_buckets=8, relative_attention_max_distance=20,
                          feed_forward_proj="gated-gelu" if v11 else "relu", tie_word_embeddings=not v11,
                          pad_token_id=ids["pad"], eos_token_id=ids["eos"],
                          decoder_start_token_id=ids["start"])
        return T5ForConditionalGeneration(config)
    config = BartConfig(vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=d_ff,
                        decoder_ffn_dim=d_ff, max_position_embeddings=positions, activation_function="gelu",
                        pad_token_id=ids["pad"], eos_token_id=ids["eos"], bos_token_id=ids["bos"],
                        decoder_start_token_id=ids["start"], forced_bos_token_id=ids["bos"],
                        forced_eos_token_id=ids["eos"])
    return BartForConditionalGeneration(config)


def _new_family(family: str, ids: dict, vocab: int, layers: int, d_model: int, heads: int, d_ff: int,
                positions: int):
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        M2M100Config,
        M2M100ForConditionalGeneration,
        MarianConfig,
        MarianMTModel,
        MBartConfig,
        MBartForConditionalGeneration,
        PegasusConfig,
        PegasusForConditionalGeneration,
        T5Config,
        T5ForConditionalGeneration,
        UMT5Config,
        UMT5ForConditionalGeneration,
    )

    tokens = dict(vocab_size=vocab, pad_token_id=ids["pad"], eos_token_id=ids["eos"],
                  decoder_start_token_id=ids["start"], forced_eos_token_id=ids["eos"])
    if family in ("umt5", "t5-gated-relu"):
        shape = dict(d_model=d_model, d_kv=d_model // heads, d_ff=d_ff, num_layers=layers,
                     num_decoder_layers=layers, num_heads=heads, relative_attention_num_buckets=8,
                     relative_attention_max_distance=20)
        if family == "umt5":
            return UMT5ForConditionalGeneration(UMT5Config(**shape, **tokens))
        return T5ForConditionalGeneration(T5Config(**shape, **tokens, feed_forward_proj="gated-relu"))
    if family == "marian-odd":
        d_model, heads = 33, 3
    shape = dict(d_model=d_model, encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=heads,
                 decoder_attention_heads=heads, encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff,
                 max_position_embeddings=positions)
    if family == "mbart50":
        return MBartForConditionalGeneration(MBartConfig(**shape, **tokens, bos_token_id=ids["bos"],
                                                         scale_embedding=True))
    if family in ("nllb", "m2m100"):
        return M2M100ForConditionalGeneration(M2M100Config(**shape, **tokens, bos_token_id=ids["bos"],
                                                           scale_embedding=True, activation_function="relu"))
    if family == "pegasus":
        return PegasusForConditionalGeneration(PegasusConfig(**shape, **tokens, scale_embedding=True))
    if family == "bart-unequal":
        return BartForConditionalGeneration(BartConfig(**{**shape, "decoder_ffn_dim": d_ff - 16}, **tokens,
                                                       bos_token_id=ids["bos"]))
    return MarianMTModel(MarianConfig(**shape, **tokens, decoder_vocab_size=vocab, scale_embedding=True,
                                      activation_function="swish", bos_token_id=ids["eos"],
                                      share_encoder_decoder_embeddings=family != SEPARATE_MARIAN))


def save_model(folder: Path, family: str, seed: int = 0, eos_boost: float = 3.0, **shape) -> Path:
    """Save a random model of `family` into `folder` (save_pretrained's own files, the generation
    settings a real folder of the family has, and its tokeniser). Returns the folder."""
    torch.manual_seed(seed)
    model = hf_model(family, **shape).eval()
    with torch.no_grad():  # weights that make every token, position and head matter
        for name, p in model.named_parameters():
            if p.dim() == 2 and p.shape[1] > 16:  # projections and tables: unit-variance outputs
                p.normal_(0, p.shape[1] ** -0.5 if "embed" not in name and "shared" not in name else 1.0)
            elif "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.1)
            else:  # biases, norms' biases, T5's relative position bias (buckets x heads)
                p.normal_(0, 0.1 if p.dim() == 1 else 1.0)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(0, 0.1)
        ids = special_ids(family)
        # EOS's row of the output table, longer: outputs end at different steps, not only at the cap
        model.get_output_embeddings().weight[ids["eos"]] *= eos_boost
    if family in ("marian", "marian-odd", SEPARATE_MARIAN):  # opus-mt's: PAD never produced, EOS forced last
        model.generation_config.bad_words_ids = [[ids["pad"]]]
        model.generation_config.max_length = 24
    if SUFFIX_CODE_FOLDERS.get(family, family) in NEW_FAMILIES or family in OTHER_FAMILIES:
        model.generation_config.max_length = 24
    if family == "pegasus":  # random weights put PAD (its zero row) first: banned, as Marian bans it
        model.generation_config.bad_words_ids = [[ids["pad"]]]
    if family == "bart":  # bart-large-cnn's: the output starts with <s>
        model.generation_config.max_length = 24
        model.generation_config.forced_bos_token_id = ids["bos"]
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    if family == "flan-t5":  # a real Flan-T5 keeps its own lm_head (transformers 5 would tie it)
        _untie_lm_head(folder, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MarianTokenizer recommends sacremoses, which it does not use
        save_tokeniser(folder, tokeniser_family(family), vocab_size(family),
                       separate_vocabs=family == SEPARATE_MARIAN)
    return folder


def _untie_lm_head(folder: Path, seed: int) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    generator = torch.Generator().manual_seed(seed + 1)
    shared = weights["shared.weight"]
    weights["lm_head.weight"] = torch.randn(shared.shape, generator=generator) * shared.std()
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["tie_word_embeddings"] = False
    config.pop("scale_decoder_outputs", None)
    (folder / "config.json").write_text(json.dumps(config, indent=2))


def load_reference(folder: Path):
    """The folder as transformers loads it: the reference minitx is held to."""
    from transformers import AutoModelForSeq2SeqLM

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
