"""A minitx model written back as a Hugging Face folder (`minitx export FILE --format hf --out DIR`,
docs/huggingface.md): config.json, model.safetensors, generation_config.json and the tokeniser's
files, which transformers' AutoModelForSeq2SeqLM and AutoTokenizer open.

The inverse of opening a folder (huggingface.py), and built from the same rules so that the two
cannot drift apart:
- the tensor names are hf_weights' table (`layer_names`, TABLES), read the other way;
- config.json is written from the model's options, then read back with hf_weights.model_config:
  a family is the one whose reading gives back the model's options exactly. A model that came
  from a folder is written as its own family (any of core/families.py's). A model that never
  was a Hugging Face one (trained by minitx) is written as the first family that computes what
  it computes, or refused in one line naming the option no family has;
- the generation settings are written so that hf_generation.read_generation gives them back;
- before anything is moved into place the written folder is opened again (read_model) and
  its options, weights and generation settings must equal the model's.

Everything is written into a temporary folder beside DIR and renamed into place at the end:
an error leaves nothing half-written.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from minitx.core.config import ModelConfig
from minitx.core.data.generation import Generation
from minitx.core.data.subword import SubwordVocab
from minitx.core.data.task import Task
from minitx.core.families import FAMILIES as FAMILY_TABLE
from minitx.core.families import family as family_entry
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.hf_generation import COMPUTED
from minitx.core.importing.hf_tokeniser_files import json_bytes, tokeniser_files
from minitx.core.importing.hf_tokenisers import read_tokenisers
from minitx.core.importing.hf_weights import (
    ACTIVATIONS,
    BART_POSITION_OFFSET,
    FAMILIES,
    T5_FEED_FORWARD,
    T5_LIKE,
    layer_names,
    marian_positions,
    model_config,
)
from minitx.core.importing.huggingface import read_model
from minitx.core.model.transformer import Seq2Seq
from minitx.core.options import MODEL_OPTIONS

# The families in the order a model of minitx's own is tried against them (a model that came
# from a folder is written as its own family, any of core/families.py's).
ORDER = ("marian", "bart", "t5")
ARCHITECTURES = {"marian": "MarianMTModel", "bart": "BartForConditionalGeneration",
                 "t5": "T5ForConditionalGeneration", "mt5": "MT5ForConditionalGeneration",
                 "umt5": "UMT5ForConditionalGeneration", "mbart": "MBartForConditionalGeneration",
                 "m2m_100": "M2M100ForConditionalGeneration", "pegasus": "PegasusForConditionalGeneration"}
# The BART-like families keep their weights under "model." (their lm_head and final_logits_bias
# not); T5's have no prefix.
PREFIX = {family: "" if family in T5_LIKE else "model." for family in FAMILY_TABLE}
# Learned position tables looked up at row p + 2 (BART's, kept by mBART); Pegasus' sinusoid
# tables are saved as they are; Marian's and M2M100's are computed, never saved.
OFFSET_POSITIONS = ("bart", "mbart")
SAVED_POSITIONS = ("pegasus",)
# No final_logits_bias in the folder (core/families.py freezes minitx's output bias at zeros for
# it): the output has no bias to write.
NO_OUTPUT_BIAS = ("m2m_100",)
# Options that change no figure transformers computes: dropout (none at inference), how
# attention is computed (explicit or fused: the same softmax(QK^T)V).
SAME_EITHER_WAY = ("dropout", "attention")


class ExportError(ValueError):
    """One line for a person: why the model cannot be written as a Hugging Face folder."""


@dataclass
class Exported:
    folder: Path
    family: str
    files: list[str]  # the names written
    matched: bool  # True: a model of minitx's own, written as the family whose options it has


# ---------------------------------------------------------------------------------------------
# Which family


def origin_family(task: Task) -> str | None:
    """The family (core/families.py's key) of a model that came from a Hugging Face folder
    (opened, imported or fine-tuned: its task keeps the folder's origin and tokeniser); None
    otherwise."""
    family = FAMILIES.get(task.origin.family) if task.origin is not None else None
    return family if family and isinstance(task.vocab, SubwordVocab) else None


def family_for(model: Seq2Seq, task: Task) -> tuple[str, bool]:
    """(the family to write the model as, whether it was matched by its options)."""
    family = origin_family(task)
    if family is not None:
        problems = _differences(model, family)
        if problems:
            raise ExportError(f"this {family_entry(family).name} model cannot be written back as one: "
                              f"{problems[0]}")
        return family, False
    found = {f: _differences(model, f) for f in ORDER}
    for f in ORDER:
        if not found[f]:
            return f, True
    nearest = min(ORDER, key=lambda f: len(found[f]))
    raise ExportError(f"no Hugging Face family computes this model; nearest is {nearest}, but "
                      + "; ".join(found[nearest]))


def _option(name: str) -> str:
    """A ModelConfig field as the option that sets it (--heads for n_heads)."""
    by_field = {v: k for k, v in MODEL_OPTIONS.items()}
    return "--" + by_field.get(name, name).replace("_", "-")


def _differences(model: Seq2Seq, family: str) -> list[str]:
    """What `family` cannot compute of the model, each as a phrase naming the option."""
    cfg, problems = model.cfg, []
    if cfg.bug:
        return [f"it computes a deliberate bug ({cfg.bug}), which no family has"]
    if cfg.src_vocab_size and family != "marian":  # Marian's separate vocabularies: a table a side
        problems.append("its source has a table of its own (--tie-embeddings: one table for both sides)")
    elif not cfg.tie_embeddings and not cfg.src_vocab_size:
        problems.append(f"minitx writes {family} with one token table for source and target, and "
                        "this model has two (--tie-embeddings)")
    if family == "bart" and not cfg.tie_output:
        problems.append("bart's output is its token table (--tie-output)")
    bias = model.own_state_dict().get("output.bias")
    if family in NO_OUTPUT_BIAS and bias is not None and bool(bias.detach().ne(0).any()):
        problems.append(f"{family_entry(family).name} has no output bias (final_logits_bias), and this "
                        "model's is not zero")
    try:
        back = model_config(Path("config.json").parent, folder_config(cfg, family), family)
    except (ImportFileError, ValueError, KeyError) as e:
        return [*problems, f"{family}'s config.json cannot say it ({e})"]
    mine, theirs = _comparable(cfg, family), _comparable(back, family)
    for name, value in mine.items():
        if theirs.get(name) != value:
            problems.append(f"{family} computes {_option(name)} {_shown(theirs.get(name))}, this model "
                            f"{_shown(value)}")
    if family == "marian" and cfg.position_encoding == "sinusoidal":
        table = model.own_state_dict().get("positional")
        if table is None or not torch.equal(table.float().cpu(), marian_positions(cfg.max_len, cfg.d_model)):
            problems.append("marian's sinusoids are sines then cosines in halves, this model's are "
                            "interleaved (--position-encoding)")
    return problems


def _shown(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _comparable(cfg: ModelConfig, family: str) -> dict[str, Any]:
    """The options that decide what the model computes, as comparable values."""
    fields = {k: v for k, v in cfg.to_dict().items()
              if k not in (*SAME_EITHER_WAY, "tie_embeddings", "tie_output", "src_vocab_size", "src_pad_id")}
    fields["norm_eps"] = cfg.norm_epsilon
    if fields.get("kv_heads") == 0:
        fields["kv_heads"] = cfg.n_heads
    if family == "bart" and cfg.position_encoding == "sinusoidal":
        fields["position_encoding"] = "learned"  # a fixed table is a learned one that was not trained
    if family in T5_LIKE:  # relative positions reach any length; minitx's positions only cap it
        fields.pop("max_len")
    return fields


# ---------------------------------------------------------------------------------------------
# config.json, generation_config.json


def _inverse(table: dict[str, str]) -> dict[str, str]:
    """minitx's value -> the first of the folder's spellings that reads as it."""
    return {v: k for k, v in reversed(table.items())}


def folder_config(cfg: ModelConfig, family: str, model_type: str = "") -> dict[str, Any]:
    """config.json for the model's options: what hf_weights.model_config reads back as them.
    model_type: the base folder's, where it names the family another way (mt5 is a t5)."""
    kind = model_type if FAMILIES.get(model_type) == family else family
    ids = {"pad_token_id": cfg.pad_id, "eos_token_id": cfg.eos_id, "decoder_start_token_id": cfg.sos_id}
    common = {"model_type": kind, "architectures": [ARCHITECTURES[kind]], "is_encoder_decoder": True,
              "vocab_size": cfg.vocab_size, "d_model": cfg.d_model, **ids}
    if family in T5_LIKE:
        d_kv = cfg.d_head or cfg.d_model // cfg.n_heads
        proj = _inverse(T5_FEED_FORWARD)[cfg.activation]
        config = {**common, "d_kv": d_kv, "d_ff": cfg.d_ff, "num_layers": cfg.n_encoder_layers,
                  "num_decoder_layers": cfg.n_decoder_layers, "num_heads": cfg.n_heads,
                  "relative_attention_num_buckets": cfg.relative_buckets,
                  "relative_attention_max_distance": cfg.relative_max_distance,
                  "feed_forward_proj": proj, "is_gated_act": proj.startswith("gated-"),
                  "layer_norm_epsilon": cfg.norm_epsilon, "dropout_rate": cfg.dropout,
                  "tie_word_embeddings": cfg.tie_output, "scale_decoder_outputs": cfg.scale_output}
        if cfg.max_len > 512:
            config["n_positions"] = cfg.max_len
        return config
    config = {**common, "encoder_layers": cfg.n_encoder_layers, "decoder_layers": cfg.n_decoder_layers,
              "encoder_attention_heads": cfg.n_heads, "decoder_attention_heads": cfg.n_heads,
              "encoder_ffn_dim": cfg.d_ff, "decoder_ffn_dim": cfg.decoder_ff_width,
              "max_position_embeddings": cfg.max_len,
              "activation_function": _inverse(ACTIVATIONS)[cfg.activation],
              "scale_embedding": cfg.embed_scale, "dropout": cfg.dropout, "attention_dropout": 0.0,
              "activation_dropout": 0.0, "tie_word_embeddings": cfg.tie_output}
    if family == "marian":  # separate vocabularies: vocab_size is the source's
        config.update(vocab_size=cfg.src_vocab_size or cfg.vocab_size, decoder_vocab_size=cfg.vocab_size,
                      share_encoder_decoder_embeddings=not cfg.src_vocab_size)
    return config


def generation_config(generation: Generation, cfg: ModelConfig, positions: int) -> dict[str, Any]:
    """generation_config.json: what hf_generation.read_generation reads back as `generation`. A
    minitx model's own rule (max_length 0: the task decides) becomes the model's positions."""
    g = generation
    data: dict[str, Any] = {"decoder_start_token_id": g.start, "pad_token_id": g.pad,
                            "eos_token_id": g.eos[0] if len(g.eos) == 1 else list(g.eos),
                            "max_length": g.max_length or positions}
    lists = {"bad_words_ids": [list(w) for w in g.bad_words], "suppress_tokens": list(g.suppressed),
             "begin_suppress_tokens": list(g.begin_suppressed)}
    ids = {"forced_bos_token_id": g.forced_bos, "forced_eos_token_id": g.forced_eos}  # 0 is an id
    counts = {"max_new_tokens": g.max_new_tokens, "min_length": g.min_length,
              "no_repeat_ngram_size": g.no_repeat_ngram_size, "num_beams": g.num_beams - 1}
    data.update({k: v for k, v in lists.items() if v})
    data.update({k: v for k, v in ids.items() if v is not None})
    data.update({k: v for k, v in counts.items() if v})
    if g.num_beams > 1:
        data["num_beams"] = g.num_beams
    if g.length_penalty != 1.0:
        data["length_penalty"] = g.length_penalty
    if g.early_stopping:
        data["early_stopping"] = g.early_stopping
    if g.forced_bos is not None:
        data["bos_token_id"] = g.forced_bos
    # The rules that change scores rather than ban tokens, each written only when it is not
    # generate()'s neutral default, hf_generation's COMPUTED (the folder then reads back as the
    # same Generation).
    scores: dict[str, Any] = {
        "repetition_penalty": g.repetition_penalty,
        "encoder_repetition_penalty": g.encoder_repetition_penalty,
        "sequence_bias": [[list(words), bias] for words, bias in g.sequence_bias] or None,
        "encoder_no_repeat_ngram_size": g.encoder_no_repeat_ngram_size,
        "exponential_decay_length_penalty": (list(g.exponential_decay_length_penalty)
                                             if g.exponential_decay_length_penalty else None),
        "remove_invalid_values": g.remove_invalid_values,
        "renormalize_logits": g.renormalize_logits,
    }
    data.update({k: v for k, v in scores.items() if v != COMPUTED[k]})
    return data


# ---------------------------------------------------------------------------------------------
# Weights


def folder_state(model: Seq2Seq, family: str) -> dict[str, torch.Tensor]:
    """The model's tensors under the folder's names, as transformers' save_pretrained writes
    them: a tied table once (shared.weight), lm_head only when the output has its own table,
    Marian's sinusoids not at all (transformers computes them from their shape)."""
    cfg, prefix = model.cfg, PREFIX[family]
    own = {k: t.detach().to("cpu", torch.float32) for k, t in model.own_state_dict().items()}
    state = {prefix + theirs: own[mine] for mine, theirs in layer_names(family, cfg).items()}
    if cfg.src_vocab_size:  # Marian's separate vocabularies: a table a side, no shared one
        state[prefix + "encoder.embed_tokens.weight"] = own["src_embed.weight"]
        state[prefix + "decoder.embed_tokens.weight"] = own["tgt_embed.weight"]
    else:
        state[prefix + "shared.weight"] = own["src_embed.weight"]
    if not cfg.tie_output:
        state["lm_head.weight"] = own["output.weight"]
    if cfg.bias and family not in NO_OUTPUT_BIAS:
        state["final_logits_bias"] = own["output.bias"].reshape(1, -1)
    if family in SAVED_POSITIONS:  # (positions, d) a side, as the folder's own are
        for side, stack in (("src", "encoder"), ("tgt", "decoder")):
            state[f"{prefix}{stack}.embed_positions.weight"] = own[f"{side}_positions.weight"]
    if family in OFFSET_POSITIONS:
        for side, stack in (("src", "encoder"), ("tgt", "decoder")):
            table = own.get(f"{side}_positions.weight", own.get("positional"))  # (positions, d)
            # rows 0 and 1 are never looked up (position p is row p + 2): zeros
            unused = torch.zeros(BART_POSITION_OFFSET, cfg.d_model)
            state[f"{prefix}{stack}.embed_positions.weight"] = torch.cat([unused, table])
    return {k: t.contiguous().clone() for k, t in state.items()}  # no shared storage: safetensors refuses it


# ---------------------------------------------------------------------------------------------
# Writing


def check_out(out: Path, force: bool) -> None:
    """An existing DIR with anything in it is replaced only with force; a file is never."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"{out} exists and is not empty (--force replaces it)")


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A new folder to write into that becomes `out` (replacing it) only once the block ends
    without an error: a failed export leaves no half-written folder, and `out`'s old files stay
    until the new ones are whole. On an error the parent folders made for it go too."""
    created = next((p for p in reversed(out.absolute().parents) if not p.exists()), None)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield staging
        staging.chmod(0o755)  # mkdtemp made it private; a folder to share reads as any other
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
        if created is not None and not out.exists():  # the folders made for it, on an error
            shutil.rmtree(created, ignore_errors=True)


def export_folder(model: Seq2Seq, task: Task, out: str | Path, force: bool = False) -> Exported:
    """Write the model as a Hugging Face folder at `out`; ExportError (one line) if it cannot be."""
    out = Path(out)
    check_out(out, force)
    family, matched = family_for(model, task)
    cfg = model.cfg
    model_type = task.origin.model_type if task.origin is not None else ""
    written = {"config.json": json_bytes(folder_config(cfg, family, model_type)),
               "generation_config.json": json_bytes(generation_config(model.generation, cfg,
                                                                      _longest(task, cfg.max_len))),
               **tokeniser_files(task)}
    with staged_folder(out) as staging:
        for name, data in written.items():
            (staging / name).write_bytes(data)
        save_file(folder_state(model, family), str(staging / "model.safetensors"), metadata={"format": "pt"})
        _check_written(staging, model, task, _longest(task, cfg.max_len))
    return Exported(out, family, sorted([*written, "model.safetensors"]), matched)


def _longest(task: Task, positions: int) -> int:
    """generation_config.json's max_length for a model of minitx's own rule: the task's cap plus
    the start token where the cap does not depend on the source (dates, a data file's pairs), else
    the model's positions (a digit task stops a couple of tokens past the source's length, which
    transformers cannot say: an output that never ends runs longer there)."""
    cap = task.decode_cap(1, positions)
    return cap + 1 if cap == task.decode_cap(positions, positions) else positions


def _check_written(folder: Path, model: Seq2Seq, task: Task, longest: int) -> None:
    """The folder opened again computes the model: the same options, weights and generation
    settings, and tokenisers that read text as the model's do."""
    try:
        read = read_model(folder)
        src_vocab, vocab = read_tokenisers(folder, read.config, read.model.cfg.sos_id)
    except ImportFileError as e:
        raise ExportError(f"the written folder does not open again: {e}") from None
    mine, theirs = model.cfg, read.model.cfg
    for name in (f.name for f in dataclasses.fields(ModelConfig)):
        if name in SAME_EITHER_WAY or name == "position_encoding" or (name == "max_len" and
                                                                       mine.position_encoding == "relative"):
            continue
        a, b = getattr(mine, name), getattr(theirs, name)
        if name == "norm_eps":
            a, b = mine.norm_epsilon, theirs.norm_epsilon
        if a != b:
            raise ExportError(f"the written folder reads back with {name} {b}, not {a}")
    own, back = model.own_state_dict(), read.model.own_state_dict()
    for name, tensor in own.items():
        other = back.get(name, back.get("src_positions.weight") if name == "positional" else None)
        if other is None or not torch.equal(tensor.detach().cpu().float(), other.float()):
            raise ExportError(f"the written folder's {name} differs from the model's")
    expected = model.generation
    if not expected.max_length and not expected.max_new_tokens:  # minitx's rule: the task's cap
        expected = dataclasses.replace(expected, max_length=longest)
    if read.model.generation != expected:
        raise ExportError("the written generation_config.json reads back as other generation settings")
    if isinstance(task.vocab, SubwordVocab):
        same = vocab.to_dict() == task.vocab.to_dict() and src_vocab.to_dict() == task.src_vocab.to_dict()
    else:  # a vocabulary of minitx's own: the same token at every id
        same = all(vocab.tokens[i] == task.vocab.tokens[i] for i in range(task.vocab.size))
    if not same:
        raise ExportError("the written tokeniser files read back as another tokeniser")
