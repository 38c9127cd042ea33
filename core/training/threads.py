"""How many CPU threads torch uses: one rule for every command, the app and the lab.

torch starts one intra-op thread per core, and its OpenMP threads spin while they wait for the
next parallel region. On a machine where another process holds a core, the thread that shares
that core runs in slices, every parallel region waits for it, and training collapses. The models
here are small, so one thread fewer than the cores costs little when the machine is idle
(docs/performance.md, "Threads on a busy machine", has the measurements). The rule: every usable
core but one, so the rest of the machine (the app's UI thread, another process) keeps a core; at
least 1.

Two ways in, because torch reads its settings once, when it is first imported:
- prepare_environment() before torch loads (the `minitx` and `minitx-tui` entry points call it
  first thing): OMP_NUM_THREADS and passive waiting for OpenMP's idle threads, unless the
  environment already says otherwise;
- set_threads() once torch is there (every command's start; in the app its loader, its UI
  thread and its training worker): an explicit --threads, or the default. A thread that has run
  torch keeps its own count until it sets it again; threads started later take the last count
  set anywhere (torch 2.13 with OpenMP), so each long-lived thread that computes sets it.
This module imports nothing heavy: torch only inside set_threads().
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, e.g. under taskset or a container)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cores_but_one() -> int:
    """The rule: every usable core but one, at least 1."""
    return max(1, usable_cores() - 1)


def default_threads() -> int:
    """torch threads when --threads is not given: OMP_NUM_THREADS when the environment sets it
    (a person's choice, or prepare_environment's), else every usable core but one, at least 1."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return cores_but_one()


def prepare_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Before torch is imported: its default thread count, and OpenMP threads that sleep instead
    of spinning while they wait (OMP_WAIT_POLICY=PASSIVE), unless already set."""
    env = os.environ if env is None else env
    env.setdefault("OMP_NUM_THREADS", str(cores_but_one()))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def set_threads(threads: int | None = None) -> int:
    """torch's thread count: `threads` when given, else the default; returns it."""
    import torch

    count = threads or default_threads()
    if torch.get_num_threads() != count:  # setting it again is not free (MKL, oneDNN)
        torch.set_num_threads(count)
    return count
