"""The Train screen's form: where a run starts from, and its named values.

`from` picks the configs the fields start from: a recipe, the open checkpoint's own configs
(`like`), or the open checkpoint's saved run (`resume`, which only lets steps, device and
until change). Every other field is named after its option in core.options (`batch_size`, `heads`,
`lengths`, ...) and the form turns what was changed into configs with
core.options.configs_from_options, the one function the CLI uses too; an OptionError names the
field to mark.

Adding a field: one entry in FIELDS (and in CHOICES if core gives a list of values), and grow
`#form`'s grid in minitx.tcss if it needs another row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.widgets import Input, Label

from minitx.tui.app.widgets.choice import ChoiceField

SOURCE = "from"  # not an option: which configs the fields start from
# option name -> label, in the form's order, four to a row after `from` (which takes two): the
# data, the optimiser, the model's size, its components (docs/components.md), when to stop and
# what to record, and last a data file of your own with its tokenisation. A WIDE field takes
# the rest of its row.
FIELDS = {
    "task": "task", "lengths": "lengths",
    "steps": "steps", "batch_size": "batch", "lr": "lr", "schedule": "schedule",
    "warmup": "warmup", "dropout": "dropout", "seed": "seed", "device": "device",
    "d_model": "d_model", "heads": "heads", "kv_heads": "K/V", "layers": "layers",
    "norm": "norm", "norm_kind": "kind", "activation": "ffn", "position_encoding": "pos",
    "until": "until", "probe_source": "probe",
    "data": "data", "tokens": "tokens",
}
WIDE = ("probe_source", "data")  # fields that take the rest of their row
PLACEHOLDERS = {"probe_source": "digits, e.g. 3 1 4 1 5 (empty: 7 2 9 0 4 6)", "kv_heads": "= heads",
                "data": "a .tsv/.csv/.jsonl of pairs (blank: the task)"}
OPTIONAL = ("kv_heads",)  # may stay empty, meaning "not given": core decides (K/V heads = heads)
CHOICES = ("task", "schedule", "norm", "norm_kind", "activation", "position_encoding",
           "device", "tokens")  # picked from lists core defines, not typed
RUN_KEYS = ("space", "x", "w", "u")  # never part of a form value, so they drive the run anywhere
SPACED = ("probe_source", "data")  # values with spaces ('3 1 4'): there space types, and Enter starts


class FormInput(Input):
    BINDINGS = [Binding("escape", "screen.leave_form", "leave form")]

    def __init__(self, *, id: str, spaced: bool = False, **options) -> None:
        super().__init__(id=id, **options)
        self.run_keys = tuple(k for k in RUN_KEYS if k != "space") if spaced else RUN_KEYS

    def check_consume_key(self, key: str, character: str | None) -> bool:
        # An Input claims every printable key, which hides even priority bindings.
        return key not in self.run_keys and super().check_consume_key(key, character)


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
        if kind not in ("int", "float") or text is None:
            typed[name] = text
            continue
        try:
            typed[name] = int(text) if kind == "int" else float(text)
        except ValueError:
            raise OptionError(name, f"must be {'a whole number' if kind == 'int' else 'a number'}, "
                                    f"got {text!r}") from None
    return typed


def choice_values() -> dict[str, list[str]]:
    """What each CHOICES field offers: core's own lists."""
    from minitx.core import config
    from minitx.core.data.tasks import TASKS

    return {"task": list(TASKS), "schedule": list(config.SCHEDULES), "norm": list(config.NORMS),
            "norm_kind": list(config.NORM_KINDS), "activation": list(config.ACTIVATIONS),
            "position_encoding": list(config.POSITION_ENCODINGS), "device": list(config.DEVICES),
            "tokens": list(config.TOKENISATIONS)}


def field_texts(model_cfg, train_cfg) -> dict[str, str]:
    """What each field shows for a pair of configs."""
    from minitx.core.options import MODEL_OPTIONS, train_options

    values = {**{n: getattr(model_cfg, f) for n, f in MODEL_OPTIONS.items()},
              **{n: getattr(train_cfg, f) for n, f in train_options().items()},
              "layers": model_cfg.n_decoder_layers,
              "lengths": f"{train_cfg.min_source_len}-{train_cfg.max_source_len}"}
    texts = {name: f"{values[name]:g}" if isinstance(values[name], float) else str(values[name])
             for name in FIELDS}
    if model_cfg.kv_heads == model_cfg.n_heads:
        texts["kv_heads"] = ""  # multi-head: empty, so a new `heads` keeps one K/V head each
    return texts


def free_when_resuming() -> set[str]:
    """The fields a continued run may change: those of core's resume rule the form has."""
    from minitx.core.options import train_options
    from minitx.core.training.resume import FREE_ON_RESUME

    return {name for name, field in train_options().items() if field in FREE_ON_RESUME and name in FIELDS}


