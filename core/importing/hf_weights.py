"""A Hugging Face encoder-decoder folder's model: config.json and the weights file(s) -> a minitx
ModelConfig and the weights under minitx's names, checked against each other before anything is
built (docs/huggingface.md).

Families (config.json's model_type): marian (opus-mt), t5 / mt5 (T5 v1.0 and v1.1, Flan-T5, mT5),
umt5, bart, mbart (mBART, mBART-50), m2m_100 (M2M100, NLLB-200), pegasus. What each computes, as
minitx options (core/config.py):

- marian: post-norm LayerNorm; a sinusoidal table with sines and cosines in halves; token
  vectors times sqrt(d) if scale_embedding; biases; output tied, plus final_logits_bias;
- t5: pre-norm, T5's RMSNorm, final norms; a relative position bias per stack; plain token
  vectors; no biases, scores not divided by sqrt(d_k); output tied and times d^-0.5 (v1.0) or
  its own lm_head (v1.1, Flan-T5); umt5 the same with a relative position bias in every
  self-attention layer, each its own;
- bart: post-norm LayerNorm; learned positions (offset 2); token vectors as scale_embedding,
  then layernorm_embedding; biases; output tied, plus final_logits_bias;
- mbart: BART made pre-norm, with a LayerNorm after each stack;
- pegasus: Marian's embeddings and sinusoids (saved in its files, a table per side, read as
  learned tables are; computed when absent), pre-norm, a LayerNorm after each stack;
- m2m_100: pre-norm, a LayerNorm after each stack, scaled token vectors, fairseq's sinusoids
  (sines then cosines, frequencies 10000^(-i / (d/2 - 1))) looked up from row pad + 1; no
  final_logits_bias.
The encoder's and the decoder's feed-forward widths may differ (encoder_ffn_dim, decoder_ffn_dim).

BART's position tables have two rows more than positions (its code looks position p up at row
p + 2, a remnant of fairseq); minitx keeps the rows positions use, rows 2 onwards. Marian's table
is not stored by transformers 5 (it is a function of the shape): it is computed here exactly as
transformers computes it unless the file has one.

Weights are read with safetensors (model.safetensors, or the shards of
model.safetensors.index.json) or torch.load(weights_only=True) (pytorch_model.bin or its shards),
never unpickling an object. Every tensor config.json implies must be there with its shape, and
every tensor of the file must be one of them (or a known alias: shared/embed_tokens/lm_head of
tied tables, Marian's own position tables): anything else means the config and the weights do
not belong together, and that is one line naming the file and the key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from minitx.core.config import GATED_ACTIVATIONS, ModelConfig
from minitx.core.families import MODEL_TYPES
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.hf_cache import unfinished_download
from minitx.core.importing.json_files import read_json_object
from minitx.core.importing.state_files import read_state_dict
from minitx.core.model.transformer import Seq2Seq
from minitx.core.tensor_checks import all_finite
from minitx.core.wording import counted

MAX_JSON_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; a tokenizer.json is read elsewhere
FAMILIES = MODEL_TYPES  # config.json's model_type -> its family (core/families.py)
T5_LIKE = ("t5", "umt5")
PRE_NORM = ("mbart", "m2m_100", "pegasus")  # BART-like layers made pre-norm, a LayerNorm after each stack
OTHER_KINDS = {  # model types people will try, and what they are
    **dict.fromkeys(("bert", "roberta", "distilbert", "xlm-roberta", "deberta-v2", "electra"),
                    "an encoder-only model"),
    **dict.fromkeys(("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "opt", "gpt_neox", "phi"),
                    "a decoder-only model"),
    "whisper": "a speech model (its encoder reads audio, not tokens)",
    "speech_to_text": "a speech model (its encoder reads audio, not tokens)",
    "vision-encoder-decoder": "an image-to-text model",
    "led": "not supported yet (Longformer's attention)", "longt5": "not supported yet (LongT5's attention)",
    "nllb-moe": "not supported yet (mixture-of-experts layers)", "pegasus_x": "not supported yet",
    "fsmt": "not supported yet", "prophetnet": "not supported yet",
    "blenderbot": "not supported yet", "encoder-decoder": "a pairing of two models that minitx cannot read",
}
SUPPORTED = ("marian (opus-mt), t5, mt5 and umt5 (T5, Flan-T5, mT5, UMT5), bart, mbart (mBART, mBART-50), "
             "m2m_100 (M2M100, NLLB-200) and pegasus")
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu", "gelu_new": "gelu-tanh",
               "gelu_pytorch_tanh": "gelu-tanh", "gelu_fast": "gelu-tanh"}
T5_FEED_FORWARD = {"relu": "relu", "gated-relu": "reglu", "gated-gelu": "geglu", "gated-gelu_new": "geglu",
                   "gated-silu": "swiglu", "gated-swish": "swiglu", "gelu": "gelu", "gelu_new": "gelu-tanh"}
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
BART_POSITION_OFFSET = 2


def read_json(path: Path, what: str = "") -> dict[str, Any]:
    """A folder's small JSON file (config.json, its generation settings, a shard index) as an
    object; `what` adds to the message for a folder without it."""
    if not path.exists():
        raise ImportFileError(f"{path.parent} has no {path.name}{what}")
    return read_json_object(path, MAX_JSON_BYTES, "a config file")


def family_of(folder: Path, config: dict[str, Any]) -> str:
    """The family minitx computes for config.json's model_type; one line listing what is
    supported for anything else."""
    kind = config.get("model_type")
    if not isinstance(kind, str) or not kind:
        raise ImportFileError(f"{folder / 'config.json'} has no model_type; minitx opens {SUPPORTED}")
    if kind not in FAMILIES:
        what = OTHER_KINDS.get(kind, "not an encoder-decoder model minitx knows")
        raise ImportFileError(f"{folder / 'config.json'}: model_type {kind!r} is {what}; minitx opens "
                              f"encoder-decoder models of {SUPPORTED}")
    if config.get("is_encoder_decoder") is False:
        raise ImportFileError(f"{folder / 'config.json'}: is_encoder_decoder is false; minitx opens "
                              "encoder-decoder models only")
    return FAMILIES[kind]


# ---------------------------------------------------------------------------------------------
# config.json -> ModelConfig


class _Config:
    """config.json's values, each checked as it is read (ImportFileError naming the key)."""

    def __init__(self, folder: Path, data: dict[str, Any]) -> None:
        self.path, self.data = folder / "config.json", data

    def int(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.data.get(key, default)
        if value is None:
            raise ImportFileError(f"{self.path} has no {key}")
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ImportFileError(f"{self.path}: {key} must be an integer of at least {minimum}, "
                                  f"not {json.dumps(value)[:40]}")
        return value

    def first_int(self, key: str) -> int:
        """A token id, or the first of a list of them (eos_token_id may list several)."""
        value = self.data.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        return self.int(key, value, minimum=0)

    def float(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ImportFileError(f"{self.path}: {key} must be a number, not {json.dumps(value)[:40]}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ImportFileError(f"{self.path}: {key} must be true or false, not {json.dumps(value)[:40]}")
        return value

    def same(self, *keys: str, default: int | None = None) -> int:
        """One value that several keys must agree on (the encoder's and the decoder's heads)."""
        values = [self.int(k, default) for k in keys]
        if len(set(values)) > 1:
            shown = ", ".join(f"{k} {v}" for k, v in zip(keys, values))
            raise ImportFileError(f"{self.path}: {shown}; minitx computes models whose encoder and decoder "
                                  "share these")
        return values[0]

    def activation(self, key: str, table: dict[str, str], default: str = "relu") -> str:
        value = self.data.get(key, default)
        if value not in table:
            raise ImportFileError(f"{self.path}: {key} {json.dumps(value)[:40]} is an activation minitx does "
                                  f"not compute (it computes {', '.join(sorted(table))})")
        return table[value]


def model_config(folder: Path, config: dict[str, Any], family: str) -> ModelConfig:
    """What config.json says of the network, as minitx's options. The special ids come from
    config.json too (the tokenisers must agree with them, checked where they are read)."""
    c = _Config(folder, config)
    pad = c.int("pad_token_id", minimum=0)
    eos = c.first_int("eos_token_id")
    start = c.int("decoder_start_token_id", config.get("bos_token_id"), minimum=0)
    common = {"dropout": 0.0, "pad_id": pad, "eos_id": eos, "sos_id": start}
    if family in T5_LIKE:
        vocab = c.int("vocab_size")
        heads, d_kv, d = c.int("num_heads"), c.int("d_kv"), c.int("d_model")
        # transformers 5 reads scale_decoder_outputs; older configs say it by tie_word_embeddings
        scale = c.bool("scale_decoder_outputs", c.data.get("tie_word_embeddings", True) is not False)
        return _model_config(c, vocab_size=vocab, d_model=d, n_heads=heads,
                             d_head=0 if heads * d_kv == d else d_kv,
                             d_ff=c.int("d_ff"), n_encoder_layers=c.int("num_layers"),
                             n_decoder_layers=c.int("num_decoder_layers", c.data.get("num_layers")),
                             max_len=max(512, c.int("n_positions", 512)), norm="pre", norm_kind="rms",
                             norm_eps=c.float("layer_norm_epsilon", 1e-6), final_norms=True,
                             activation=c.activation("feed_forward_proj", T5_FEED_FORWARD,
                                                     "gated-gelu" if family == "umt5" else "relu"),
                             position_encoding="relative", relative_per_layer=family == "umt5",
                             relative_buckets=c.int("relative_attention_num_buckets", 32, minimum=4),
                             relative_max_distance=c.int("relative_attention_max_distance", 128),
                             bias=False, scale_scores=False, embed_scale=False, scale_output=scale,
                             **common)
    d = c.int("d_model")
    shared = c.bool("share_encoder_decoder_embeddings", True) if family == "marian" else True
    vocab = c.int("decoder_vocab_size", c.data.get("vocab_size")) if not shared else c.int("vocab_size")
    d_ff, decoder_d_ff = c.int("encoder_ffn_dim"), c.int("decoder_ffn_dim")
    fields = dict(vocab_size=vocab, d_model=d,
                  n_heads=c.same("encoder_attention_heads", "decoder_attention_heads"),
                  d_ff=d_ff, decoder_d_ff=decoder_d_ff if decoder_d_ff != d_ff else 0,
                  n_encoder_layers=c.int("encoder_layers"), n_decoder_layers=c.int("decoder_layers"),
                  max_len=c.int("max_position_embeddings", minimum=3), norm_kind="layer", norm_eps=1e-5,
                  activation=c.activation("activation_function", ACTIVATIONS),
                  embed_scale=c.bool("scale_embedding", False), **common)
    if not shared:
        fields["src_vocab_size"] = c.int("vocab_size")
        fields["src_pad_id"] = pad
    norm = "pre" if family in PRE_NORM else "post"
    if family in ("marian", "m2m_100"):
        return _model_config(c, norm=norm, position_encoding="sinusoidal", **fields)
    # Pegasus' sinusoids are a table per side in its files, as learned positions are
    return _model_config(c, norm=norm, position_encoding="learned", embedding_norm=family != "pegasus",
                         **fields)


def _model_config(c: _Config, **fields: Any) -> ModelConfig:
    try:
        return ModelConfig(**fields)
    except ValueError as e:  # ModelConfig names its own field: say which file it came from
        raise ImportFileError(f"{c.path}: {e}") from None


# ---------------------------------------------------------------------------------------------
# Names: minitx's tensor -> the folder's


def layer_names(family: str, cfg: ModelConfig) -> dict[str, str]:
    """minitx name -> the folder's name (without a "model." prefix) for every layer tensor."""
    names: dict[str, str] = {}
    gated = cfg.activation in GATED_ACTIVATIONS
    if family in T5_LIKE:
        ff = {"w1.weight": "DenseReluDense.wi_0.weight", "w3.weight": "DenseReluDense.wi_1.weight",
              "w2.weight": "DenseReluDense.wo.weight"} if gated else \
            {"0.weight": "DenseReluDense.wi.weight", "3.weight": "DenseReluDense.wo.weight"}
        for i in range(cfg.n_encoder_layers):
            at, mine = f"encoder.block.{i}.layer", f"encoder.{i}"
            names.update({f"{mine}.self_attn.{p}_proj.weight": f"{at}.0.SelfAttention.{q}.weight"
                          for p, q in zip("qkvo", "qkvo")})
            names[f"{mine}.attn_res.norm.weight"] = f"{at}.0.layer_norm.weight"
            names.update({f"{mine}.ff.{k}": f"{at}.1.{v}" for k, v in ff.items()})
            names[f"{mine}.ff_res.norm.weight"] = f"{at}.1.layer_norm.weight"
        for i in range(cfg.n_decoder_layers):
            at, mine = f"decoder.block.{i}.layer", f"decoder.{i}"
            names.update({f"{mine}.self_attn.{p}_proj.weight": f"{at}.0.SelfAttention.{p}.weight"
                          for p in "qkvo"})
            names[f"{mine}.self_res.norm.weight"] = f"{at}.0.layer_norm.weight"
            names.update({f"{mine}.cross_attn.{p}_proj.weight": f"{at}.1.EncDecAttention.{p}.weight"
                          for p in "qkvo"})
            names[f"{mine}.cross_res.norm.weight"] = f"{at}.1.layer_norm.weight"
            names.update({f"{mine}.ff.{k}": f"{at}.2.{v}" for k, v in ff.items()})
            names[f"{mine}.ff_res.norm.weight"] = f"{at}.2.layer_norm.weight"
        names = {k.replace("o_proj", "out_proj"): v for k, v in names.items()}
        names["encoder_norm.weight"] = "encoder.final_layer_norm.weight"
        names["decoder_norm.weight"] = "decoder.final_layer_norm.weight"
        if cfg.relative_per_layer:  # UMT5: every layer's self-attention has its own
            for stack, count in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
                names.update({f"{stack}.{i}.position_bias.weight":
                              f"{stack}.block.{i}.layer.0.SelfAttention.relative_attention_bias.weight"
                              for i in range(count)})
            return names
        for side, stack in (("src", "encoder"), ("tgt", "decoder")):
            first = f"{stack}.block.0.layer.0.SelfAttention"
            names[f"{side}_position_bias.weight"] = f"{first}.relative_attention_bias.weight"
        return names
    attention = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "out_proj": "out_proj"}
    for stack, count in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(count):
            at, mine = f"{stack}.layers.{i}", f"{stack}.{i}"
            blocks = {"self_attn": ("self_attn", "self_attn_layer_norm",
                                    "attn_res" if stack == "encoder" else "self_res")}
            if stack == "decoder":
                blocks["cross_attn"] = ("encoder_attn", "encoder_attn_layer_norm", "cross_res")
            for block, (theirs, norm, residual) in blocks.items():
                for p in ("weight", "bias"):
                    names.update({f"{mine}.{block}.{k}.{p}": f"{at}.{theirs}.{v}.{p}"
                                  for k, v in attention.items()})
                    names[f"{mine}.{residual}.norm.{p}"] = f"{at}.{norm}.{p}"
            for p in ("weight", "bias"):
                names[f"{mine}.ff.0.{p}"] = f"{at}.fc1.{p}"
                names[f"{mine}.ff.3.{p}"] = f"{at}.fc2.{p}"
                names[f"{mine}.ff_res.norm.{p}"] = f"{at}.final_layer_norm.{p}"
    if cfg.embedding_norm:  # BART, mBART
        for p in ("weight", "bias"):
            names[f"src_embed_norm.{p}"] = f"encoder.layernorm_embedding.{p}"
            names[f"tgt_embed_norm.{p}"] = f"decoder.layernorm_embedding.{p}"
    if cfg.norm == "pre":  # mBART, M2M100, Pegasus: a LayerNorm after each stack
        for p in ("weight", "bias"):
            names[f"encoder_norm.{p}"] = f"encoder.layer_norm.{p}"
            names[f"decoder_norm.{p}"] = f"decoder.layer_norm.{p}"
    return names


# The tables that may be one tensor under several names: minitx's name -> the folder's names, the
# first found wins (transformers 5 saves a tied table once, as shared.weight).
TABLES = {"src_embed.weight": ("shared.weight", "encoder.embed_tokens.weight"),
          "tgt_embed.weight": ("decoder.embed_tokens.weight", "shared.weight"),
          "output.weight": ("lm_head.weight",)}
ALIASES = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")


@dataclass
class FolderWeights:
    """What a folder's weights say, under minitx's names, with what it took to read them."""

    tensors: dict[str, torch.Tensor]  # minitx name -> float32 tensor (tied tables once)
    files: list[Path]  # the weight files read
    cfg: ModelConfig  # config.json's, with the tying the tensors show


def read_weights(folder: Path, family: str, cfg: ModelConfig,
                 progress: Callable[[int, int], None] | None = None) -> FolderWeights:
    """The folder's tensors under minitx's names for `cfg`, every one checked; ImportFileError
    (one line naming the file and the key) for anything that does not fit."""
    state, files = _read_files(folder, progress)
    shown = files[0] if len(files) == 1 else folder
    prefixed = any(k.startswith("model.") for k in state)
    state = {k[len("model."):] if k.startswith("model.") else k: v for k, v in state.items()}

    def key(name: str) -> str:  # the folder's own spelling of a name, for messages
        return f"model.{name}" if prefixed and not name.startswith("lm_head") else name

    names = layer_names(family, cfg)
    used: set[str] = set()
    tensors: dict[str, torch.Tensor] = {}
    for mine, theirs in names.items():
        if theirs not in state:
            raise ImportFileError(f"{shown} lacks {key(theirs)!r}, which config.json's model needs")
        tensors[mine], _ = state[theirs], used.add(theirs)
    found = {}
    for mine, candidates in TABLES.items():
        name = next((n for n in candidates if n in state), None)
        if name is not None:
            found[mine] = name
    for required in ("src_embed.weight", "tgt_embed.weight"):
        if required not in found:
            raise ImportFileError(f"{shown} lacks the token table ({key('shared.weight')!r} or "
                                  f"{key(TABLES[required][-1])!r})")
    used.update(n for n in ALIASES if n in state)
    src, tgt = state[found["src_embed.weight"]], state[found["tgt_embed.weight"]]
    out = state[found["output.weight"]] if "output.weight" in found else tgt
    tie_embeddings = src.shape == tgt.shape and (src is tgt or torch.equal(src, tgt))
    tie_output = out.shape == tgt.shape and (out is tgt or torch.equal(out, tgt))
    tensors["src_embed.weight"] = src
    if not tie_embeddings:
        tensors["tgt_embed.weight"] = tgt
    if not tie_output:
        tensors["output.weight"] = out
    cfg = cfg.replace(tie_embeddings=tie_embeddings, tie_output=tie_output)
    if cfg.bias:  # the output's bias is final_logits_bias, (1, V); zeros if absent (M2M100 has none)
        bias = state.get("final_logits_bias")
        used.add("final_logits_bias")
        tensors["output.bias"] = bias.reshape(-1) if bias is not None else torch.zeros(cfg.vocab_size)
    tensors.update(_positions(state, family, cfg, used, key, shown))
    extra = sorted(k for k in state if k not in used)
    if extra:
        raise ImportFileError(f"{shown} has {key(extra[0])!r}, which config.json does not account for "
                              f"({counted(len(extra), 'such tensor')}): the config and "
                              "the weights do not belong together")
    _check(tensors, cfg, shown, {mine: key(theirs) for mine, theirs in names.items()}
           | {k: key(found.get(k, k)) for k in TABLES})
    return FolderWeights({k: t.to(torch.float32) for k, t in tensors.items()}, files, cfg)


def _positions(state: dict[str, torch.Tensor], family: str, cfg: ModelConfig, used: set[str],
               key: Callable[[str], str], shown: Path) -> dict[str, torch.Tensor]:
    if family in T5_LIKE:
        return {}
    if family == "pegasus":  # its sinusoids are parameters, saved per side: the file's are the weights
        tables = {}
        for side, stack in (("src", "encoder"), ("tgt", "decoder")):
            name = f"{stack}.embed_positions.weight"
            used.add(name)
            table = state.get(name)
            if table is None:
                table = marian_positions(cfg.max_len, cfg.d_model)
            elif tuple(table.shape) != (cfg.max_len, cfg.d_model):
                raise ImportFileError(f"{shown}: {key(name)!r} has shape {tuple(table.shape)}, but "
                                      f"config.json's max_position_embeddings and d_model make it "
                                      f"({cfg.max_len}, {cfg.d_model})")
            tables[f"{side}_positions.weight"] = table
        return tables
    if family == "marian":
        table = state.get("encoder.embed_positions.weight")
        used.update(f"{stack}.embed_positions.weight" for stack in ("encoder", "decoder"))
        if table is None or tuple(table.shape) != (cfg.max_len, cfg.d_model):
            table = marian_positions(cfg.max_len, cfg.d_model)
        return {"positional": table}
    if family == "m2m_100":  # computed, never stored (a buffer transformers does not save)
        used.update(f"{stack}.embed_positions.weights" for stack in ("encoder", "decoder"))
        return {"positional": fairseq_positions(cfg.max_len, cfg.d_model, cfg.pad_id)}
    found = {}
    for side, stack in (("src", "encoder"), ("tgt", "decoder")):
        name = f"{stack}.embed_positions.weight"
        if name not in state:
            raise ImportFileError(f"{shown} lacks {key(name)!r}, which config.json's model needs")
        used.add(name)
        table = state[name]
        rows = cfg.max_len + BART_POSITION_OFFSET
        if tuple(table.shape) != (rows, cfg.d_model):
            raise ImportFileError(f"{shown}: {key(name)!r} has shape {tuple(table.shape)}, but config.json's "
                                  f"max_position_embeddings and d_model make it ({rows}, {cfg.d_model})")
        found[f"{side}_positions.weight"] = table[BART_POSITION_OFFSET:]
    return found


def marian_positions(positions: int, d: int) -> torch.Tensor:
    """(positions, d): Marian's (and Pegasus') sinusoids, sines in the first half and cosines in the
    second (not interleaved as minitx's own are), computed in float64 as transformers computes them."""
    j = torch.arange(d, dtype=torch.float64)
    angles = torch.arange(positions, dtype=torch.float64)[:, None] / torch.pow(10000.0, 2 * (j // 2) / d)
    half = d // 2 + d % 2
    table = torch.empty(positions, d, dtype=torch.float64)
    table[:, :half] = torch.sin(angles[:, 0::2])
    table[:, half:] = torch.cos(angles[:, 1::2])
    return table.to(torch.float32)


def fairseq_positions(positions: int, d: int, pad: int) -> torch.Tensor:
    """(positions, d): M2M100's sinusoids (fairseq's), as transformers computes them in float32:
    sines in the first d/2 columns, cosines in the next, frequencies exp(-i log(10000) / (d/2 - 1)),
    a zero column last for an odd d. Position p of a sequence without padding reads row
    pad + 1 + p of that table (transformers numbers positions from pad + 1), so these are those rows."""
    half = d // 2
    rows = pad + 1 + positions
    frequencies = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
    angles = torch.arange(rows, dtype=torch.int64).float().unsqueeze(1) * frequencies.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).view(rows, -1)  # (rows, 2 half)
    if d % 2 == 1:
        table = torch.cat([table, torch.zeros(rows, 1)], dim=1)
    return table[pad + 1 :].contiguous()


def _check(tensors: dict[str, torch.Tensor], cfg: ModelConfig, shown: Path, theirs: dict[str, str]) -> None:
    """Every tensor's shape against what the config makes it, every value a finite float."""
    with torch.device("meta"):
        expected = {k: tuple(t.shape) for k, t in Seq2Seq(cfg).own_state_dict().items()}
    for name, shape in expected.items():
        t = tensors.get(name)
        if t is None:
            raise ImportFileError(f"{shown} lacks the tensor for minitx's {name!r}")
        if tuple(t.shape) != shape:
            raise ImportFileError(f"{shown}: {theirs.get(name, name)!r} has shape {tuple(t.shape)}, but "
                                  f"config.json makes it {shape}")
        if not t.is_floating_point():
            raise ImportFileError(f"{shown}: {theirs.get(name, name)!r} holds {t.dtype} values, not floats")
        if not all_finite(t):
            raise ImportFileError(f"{shown}: {theirs.get(name, name)!r} holds NaN or infinite values")


def _read_files(folder: Path, progress: Callable[[int, int], None] | None
                ) -> tuple[dict[str, torch.Tensor], list[Path]]:
    """Every tensor of the folder's weights: one file, or the shards its index lists."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            if progress:
                progress(0, 1)
            state = read_state_dict(path)
            if progress:
                progress(1, 1)
            return state, [path]
        index = read_json(path)
        weight_map = index.get("weight_map")
        plain = isinstance(weight_map, dict) and weight_map and all(
            isinstance(v, str) and v and "/" not in v and v not in (".", "..") for v in weight_map.values())
        if not plain:
            raise ImportFileError(f"{path} has no weight_map of tensor names to shard files in the folder")
        shards = list(dict.fromkeys(weight_map.values()))
        state: dict[str, torch.Tensor] = {}
        for i, shard in enumerate(shards):
            if progress:
                progress(i, len(shards))
            shard_path = folder / shard
            if not shard_path.is_file():
                raise ImportFileError(f"{path} lists the shard {shard}, which the folder lacks")
            part = read_state_dict(shard_path)
            for tensor_name in part:
                if weight_map.get(tensor_name) != shard:
                    raise ImportFileError(f"{shard_path} holds {tensor_name!r}, which {path.name} does not "
                                          f"place there")
            state.update(part)
        missing = sorted(set(weight_map) - set(state))
        if missing:
            raise ImportFileError(f"{folder / weight_map[missing[0]]} lacks {missing[0]!r}, which "
                                  f"{path.name} places there")
        if progress:
            progress(len(shards), len(shards))
        return state, [folder / s for s in shards]
    raise ImportFileError(unfinished_download(folder, WEIGHT_FILES)
                          or f"{folder} has no weights: none of {', '.join(WEIGHT_FILES)}")
