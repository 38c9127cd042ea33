"""One beam search of one source, as the app's beam view shows it: the core BeamSearch (each step
recorded, so stepping back replays), greedy's output to lay over it, the hypothesis chosen (with a
teacher-forced Stepper on its tokens for its cross-attention grid and lens), the length penalty the
finished hypotheses are re-ranked under, the search check once asked for, and why a hypothesis
took its token rather than greedy's (contrastive attribution where they part, by a worker).

A plain object, no Textual (tui/app/screens/beam.py draws it): its keys are tested without the app.
Nothing here imports torch at module level.
"""

from __future__ import annotations

from dataclasses import dataclass

VIEWS = ("tree", "grid", "lens", "check", "why")  # "tree" is where every other returns
PENALTY_STEP = 0.25  # what + and - change the what-if length penalty by


@dataclass(frozen=True)
class Contrast:
    """Why the chosen hypothesis took its token rather than greedy's: the step where they part, the
    prefix both were fed there, and the two tokens. What contrastive attribution (issue 32's
    `--target`) explains: log p(token | prefix) - log p(greedy's | prefix)."""

    step: int  # 0-based output position
    prefix: tuple[int, ...]  # generated ids before it (the decoder's start left out)
    token: int  # the hypothesis' token there
    greedy: int | None  # greedy's token there (None: greedy had ended)


