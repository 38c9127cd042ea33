"""One decoding trace as a single HTML file that needs nothing else (`minitx export --trace SOURCE
--format html`): no font, script, style or picture from anywhere, so it opens offline, from a
mail attachment or a laptop with no network.

The page holds the trace as JSON and draws it with its own script: every layer and head of
cross-attention, decoder self-attention and encoder self-attention, one grid at a time (buttons,
or the app's keys: s the kind, [ ] the layer, , . the head, # numbers in the cells), the value of
each cell on hover, and per step the token output, its probability, the top-k and the entropy.
The colours are the app's (viridis, tui/render/colors.py), passed to the page as a table. Every
text from the trace reaches the page as text (textContent), never as markup: a data model's
tokens may hold '<'.
"""

from __future__ import annotations

import html
import json

from minitx.tui.render.colors import text_colour_on, viridis_hex

PALETTE_STEPS = 100  # colours in the page's table: one per hundredth of a weight
DIGITS = 4  # decimals kept of each weight (the page shows three)

STYLE = """
:root { color-scheme: dark; --bg: #0f1419; --fg: #dde3ea; --dim: #8b96a3; --line: #2c3540;
        --accent: #56b4e9; }
* { box-sizing: border-box; }
body { margin: 0; padding: 1.2rem 1.6rem; background: var(--bg); color: var(--fg);
       font: 14px/1.45 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
h1 { font-size: 1.15rem; margin: 0 0 .3rem; }
h2 { font-size: 1rem; margin: 0 0 .5rem; }
.dim { color: var(--dim); }
.right { color: #7fd47f; } .wrong { color: #ff7070; }
nav { display: flex; flex-wrap: wrap; gap: .35rem; margin: .6rem 0; align-items: center; }
button { font: inherit; color: var(--fg); background: #1b232c; border: 1px solid var(--line);
         border-radius: 4px; padding: .15rem .55rem; cursor: pointer; }
button[aria-pressed="true"] { background: var(--accent); color: #000; border-color: var(--accent); }
#heads { display: grid; grid-template-columns: auto repeat(var(--heads), auto); gap: .3rem;
         justify-content: start; }
#heads span { align-self: center; color: var(--dim); }
main { display: flex; flex-wrap: wrap; gap: 2rem; align-items: flex-start; }
table.grid { border-collapse: separate; border-spacing: 2px; }
table.grid th { font-weight: bold; padding: 0 .3rem; white-space: nowrap; }
table.grid td { width: 2.6em; height: 1.7em; text-align: center; font-size: 12px; border-radius: 2px; }
table.grid td.future { color: var(--dim); background: transparent; }
table.grid tr.picked th { outline: 1px solid var(--accent); }
td.hover { outline: 2px solid #fff; }
#hover { min-height: 1.5em; margin: .5rem 0; }
#legend { display: flex; align-items: center; gap: .4rem; }
#legend i { display: inline-block; width: 1.2em; height: 1em; }
table.steps { border-collapse: collapse; }
table.steps th, table.steps td { padding: .15rem .6rem; text-align: left;
                                  border-bottom: 1px solid var(--line); }
table.steps tr { cursor: pointer; }
table.steps tr.picked { background: #1d2a36; }
kbd { border: 1px solid var(--line); border-radius: 3px; padding: 0 .3em; }
"""

