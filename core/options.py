"""Named values -> configs: the one way the CLI (`train`, `doctor`) and the app's Train form turn
what a person typed into a ModelConfig and a TrainConfig.

Names are the command line's option names with underscores (`d_model`, `heads`, `layers`,
`batch_size`, `lengths`, ...). A value of None means "not given": the base configs (a recipe, or
a saved run) keep theirs. Every problem is an OptionError naming the option to blame, so the CLI
can point at `--heads` and the form can mark its `heads` field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.task import DATA_TASK
from minitx.core.data.tasks import TASKS

# option name -> ModelConfig field
MODEL_OPTIONS = {
    "d_model": "d_model",
    "heads": "n_heads",
    "d_ff": "d_ff",
    "encoder_layers": "n_encoder_layers",
    "decoder_layers": "n_decoder_layers",
    "dropout": "dropout",
    "positions": "max_len",
    "norm": "norm",
    "norm_kind": "norm_kind",
    "activation": "activation",
    "position_encoding": "position_encoding",
    "kv_heads": "kv_heads",
    "attention": "attention",
    "final_norms": "final_norms",
    "norm_eps": "norm_eps",
    "log_softmax": "log_softmax",
    # the Hugging Face families' components (docs/huggingface.md), to train with too
    "d_head": "d_head",
    "bias": "bias",
    "scale_scores": "scale_scores",
    "embed_scale": "embed_scale",
    "embedding_norm": "embedding_norm",
    "relative_buckets": "relative_buckets",
    "relative_max_distance": "relative_max_distance",
    "tie_embeddings": "tie_embeddings",
    "tie_output": "tie_output",
    "scale_output": "scale_output",
    "decoder_d_ff": "decoder_d_ff",
    "relative_per_layer": "relative_per_layer",
}
# Options that set something other than one field of the same name.
COMBINED_OPTIONS = ("layers", "lengths")


class OptionError(ValueError):
    """A value that cannot be used; `option` is the name (as in MODEL_OPTIONS) to blame."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option, self.message = option, message


def train_options() -> dict[str, str]:
    """option name -> TrainConfig field: every field has an option of its own name except the
    source lengths, which `lengths` sets together, and a fine-tune's probes, which several
    `probe_source` texts give (_probes)."""
    return {f.name: f.name for f in dataclasses.fields(TrainConfig)
            if f.name not in ("min_source_len", "max_source_len", "probes")}


def option_names() -> list[str]:
    """Every name configs_from_options() understands."""
    return [*MODEL_OPTIONS, *COMBINED_OPTIONS, *train_options()]


def parse_lengths(text: str) -> tuple[int, int]:
    """'4-10' -> (4, 10); '7' -> (7, 7). ValueError with a one-line message otherwise."""
    parts = str(text).replace(" ", "").split("-")
    try:
        if len(parts) == 1:
            lo = hi = int(parts[0])
        elif len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f"expected MIN-MAX such as 4-10, got {text!r}") from None
    if not 1 <= lo <= hi:
        raise ValueError(f"need 1 <= MIN <= MAX, got {text!r}")
    return lo, hi


def option_for_field(field: str) -> str:
    """The option that sets a config field (core's errors name fields)."""
    by_field = {f: o for o, f in MODEL_OPTIONS.items()}
    by_field.update({"n_encoder_layers": "layers", "n_decoder_layers": "layers",
                     "min_source_len": "lengths", "max_source_len": "lengths", "probes": "probe",
                     "lora_rank": "lora"})
    return by_field.get(field, field)


def _data_task(given: dict[str, Any], train_changes: dict[str, Any]) -> None:
    """`data` makes the task "data"; the options only a data file uses need one, and the
    source lengths belong to the digit tasks (a file's pairs, and dates, have their own)."""
    if given.get("data"):
        if given.get("task", DATA_TASK) != DATA_TASK:
            raise OptionError("task", f"a data file is its own task; drop --task {given['task']} "
                                      "or --data")
        train_changes["task"] = DATA_TASK
    else:
        for name in ("valid", "tokens", "expect"):
            if given.get(name):
                raise OptionError(name, "applies to a data file: give --data FILE too")
    task = train_changes.get("task", "")
    if "lengths" in given and (task == DATA_TASK or (task in TASKS and not TASKS[task].exact_lengths)):
        raise OptionError("lengths", f"the {task} task's sources have their own lengths "
                                     "(--positions limits them)")


