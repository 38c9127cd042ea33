"""The beam view (B in Explore): the source on screen searched with a beam, stepped one step at a
time as greedy decoding is, and drawn as a tree (tui/render/beam_tree.py), a row per hypothesis,
greedy's path laid over it and the step where it parts from the beam's best marked. ↑ ↓ choose a
hypothesis; g and l show its cross-attention grid and logit lens (a Stepper teacher-forced on its
tokens), where ← → move through its steps; + and - re-rank the finished hypotheses under another
length penalty on the spot; S runs the search check (core/interp/search_check.py) in a worker;
y shows why the chosen hypothesis took its token rather than greedy's where the two part:
contrastive attribution of that one step (core attribute_step), in a worker, one at a time.

The state is a BeamSession (tui/app/beam_session.py); this screen only draws it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from minitx.tui.app.beam_work import BeamWork
from minitx.tui.app.exports import EXPORT_BINDING
from minitx.tui.app.help import HELP_BINDING
from minitx.tui.app.key_reasons import ExplainedKeys
from minitx.tui.app.widgets.attention import AttentionGrid
from minitx.tui.app.widgets.beam_why import ContrastView
from minitx.tui.app.widgets.lens_view import LensTable

DEFAULT_BEAMS = 4  # the beam of a model whose own settings decode greedily
TREE_TOP = 2  # the tree's first hypothesis row (under the step numbers and greedy's row)
KEYS = {  # what each view's key line lists (every key is in the ? help with its tooltip)
    "tree": [("→/←", "step"), ("⏎", "run"), ("x", "reset"), ("↑/↓", "choose"), ("g", "grid"),
             ("l", "lens"), ("y", "why"), ("+/-", "length penalty"), ("0", "its own"), ("p", "pruned"),
             ("S", "search check"), ("E", "export"), ("esc", "close")],
    "grid": [("→/←", "its steps"), ("[/]", "layer"), (",/.", "head"), ("l", "lens"), ("g", "tree"),
             ("y", "why"), ("esc", "tree"), ("q", "close")],
    "lens": [("→/←", "its steps"), ("g", "grid"), ("l", "tree"), ("y", "why"), ("esc", "tree"),
             ("q", "close")],
    "check": [("S", "tree"), ("E", "export"), ("esc", "tree"), ("q", "close")],
    # y's entry is made when drawn: the next method, or the tree after the last
    "why": [("↑/↓", "choose"), ("g", "grid"), ("l", "lens"), ("E", "export"), ("esc", "tree"),
            ("q", "close")],
}


class BeamScreen(BeamWork, ExplainedKeys, ModalScreen[None]):
    AUTO_FOCUS = ""  # the arrows choose hypotheses, never scroll a focused box
    HELP_TITLE = "Beam search"
    HELP_NOTE = ("Rows: hypotheses (▸ chosen, ✓ finished, faded: pruned); greedy's on top.\n"
                 "y: how each source token favours its token over greedy's where they part\n"
                 "(the difference of their log p; attention rows are weights, not a contrast).")
    BINDINGS = [
        # esc goes back one level: from a hypothesis's grid, lens or why, or the search check, to
        # the tree; from the tree, out of the view. q closes it from anywhere.
        Binding("escape", "back", "back", tooltip="back to the tree (in the tree: close the view)"),
        Binding("q", "dismiss(None)", "close", tooltip="close the beam view"),
        Binding("right,n", "step(1)", "step", show=False,
                tooltip="one search step (in a hypothesis: its next step)"),
        Binding("left,b", "step(-1)", "back", show=False, tooltip="one step back"),
        Binding("enter,r", "run", "run", show=False, tooltip="run the search to its end"),
        Binding("x", "reset", "reset", show=False, tooltip="back to step 0"),
        Binding("up", "choose(-1)", "choose", show=False, tooltip="the hypothesis above"),
        Binding("down", "choose(1)", "choose", show=False, tooltip="the hypothesis below"),
        Binding("g", "view('grid')", "grid", show=False, tooltip="the chosen hypothesis's cross-attention"),
        Binding("l", "view('lens')", "lens", show=False, tooltip="the chosen hypothesis's logit lens"),
        Binding("plus,equals_sign", "penalty(1)", "penalty", show=False,
                tooltip="re-rank the finished hypotheses under a larger length penalty"),
        Binding("minus", "penalty(-1)", "penalty", show=False,
                tooltip="re-rank the finished hypotheses under a smaller length penalty"),
        Binding("0", "penalty(0)", "penalty", show=False, tooltip="the search's own length penalty again"),
        Binding("p", "pruned", "pruned", show=False, tooltip="hide or show the pruned hypotheses"),
        Binding("S", "check", "check", show=False,
                tooltip="search error or model error? (beam 64, empty, greedy)"),
        Binding("y", "why", "why", show=False,
                tooltip="why the chosen hypothesis's token, not greedy's, where they part (again: "
                        "ig → ixg → occlusion → the tree)"),
        Binding("left_square_bracket", "layer(-1)", "layer", show=False, tooltip="layer"),
        Binding("right_square_bracket", "layer(1)", "layer", show=False, tooltip="layer"),
        Binding("comma", "head(-1)", "head", show=False, tooltip="head"),
        Binding("full_stop", "head(1)", "head", show=False, tooltip="head"),
        EXPORT_BINDING,
        HELP_BINDING,
    ]
    DEFAULT_CSS = """
    #beam-box { width: 100%; height: 100%; }
    #beam-status { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #beam-greedy, #beam-detail, #beam-keys { height: auto; }
    #beam-body { height: 1fr; scrollbar-gutter: stable; }  /* the tree keeps its width as it grows taller */
    #beam-tree { width: auto; height: auto; }
    """

    def __init__(self, session=None, *, layer: int = 0, head: int = 0, play: bool = True,
                 prepare=None) -> None:
        """`session`, or `prepare(progress)`, which makes it (in a worker, the screen saying how
        far greedy's decode is: a big model's takes seconds; esc leaves)."""
        super().__init__()
        self.session = session  # a BeamSession (tui/app/beam_session.py); None while prepared
        self._prepare = prepare
        self.grid_layer, self.grid_head = layer, head
        self.hypothesis_step = 0  # in the grid and lens views: the chosen hypothesis's step shown
        self.checking = False
        self.looking = False  # a worker makes the chosen hypothesis's steps (g, l on a long one)
        self.top = 0  # the first tree row drawn: a window around the chosen one, as tall as the box
        self.playing = False  # the search steps on by itself (B and Enter), a step per frame
        self.play_at_first = play

    def compose(self) -> ComposeResult:
        with Vertical(id="beam-box", classes="dialog"):
            yield Static("", id="beam-status", markup=False)
            yield Static("", id="beam-greedy")
            with VerticalScroll(id="beam-body", can_focus=False):
                yield Static("", id="beam-tree")
                yield AttentionGrid(id="beam-grid")
                yield LensTable(id="beam-lens")
                yield Static("", id="beam-check", markup=False)
                yield ContrastView(id="beam-why")
            yield Static("", id="beam-detail")
            yield Static("", id="beam-keys")

    def on_resize(self) -> None:
        """The tree, its window and the key lines fit the new width and height (a tree drawn for
        80 columns would lose its score columns at 60)."""
        if self.session is not None:  # still getting ready: nothing drawn yet
            self.call_after_refresh(self.redraw)

    # -- keys --------------------------------------------------------------------------------
    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if self.session is None:
            return None if action in ("dismiss", "back") else "the beam view is getting ready " \
                "(greedy's output first): esc leaves"
        view = self.session.view
        if action in ("layer", "head") and view != "grid":
            return "[ ] , . choose the head of a hypothesis's grid: g shows it"
        if action == "choose" and view == "why":
            return None  # each hypothesis's why, one after the other
        if action in ("run", "reset", "choose", "penalty", "pruned") and view == "why":
            return "in the tree only: y goes back to it after the last method"
        if action in ("run", "reset", "choose", "penalty", "pruned") and view != "tree":
            return "in the tree only: g or l goes back to it"
        if action == "step" and view == "why":
            return "the why is of one step, where the two part: ↑ ↓ another hypothesis, y the method"
        return None

    def action_back(self) -> None:
        if self.session is None or self.session.view == "tree":  # (None: still getting ready)
            self.dismiss(None)
            return
        self.playing = False
        self.session.set_view("tree")
        self.redraw()

    def action_step(self, steps: int) -> None:
        self.playing = False
        s = self.session
        if s.view in ("grid", "lens"):
            last = len(s.stepper().results) - 1
            self.hypothesis_step = max(0, min(last, self.hypothesis_step + steps))
        elif steps > 0 and not s.step():
            self.notify(f"the search has stopped: {self._why_stopped()}; ← steps back, x resets", timeout=3)
        elif steps < 0:
            s.back()
        self.redraw()

    def action_run(self) -> None:
        """Step the search to its end, a step per frame: the tree grows as it is searched and
        every key still works (any step key stops it)."""
        self.playing = True
        self._play()

    def _play(self) -> None:
        if not self.playing or not self.is_attached:
            return
        if self.session.view != "tree" or not self.session.step():
            self.playing = False
        self.redraw()
        if self.playing:
            self.set_timer(0.001, self._play)

    def action_reset(self) -> None:
        self.playing = False
        self.session.reset()
        self.redraw()

    def action_choose(self, rows: int) -> None:
        self.session.choose(rows)
        self.redraw()

    def _window(self, rows: list) -> tuple[int, int]:
        """(first row, rows) of the tree drawn: as many as the box holds under the step numbers
        and greedy's row, moved only as far as it takes to keep the chosen row in it."""
        room = max(1, (self.query_one("#beam-body").size.height or 16) - TREE_TOP)
        ids = [n.id for n in rows]
        at = ids.index(self.session.selected) if self.session.selected in ids else 0
        self.top = min(max(0, len(rows) - room), max(at - room + 1, min(self.top, at)))
        return self.top, room

    def action_view(self, view: str) -> None:
        self.playing = False
        s = self.session
        if view in ("grid", "lens") and s.selected is None:
            self.notify("step the search (→) first: there is no hypothesis to look at yet", timeout=3)
            return
        if view in ("grid", "lens") and view != s.view and not s.has_stepper():
            self.looking = True  # a long hypothesis: its steps in a worker, the status saying how far
            self._look(s.selected, view)
            return
        s.set_view(view)
        if s.view in ("grid", "lens"):
            self.hypothesis_step = len(s.stepper().results) - 1
        self.redraw()

    def action_why(self) -> None:
        """y: the why view of the chosen hypothesis (ig first); in it, the next method, and after
        the last one the tree again (as Explore's y turns its row off)."""
        self.playing = False
        s = self.session
        if s.selected is None:
            self.notify("step the search (→) first: there is no hypothesis to look at yet", timeout=3)
            return
        if s.view != "why":
            s.set_view("why")
        elif not s.next_why_method():
            s.set_view("tree")
        self.redraw()

    def action_penalty(self, steps: int) -> None:
        if steps:
            self.session.change_penalty(steps)
        else:
            self.session.reset_penalty()
        self.redraw()

    def action_pruned(self) -> None:
        self.session.toggle_pruned()
        self.redraw()

    def action_layer(self, delta: int) -> None:
        self.grid_layer = (self.grid_layer + delta) % len(self.session.record.model.decoder)
        self.redraw()

    def action_head(self, delta: int) -> None:
        self.grid_head = (self.grid_head + delta) % self.session.record.model.cfg.n_heads
        self.redraw()

    def action_check(self) -> None:
        s = self.session
        if s.view == "check":
            s.set_view("tree")
        else:
            s.view = "check"
            if s.check is None and not self.checking:
                self.checking = True
                self._check()
        self.redraw()

    # -- drawing ------------------------------------------------------------------------------
    def _why_stopped(self) -> str:
        steps = self.session.search.steps
        return steps[-1].why if steps and steps[-1].stopped else "not yet"

    def redraw(self) -> None:
        from minitx.tui.app.widgets.keybar import packed_keys

        s = self.session
        if s is None:  # getting ready: the status line says how far
            return
        search, task = s.search, s.record.task
        state = f"stopped: {self._why_stopped()}" if search.finished else \
            "searching…" if self.playing else "searching"
        rows = len(s.rows())
        shown = f" · rows {self.top + 1}-{min(rows, self.top + self._window(s.rows())[1])} of {rows}" \
            if s.view == "tree" and rows > self._window(s.rows())[1] else ""
        self.query_one("#beam-status", Static).update(
            f"step {s.position} · {state}{shown} · source {task.shown_source(s.src_ids)}")
        self.query_one("#beam-greedy", Static).update(self._greedy_line())
        for view, widget in (("tree", "#beam-tree"), ("grid", "#beam-grid"), ("lens", "#beam-lens"),
                             ("check", "#beam-check"), ("why", "#beam-why")):
            self.query_one(widget).display = view == s.view
        getattr(self, f"_draw_{s.view}")()
        self.query_one("#beam-detail", Static).update(self._detail())
        width = max(20, self.query_one("#beam-keys").size.width or 76)
        keys = KEYS[s.view] if s.view != "why" else [("y", s.method_after() or "tree"), *KEYS["why"]]
        self.query_one("#beam-keys", Static).update(Text("\n").join(packed_keys(keys, width, "  ")))

    def _greedy_line(self) -> Text:
        s = self.session
        vocab = s.record.task.vocab
        parting = s.parting()
        line = Text("greedy ", style="magenta")
        if parting is None:
            line.append("agrees with the beam's best so far" if s.position else "step the search with →")
            return line
        best = s.search.tokens(s.best())
        theirs = vocab.label(s.greedy[parting]) if parting < len(s.greedy) else "nothing"
        ours = vocab.label(best[parting]) if parting < len(best) else "nothing"
        line.append(f"parts from the beam's best at step {parting + 1}: ", style="bold")
        line.append(f"{theirs} rather than {ours}")
        return line

    def _detail(self) -> Text:
        from minitx.tui.render.beam_tables import output_text

        s = self.session
        task = s.record.task
        if s.selected is None:
            return Text("")
        node = s.search.nodes[s.selected]
        text = output_text(task, s.search.tokens(node.id))
        rest = f" · {node.state} at step {node.step + 1} · sum {node.total:.3f} · score {node.score:.3f}"
        room = max(8, (self.query_one("#beam-detail").size.width or 76) - 2 - len(rest))
        out = Text(f"▸ {text if len(text) <= room else text[: room - 1] + '…'}", style="bold")
        out.append(rest)
        ranked = s.reranked()
        if s.what_if != s.search.length_penalty and ranked:
            winner = ranked[0]
            out.append(f"\nlength penalty {s.what_if:g} (the search ran with {s.search.length_penalty:g}): ")
            if s.winner_changes():
                out.append(f"'{output_text(task, winner.tokens)}' would win ({winner.score:.3f})",
                           style="bold yellow")
            else:
                out.append("the same winner", style="green")
        return out

    def _draw_tree(self) -> None:
        from minitx.tui.render.beam_tree import beam_tree

        s = self.session
        box = self.query_one("#beam-body", VerticalScroll)
        width = max(40, box.scrollable_content_region.width or 76)
        what_if = None if s.what_if == s.search.length_penalty else s.what_if
        rows = s.rows()
        tree = beam_tree(s.search, rows, vocab=s.record.task.vocab, eos=s.record.model.generation.eos,
                         greedy=s.greedy, width=width, selected=s.selected, what_if=what_if,
                         parting=s.parting(), window=self._window(rows))
        self.query_one("#beam-tree", Static).update(tree)

    def _draw_grid(self) -> None:
        s = self.session
        stepper = s.stepper()
        grid = self.query_one("#beam-grid", AttentionGrid)
        rows = stepper.cross_attention_grid(self.grid_layer, self.grid_head).tolist()
        labels = [r.text for r in stepper.results]
        self.query_one("#beam-body").border_title = None
        grid.show(rows, s.record.task.source_labels(s.src_ids), labels, self.hypothesis_step, "",
                  f"cross-attention L{self.grid_layer + 1} H{self.grid_head + 1} · rows: the chosen "
                  "hypothesis · columns: source")

    def _draw_lens(self) -> None:
        s = self.session
        stepper = s.stepper()
        r = stepper.results[self.hypothesis_step]
        vocab = s.record.task.vocab
        top = s.record.model.generation.emittable(r.lens).exp().topk(3, dim=-1)  # (layers, 3)
        layers = [[(vocab.label(int(i)), float(p)) for p, i in zip(ps, idx)]
                  for ps, idx in zip(top.values, top.indices)]
        fed = vocab.label(stepper.decoder_input(stepper.results)[r.index])
        self.query_one("#beam-lens", LensTable).show(
            layers, f"the chosen hypothesis, step {r.index + 1}: fed {fed}, output {r.text}")

    def _draw_check(self) -> None:
        from minitx.tui.render.beam_tables import search_check_lines

        s = self.session
        text = "searching with a beam of 64, scoring the empty output, greedy and the expected one…" \
            if s.check is None else "\n".join(search_check_lines(s.check, s.record.task,
                                                                   s.record.task.source_labels(s.src_ids)))
        self.query_one("#beam-check", Static).update(text)

    def _draw_why(self) -> None:
        """Why the chosen hypothesis took its token rather than greedy's where they part
        (tui/app/widgets/beam_why.py); asks the worker for it when it is not measured yet."""
        self.query_one("#beam-body").border_title = None
        job = self.session.contrast_wanted()
        if job is not None:
            self._contrast(job)
        self.query_one(ContrastView).show(self.session)

    def export_numbers(self):
        """The numbers beside the picture when E exports this view: the tree as --json has it, the
        n-best, greedy's output, the search check once run, and the chosen hypothesis against
        greedy where they part, with its attribution once y computed it."""
        from minitx.tui.app.exports import json_numbers
        from minitx.tui.render.beam_tables import contrast_data, hypothesis_data, search_check_data, tree_data

        s = self.session
        if s is None:
            return json_numbers("beam", {"getting_ready": True})
        task = s.record.task
        data = {"source": task.format_source(s.src_ids), "greedy": s.greedy,
                "nbest": [hypothesis_data(h, task) for h in s.search.hypotheses()],
                "tree": tree_data(s.search, task.vocab), "position": s.position}
        if s.check is not None:
            data["search_check"] = search_check_data(s.check, task)
        if s.selected is not None:
            data["contrast"] = contrast_data(s.search.tokens(s.selected), s.contrast(),
                                             s.contrast_attribution(), task)
        return json_numbers("beam", data)
