"""Shared fixtures. Tests that train keep models tiny so the suite stays fast on 2 CPU cores."""

import gc
import os
import signal
import sys
from pathlib import Path

# One intra-op thread for the whole suite: the models are tiny, so threads gain little, and on a
# shared 2-core machine spinning threads made training steps ten to a hundred times slower.
# It also makes CPU results independent of the machine's core count. Through the environment,
# so minitx's own default (core/training/threads.py, which commands and the app apply) is 1 here too.
os.environ["OMP_NUM_THREADS"] = "1"

# Many container images set PYTHONDONTWRITEBYTECODE; pytest then rewrites the asserts of every
# test module again in every worker of every run (about 5 s each on 2 cores). Test modules
# are imported after this file, so their rewritten code is cached in __pycache__ from here on.
sys.dont_write_bytecode = False

import pytest  # noqa: E402
import torch  # noqa: E402
from textual.css.stylesheet import Stylesheet  # noqa: E402

from minitx.core.config import ModelConfig, TrainConfig  # noqa: E402

# The reference models of other codes (tests/reference_models/fixtures.py), for the folders that
# import them (importing/, reference_models/).
pytest_plugins = ["tests.reference_models.fixtures"]

torch.set_num_threads(1)

# Each new app parses every widget's CSS again (Textual caches the rules per stylesheet, that is
# per app): a tenth of an app test's time, for some two hundred apps. One cache for the process,
# keyed also by the theme's variables, which the parse substitutes; parsed rules are only read.
_PARSED_CSS: dict = {}
_parse_rules = Stylesheet._parse_rules


def _parse_rules_once(self, css, read_from, is_default_rules=False, tie_breaker=0, scope=""):
    key = (css, read_from, is_default_rules, tie_breaker, scope, tuple(sorted(self._variables.items())))
    if key not in _PARSED_CSS:
        _PARSED_CSS[key] = _parse_rules(self, css, read_from, is_default_rules, tie_breaker, scope)
    return _PARSED_CSS[key]


Stylesheet._parse_rules = _parse_rules_once

# The second tier: what proves the whole more than any behaviour, and takes minutes (the
# reference recipe trained end to end, the wheel built and installed, every benchmark's smoke
# run, reference-size models, minitx serve in a real browser, SIGKILL at random moments, a storm
# of keys, the doctor on both models of Compare). The README's test command runs the first;
# .ci/run runs both.
SECOND_TIER_FOLDERS = ("packaging", "benchmarks")
TIERS = ("tier 1: every behaviour, in minutes (pytest -q)",
         "tier 2: end to end, the wheel, the benchmarks, a browser (pytest -q -m slow)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).parent.name in SECOND_TIER_FOLDERS:
            item.add_marker(pytest.mark.slow)


def pytest_report_header(config):
    tier = TIERS[1] if "slow" in (config.getoption("markexpr") or "").replace("not slow", "") else TIERS[0]
    return [f"minitx tests, {tier}"]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in pytest_report_header(config):
        terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.manual_seed(0)
    yield
    gc.unfreeze()  # the app freezes the collector's view once loaded; each test starts unfrozen


@pytest.fixture
def late_signals_land_here():
    """For a test that signals its own process (a Ctrl-C, a hang-up, a SIGTERM to a run): a signal
    Python handles only after the run restored the handlers it found (the C handler trips a flag
    that the main thread acts on later) lands in this no-op, not as a KeyboardInterrupt in whatever
    the worker runs next. One such surfaced in a garbage-collection callback of a busy suite."""
    numbers = [signal.SIGINT, signal.SIGHUP, signal.SIGTERM]
    previous = {number: signal.signal(number, lambda *_: None) for number in numbers}
    yield
    for number, handler in previous.items():
        signal.signal(number, handler)


@pytest.fixture
def tiny_model_cfg() -> ModelConfig:
    return ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                       max_len=16)


@pytest.fixture
def tiny_train_cfg() -> TrainConfig:
    return TrainConfig(steps=20, batch_size=16, warmup=5, min_source_len=3, max_source_len=6, eval_every=0,
                       eval_size=32, device="cpu")


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """A worker's last act is pytest's cleanup, which collects garbage five times over a heap of
    about a million objects (a second each on a quiet machine); xdist's execnet gives a finished
    worker five seconds, then sends it a SIGINT, whose KeyboardInterrupt printed a traceback amid
    the summary of a busy run. Frozen, the heap is not traversed again: those collections see
    only what the cleanup itself makes."""
    gc.freeze()
