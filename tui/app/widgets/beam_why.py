"""Why a beam hypothesis took its token rather than greedy's where the two part (the beam view's
y): the contrastive attribution of that one step over the source tokens (core attribute_step,
computed by the beam screen's worker), its title in words, the grid in the attention palette and
the source token that pushed most towards each of the two."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from minitx.tui.app.widgets.attention import AttentionGrid
from minitx.tui.render.beam_tables import output_text


class ContrastView(Vertical):
    DEFAULT_CSS = "ContrastView { height: auto; }"

    def compose(self) -> ComposeResult:
        yield Static("", id="beam-why-title")  # what is attributed, in words
        yield AttentionGrid(id="beam-why-grid")  # over the source, the grid's palette
        yield Static("", id="beam-why-notes")  # the largest for each token, ig's sum

    def show(self, s) -> None:
        """Draw the BeamSession `s`'s contrast for its chosen hypothesis (or why there is none)."""
        task = s.record.task
        vocab = task.vocab
        title = self.query_one("#beam-why-title", Static)
        grid = self.query_one("#beam-why-grid", AttentionGrid)
        notes = self.query_one("#beam-why-notes", Static)
        grid.display = notes.display = True
        if s.selected is None:  # a search reset to step 0: nothing chosen
            grid.display = notes.display = False
            title.update("step the search (→): there is no hypothesis to look at yet")
            return
        contrast = s.contrast()
        if contrast is None or contrast.greedy is None:
            grid.display = notes.display = False
            text = output_text(task, s.search.tokens(s.selected))
            title.update(Text(f"'{text}' never parts from greedy: there is no other token to explain"
                              if contrast is None else
                              f"greedy had ended before step {contrast.step + 1}: no token of greedy's "
                              f"to set '{vocab.label(contrast.token)}' against"))
            return
        ours, theirs = vocab.label(contrast.token), vocab.label(contrast.greedy)
        head = Text()
        head.append(f"why '{ours}' rather than greedy's '{theirs}' at step {contrast.step + 1}", style="bold")
        fed = f"after '{task.format(list(contrast.prefix))}'" if contrast.prefix else "at the first step"
        result, error = s.contrast_attribution(), s.contrast_error()
        columns = task.source_labels(s.src_ids)
        method = s.why_method
        if result is None:
            head.append(f"\n{fed} · {method}: " + (f"cannot attribute: {error}" if error else "measuring…"),
                        style="" if error else "dim")
            title.update(head)
            grid.show([], columns, [], hint="", unit="share", signed=True)
            notes.update("")
            return
        value = float(result.value[0])
        head.append(f"\n{fed}, log p('{ours}') - log p('{theirs}') = {value:+.3f}")
        if value < 0:
            head.append(": greedy's is likelier", style="dim")
        head.append(f"\n{result.describe(vocab)}", style="dim")
        title.update(head)
        grid.show(result.shares().tolist(), columns, [f"{ours} vs {theirs}"], None, "",
                  f"+ for '{ours}', - for greedy's '{theirs}' · columns: source tokens", unit="share",
                  signed=True)
        notes.update(self._why_notes(result, columns, ours, theirs))

    @staticmethod
    def _why_notes(result, columns: list[str], ours: str, theirs: str) -> Text:
        """The source token that pushed most towards each of the two, and ig's sum."""
        scores = result.scores[0].tolist()
        out = Text()
        for sign, name in ((1, ours), (-1, theirs)):
            j = max(range(len(scores)), key=lambda i: sign * scores[i])
            if sign * scores[j] > 0:
                out.append(f"{' · ' if out else ''}most for '{name}': '{columns[j]}' at {j + 1} "
                           f"({scores[j]:+.3g})")
        if result.method == "ig":
            out.append(f"\nfrom an all-<pad> source the difference moves {float(result.change[0]):+.2f} "
                       f"(the scores sum {sum(scores):+.2f})", style="dim")
        return out
