"""Recorded steps shown up to a pointer: what lets greedy decoding (core/interp/decode.py's
Stepper) and beam search (core/interp/beam.py) step back and forth without recomputing anything."""

from __future__ import annotations


class Replay:
    """Mixed into a stepping decode. The subclass keeps its records in `_records()` (each step's,
    in order), says when it is `finished` (at the pointer) and computes the next step in
    `_compute_next()`; `position` is how many records are shown, `cap` the most there can be."""

    position = 0
    cap = 0

    @property
    def finished(self) -> bool:
        raise NotImplementedError

    def _records(self) -> list:
        raise NotImplementedError

    def _compute_next(self):
        raise NotImplementedError

    def step(self):
        """Advance one step; returns its record, or None when already finished. A step shown
        before (then stepped back over) is replayed, not computed again."""
        if self.finished:
            return None
        records = self._records()
        if self.position < len(records):
            self.position += 1
            return records[self.position - 1]
        records.append(self._compute_next())
        self.position += 1
        return records[-1]

    def back(self) -> bool:
        """Step back one step; False at the start."""
        if self.position == 0:
            return False
        self.position -= 1
        return True

    def reset(self) -> None:
        self.position = 0

    def step_all(self, progress=None) -> None:
        """Step until finished. `progress(done, cap)` after each step (steps shown, and the most
        there can be); a True answer stops there (a person left the wait), the rest computed
        when stepped to."""
        while self.step() is not None:
            if progress is not None and progress(self.position, self.cap):
                return
