"""`minitx export --trace SOURCE --format html`: one file that needs nothing from anywhere (parsed
here for any address it could fetch, and opened in headless Chromium with every request but the
file itself refused), holding every layer and head of the three kinds of attention, switchable,
each cell's weight on hover, and each step's output and top-k.

The browser half needs Playwright and Chromium (`apt-get install chromium`); without them it skips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from html.parser import HTMLParser

import pytest

from tests.cli.conftest import run_cli

CHROMIUM = os.environ.get("MINITX_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SOURCE = "3 1 4 2"


class Addresses(HTMLParser):
    """Every attribute that makes a browser fetch or go somewhere, and every tag."""

    def __init__(self) -> None:
        super().__init__()
        self.addresses: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "poster", "data") and value:
                self.addresses.append(value)


@pytest.fixture(scope="module")
def page_file(tiny_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "trace.html"
    run = run_cli("export", tiny_ckpt, "--trace", SOURCE, "--format", "html", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    assert f"wrote the html trace of {SOURCE!r} to {out}" in run.stderr
    return out


def embedded(text: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="trace">(.*?)</script>', text, re.S)
                      .group(1))


def test_the_html_trace_is_one_file_that_names_no_address_at_all(page_file):
    text = page_file.read_text(encoding="utf-8")
    parser = Addresses()
    parser.feed(text)
    assert parser.addresses == []  # no script, style, font or picture from anywhere, not even a local one
    assert not re.search(r"https?://|url\(|@import|//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I)
    assert {"script", "style", "table"} <= set(parser.tags) and "link" not in parser.tags


def test_the_html_trace_holds_every_layer_and_head_of_each_kind_of_attention(page_file, tiny_ckpt):
    data = embedded(page_file.read_text(encoding="utf-8"))
    decoded = json.loads(run_cli("decode", tiny_ckpt, SOURCE, "--json").stdout)["results"][0]
    steps, source = len(decoded["steps"]), len(SOURCE.split())
    assert data["prediction"] == decoded["prediction"] and len(data["steps"]) == steps
    assert [s["top_k"][0]["text"] for s in data["steps"]] == [s["top_k"][0]["text"] for s in decoded["steps"]]
    for kind, rows, columns in (("cross_attention", steps, source), ("self_attention", steps, steps),
                                ("encoder_attention", source, source)):
        grids = data[kind]
        assert len(grids) == 1 and len(grids[0]) == 2  # the tiny model: one layer of each, two heads
        for grid in grids[0]:
            assert len(grid) == rows and all(len(row) == columns for row in grid)
            assert all(abs(sum(row) - 1) < 1e-3 for row in grid)  # each row a distribution
    assert data["cross_attention"][0][1][0] == pytest.approx(decoded["cross_attention"][0][1][0], abs=1e-4)
    self_grid = data["self_attention"][0][0]
    assert all(value == 0 for i, row in enumerate(self_grid) for value in row[i + 1:])  # never the future


def test_a_token_with_markup_in_it_stays_text():
    from minitx.tui.render.trace_html import trace_html

    trace = {"source": "<b>", "source_tokens": ["</script>"], "prediction": "<i>", "expected": None,
             "steps": [], "cross_attention": [[[]]], "self_attention": [[[]]],
             "encoder_attention": [[[[1.0]]]], "decoder_inputs": ["<sos>"], "best": [0, 0]}
    text = trace_html(trace, "a <title>")
    assert "<b>" not in text and "<i>" not in text and "&lt;b&gt;" in text and "&lt;title&gt;" in text
    assert text.count("</script>") == 2  # the page's own two: no token ends one
    assert embedded(text)["source_tokens"] == ["</script>"]  # and the page reads the tokens back as they were


# -- in a browser -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set MINITX_TEST_CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM,
                                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


@pytest.mark.slow  # a real browser: tier 2, with minitx serve's
def test_offline_in_chromium_it_fetches_nothing_and_every_grid_shows_its_weights(browser, page_file):
    data = embedded(page_file.read_text(encoding="utf-8"))
    context = browser.new_context(offline=True)
    asked, errors = [], []

    def only_the_file(route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            asked.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", only_the_file)
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda r: None if r.url.startswith("file://") else asked.append(r.url))
    try:
        page.goto(page_file.as_uri())
        assert page.locator("#grid-title").text_content().startswith("cross-attention")
        assert page.locator("#steps tr").count() == 1 + len(data["steps"])
        first = page.locator("#steps tr").nth(1).text_content()
        assert data["steps"][0]["text"] in first and data["steps"][0]["top_k"][1]["text"] in first
        shapes = {}
        for index, kind in enumerate(("cross_attention", "self_attention", "encoder_attention")):
            page.locator(f'#kinds button[data-kind="{index}"]').click()
            assert page.locator("#heads button").count() == 2  # layers x heads of the kind
            page.locator('#heads button[data-layer="0"][data-head="1"]').click()
            assert page.locator("#grid-title").text_content().endswith("L1 H2")
            rows = page.locator("#grid tr")
            shapes[kind] = (rows.count() - 1, rows.nth(1).locator("td").count())
            page.hover("#grid tr:nth-child(2) td:nth-child(2)")  # row 1, column 1
            weight = data[kind][0][1][0][0]
            assert f"weight {weight:.3f}" in page.locator("#hover").text_content()
        steps, source = len(data["steps"]), len(SOURCE.split())
        assert shapes == {"cross_attention": (steps, source), "self_attention": (steps, steps),
                          "encoder_attention": (source, source)}
        page.keyboard.press("s")  # the app's keys: s back to cross-attention, # numbers in the cells
        page.keyboard.press("#")
        assert page.locator("#grid-title").text_content().startswith("cross-attention")
        assert re.fullmatch(r"\.\d{3}|1\.00", page.locator("#grid td").first.text_content())
    finally:
        context.close()
    assert asked == [] and errors == []
