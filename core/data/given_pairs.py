"""A model's task measured on pairs a person gives: `--pairs FILE` of every command that measures
(eval, heads, patch, circuit, doctor, compare, and mean ablation's sources), the app's pairs key,
and `minitx import --pairs`, which keeps them in the checkpoint.

The file (TSV, CSV or JSONL, docs/data.md) is read in the model's own vocabularies (an imported
model's source vocabulary for sources; tokens it does not know read as <unk>), pairs longer than
its positions allow are skipped and counted, and the pairs become the task's held-out examples:
what its accuracy, its drawn clean/corrupted pairs and its doctor's weight checks measure. The
task keeps what else it knows: its name, an imported model's wrapping and origin, a data model's
expected alignment and training sources; a generated task (reverse, dates) becomes a task of the
file's pairs in its vocabulary, with its expected alignment where it has one.
"""

from __future__ import annotations

from pathlib import Path

from minitx.core.data.imported_task import ImportedTask
from minitx.core.data.pair_files import BY_NAME, Columns
from minitx.core.data.pair_task import PairSet, PairsTask, read_for_model
from minitx.core.data.task import EXPECTATIONS, Task


def with_pairs(task: Task, path: str | Path, positions: int, limit: int | None = None,
               columns: Columns = BY_NAME) -> Task:
    """`task` measuring on the pairs of `path` that fit `positions` (the first `limit` of them,
    if given; the sides `columns` picks). DataError (one line, naming the file and line) for a bad
    file or none that fits."""
    read = read_for_model(str(path), task, positions, columns)
    kept = read.pairs if limit is None else PairSet(read.pairs.data, read.pairs.index[:limit])
    provenance = {"data": read.provenance.to_dict(), "valid": None, "tokens": task.vocab.level}
    counts = {"read": len(read.pairs) + read.skipped, "heldout": len(kept), "skipped_too_long": read.skipped,
              "unknown_heldout_tokens": read.unknown}
    lengths = kept.source_lengths()
    shape = (int(lengths.min()), int(lengths.max()), int(kept.target_lengths().max()))
    if isinstance(task, ImportedTask):  # a Hugging Face model's task stays one
        given = task.with_pairs(kept, provenance, counts, *shape)
    elif isinstance(task, PairsTask):
        given = PairsTask(task.vocab, kept, None, provenance, counts, task.expect, *shape, task.source_tokens)
    else:
        expect = task.alignment_name if task.alignment_name in EXPECTATIONS else ""
        given = PairsTask(task.vocab, kept, None, provenance, counts, expect, *shape)
    given.name = task.name  # a reverse model measured on a file's pairs is still a reverse model
    given.evaluated_on = f"pairs of {read.provenance.file}"
    return given
