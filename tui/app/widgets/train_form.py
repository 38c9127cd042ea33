"""The Train screen's form: where a run starts from, and its named values.

`from` picks the configs the fields start from: a recipe, the open checkpoint's own configs
(`like`), the open checkpoint's saved run (`resume`, which only lets steps, device and
until change), or a fine-tune of the open model (`fine-tune`: `minitx train --init`, from
core's fine-tuning defaults for its family; its architecture and tokenisers are the model's, so
only the training fields and the pairs files can change, and the pairs file must be given: the
fields the base decides leave the rows, and a fine-tune's own (FINE_TUNE_FIELDS: LoRA, keep best
and patience, the languages, guided alignment) take their cells).
Every other field is named after its option in core.options (`batch_size`, `heads`, `lengths`,
...) and the form turns what was changed into configs with core.options.configs_from_options,
the one function the CLI uses too; an OptionError names the field to mark. A data file is its
own task: while one is typed the task field says so and the lengths are the file's (neither can
be edited), and only then do `tokens`, `expect` and `held-out` apply.

The fields themselves (which, their types, choices and texts, what a start locks) are
tui/app/form_fields.py's; this module lays them out and edits them. Adding a field: one entry
in FIELDS (and in CHOICES if core gives a list of values) there; every row of both layouts
(ROW_SPANS) here must stay full.
"""

from __future__ import annotations

import math

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.widgets import Input, Label

from minitx.tui.app.form_fields import (
    CHOICES,
    DATA_ONLY,
    DATA_TASK,
    FIELDS,
    FILES,
    FINE_TUNE_FIELDS,
    FINE_TUNE_ONLY,
    HELP,
    OPTIONAL,
    PROBES_SEPARATOR,
    SOURCE,
    Start,
    checked_data_path,
    field_texts,
    fine_tune_locked,
    free_when_resuming,
    own_lengths,
    probe_hint,
    typed_options,
)
from minitx.tui.app.messages import ChoiceChanged
from minitx.tui.app.widgets.choice import ChoiceField

# Fields a row to a row, by the terminal's width: the columns of each field taking more than one.
# Four columns from 78 characters (80x24: 8 rows), three below (60x20: 11 rows); both fill every row.
ROW_SPANS = {4: {SOURCE: 2, "probe_source": 2, "data": 2, "valid": 2, "general": 2, "lora_targets": 2,
                 "alignments": 2},
             3: {SOURCE: 1, "probe_source": 2, "data": 2, "valid": 3, "general": 3, "lora_targets": 2,
                 "alignments": 3, "guided_weight": 2}}
# A fine-tune's own fields take the cells of those its base decides, and one row more (9 at
# 80x24); these spans fill its rows (14 at three columns)
FINE_TUNE_SPANS = {4: {"guided_head": 2, "guided_weight": 2},
                   3: {SOURCE: 2, "probe_source": 3, "data": 3, "lora_alpha": 2, "tgt_lang": 2}}
FOUR_COLUMNS = 78  # the form's width from which four fields fit a row
PLACEHOLDERS = {"kv_heads": "= heads", "data": "a .tsv/.csv/.jsonl of pairs (blank: the task)",
                "valid": "blank: 5% of data", "general": "a fine-tune's: pairs to keep",
                "lora_rank": "off", "src_lang": "data's", "tgt_lang": "data's",
                "alignments": "i-j links of data's pairs", "guided_head": "L:H"}
FINE_TUNE_DATA = "pairs to learn (.tsv/.csv/.jsonl)"  # data's placeholder for a fine-tune


class FormInput(Input):
    """A typed field. Like every Input of the app it takes every printable key while it has
    focus (no key of the screen fires then): Enter starts the run, esc leaves the form."""

    BINDINGS = [Binding("escape", "screen.leave_form", "leave form")]


