"""The Train form's fields as options, apart from the widget that shows them
(tui/app/widgets/train_form.py): which fields there are and in what order, the type and the
choices of each (core's own lists), what each shows for a pair of configs, which a start locks
(a resumed run frees only what core's resume rule frees; a fine-tune keeps its base's
architecture and task), and the starts themselves. No Textual here, and nothing imports torch at
module level.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

SOURCE = "from"  # not an option: which configs the fields start from
DATA_TASK = "data"  # core's name of a data file's task (core.data.task.DATA_TASK)
# option name -> label, in the form's order after `from`: the data, the optimiser, the model's
# size, its components (docs/components.md), when to stop and what to record, and last a data
# file of your own with its tokenisation and the attention pattern it should show.
FIELDS = {
    "task": "task", "lengths": "lengths",
    "steps": "steps", "batch_size": "batch", "lr": "lr", "schedule": "schedule",
    "optimizer": "optim", "warmup": "warmup", "dropout": "dropout", "seed": "seed", "device": "device",
    "d_model": "d_model", "heads": "heads", "kv_heads": "K/V", "layers": "layers",
    "norm": "norm", "norm_kind": "kind", "activation": "ffn", "position_encoding": "pos",
    "until": "until", "probe_source": "probe", "tokens": "tokens", "expect": "expect",
    "data": "data", "valid": "held-out", "general": "general",
    # a fine-tune's own (shown in the cells of the fields its base decides): LoRA, how a step
    # holds its memory, the course's workflow, the pair's languages and guided alignment (LoRA's
    # dropout: the command line's)
    "lora_rank": "lora", "lora_alpha": "alpha", "lora_targets": "targets",
    "precision": "precision", "gradient_checkpointing": "ckpt",
    "keep_best": "keep best", "patience": "patience", "src_lang": "src lang", "tgt_lang": "tgt lang",
    "alignments": "alignments", "guided_head": "guided head", "guided_weight": "g.weight",
}
PROBES_SEPARATOR = "|"  # a fine-tune's probe field holds several sources: "the cat | a house"
FINE_TUNE_ONLY = ("general",)  # pairs it should still handle: forgetting measured on them
# Fields only a fine-tune shows (the others have none of them in their rows)
FINE_TUNE_FIELDS = ("lora_rank", "lora_alpha", "lora_targets", "precision", "gradient_checkpointing",
                    "keep_best", "patience", "src_lang", "tgt_lang", "alignments", "guided_head",
                    "guided_weight")
FILES = ("alignments",)  # a path, checked as `data`'s is
OPTIONAL = ("kv_heads", "lora_rank")  # may stay empty, meaning "not given": core decides (K/V heads = heads)
CHOICES = ("task", "schedule", "optimizer", "norm", "norm_kind", "activation", "position_encoding",
           "device", "tokens", "expect", "keep_best", "precision",
           "gradient_checkpointing")  # picked from lists core defines, not typed
DATA_ONLY = ("tokens", "expect", "valid")  # they apply to a data file only
# What a fine-tune takes from its base, besides the model options: its task and tokenisers
# (core's planned_fine_tune lets only the dropout of the architecture differ: how it trains).
BASE_DECIDES = ("task", "lengths", "tokens", "expect", "layers")
EXPECT_LABELS = {"": "none", "anti-diagonal": "anti-diag"}  # what `expect` shows: short, never cut
LIST_SEPARATOR = ","  # a tuple field's values in one text, as the CLI takes them (--lora-targets)
# What each field is, shown as its tooltip (train's --help says the same of its option)
HELP = {
    "task": "the built-in task to learn (a data file is its own task)",
    "lengths": "the task's source lengths, MIN-MAX such as 4-10",
    "steps": "optimiser steps of the run", "batch_size": "pairs a step",
    "lr": "the peak learning rate", "schedule": "the learning rate after warmup",
    "optimizer": "adamw, or adafactor (T5's)", "warmup": "linear warmup steps",
    "dropout": "the model's dropout while it trains", "seed": "seed for initialisation and data",
    "device": "where it trains: auto picks cuda when there is one",
    "d_model": "the model's width", "heads": "attention heads a layer",
    "kv_heads": "K/V heads the query heads share (empty: one each)",
    "layers": "encoder and decoder layers", "norm": "where each sublayer's norm is: post or pre",
    "norm_kind": "layer norm or RMS norm", "activation": "the feed-forward's activation",
    "position_encoding": "how positions enter the model",
    "until": "stop once held-out exact match reaches this (0: never)",
    "probe_source": "the source whose attention is snapshotted as it trains",
    "tokens": "how a data file's text becomes tokens: characters or words",
    "expect": "the attention pattern a data file's pairs should show",
    "data": "a file of source/target pairs to train on", "valid": "held-out pairs to measure on",
    "general": "pairs a fine-tune should still handle: forgetting is measured on them",
    "lora_rank": "LoRA rank: train only rank-R adapters of the attention projections (0: a full fine-tune)",
    "lora_alpha": "LoRA alpha: the adapters' scale is alpha / rank",
    "lora_targets": "the projections LoRA adapts, comma-separated",
    "precision": "fp32, or bf16 autocast (the frozen base in bf16 under LoRA): less memory",
    "gradient_checkpointing": "recompute each layer in backward: the same gradients, less memory, slower",
    "keep_best": "also keep the best evaluation's weights, by this metric (NAME.best.safetensors)",
    "patience": "stop after N evaluations without a better keep-best metric (0: never)",
    "src_lang": "the source's language: the data's key, a multilingual model's code",
    "tgt_lang": "the target's language: the data's key, a multilingual model's code",
    "alignments": "word links of data's pairs (Pharaoh i-j, line i = pair i), taught to the guided head",
    "guided_head": "LAYER:HEAD (from 1): the cross-attention head taught the alignments",
    "guided_weight": "the guided loss's weight beside the translation loss",
}


def option_types() -> dict[str, str]:
    """option name -> 'int' | 'float' | 'str' | 'bool': the type of the config field it sets."""
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.options import MODEL_OPTIONS, train_options

    model = {f.name: f.type for f in dataclasses.fields(ModelConfig)}
    train = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    types = {name: model[field] for name, field in MODEL_OPTIONS.items()}
    types.update({name: train[field] for name, field in train_options().items()})
    types.update(layers="int", lengths="str")
    return types


def typed_options(values: dict[str, str | None]) -> dict[str, Any]:
    """Form text -> option values of the config fields' types; OptionError for bad text."""
    from minitx.core.options import OptionError

    types, typed = option_types(), {}
    for name, text in values.items():
        kind = types.get(name, "str")
        if kind.startswith("tuple") and text is not None:  # "q_proj, v_proj": core checks each
            typed[name] = tuple(t.strip() for t in text.split(LIST_SEPARATOR) if t.strip())
            continue
        if kind == "bool" and text is not None:  # a choice of off and on: field_texts' str(bool)
            typed[name] = text == str(True)
            continue
        if kind not in ("int", "float") or text is None:
            typed[name] = text
            continue
        try:
            typed[name] = int(text) if kind == "int" else float(text)
        except ValueError:
            raise OptionError(name, f"must be {'a whole number' if kind == 'int' else 'a number'}, "
                                    f"got {text!r}") from None
    return typed