SCRIPT = r"""
"use strict";
const trace = JSON.parse(document.getElementById("trace").textContent);
const palette = trace.palette, inks = trace.inks;
const steps = trace.steps.map(s => s.text);
const kinds = [
  {title: "cross-attention", grids: trace.cross_attention, rows: steps, columns: trace.source_tokens,
   rowName: "output", columnName: "source", axes: "rows: tokens generated · columns: source tokens"},
  {title: "decoder self-attention", grids: trace.self_attention, rows: steps, columns: trace.decoder_inputs,
   rowName: "output", columnName: "input", causal: true,
   axes: "rows: tokens generated · columns: decoder inputs (· the future)"},
  {title: "encoder self-attention", grids: trace.encoder_attention, rows: trace.source_tokens,
   columns: trace.source_tokens, rowName: "query", columnName: "key",
   axes: "rows: source tokens asking · columns: source tokens looked at"},
];
const state = {kind: 0, layer: trace.best[0], head: trace.best[1], numbers: false, step: null};

function el(tag, text, attributes) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  return node;
}
function at(table, value) {
  return table[Math.max(0, Math.min(table.length - 1, Math.round(value * (table.length - 1))))];
}
function colour(value) { return at(palette, value); }
function ink(value) { return at(inks, value); }
function shown(value) { return value >= 0.9995 ? "1.00" : value.toFixed(3).replace(/^0/, ""); }
function figure(value) {  // 0.953, or 3e-5 where three decimals would read 0.000
  return value !== 0 && Math.abs(value) < 0.001 ? value.toExponential(0) : value.toFixed(3);
}
function kind() { return kinds[state.kind]; }

function drawKinds() {
  const nav = document.getElementById("kinds");
  nav.replaceChildren(el("span", "attention:", {class: "dim"}));
  kinds.forEach((k, i) => {
    const button = el("button", k.title, {"aria-pressed": String(i === state.kind), "data-kind": String(i)});
    button.onclick = () => { state.kind = i; clampHead(); draw(); };
    nav.append(button);
  });
  const numbers = el("button", "# numbers", {"aria-pressed": String(state.numbers), id: "numbers"});
  numbers.onclick = () => { state.numbers = !state.numbers; draw(); };
  nav.append(numbers);
}

function drawHeads() {
  const box = document.getElementById("heads"), grids = kind().grids;
  box.style.setProperty("--heads", grids[0].length);
  box.replaceChildren();
  grids.forEach((heads, layer) => {
    box.append(el("span", `L${layer + 1}`));
    heads.forEach((_, head) => {
      let label = `H${head + 1}`;
      if (state.kind === 0 && trace.scores) label += ` ${trace.scores[layer][head].toFixed(2)}`;
      const picked = layer === state.layer && head === state.head;
      const button = el("button", label, {"aria-pressed": String(picked), "data-layer": String(layer),
                                          "data-head": String(head),
                                          title: `layer ${layer + 1}, head ${head + 1}`});
      button.onclick = () => { state.layer = layer; state.head = head; draw(); };
      box.append(button);
    });
  });
  document.getElementById("scores-note").textContent = state.kind === 0 && trace.scores
    ? `beside each cross-attention head: its ${trace.measure} on the task's examples` : "";
}

function drawGrid() {
  const k = kind(), rows = k.grids[state.layer][state.head];
  document.getElementById("grid-title").textContent = `${k.title} · L${state.layer + 1} H${state.head + 1}`;
  const table = document.getElementById("grid");
  table.replaceChildren();
  const header = el("tr");
  header.append(el("th"));
  k.columns.forEach(c => header.append(el("th", c)));
  table.append(header);
  rows.forEach((row, i) => {
    const line = el("tr", null, state.step === i && k !== kinds[2] ? {class: "picked"} : {});
    line.append(el("th", k.rows[i], {style: "text-align: right"}));
    row.forEach((value, j) => {
      const future = k.causal && j > i;
      const cell = el("td", future ? "·" : (state.numbers ? shown(value) : ""),
                      {"data-row": String(i), "data-column": String(j)});
      if (future) {
        cell.className = "future";
      } else {
        cell.style.background = colour(value);
        cell.style.color = ink(value);
        cell.title = `${k.rowName} ${k.rows[i]} → ${k.columnName} ${k.columns[j]}: ${value.toFixed(3)}`;
      }
      line.append(cell);
    });
    table.append(line);
  });
  document.getElementById("axes").textContent = k.axes;
}

function hover(event) {
  const cell = event.target.closest("td");
  const note = document.getElementById("hover");
  document.querySelectorAll("td.hover").forEach(c => c.classList.remove("hover"));
  if (!cell || cell.classList.contains("future")) {
    note.textContent = "hover a cell for its weight";
    return;
  }
  cell.classList.add("hover");
  const k = kind(), i = Number(cell.dataset.row), j = Number(cell.dataset.column);
  const value = k.grids[state.layer][state.head][i][j];
  note.textContent = `L${state.layer + 1} H${state.head + 1} · ${k.rowName} ${k.rows[i]} (row ${i + 1}) → ` +
                     `${k.columnName} ${k.columns[j]} (column ${j + 1}): weight ${value.toFixed(3)}`;
}

function drawSteps() {
  const table = document.getElementById("steps");
  table.replaceChildren();
  const header = el("tr");
  ["step", "output", "p", "top-k", "log p", "entropy"].forEach(h => header.append(el("th", h)));
  table.append(header);
  trace.steps.forEach((s, i) => {
    const row = el("tr", null, state.step === i ? {class: "picked"} : {});
    row.append(el("td", String(s.index + 1)), el("td", s.text), el("td", figure(Math.exp(s.log_p))),
               el("td", s.top_k.map(t => `${t.text} ${figure(t.p)}`).join(" · ")),
               el("td", figure(s.log_p)), el("td", figure(s.entropy)));
    row.onclick = () => { state.step = state.step === i ? null : i; draw(); };
    table.append(row);
  });
}

function clampHead() {
  const grids = kind().grids;
  state.layer = Math.min(state.layer, grids.length - 1);
  state.head = Math.min(state.head, grids[0].length - 1);
}

function draw() { drawKinds(); drawHeads(); drawGrid(); drawSteps(); }

document.getElementById("grid").addEventListener("mouseover", hover);
document.addEventListener("keydown", event => {
  const grids = kind().grids, moves = {"[": [-1, 0], "]": [1, 0], ",": [0, -1], ".": [0, 1]};
  if (event.key === "s") { state.kind = (state.kind + 1) % kinds.length; clampHead(); }
  else if (event.key === "#") { state.numbers = !state.numbers; }
  else if (moves[event.key]) {
    const [dl, dh] = moves[event.key];
    state.layer = (state.layer + dl + grids.length) % grids.length;
    state.head = (state.head + dh + grids[0].length) % grids[0].length;
  } else { return; }
  draw();
});
const legend = document.getElementById("legend");
legend.append(el("span", "0.0", {class: "dim"}));
for (let i = 0; i <= 8; i++) legend.append(el("i", null, {style: `background: ${colour(i / 8)}`}));
legend.append(el("span", "1.0 weight", {class: "dim"}));
draw();
"""


