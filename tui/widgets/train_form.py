"""The Train screen's form: named values in, (ModelConfig, TrainConfig) out.

Every field is named after its option in core.options (`batch_size`, `heads`, `lengths`, ...)
and the form turns its text into configs with core.options.configs_from_options, the one
function the CLI uses too; an OptionError names the field to mark. Adding a field: one entry in
FIELDS (and in CHOICES if it picks from a list core defines).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.widgets import Input, Label, Select

# option name -> label, in the form's order (four to a row); the fourth row is the component
# switches (docs/components.md), the last a data file of your own and its tokenisation
FIELDS = {
    "task": "task", "steps": "steps", "batch_size": "batch", "lr": "lr",
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
CHOICES = ("task", "norm", "norm_kind", "activation", "position_encoding", "device", "tokens")  # core's lists
RUN_KEYS = ("space", "x", "w")  # never part of a form value, so they drive the run anywhere


class FormInput(Input):
    BINDINGS = [Binding("escape", "screen.leave_form", "leave form")]

    def check_consume_key(self, key: str, character: str | None) -> bool:
        # An Input claims every printable key, which hides even priority bindings.
        return key not in RUN_KEYS and super().check_consume_key(key, character)


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


class TrainForm(Grid):
    def __init__(self) -> None:
        super().__init__(id="form")
        self.recipe = None  # core.config.Recipe the form starts from
        self.error = ""  # the form's first problem, "option: message"

    def compose(self) -> ComposeResult:
        for name, label in FIELDS.items():
            with Horizontal(classes="field wide" if name in WIDE else "field", id=f"field-{name}"):
                yield Label(label, classes="field-label")
                if name in CHOICES:
                    yield Select([], id=name, compact=True, allow_blank=True)
                else:
                    yield FormInput(id=name, compact=True, placeholder=PLACEHOLDERS.get(name, ""))

    def fill(self, recipe, choices: dict[str, list[str]]) -> None:
        """Show a recipe's values; `choices` lists what each choice field offers."""
        from minitx.core.options import MODEL_OPTIONS, train_options

        self.recipe = recipe
        fields = {**{n: getattr(recipe.model, f) for n, f in MODEL_OPTIONS.items()},
                  **{n: getattr(recipe.train, f) for n, f in train_options().items()},
                  "layers": recipe.model.n_decoder_layers}
        if recipe.model.kv_heads == recipe.model.n_heads:
            fields["kv_heads"] = ""  # multi-head: empty, so a new `heads` keeps one K/V head each
        for name in FIELDS:
            value = fields[name]
            if name in CHOICES:
                select = self.query_one(f"#{name}", Select)
                select.set_options([(o, o) for o in choices[name]])
                select.value = value
            else:
                self.query_one(f"#{name}", Input).value = f"{value:g}" if isinstance(value, float) \
                    else str(value)

    def values(self) -> dict[str, str | None]:
        values = {}
        for name in FIELDS:
            widget = self.query_one(f"#{name}")
            values[name] = widget.value if isinstance(widget, Input) else \
                (None if widget.value is Select.BLANK else widget.value)
            if name in OPTIONAL and not (values[name] or "").strip():
                values[name] = None
        return values

    def options(self) -> dict[str, str | None]:
        """The values as options: a data file is the task (the task field then says nothing),
        and without one the tokenisation says nothing either."""
        values = self.values()
        values["data"] = (values.get("data") or "").strip() or None
        if values["data"] is None:
            values["tokens"] = None
        else:
            values["task"] = None
        return values

    def configs(self):
        """(ModelConfig, TrainConfig) from the recipe and the form; OptionError names the field."""
        from minitx.core.options import OptionError, configs_from_options

        options = self.options()
        data = options["data"]
        if data is not None:  # cheap checks here; the file's lines are read when the run starts
            from pathlib import Path

            path = Path(data).expanduser()
            if not path.is_file():
                raise OptionError("data", f"{data} is {'a folder' if path.is_dir() else 'not a file'}")
            options["data"] = str(path)
        return configs_from_options(self.recipe.model, self.recipe.train, typed_options(options))

    def validate(self):
        """Inline validation: the configs, or None with the first problem in `error` and its
        field marked."""
        from minitx.core.options import OptionError

        if self.recipe is None:
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
