"""What a run is called and where its checkpoint goes when no path is given: one scheme for the
command line (`minitx train` without --out) and the app (Train's `w`), so a run's file has the
same name whichever started it. It imports nothing heavy: the app names runs before torch loads."""

from __future__ import annotations

from pathlib import Path

MAX_RUNS = 10_000  # run numbers tried before a folder counts as full


def run_name(task: str, data: str = "") -> str:
    """A run's name, from its TrainConfig's task and data: the data file's name when it has one
    (the task is then "data"), else the task."""
    return Path(data).stem if data else task


def run_path(folder: str | Path, name: str, number: int) -> Path:
    """NAME-runN.safetensors in `folder`: run N of NAME."""
    return Path(folder) / f"{name}-run{number}.safetensors"


def next_run_number(folder: str | Path, name: str, after: int = 0) -> int:
    """The first run number above `after` whose file does not exist yet: a run never overwrites an
    earlier one (of this session or another). ValueError when the folder holds every number."""
    for number in range(after + 1, after + 1 + MAX_RUNS):
        if not run_path(folder, name, number).exists():
            return number
    raise ValueError(f"every {name}-runN.safetensors name is taken in {folder}; give a path")