def trace_html(trace: dict, title: str) -> str:
    """The page for `trace` (trace.trace_of(..., every_kind=True), with "scores", "measure" and
    "best" of the model's cross-attention heads)."""
    data = {
        **trace,
        "cross_attention": _rounded(trace["cross_attention"]),
        "self_attention": _rounded(trace["self_attention"]),
        "encoder_attention": _rounded(trace["encoder_attention"]),
        "palette": [viridis_hex(i / PALETTE_STEPS) for i in range(PALETTE_STEPS + 1)],
        "inks": [text_colour_on(i / PALETTE_STEPS) for i in range(PALETTE_STEPS + 1)],
    }
    # Inside <script> a "</script" (or "<!--") in a token would end (or confuse) the element: every
    # "<" goes as JSON's own \u003c, which the page's JSON.parse turns back into "<".
    payload = json.dumps(data, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")
    verdict = ""
    if trace.get("expected") is not None:
        verdict = ('<span class="right">✓ correct</span>' if trace["correct"] else
                   f'<span class="wrong">✗ expected {html.escape(trace["expected"])}</span>')
    ablated = (f'<p class="dim">ablated: {html.escape(", ".join(trace["ablated"]))}</p>'
               if trace.get("ablated") else "")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>{html.escape(title)}</h1>
<p><span class="dim">source</span> {html.escape(trace["source"])}
&nbsp; <span class="dim">prediction</span> {html.escape(trace["prediction"])} {verdict}</p>
{ablated}
</header>
<nav id="kinds"></nav>
<div id="heads"></div>
<p id="scores-note" class="dim"></p>
<main>
<section>
<h2 id="grid-title"></h2>
<table id="grid" class="grid"></table>
<p id="hover" class="dim">hover a cell for its weight</p>
<div id="legend"></div>
<p id="axes" class="dim"></p>
</section>
<section>
<h2>each step: what it output, and what it weighed up</h2>
<table id="steps" class="steps"></table>
<p class="dim">click a step to mark its row · keys: <kbd>s</kbd> attention kind, <kbd>[</kbd>
<kbd>]</kbd> layer, <kbd>,</kbd> <kbd>.</kbd> head, <kbd>#</kbd> numbers</p>
</section>
</main>
<script type="application/json" id="trace">{payload}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""


def _rounded(grids):
    """Nested lists of weights, each to DIGITS decimals (a file a tenth the size)."""
    if isinstance(grids, list):
        return [_rounded(g) for g in grids]
    return round(float(grids), DIGITS)
