"""Whether the run the Train form describes can start, asked before anything is started, asked
or dropped: its task made (a data file read, every line checked), its probe source read, a
guided head found and its alignments read, and its parameters counted without building its
weights.

check_run is what a thread worker runs; FormChecks is the Train screen's side of the form: its
starts (recipes, like, resume), validating it as it is edited, checking the run it gives once it
has stayed unchanged for CHECK_DELAY, and the note under it (its first problem, or where `w`
saves and the next run's size). Nothing here imports torch at module level.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.widgets import Input, Static

from minitx.tui.app.errors import error_text
from minitx.tui.app.form_fields import SOURCE, Start, choice_values, fine_tune_train
from minitx.tui.app.messages import ChoiceChanged, FormDefaults, RunChecked
from minitx.tui.app.training import ACTIVE
from minitx.tui.render.numbers import short_count, short_path

CHECK_DELAY = 0.3  # seconds the form stays unchanged before its run is checked (a data file read)


def parameter_count(model_cfg) -> int:
    """The parameters of a model of `model_cfg`, built on torch's meta device: shapes, no memory."""
    import torch

    from minitx.core.model.transformer import Seq2Seq, parameter_breakdown

    with torch.device("meta"):
        return parameter_breakdown(Seq2Seq(model_cfg))["total"]


def check_run(model_cfg, train_cfg, base=None) -> RunChecked:
    """The form's configs checked as a run would use them; an error is 'option: message'. A
    fine-tune's (train_cfg.init) are checked against `base`, the model on screen it starts from."""
    from minitx.core.data.pair_files import DataError
    from minitx.core.training.guided_alignment import Guide
    from minitx.core.training.memory_estimate import BF16_EMULATED, bf16_is_fast, check_fine_tune
    from minitx.core.training.probe import probe_example
    from minitx.core.training.trainer import planned_fine_tune, planned_run, resolve_device
    from minitx.tui.app.loaded import as_checkpoint

    configs = (model_cfg, train_cfg)
    try:
        planned_model, planned_train, task = planned_fine_tune(as_checkpoint(base), model_cfg, train_cfg) \
            if train_cfg.init else planned_run(model_cfg, train_cfg)
        probe_example(task, planned_train.probe_source)
        if train_cfg.init:  # a fine-tune that will not fit the machine: "memory: ... would fit with ..."
            check_fine_tune(planned_model, planned_train, task, resolve_device(planned_train.device))
        if planned_train.guided_head:  # the head found, the links read and fitted to the pairs
            try:
                Guide.for_run(planned_train, task, planned_model)
            except DataError as e:
                return RunChecked(configs, error=f"alignments: {e}")
    except DataError as e:  # names the file and the line
        return RunChecked(configs, error=f"data: {e}")
    except ValueError as e:  # core's messages read "field: message"
        field, _, message = str(e).partition(": ")
        return RunChecked(configs, error=f"{field}: {message}" if message else str(e))
    device = resolve_device(planned_train.device)
    slow = BF16_EMULATED if planned_train.precision == "bf16" and not bf16_is_fast(device) else ""
    return RunChecked(configs, parameter_count(planned_model), notes=task.notes(), slow=slow)


