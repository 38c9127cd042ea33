"""Every task by name: the built-in ones (reverse, copy, sort, dates), the task of a data file
of pairs ("data") and an imported model's ("imported"), and how a task is rebuilt from a
checkpoint or made from a TrainConfig."""

from __future__ import annotations

from minitx.core.data.dates import DatesTask
from minitx.core.data.digits import CopyTask, ReverseTask, SortTask
from minitx.core.data.hf_task import HF_TASK, HuggingFaceTask
from minitx.core.data.imported_task import IMPORTED_TASK, ImportedTask
from minitx.core.data.pair_task import PairsTask
from minitx.core.data.task import DATA_TASK, Task
from minitx.core.data.vocab import Vocab

TASKS: dict[str, type[Task]] = {t.name: t for t in (ReverseTask, CopyTask, SortTask, DatesTask)}


def get_task(name: str, min_len: int = 4, max_len: int = 10) -> Task:
    if name not in TASKS:
        raise ValueError(f"task: must be one of {', '.join(TASKS)}; got {name!r}")
    return TASKS[name](min_len=min_len, max_len=max_len)


def task_from_dict(data: dict, vocab: Vocab | None = None, src_vocab: Vocab | None = None) -> Task:
    """A task from a checkpoint's metadata, with the file's vocabulary (None: a file written
    before vocabularies were stored, which holds a digit task) and its source vocabulary (only
    an imported model has one). ValueError if they disagree."""
    if not isinstance(data, dict):
        raise ValueError("the task is not an object")
    if data.get("name") in (IMPORTED_TASK, HF_TASK):
        if vocab is None or src_vocab is None:
            raise ValueError("an imported model's task needs its source and target vocabularies, "
                             "and the file lacks one")
        task_class = HuggingFaceTask if data["name"] == HF_TASK else ImportedTask
        return task_class.from_dict(data, vocab, src_vocab)
    if src_vocab is not None:
        raise ValueError(f"the {str(data.get('name'))[:40]!r} task reads one vocabulary, and the file "
                         "has a second one (src_vocab)")
    if data.get("name") == DATA_TASK:
        if vocab is None:
            raise ValueError("a data task needs its vocabulary, and the file has none")
        return PairsTask.from_dict(data, vocab)
    task = get_task(data["name"], int(data.get("min_len", 4)), int(data.get("max_len", 10)))
    if vocab is not None and vocab != task.vocab:
        raise ValueError(f"the {task.name} task reads its own {task.vocab.level} vocabulary, not "
                         f"the file's {vocab.level} vocabulary of {vocab.size} tokens")
    return task


def task_for_config(train_cfg, positions: int) -> Task:
    """The task a TrainConfig trains on: a built-in one, or the pairs of its data file read for
    a model of `positions` (DataError, one line, for a bad file)."""
    if train_cfg.task == DATA_TASK:
        return PairsTask.from_files(train_cfg.data, train_cfg.valid, train_cfg.tokens, train_cfg.seed,
                                    positions, train_cfg.expect, train_cfg.columns)
    task = get_task(train_cfg.task, train_cfg.min_source_len, train_cfg.max_source_len)
    if task.max_len + 2 > positions:
        raise ValueError(f"max_len: the model's {positions} positions cannot hold {task.name} sources of "
                         f"{task.max_len} tokens plus SOS/EOS")
    return task
