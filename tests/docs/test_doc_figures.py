"""tools/doc_figures.py re-runs the commands behind the figures of the README and docs/; here,
without running anything, every figure it knows is still on its page, once: a page edited
without its entry (or an entry left behind) fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "doc_figures.py"
spec = importlib.util.spec_from_file_location("doc_figures", TOOL)
doc_figures = importlib.util.module_from_spec(spec)
sys.modules["doc_figures"] = doc_figures  # its dataclasses look their module up while being made
spec.loader.exec_module(doc_figures)


@pytest.mark.parametrize("figure", doc_figures.FIGURES, ids=lambda f: f"{f.page}:{f.pattern[:40]}")
def test_every_figure_the_tool_checks_is_on_its_page_once(figure):
    found = figure.documented()
    assert len(found) == 1, (figure.page, figure.pattern, found)


def test_the_tool_reads_a_figure_from_a_commands_output():
    figure = next(f for f in doc_figures.FIGURES if f.command[:2] == ["decode", "reverse"])
    assert figure.read("5 1 4 6 1\n") == "5 1 4 6 1"
    accuracy = next(f for f in doc_figures.FIGURES if f.read is doc_figures.accuracy_of)
    assert accuracy.read('{"accuracy": 0.035}') == "3.5%"


def test_the_readers_of_training_logs_give_the_pages_forms():
    log = ("step      1  loss 3.1538  grad 5.936  lr 6.00e-05  1,817 ex/s\n"
           "step    800  loss 6.9e-04  grad 0.020  lr 1.30e-04  3,407 ex/s"
           "  acc <99.9% (stopped after 1,800)\n"
           "reached 99.9% exact match at step 1850 (--until 99.9%; --steps allowed 900)\n")
    assert doc_figures.log_table(log) == ("| 1 | 3.1538 |  |\n"
                                          "| 800 | 6.9e-04 | <99.9% (stopped after 1,800) |")
    assert doc_figures.step_of(log) == "1,850"
    assert doc_figures.step_range(log + log.replace("1850", "800")) == "800-1,850"
    assert doc_figures.checked_list("exact match 100.0% (1/1)\nexact match 99.7% (9/9)") == "100.0% and 99.7%"
