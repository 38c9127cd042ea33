"""One model decoding one source, as the app shows it: the core Stepper (each step recorded, so
stepping back replays), what is looked at (attention kind, layer, head, view, numbers) and what is
done to the model (heads knocked out, teacher forcing, forced tokens).

A plain object, no Textual: Explore drives one, Compare two in lockstep (tui/app/decode_keys.py),
and a DecodePanel (tui/app/widgets/decode_panel.py) only draws one. Nothing here imports torch
at module level: the app paints before torch loads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minitx.core.interp.decode import Stepper
    from minitx.tui.app.loaded import LoadedModel

KINDS = ("cross", "self", "enc")  # the attention a grid shows; s cycles through them
# "grid" is where every other view returns
VIEWS = ("grid", "heads", "lens", "importance", "positions", "attribution")
KIND_TITLES = {"cross": "cross-attention", "self": "decoder self-attention",
               "enc": "encoder self-attention"}
# The attribution methods y cycles through (core/interp/source_attribution.py's; "attention" is
# the rollout, the one attention row that is not a head's), and how the app names each.
ATTRIBUTION_METHODS = ("ig", "ixg", "occlusion", "attention")
METHOD_NAMES = {"ig": "ig", "ixg": "ixg", "occlusion": "occlusion", "attention": "rollout"}
ROW_LABELS = {"ig": "ig", "ixg": "ixg", "occlusion": "occl", "attention": "roll"}  # fit <eos>'s room


# Seconds a decode to its end runs at once in the app (a small model's whole decode) before the
# screen is drawn and the rest goes on a frame at a time (decode_keys.py's frames).
RUN_AT_ONCE = 0.5


class DecodeSession:
    def __init__(self, budget: float | None = None) -> None:
        """budget: seconds a decode to its end after a change (a head knocked out, teacher
        forcing, a forced token) runs at once; past it, `runs_on` asks the screen to go on
        frame by frame. None: all of it at once."""
        self.budget = budget
        self.runs_on = False
        self.record: LoadedModel | None = None
        self.stepper: Stepper | None = None
        self.target = 0  # the step the screen asked for; a decode that ended earlier stays at its end
        self.layer_index = self.head_index = 0
        self.kind, self.view_mode = "cross", "grid"
        self.numbers = False
        self.ablated: frozenset = frozenset()  # core Heads knocked out (zero ablation)
        self.teacher = False  # feed the decoder the task's answer instead of its own tokens
        self.forced: dict[int, int] = {}  # step -> token output there instead of the model's
        self.importance = None  # core.interp.importance.Importance of this model, once measured
        self.importance_progress = (0, 0)
        self.roles: dict[str, str] | None = None  # each head's strongest role, once measured
        self.roles_asked = False  # a worker measures them
        self.attribution_method: str | None = None  # None: no attribution row (y shows one)
        self.attributions: dict[tuple, object] = {}  # attribution_key -> core SourceAttribution
        self.attributions_asked: set[tuple] = set()  # keys a worker is computing
        self.steps_asked: set[tuple] = set()  # (key, step) of the one-step rows being computed
        self.attribution_progress: dict[tuple, float] = {}  # (key, step or None) -> share done

    # -- what is shown ---------------------------------------------------------------------------
    @property
    def position(self) -> int:
        return self.stepper.position if self.stepper else 0

    @property
    def finished(self) -> bool:
        return self.stepper is not None and self.stepper.finished

    @property
    def output_length(self) -> int | None:
        """Tokens the whole decode outputs (its EOS, or the cap), once it has been decoded to its
        end; None before (the cap is only a bound)."""
        results = self.stepper.results if self.stepper else []
        if results and (results[-1].is_end or len(results) >= self.stepper.cap):
            return len(results)
        return None

    @property
    def longest_source(self) -> int:
        """Source tokens this model takes (its task's rule for its positions)."""
        return self.record.task.source_limit(self.record.model.cfg.max_len) if self.record else 0

    @property
    def answer(self) -> list[int] | None:
        """The task's output for the source, then EOS; None when the task cannot tell (dates,
        a data file: typed text has no known answer)."""
        return self.answer_of(self.stepper.src_ids)

    def answer_of(self, ids: list[int]) -> list[int] | None:
        output = self.record.task.expected_output(ids)
        return None if output is None else output + [self.record.task.vocab.eos]

    @property
    def expected(self) -> str | None:
        answer = self.answer
        return None if answer is None else self.record.task.format(answer)

    @property
    def expected_labels(self) -> list[str] | None:
        """The answer as the output line shows tokens (a space as ␣), without its EOS."""
        answer = self.answer
        return None if answer is None else self.record.task.vocab.labels(answer[:-1])

    @property
    def predictions(self) -> list[int]:
        """What the model chose at each shown step (under teacher forcing, not what it was fed)."""
        shown = self.stepper.results[: self.position]
        return [r.token if r.predicted is None else r.predicted for r in shown]

    @property
    def correct(self) -> bool | None:
        """None when the task cannot tell what is correct."""
        expected = self.expected
        if expected is None:
            return None
        shown = self.predictions if self.teacher else self.stepper.tokens
        return self.record.task.format(shown) == expected

    def layer_count(self, kind: str | None = None) -> int:
        """Layers of `kind` (the kind shown when None): the encoder's or the decoder's."""
        kind = kind or self.kind
        return len(self.record.model.encoder) if kind == "enc" else self.record.layers

    @property
    def has_selected_head(self) -> bool:
        """The model has the head chosen (Compare chooses among the larger model's heads)."""
        return self.layer_index < self.layer_count() and self.head_index < self.record.heads

    @property
    def selected_head(self):
        """The core Head the selection names in the kind shown (what k knocks out)."""
        from minitx.core.interp.interventions import Head

        return Head(self.kind, self.layer_index, self.head_index)

    def roles_grid(self, kind: str | None = None) -> list[list[str]] | None:
        """[layer][head] -> the strongest role of each head of `kind` (None until measured)."""
        if self.roles is None:
            return None
        kind = kind or self.kind
        return [[self.roles.get(f"{kind}:L{layer + 1}.H{head + 1}", "") for head in range(self.record.heads)]
                for layer in range(self.layer_count(kind))]

    def off_heads(self, kind: str | None = None) -> set[tuple[int, int]]:
        """(layer, head) of the heads knocked out in `kind` (the kind shown when None)."""
        kind = kind or self.kind
        return {(h.layer, h.head) for h in self.ablated if h.kind == kind}

    # -- changing it -----------------------------------------------------------------------------
    def set_model(self, record: LoadedModel) -> None:
        """A new model: start on the head that does the work, so its alignment shows at once;
        nothing done to the old model carries over."""
        from minitx.core.interp.alignment import best_head

        self.record, self.stepper, self.target = record, None, 0
        self.kind, self.ablated, self.forced, self.teacher = "cross", frozenset(), {}, False
        self.importance, self.importance_progress = None, (0, 0)
        self.roles, self.roles_asked = None, False
        self.attributions, self.attributions_asked = {}, set()
        self.step_attributions, self.steps_asked = {}, set()  # (key, step) -> one step's, asked
        self.attribution_progress = {}
        self.layer_index, self.head_index = best_head(record.scores)

    def set_source(self, ids: list[int]) -> None:
        self.forced, self.target = {}, 0
        self.stepper = self._new_stepper(ids)

    def _new_stepper(self, ids: list[int]):
        from minitx.core.interp.decode import Stepper
        from minitx.core.interp.interventions import Interventions

        task, cfg = self.record.task, self.record.model.cfg
        teacher = self.answer_of(ids) if self.teacher else None
        return Stepper(self.record.model, ids, top_k=5, cap=task.decode_cap(len(ids), cfg.max_len),
                       interventions=Interventions(zero=self.ablated), forced=self.forced,
                       teacher=teacher, vocab=task.vocab)

    def restart(self) -> None:
        """Decode again after a change to the model or the feeding, to the same step (or again to
        the end, if the decode was shown to its end)."""
        if self.stepper is None:
            return
        at_end = self.stepper.finished
        self.stepper = self._new_stepper(self.stepper.src_ids)
        if at_end:
            self._run_within_budget()
        else:
            self.goto(self.target)

    def _run_within_budget(self) -> None:
        self.run_to_end(None if self.budget is None else time.monotonic() + self.budget)
        self.runs_on = not self.stepper.finished

    def goto(self, position: int) -> None:
        """Move to `position` steps (a decode that ends earlier stays at its end)."""
        s, self.target = self.stepper, position
        if position == 0:
            s.reset()
        while s.position > position:
            s.back()
        while s.position < position and s.step() is not None:
            pass

    def run_to_end(self, until: float | None = None) -> None:
        """Decode to the end, or (with `until`, a time.monotonic() deadline) as far as it gets by
        then: a big model's long decode runs a frame at a time, the keys live between frames."""
        self.stepper.run(None if until is None else lambda done, cap: time.monotonic() > until)
        self.target = self.stepper.position

    def select_head(self, layer: int, head: int) -> None:
        self.layer_index, self.head_index = layer, head

    def set_view(self, view: str) -> None:
        self.view_mode = view if view in VIEWS else "grid"

    def set_kind(self, kind: str) -> None:
        """Show another attention kind, keeping the selected head where that kind has it."""
        self.kind = kind if kind in KINDS else "cross"
        self.layer_index = min(self.layer_index, self.layer_count() - 1)

    def toggle_ablation(self) -> None:
        """Knock the selected head out, or bring it back; the decode follows at once."""
        self.ablated = self.ablated ^ {self.selected_head}
        self.restart()

    def clear_ablations(self) -> None:
        self.ablated = frozenset()
        self.restart()

    def set_teacher(self, on: bool) -> None:
        self.teacher, self.forced = on, {}
        self.restart()

    def force(self, token: int) -> None:
        """Output `token` at the current step, then decode greedily from it to the end."""
        self.stepper.force(token)
        self.forced = dict(self.stepper.forced)
        self._run_within_budget()

    # -- attribution -----------------------------------------------------------------------------
    @property
    def attribution_shown(self) -> bool:
        """A method is chosen and a decode is there: its row (or its matrix) is on screen."""
        return self.attribution_method is not None and self.stepper is not None

    def attribution_key(self) -> tuple | None:
        """What the attribution on screen depends on: the method, the source, every token the decode
        recorded (stepping back keeps them) and the heads knocked out."""
        if not self.attribution_shown or not self.stepper.results:
            return None
        tokens = tuple(r.token for r in self.stepper.results)
        return self.attribution_method, tuple(self.stepper.src_ids), tokens, self.ablated

    @property
    def attribution(self):
        """The core SourceAttribution of the decode on screen, once computed (None before)."""
        key = self.attribution_key()
        return self.attributions.get(key) if key is not None else None

    def attribution_wanted(self) -> AttributionJob | None:
        """The attribution on screen when it is neither computed nor being computed (None
        otherwise): what a worker computes. The decode is copied here, on the screen's thread."""
        key = self.attribution_key()
        if key is None or key in self.attributions or key in self.attributions_asked:
            return None
        from minitx.core.interp.source_attribution import Decode

        self.attributions_asked.add(key)
        return AttributionJob(self.record, key, Decode.of_stepper(self.stepper, len(self.stepper.results)))

    def step_attribution_wanted(self) -> AttributionJob | None:
        """The current step's attribution alone, while neither the whole decode's nor that step's
        is there or being computed (None otherwise): one step costs a step's work, so a costly
        method's row (ig's) comes long before the matrix of every step."""
        from minitx.core.interp.source_attribution import OBJECTIVE_METHODS, Decode

        key, step = self.attribution_key(), self.position - 1
        if key is None or key[0] not in OBJECTIVE_METHODS or key in self.attributions or step < 0:
            return None  # (attention's rows are a step's weights, not an objective's attribution)
        if (key, step) in self.step_attributions or (key, step) in self.steps_asked:
            return None

        self.steps_asked.add((key, step))
        decode = Decode.of_stepper(self.stepper, len(self.stepper.results))
        return AttributionJob(self.record, key, decode, step)

    def attribution_done(self, job: AttributionJob, result) -> None:
        """Keep a job's result, if it is of this session's model."""
        self.attribution_given_up(job)
        if job.record is not self.record:
            return
        if job.step is None:
            self.attributions[job.key] = result
        else:
            self.step_attributions[job.key, job.step] = result

    def attribution_given_up(self, job: AttributionJob) -> None:
        """A job is done, failed or stopped: no longer being computed (a later redraw may ask again)."""
        if job.step is None:
            self.attributions_asked.discard(job.key)
        else:
            self.steps_asked.discard((job.key, job.step))
        self.attribution_progress.pop((job.key, job.step), None)

    def stop_attributions(self) -> None:
        """Esc while attributions are computed: nothing asked any more, and the row (or the
        matrix) goes until y asks again."""
        self.attributions_asked.clear()
        self.steps_asked.clear()
        self.attribution_progress.clear()
        self.attribution_method = None
        if self.view_mode == "attribution":
            self.set_view("grid")

    def attribution_measured(self, step: int | None) -> str:
        """How far the attribution of `step` (None: every step's) is, as a percentage ("" before
        its worker said): the current step's own row, or else the whole decode's."""
        key = self.attribution_key()
        if key is None:
            return ""
        done = self.attribution_progress.get((key, step))
        if done is None and step is not None:
            done = self.attribution_progress.get((key, None))
        return "" if done is None else f"{done:.0%}"

    def attribution_row(self) -> list[float] | None:
        """The current step's shares (|a| / sum |a|, signed), or None before it is computed: the
        whole decode's row once it is there, that step's own before."""
        result = self.attribution
        index = self.position - 1
        if result is not None:
            return result.shares()[index].tolist() if 0 <= index < result.scores.shape[0] else None
        key = self.attribution_key()
        alone = self.step_attributions.get((key, index)) if key is not None else None
        return None if alone is None else alone.shares()[0].tolist()

    def next_method(self, with_off: bool) -> None:
        """y: the next attribution method; with_off, after the last one the row goes."""
        cycle = ((None,) if with_off else ()) + ATTRIBUTION_METHODS
        at = cycle.index(self.attribution_method) if self.attribution_method in cycle else -1
        self.attribution_method = cycle[(at + 1) % len(cycle)]


@dataclass(frozen=True)
class AttributionJob:
    """One attribution to compute: of `decode` by `record`'s model, as `key` says (the method, and
    the heads knocked out); of every step, or of `step` alone."""

    record: LoadedModel
    key: tuple
    decode: object  # core Decode
    step: int | None = None

    def run(self, progress=None):
        """The core SourceAttribution (ig of every step takes about 0.1 s on a bundled model, of
        one step about a tenth of that; a 74M model's 511-step decode, hours: progress(done,
        total) after each batch, True stops it with core's Cancelled)."""
        from minitx.core.interp.interventions import Interventions
        from minitx.core.interp.source_attribution import attribute, attribute_step

        method, interventions = self.key[0], Interventions(zero=self.key[3])
        if self.step is None:
            return attribute(self.record.model, self.decode, method, interventions=interventions,
                             progress=progress)
        tokens = list(self.decode.tokens)
        return attribute_step(self.record.model, list(self.decode.src), tokens[: self.step],
                              tokens[self.step], method, interventions=interventions, progress=progress)
