"""The line Explore shows over the greedy decode of a model whose own generation settings search
with a beam (a Hugging Face folder's num_beams): greedy is not what its generate() returns."""

from __future__ import annotations

from textual.widgets import Static


class BeamNote(Static):
    DEFAULT_CSS = "BeamNote { height: 1; padding: 0 1; color: $warning; text-wrap: nowrap; " \
                  "text-overflow: ellipsis; }"

    def __init__(self) -> None:
        super().__init__("", markup=False)
        self.display = False

    def follow(self, record) -> None:
        """Shown for a model whose settings search with a beam, hidden for any other."""
        from minitx.tui.render.beam_tables import greedy_note

        beams = record.model.generation.num_beams
        self.display = beams > 1
        if beams > 1:
            self.update(greedy_note(beams, "B shows it"))