def choice_values() -> dict[str, list]:
    """What each CHOICES field offers: core's own lists (values, or (value, label) pairs)."""
    from minitx.core import config
    from minitx.core.data.task import EXPECTATIONS
    from minitx.core.data.tasks import TASKS

    return {"task": list(TASKS), "schedule": list(config.SCHEDULES),
            "optimizer": list(config.OPTIMIZERS), "norm": list(config.NORMS),
            "norm_kind": list(config.NORM_KINDS), "activation": list(config.ACTIVATIONS),
            "position_encoding": list(config.POSITION_ENCODINGS), "device": list(config.DEVICES),
            "tokens": list(config.TOKENISATIONS),
            "expect": [(e, EXPECT_LABELS.get(e, e)) for e in EXPECTATIONS],
            "keep_best": [("", "off"), *config.KEEP_BEST], "precision": list(config.PRECISIONS),
            "gradient_checkpointing": [(str(False), "off"), (str(True), "on")]}


@functools.cache
def probe_hint(task: str) -> str:
    """The probe field's placeholder: what an empty probe means for `task`."""
    from minitx.core.data.tasks import get_task

    if task == "fine-tune":
        return f"empty: 3 held-out; a {PROBES_SEPARATOR} b"
    if task == DATA_TASK:
        return "empty: the first held-out pair"
    example = get_task(task).example_batch()
    return f"empty: {get_task(task).format(example.src[0])}"