def configs_from_options(
    model_cfg: ModelConfig, train_cfg: TrainConfig, options: Mapping[str, Any]
) -> tuple[ModelConfig, TrainConfig]:
    """The base configs with every given option applied.

    Rules beyond "the option sets its field":
    - `layers` sets encoder and decoder layers (`encoder_layers`/`decoder_layers` win);
    - `lengths` ("4-10") sets the source lengths, and the positional table grows to hold
      them plus SOS and EOS unless `positions` is given;
    - `d_model` without `d_ff` keeps the base's feed-forward ratio (64 -> 256 becomes 32 -> 128);
    - `norm` without `activation` takes the norm's own default activation;
    - `heads` without `kv_heads` keeps the base's query heads per K/V head (multi-head attention
      stays multi-head; 4 heads sharing 2 K/V heads become 8 sharing 4);
    - `bug` "none" means no bug;
    - `eval_every` 0 without `until` also turns off the base's `until` (nothing to stop at);
    - `data` (a file of pairs) makes the task "data"; `valid`, `tokens` and `expect` need it.
    """
    unknown = sorted(set(options) - set(option_names()))
    if unknown:
        raise OptionError(unknown[0], "not an option of minitx's configs")
    given = {k: v for k, v in options.items() if v is not None}
    model_changes = {field: given[name] for name, field in MODEL_OPTIONS.items() if name in given}
    if "layers" in given:
        model_changes.setdefault("n_encoder_layers", given["layers"])
        model_changes.setdefault("n_decoder_layers", given["layers"])
    if "d_model" in given and "d_ff" not in given and isinstance(given["d_model"], int):
        model_changes["d_ff"] = max(1, model_cfg.d_ff * given["d_model"] // model_cfg.d_model)
    if "norm" in given and "activation" not in given:
        model_changes["activation"] = ""  # back to the norm's own default
    heads = given.get("heads")
    if isinstance(heads, int) and heads > 0 and "kv_heads" not in given:
        group = model_cfg.n_heads // model_cfg.kv_heads
        if heads % group:
            raise OptionError("kv_heads", f"{heads} heads cannot keep {group} query heads per K/V "
                                          "head; give the K/V heads too")
        model_changes["kv_heads"] = heads // group
    probes = _probes(given, train_cfg)
    train_changes = {field: given[name] for name, field in train_options().items() if name in given}
    if probes:
        train_changes["probes"] = probes
    if train_changes.get("bug") == "none":
        train_changes["bug"] = ""
    if train_changes.get("eval_every") == 0 and "until" not in given:
        train_changes["until"] = 0.0
    _data_task(given, train_changes)
    if "lengths" in given:
        try:
            train_changes["min_source_len"], train_changes["max_source_len"] = parse_lengths(given["lengths"])
        except ValueError as e:
            raise OptionError("lengths", str(e)) from None
    try:
        train_cfg = train_cfg.replace(**train_changes)
        longest = _longest_source(train_cfg)
        if "positions" not in given and model_cfg.max_len < longest + 2:
            model_changes["max_len"] = longest + 2  # longer sources need a longer table
        model_cfg = model_cfg.replace(**model_changes)
    except (ValueError, TypeError) as e:  # core's messages read "field: message"
        field, _, message = str(e).partition(": ")
        raise OptionError(option_for_field(field), message or str(e)) from None
    if model_cfg.max_len < longest + 2:
        raise OptionError("positions", f"a table of {model_cfg.max_len} positions cannot hold sources "
                                       f"of {longest} tokens plus SOS and EOS")
    return model_cfg, train_cfg


def _probes(given: dict[str, Any], train_cfg: TrainConfig) -> tuple[str, ...]:
    """`probe_source` given as several texts (the CLI's repeatable --probe): a fine-tune's probes
    (returned, and taken out of `given`); a run from scratch snapshots one (left as its text)."""
    texts = given.get("probe_source")
    if not isinstance(texts, (list, tuple)):
        return ()
    del given["probe_source"]
    if given.get("init") or train_cfg.init:
        return tuple(texts)
    if len(texts) > 1:
        raise OptionError("probe_source", "a run from scratch snapshots one probe; several are for a "
                                          "fine-tune (--init)")
    if texts:
        given["probe_source"] = texts[0]
    return ()


def _longest_source(train_cfg: TrainConfig) -> int:
    """The longest source the task draws (0 for a data file: its too-long pairs are skipped)."""
    task = TASKS.get(train_cfg.task)
    if task is None:
        return 0
    return train_cfg.max_source_len if task.exact_lengths else task().max_len