class FormChecks:
    """Mixed into the Train screen (which has `form`, `recipes`, `state`, `start_asking` and
    `save_path`)."""

    form_configs = None  # (ModelConfig, TrainConfig) the form gives now, if it validates
    checked: RunChecked | None = None  # the last check of a run the form gave
    start_when_checked = False  # space was pressed: start once the check says it can
    _check_timer = None

    @property
    def form_error(self) -> str:
        """The form's first problem: a field's, else what the check of its run found."""
        checked = self.checked
        if not self.form.error and self.check_holds() and checked.error:
            return checked.error
        return self.form.error

    def check_holds(self) -> bool:
        """The last check is of the run the form gives now."""
        return self.checked is not None and self.form_configs is not None \
            and self.checked.configs == self.form_configs

    def draw_note(self) -> None:
        """The form's first problem, or where `w` saves and the size of the next run."""
        note, run, error = self.query_one("#form-note", Static), self.current_run, self.form_error
        if error and self.state not in ACTIVE:
            data = (self.form.values()["data"] or "").strip()
            if data:  # the field above shows the whole path: the reason needs the room
                error = error.replace(data, Path(data).name)
            note.update(f"✗ {error}")
            return
        where = short_path(self.save_path)
        if run is None or self.state in ("idle", "failed"):
            text = f"w will save the next run to {where}"
        elif run.saved_step is not None:  # the path last: where a line must wrap, it wraps whole
            text = f"w saves {run.name} (saved at step {run.saved_step}) to {where}"
        else:
            text = f"w saves {run.name} to {where}"
        note.update(text if self.state in ACTIVE else text + self.next_run_note())

    def next_run_note(self) -> str:
        """' · next run 236k params' (or that the check is under way) for the note."""
        if self.start_when_checked:
            return " · checking the run…"
        return f" · next run {short_count(self.checked.params)} params" if self.check_holds() else ""

    @work(thread=True, exclusive=True, group="defaults", exit_on_error=False)
    def load_defaults(self) -> None:
        from minitx.core.config import RECIPES

        self.post_message(FormDefaults({name: make() for name, make in RECIPES.items()}, choice_values()))

    def on_form_defaults(self, message: FormDefaults) -> None:
        from minitx.core.config import DEFAULT_RECIPE

        self.recipes = message.recipes
        self.form.offer(self._starts(), message.choices, self.first_start() or DEFAULT_RECIPE)
        self.form.disabled = False
        self.state = "idle"
        self.validate_form()
        self._model_changed(self.app)

    def _starts(self) -> dict[str, Start]:
        """Every recipe, and the open checkpoint's configs (like) and saved run (resume), and a
        fine-tune of the open model (a folder, a model id or a file: `train --init`)."""
        from minitx.core.training.fine_tune import family_of, folder_dropout

        starts = {name: Start(f"recipe {name}", r.model, r.train) for name, r in self.recipes.items()}
        current = self.app.current
        if current is None:
            return starts
        saved = current.train_config
        if saved is not None and not saved.init:  # a fine-tune's configs need its base: fine-tune it
            starts["like"] = Start(f"like {current.name}", current.model.cfg, saved)
        if saved is not None and current.resumable and current.path:
            starts["resume"] = Start(f"resume {current.name} (step {current.steps})",
                                     current.model.cfg, saved, current.path, current.steps or 0,
                                     base=current if saved.init else None)
        if current.path:
            family = family_of(current.task)
            dropout = folder_dropout(current.task)  # a folder's config.json; else the model's own
            model = current.model.cfg if dropout is None else current.model.cfg.replace(dropout=dropout)
            starts["fine-tune"] = Start(f"fine-tune {current.name}", model, fine_tune_train(family),
                                        init=current.path, base=current, family=family)
        return starts

    def first_start(self) -> str | None:
        """The start the form shows for the model just opened: a fine-tuned file's run to resume,
        a fine-tune of a Hugging Face folder or id or an imported model (minitx's own files keep
        the start shown)."""
        current = self.app.current
        if current is None or not current.path:
            return None
        saved = current.train_config
        if saved is not None and saved.init and current.resumable:
            return "resume"
        return "fine-tune" if current.task.name in ("huggingface", "imported") else None

    def validate_form(self):
        """The form's configs (None: a field's problem, marked); their run is checked once the
        form has stayed as it is for CHECK_DELAY."""
        self.form_configs = configs = self.form.validate()
        if configs is not None and self.check_holds() and self.checked.error:
            self.form.mark_field(self.checked.error.partition(": ")[0])
        elif configs is not None and not self.check_holds():
            if self._check_timer is not None:
                self._check_timer.stop()
            base = self.form.start.base  # a fine-tune's model (read here, on the UI thread)
            self._check_timer = self.set_timer(CHECK_DELAY, lambda: self.check_form_run(configs, base))
        self.draw_note()
        return configs

    def check_now(self) -> None:
        """Check the form's run at once (space was pressed): start_asking follows."""
        if self._check_timer is not None:
            self._check_timer.stop()
        self.start_when_checked = True
        self.check_form_run(self.form_configs, self.form.start.base)
        self.draw_note()

    @work(thread=True, exclusive=True, group="check", exit_on_error=False)
    def check_form_run(self, configs, base) -> None:
        self.post_message(check_run(*configs, base=base))

    def on_run_checked(self, message: RunChecked) -> None:
        if message.configs != self.form_configs:
            return  # the form has changed since: its own check follows
        self.checked = message
        if message.error:
            self.form.mark_field(message.error.partition(": ")[0])
        self.draw_note()
        if self.start_when_checked:
            self.start_when_checked = False
            self.start_asking()

    def check_failed(self, error: BaseException) -> None:
        """The check itself failed unexpectedly: it says so inline, as any problem of the form."""
        self.on_run_checked(RunChecked(self.form_configs, error=f"check: {error_text(error)}"))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.validate_form()

    def on_choice_changed(self, message: ChoiceChanged) -> None:
        if message.field.id == SOURCE:
            self.form.fill()
            self._draw_title()
        self.validate_form()