def own_lengths(task: str) -> bool:
    """The task's sources have lengths of their own (a data file, dates): `lengths` does not apply."""
    from minitx.core.data.tasks import TASKS

    return task == DATA_TASK or task not in TASKS or not TASKS[task].exact_lengths


def field_texts(model_cfg, train_cfg) -> dict[str, str]:
    """What each field shows for a pair of configs."""
    from minitx.core.options import MODEL_OPTIONS, train_options

    values = {**{n: getattr(model_cfg, f) for n, f in MODEL_OPTIONS.items()},
              **{n: getattr(train_cfg, f) for n, f in train_options().items()},
              "layers": model_cfg.n_decoder_layers,
              "lengths": f"{train_cfg.min_source_len}-{train_cfg.max_source_len}"}
    texts = {name: f"{values[name]:g}" if isinstance(values[name], float)
             else LIST_SEPARATOR.join(values[name]) if isinstance(values[name], tuple) else str(values[name])
             for name in FIELDS}
    if not train_cfg.lora_rank:
        texts["lora_rank"] = ""  # no LoRA: a full fine-tune (the field's placeholder says "off")
    if model_cfg.kv_heads == model_cfg.n_heads:
        texts["kv_heads"] = ""  # multi-head: empty, so a new `heads` keeps one K/V head each
    if own_lengths(train_cfg.task):
        texts["lengths"] = ""  # the file's (or the task's) own, as the field shows them
    if train_cfg.probes:  # a fine-tune's probes, in the probe field
        texts["probe_source"] = f" {PROBES_SEPARATOR} ".join(train_cfg.probes)
    return texts


def free_when_resuming() -> set[str]:
    """The fields a continued run may change: those of core's resume rule the form has."""
    from minitx.core.options import train_options
    from minitx.core.training.resume import FREE_ON_RESUME

    return {name for name, field in train_options().items() if field in FREE_ON_RESUME and name in FIELDS}


def fine_tune_locked() -> set[str]:
    """The fields a fine-tune keeps as its base has them: the architecture (but its dropout)
    and the task."""
    from minitx.core.options import MODEL_OPTIONS

    return {name for name in FIELDS if name in MODEL_OPTIONS and name != "dropout"} | set(BASE_DECIDES)


def fine_tune_train(family: str, optimizer: str = "adamw", lora: bool = False):
    """The TrainConfig a fine-tune of `family` starts from: core's defaults for it (and for the
    optimizer chosen, and LoRA's or not), on the task a data file gives once the form names one."""
    from minitx.core.config import TrainConfig
    from minitx.core.training.fine_tune import fine_tune_defaults

    return TrainConfig(**fine_tune_defaults(family, optimizer, lora))


def checked_data_path(text: str, option: str = "data") -> str:
    """A data file's path, expanded; OptionError when it is not a file (its lines are read,
    and their errors named, when the run starts)."""
    from pathlib import Path

    from minitx.core.options import OptionError

    path = Path(text).expanduser()
    if not path.is_file():
        raise OptionError(option, f"{text} is {'a folder' if path.is_dir() else 'not a file'}")
    return str(path)


@dataclasses.dataclass(frozen=True)
class Start:
    """One value of `from`: the configs the fields start from."""

    label: str
    model: Any  # core.config.ModelConfig
    train: Any  # core.config.TrainConfig
    resume_path: str | None = None  # set: continue this file's run
    resume_step: int = 0
    init: str | None = None  # set: fine-tune this model (its path), `train`'s --init
    # the model a fine-tune starts from (tui.app.loaded.LoadedModel), or continues; not compared
    base: Any = dataclasses.field(default=None, compare=False)
    family: str = ""  # a fine-tune's family: which of core's defaults it starts from

    def train_for(self, optimizer: str, lora: bool = False):
        """The train config the fields start from, a fine-tune's for the optimizer chosen (its
        lr and weight decay are the optimizer's) and for LoRA or not (its lr is LoRA's)."""
        return fine_tune_train(self.family, optimizer, lora) if self.init else self.train