class BeamSession:
    def __init__(self, record, src_ids: list[int], *, beams: int, ablated=frozenset(),
                 length_penalty: float | None = None, early_stopping=None, progress=None) -> None:
        """`progress(step, cap)` while greedy's output is decoded (a big model's may take many
        seconds: the view makes the session in a worker); a True answer leaves it unfinished."""
        from minitx.core.interp.beam import BeamSearch
        from minitx.core.interp.decode import greedy_output
        from minitx.core.interp.interventions import Interventions

        self.record, self.src_ids = record, list(src_ids)
        model, task = record.model, record.task
        self.interventions = Interventions(zero=frozenset(ablated))
        self.search = BeamSearch(model, self.src_ids, beams=beams, length_penalty=length_penalty,
                                 early_stopping=early_stopping,
                                 cap=task.decode_cap(len(src_ids), model.cfg.max_len),
                                 interventions=self.interventions)
        with self.interventions.applied(model):
            self.greedy = greedy_output(model, self.src_ids, self.search.cap, progress)
        self.what_if = self.search.length_penalty  # the penalty the finished ones are ranked under
        self.selected: int | None = None  # the chosen node (a row of the tree)
        self.view = "tree"
        self.hide_pruned = False
        self.check = None  # core SearchCheck, once asked for
        self._steppers: dict[int, object] = {}  # node -> teacher-forced Stepper on its path
        self.why_method = "ig"  # the method the why view attributes with (y: the next one)
        self.contrasts: dict[tuple, object] = {}  # contrast_key -> core SourceAttribution of one step
        self.contrasts_asked: set[tuple] = set()  # the key a worker is computing (one at a time)
        self.contrast_errors: dict[tuple, str] = {}  # contrast_key -> why it could not be computed

    # -- stepping --------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        return self.search.position

    def step(self) -> bool:
        following = self._following()
        moved = self.search.step() is not None
        self._keep_selection(following)
        return moved

    def back(self) -> bool:
        following = self._following()
        moved = self.search.back()
        self._keep_selection(following)
        return moved

    def run(self) -> None:
        following = self._following()
        self.search.run()
        self._keep_selection(following)

    def reset(self) -> None:
        self.search.reset()
        self._keep_selection(True)

    def _following(self) -> bool:
        return self.selected is None or self.selected == self.best()

    # -- the rows --------------------------------------------------------------------------------
    def rows(self) -> list:
        """The tree's rows (core Nodes, each a leaf of the steps shown), pruned ones left out when
        hidden."""
        leaves = self.search.leaves()
        return [n for n in leaves if n.state != "pruned"] if self.hide_pruned else leaves

    def _keep_selection(self, following: bool = False) -> None:
        """After a move the selection stays on its row if shown, else (or when it was on the
        best row before the move) goes to the best row."""
        rows = self.rows()
        if following or self.selected not in {n.id for n in rows}:
            best = self.best()
            self.selected = best if best in {n.id for n in rows} else (rows[0].id if rows else None)

    def best(self) -> int | None:
        """The node the search would return now: the best finished one, else the best running."""
        pool, running = self.search.pool, self.search.running_at()
        return pool[0] if pool else next((i for i in running if not self.search.nodes[i].void), None)

    def choose(self, rows: int) -> None:
        """Move the selection `rows` rows down (up when negative), wrapping."""
        shown = self.rows()
        if not shown:
            return
        ids = [n.id for n in shown]
        at = ids.index(self.selected) if self.selected in ids else 0
        self.selected = ids[(at + rows) % len(ids)]

    def toggle_pruned(self) -> None:
        self.hide_pruned = not self.hide_pruned
        self._keep_selection()

    # -- greedy against the beam -----------------------------------------------------------------
    def parting(self) -> int | None:
        """The 0-based step where greedy's output first differs from the best hypothesis so far
        (within the steps shown), or None."""
        best = self.best()
        if best is None:
            return None
        path = self.search.tokens(best)
        shown = min(self.position, max(len(path), len(self.greedy)))
        for i in range(shown):
            mine = path[i] if i < len(path) else None
            theirs = self.greedy[i] if i < len(self.greedy) else None
            if mine != theirs:
                return i
        return None

    def contrast(self, node: int | None = None) -> Contrast | None:
        """The hook for contrastive attribution: the chosen hypothesis against greedy at the step
        where they part (None: they do not part)."""
        node = self.selected if node is None else node
        if node is None:
            return None
        path = self.search.tokens(node)
        for i, token in enumerate(path):
            theirs = self.greedy[i] if i < len(self.greedy) else None
            if token != theirs:
                return Contrast(i, tuple(path[:i]), token, theirs)
        return None

    # -- the length penalty's what-if ------------------------------------------------------------
    def change_penalty(self, steps: int) -> None:
        self.what_if = round(self.what_if + steps * PENALTY_STEP, 6)

    def reset_penalty(self) -> None:
        self.what_if = self.search.length_penalty

    def reranked(self) -> list:
        """The finished hypotheses seen so far under the what-if penalty, best first (core
        Hypotheses, each with its node)."""
        return self.search.rerank(self.what_if)

    def winner_changes(self) -> bool:
        """The what-if penalty would make another finished hypothesis win than the search's."""
        ranked, pool = self.reranked(), self.search.pool
        return bool(ranked and pool and ranked[0].node != pool[0])

    # -- one hypothesis, looked at ---------------------------------------------------------------
    def stepper(self, node: int | None = None, progress=None):
        """A Stepper teacher-forced on the hypothesis' tokens (its cross-attention rows and lens at
        each step), run to its end; made once per node. `progress(step, cap)` as it runs (a big
        model's long hypothesis takes seconds: the view makes it in a worker); a True answer
        leaves it unmade."""
        from minitx.core.interp.decode import Stepper

        node = self.selected if node is None else node
        if node not in self._steppers:
            task, model = self.record.task, self.record.model
            stepper = Stepper(model, self.src_ids, top_k=5, interventions=self.interventions,
                              teacher=self.search.tokens(node), vocab=task.vocab)
            stepper.run(progress)
            if not stepper.finished:
                return stepper
            self._steppers[node] = stepper
        return self._steppers[node]

    def has_stepper(self, node: int | None = None) -> bool:
        """Whether the hypothesis' Stepper is made (looking at it costs nothing more)."""
        return (self.selected if node is None else node) in self._steppers

    def set_view(self, view: str) -> None:
        self.view = view if view in VIEWS and view != self.view else "tree"

    def run_check(self):
        """The search check of this source (core/interp/search_check.py): empty, greedy, beam K,
        beam 64 and the expected output where the task knows it."""
        from minitx.core.interp.search_check import search_check

        task, search = self.record.task, self.search
        expected = task.expected_output(self.src_ids)
        self.check = search_check(self.record.model, self.src_ids, beams=search.beams,
                                  length_penalty=search.length_penalty, early_stopping=search.early_stopping,
                                  cap=search.cap, interventions=self.interventions, label=task.format,
                                  expected=None if expected is None else expected + [task.vocab.eos])
        return self.check

    # -- why its token rather than greedy's ------------------------------------------------------
    def contrast_key(self, node: int | None = None) -> tuple | None:
        """What the why view of a hypothesis depends on: the method and its Contrast (None: it does
        not part from greedy, or greedy had ended there and has no token to contrast)."""
        contrast = self.contrast(node)
        if contrast is None or contrast.greedy is None:
            return None
        return self.why_method, contrast

    def contrast_attribution(self, node: int | None = None):
        """The core SourceAttribution of the hypothesis' parting step against greedy's token, once
        computed (None before)."""
        key = self.contrast_key(node)
        return self.contrasts.get(key) if key is not None else None

    def contrast_error(self, node: int | None = None) -> str:
        """Why the hypothesis' attribution could not be computed ("" when it was, or is coming)."""
        key = self.contrast_key(node)
        return self.contrast_errors.get(key, "") if key is not None else ""

    def contrast_wanted(self) -> ContrastJob | None:
        """The chosen hypothesis' attribution when it is neither computed, nor failed, nor anything
        being computed (None otherwise): what a worker computes. One at a time: ↓ held through
        the rows starts no pile of workers; the chosen one is asked for when the last is done."""
        key = self.contrast_key()
        if key is None or key in self.contrasts or key in self.contrast_errors or self.contrasts_asked:
            return None
        self.contrasts_asked.add(key)
        return ContrastJob(self.record.model, list(self.src_ids), self.interventions, key)

    def contrast_done(self, job: ContrastJob, result, error: str = "") -> None:
        """Keep a worker's result, or why it failed (said once, not asked for again)."""
        self.contrasts_asked.discard(job.key)
        if error:
            self.contrast_errors[job.key] = error
        else:
            self.contrasts[job.key] = result

    def method_after(self) -> str | None:
        """The method y moves the why view to (None after the last: the view closes). The methods
        are core's that attribute an objective: attention rows are not a contrast of two tokens."""
        from minitx.core.interp.source_attribution import OBJECTIVE_METHODS

        at = OBJECTIVE_METHODS.index(self.why_method)
        return OBJECTIVE_METHODS[at + 1] if at + 1 < len(OBJECTIVE_METHODS) else None

    def next_why_method(self) -> bool:
        """y in the why view: the next method; False after the last one (the first is chosen
        again, and the view closes)."""
        from minitx.core.interp.source_attribution import OBJECTIVE_METHODS

        after = self.method_after()
        self.why_method = after or OBJECTIVE_METHODS[0]
        return after is not None


@dataclass(frozen=True)
class ContrastJob:
    """One contrastive attribution a worker computes: of the hypothesis' token against greedy's at
    the step where they part, teacher-forced on the prefix both were fed, with the view's heads
    knocked out."""

    model: object  # core Seq2Seq
    src_ids: list[int]
    interventions: object  # core Interventions
    key: tuple  # (method, Contrast)

    def run(self):
        """The core SourceAttribution of that one step (ig about 0.1-0.2 s on a bundled model)."""
        from minitx.core.interp.source_attribution import attribute_step

        method, contrast = self.key
        return attribute_step(self.model, self.src_ids, list(contrast.prefix), contrast.token, method,
                              target=contrast.greedy, interventions=self.interventions)
