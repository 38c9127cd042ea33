"""The line Explore shows over the greedy decode of a model whose own generation settings search
with a beam (a Hugging Face folder's num_beams): greedy is not what its generate() returns; and
the settings it sets that minitx does not compute (sampling...), which generate() would apply."""

from __future__ import annotations

from textual.widgets import Static


class BeamNote(Static):
    DEFAULT_CSS = "BeamNote { height: auto; max-height: 2; padding: 0 1; color: $warning; " \
                  "text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self) -> None:
        super().__init__("", markup=False)
        self.display = False

    def follow(self, record) -> None:
        """Shown for a model whose settings search with a beam or hold what minitx does not
        compute, hidden for any other."""
        from minitx.tui.render.beam_tables import greedy_note

        generation = record.model.generation
        parts = ([greedy_note(generation.num_beams, "B shows it")] if generation.num_beams > 1 else []) \
            + ([generation.not_computed_line] if generation.not_computed else [])
        self.display = bool(parts)
        if parts:
            self.update("\n".join(parts))  # a line each: both matter