class TrainForm(Grid):
    def __init__(self) -> None:
        super().__init__(id="form")
        self.starts: dict[str, Start] = {}
        self.error = ""  # the form's first problem, "option: message"
        self.columns = 4
        self.tasks: list[str] = []  # the built-in tasks the task field offers without a data file
        self.choices: dict[str, list] = {}  # what each choice field offers (core's lists)
        self.task_before = ""  # the task chosen before a data file took its place
        self.lengths_before = ""  # the lengths typed before a task of its own lengths took them
        self.width = 0  # the width the rows were arranged for
        self.lora = False  # the lora field asks for LoRA: the lr shown is LoRA's

    def compose(self) -> ComposeResult:
        with Horizontal(classes="field", id="field-from"):
            yield Label("from", classes="field-label")
            yield ChoiceField(id=SOURCE)
        for name, label in FIELDS.items():
            with Horizontal(classes="field", id=f"field-{name}") as row:
                row.tooltip = HELP.get(name)
                yield Label(label, classes="field-label")
                yield ChoiceField(id=name) if name in CHOICES else FormInput(
                    id=name, compact=True, placeholder=PLACEHOLDERS.get(name, ""))

    def on_mount(self) -> None:
        self.arrange_for(self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self.arrange_for(event.size.width)

    def shown(self) -> list[str]:
        """The fields in the form's rows: a fine-tune's own in place of those its base decides."""
        start = self.start
        if start is not None and start.init:
            hidden = fine_tune_locked()
        else:
            hidden = set(FINE_TUNE_FIELDS)
        return [name for name in (SOURCE, *FIELDS) if name not in hidden]

    def arrange_for(self, width: int) -> None:
        """Four fields a row where they fit whole (80 columns), else three (60)."""
        columns = 4 if width >= FOUR_COLUMNS else 3
        fine_tune = self.start is not None and bool(self.start.init)
        spans = {**ROW_SPANS[columns], **(FINE_TUNE_SPANS[columns] if fine_tune else {})}
        shown = self.shown()
        rows = math.ceil(sum(spans.get(name, 1) for name in shown) / columns)
        self.columns, self.width = columns, width
        self.styles.grid_size_columns, self.styles.grid_size_rows, self.styles.height = columns, rows, rows
        for name in (SOURCE, *FIELDS):
            row = self.query_one(f"#field-{name}")
            row.styles.column_span = spans.get(name, 1)
            row.display = name in shown

    # The field being edited is marked on its row (its label reversed: visible without colour).
    def on_descendant_focus(self, event) -> None:
        event.widget.parent.add_class("-editing")

    def on_descendant_blur(self, event) -> None:
        event.widget.parent.remove_class("-editing")

    # -- filling ---------------------------------------------------------------------------------
    def offer(self, starts: dict[str, Start], choices: dict[str, list] | None = None,
              chosen: str | None = None) -> None:
        """The values of `from` (and of each choice field). The fields are filled again only
        when the start they show is no longer offered (or `chosen` picks another)."""
        source = self.query_one(f"#{SOURCE}", ChoiceField)
        before = self.start
        self.starts = starts
        for name, values in (choices or {}).items():
            self.query_one(f"#{name}", ChoiceField).set_choices(values)
        self.choices = choices or self.choices
        if choices and "task" in choices:
            self.tasks = list(choices["task"])
        source.set_choices([(key, start.label) for key, start in starts.items()], chosen)
        if self.start != before:
            self.fill()

    @property
    def start(self) -> Start | None:
        return self.starts.get(self.query_one(f"#{SOURCE}", ChoiceField).value)

    def locked(self) -> set[str]:
        """The fields a resumed run keeps as they were, and those a fine-tune keeps as its base."""
        start = self.start
        if start is None:
            return set()
        if start.resume_path is not None:
            return set(FIELDS) - free_when_resuming()
        return fine_tune_locked() if start.init else set()

    def fill(self) -> None:
        """Show the chosen start's values; a resumed run's fixed values cannot be edited."""
        start = self.start
        if start is None:
            return
        locked = self.locked()
        texts = field_texts(start.model, start.train)
        if start.init:  # its pairs are a data file's, still to be named
            texts.update(task=DATA_TASK, data="", valid="", general="", probe_source="")
        task = self.query_one("#task", ChoiceField)
        task.set_choices(self.tasks + ([DATA_TASK] if texts["task"] == DATA_TASK else []), texts["task"])
        if start.base is not None:  # a fine-tune's text becomes its base's pieces (subwords)
            texts["tokens"] = start.base.task.vocab.level
        tokens = self.query_one("#tokens", ChoiceField)
        tokens.set_choices([texts["tokens"]] if start.base is not None else self.choices.get("tokens", []),
                           texts["tokens"])
        for name, text in texts.items():
            widget = self.query_one(f"#{name}")
            widget.value = text
            widget.disabled = name in locked
        self.lora = bool(start.train.lora_rank)
        self.arrange_for(self.width or self.app.size.width)
        self.task_before = start.train.task if start.train.task != DATA_TASK else self.tasks[0]
        self.lengths_before = texts["lengths"] or f"{start.train.min_source_len}-{start.train.max_source_len}"
        self.follow_task()

    def follow_task(self) -> None:
        """What the data file and the task decide: with a file the task is the file's (shown, not
        chosen) and so are its lengths, and tokens and expect apply; a task whose sources have
        their own lengths (dates) takes no lengths either; the probe's hint is the task's."""
        data = (self.query_one("#data", Input).value or "").strip()
        task, lengths = self.query_one("#task", ChoiceField), self.query_one("#lengths", Input)
        locked = self.locked()
        fine_tune = self.start is not None and self.start.init
        self.query_one("#data", Input).placeholder = FINE_TUNE_DATA if fine_tune else PLACEHOLDERS["data"]
        if data or fine_tune:
            if task.value != DATA_TASK:
                self.task_before = task.value or self.task_before
            task.set_choices([(DATA_TASK, "data file")])
        elif not data and task.value == DATA_TASK:
            task.set_choices(self.tasks, self.task_before)
        name = task.value or ""
        if own_lengths(name):
            if lengths.value:
                self.lengths_before = lengths.value
                lengths.value = ""
            lengths.placeholder = "the file's" if name == DATA_TASK else "the task's"
        elif not lengths.value:
            lengths.value = self.lengths_before
        task.disabled = bool(data) or "task" in locked
        lengths.disabled = own_lengths(name) or "lengths" in locked
        for field in DATA_ONLY:
            self.query_one(f"#{field}").disabled = not data or field in locked
        for field in FINE_TUNE_ONLY:
            self.query_one(f"#{field}").disabled = not fine_tune
        if name and self.tasks:  # core is loaded
            hint = probe_hint("fine-tune" if fine_tune else name)
            self.query_one("#probe_source", Input).placeholder = hint

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "data":  # before the screen validates the form (it bubbles on)
            self.follow_task()
        elif event.input.id == "lora_rank" and self.start is not None and self.start.init:
            lora = self.asks_lora()
            if lora != self.lora:  # a LoRA fine-tune's lr is core's LoRA lr, a full one's the family's
                self.lora = lora
                self.query_one("#lr", Input).value = f"{self.start_train().lr:g}"

    def asks_lora(self) -> bool:
        """The lora field names a rank (a bad text too: its error is the field's)."""
        return (self.query_one("#lora_rank", Input).value or "").strip() not in ("", "0")

    def start_train(self):
        """The start's train config for the optimizer chosen and LoRA or not."""
        optimizer = self.query_one("#optimizer", ChoiceField).value or "adamw"
        return self.start.train_for(optimizer, self.asks_lora())

    def on_choice_changed(self, message: ChoiceChanged) -> None:
        if message.field.id == "task":
            self.follow_task()
        elif message.field.id == "optimizer" and self.start is not None and self.start.init:
            # a fine-tune's lr is the optimizer's (Adafactor's 1e-3, AdamW's the family's)
            self.query_one("#lr", Input).value = f"{self.start_train().lr:g}"

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
        values = self.values()
        train = self.start_train()
        base = field_texts(start.model, train)
        # Only what was changed: a field left as it was keeps the start's exact value (its
        # d_ff, its activation) instead of the rules for a changed d_model or norm.
        changed = {name: text for name, text in values.items() if text != base[name]}
        for name in ("data", "task", "lengths", *DATA_ONLY, *FINE_TUNE_ONLY):  # decided below
            changed.pop(name, None)
        data = (values["data"] or "").strip()
        if start.init:  # a fine-tune of the open model: its pairs are a data file
            if not data:
                raise OptionError("data", "a fine-tune learns a file of pairs: name it here")
            changed["init"] = start.init
            # a fine-tune watches several probes: several texts (as --probe repeated gives them)
            probes = values["probe_source"] or ""
            changed["probe_source"] = [p.strip() for p in probes.split(PROBES_SEPARATOR) if p.strip()]
            general = (values["general"] or "").strip()
            if general:
                changed["general"] = checked_data_path(general, "general")
            for name in FILES:
                text = (values[name] or "").strip()
                changed.pop(name, None)
                if text:
                    changed[name] = checked_data_path(text, name)
        if data:  # a data file is the task, and its pairs their own lengths
            path = checked_data_path(data)
            if data != base["data"] or start.init:
                changed["data"] = path
            changed.update({name: values[name] for name in DATA_ONLY if values[name] != base[name]})
            valid = (values["valid"] or "").strip()
            changed.pop("valid", None)
            if valid:
                changed["valid"] = checked_data_path(valid, "valid")
            elif base["valid"]:
                changed["valid"] = ""
        else:
            if values["task"] != base["task"]:
                changed["task"] = values["task"]
            if start.train.data:  # a data run's configs, on a task of its own now
                changed.update(data="", valid="", expect="")
            if not own_lengths(values["task"] or "") and values["lengths"] != base["lengths"]:
                changed["lengths"] = values["lengths"]
        if start.init:
            for name in fine_tune_locked():  # shown as the base has them; never changed
                changed.pop(name, None)
        if start.base is not None:  # `tokens` shows the base's pieces: no option of its run
            changed.pop("tokens", None)
        model_cfg, train_cfg = configs_from_options(start.model, train, typed_options(changed))
        if start.resume_path and train_cfg.steps <= start.resume_step:
            raise OptionError("steps", f"the run is already at step {start.resume_step}; "
                                       "raise steps to continue it")
        return model_cfg, train_cfg

    def mark_field(self, option: str) -> None:
        """Mark the field of `option` (if the form has it) as the one to fix."""
        from minitx.core.options import option_for_field

        for name in FIELDS:  # a field's option may have a name of its own (lora_rank: `lora`)
            if option in (name, option_for_field(name)):
                self.query_one(f"#{name}").add_class("-invalid")

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
            self.mark_field(e.option)
            self.error = f"{e.option}: {e.message}"
            return None
        self.error = ""
        return configs