def checked_data_path(text: str) -> str:
    """A data file's path, expanded; OptionError when it is not a file (its lines are read,
    and their errors named, when the run starts)."""
    from pathlib import Path

    from minitx.core.options import OptionError

    path = Path(text).expanduser()
    if not path.is_file():
        raise OptionError("data", f"{text} is {'a folder' if path.is_dir() else 'not a file'}")
    return str(path)


@dataclasses.dataclass(frozen=True)
class Start:
    """One value of `from`: the configs the fields start from."""

    label: str
    model: Any  # core.config.ModelConfig
    train: Any  # core.config.TrainConfig
    resume_path: str | None = None  # set: continue this file's run
    resume_step: int = 0


class TrainForm(Grid):
    def __init__(self) -> None:
        super().__init__(id="form")
        self.starts: dict[str, Start] = {}
        self.error = ""  # the form's first problem, "option: message"

    def compose(self) -> ComposeResult:
        with Horizontal(classes="field", id="field-from"):
            yield Label("from", classes="field-label")
            yield ChoiceField(id=SOURCE)
        for name, label in FIELDS.items():
            with Horizontal(classes="field wide" if name in WIDE else "field", id=f"field-{name}"):
                yield Label(label, classes="field-label")
                yield ChoiceField(id=name) if name in CHOICES else FormInput(
                    id=name, spaced=name in SPACED, compact=True, placeholder=PLACEHOLDERS.get(name, ""))

    # The field being edited is marked on its row (its label reversed: visible without colour).
    def on_descendant_focus(self, event) -> None:
        event.widget.parent.add_class("-editing")

    def on_descendant_blur(self, event) -> None:
        event.widget.parent.remove_class("-editing")

    # -- filling ---------------------------------------------------------------------------------
    def offer(self, starts: dict[str, Start], choices: dict[str, list[str]] | None = None,
              chosen: str | None = None) -> None:
        """The values of `from` (and of each choice field). The fields are filled again only
        when the start they show is no longer offered (or `chosen` picks another)."""
        source = self.query_one(f"#{SOURCE}", ChoiceField)
        before = self.start
        self.starts = starts
        for name, values in (choices or {}).items():
            self.query_one(f"#{name}", ChoiceField).set_choices(values)
        source.set_choices([(key, start.label) for key, start in starts.items()], chosen)
        if self.start != before:
            self.fill()

    @property
    def start(self) -> Start | None:
        return self.starts.get(self.query_one(f"#{SOURCE}", ChoiceField).value)

    def fill(self) -> None:
        """Show the chosen start's values; a resumed run's fixed values cannot be edited."""
        start = self.start
        if start is None:
            return
        free = free_when_resuming()
        for name, text in field_texts(start.model, start.train).items():
            widget = self.query_one(f"#{name}")
            widget.value = text
            widget.disabled = start.resume_path is not None and name not in free

    def values(self) -> dict[str, str | None]:
        """Each field's text (a choice's value); None for an OPTIONAL field left empty."""
        values = {name: self.query_one(f"#{name}").value for name in FIELDS}
        for name in OPTIONAL:
            if not (values[name] or "").strip():
                values[name] = None
        return values

    # -- configs ---------------------------------------------------------------------------------
    def configs(self):
        """(ModelConfig, TrainConfig) from the start and the fields changed from it;
        OptionError names the field to blame."""
        from minitx.core.options import OptionError, configs_from_options

        start = self.start
        base = field_texts(start.model, start.train)
        # Only what was changed: a field left as it was keeps the start's exact value (its
        # d_ff, its activation) instead of the rules for a changed d_model or norm.
        changed = {name: text for name, text in self.values().items() if text != base[name]}
        data = (changed.pop("data", None) or "").strip()
        if data:  # a data file is the task, and its pairs their own lengths: those fields say nothing
            changed.pop("task", None)
            changed.pop("lengths", None)
            changed["data"] = checked_data_path(data)
        elif not start.train.data:
            changed.pop("tokens", None)  # tokenisation means nothing without a data file
        model_cfg, train_cfg = configs_from_options(start.model, start.train, typed_options(changed))
        if start.resume_path and train_cfg.steps <= start.resume_step:
            raise OptionError("steps", f"the run is already at step {start.resume_step}; "
                                       "raise steps to continue it")
        return model_cfg, train_cfg

    def validate(self):
        """Inline validation: the configs, or None with the first problem in `error` and its
        field marked."""
        from minitx.core.options import OptionError

        if self.start is None:
            return None
        for name in FIELDS:
            self.query_one(f"#{name}").remove_class("-invalid")
        try:
            configs = self.configs()
        except OptionError as e:
            if e.option in FIELDS:
                self.query_one(f"#{e.option}").add_class("-invalid")
            self.error = f"{e.option}: {e.message}"
            return None
        self.error = ""
        return configs
