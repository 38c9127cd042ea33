"""A circuit as a picture: heads as boxes by layer and kind, kept edges drawn between them. The
same layout as terminal text (the app's circuit view) and as SVG (`minitx circuit --svg`).

Three bands, top to bottom: the encoder's heads, the cross-attention heads, the decoder's
self-attention heads; a column per layer. K/V edges run from the encoder band down to the
cross-attention band, Q edges from the self-attention band up to it, so a line never crosses a
box (with the swap-cross bug preset, K/V edges come from the self-attention band too). In text
the lines are braille dots; K/V and Q lines differ in colour and, without colour, in band.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from rich.text import Text

BANDS = ("enc", "cross", "self")  # top to bottom
BAND_LABELS = {"enc": "encoder", "cross": "cross", "self": "self"}
LINE_ROWS = 4  # text rows of each band of lines (16 braille dots tall)
LABEL = 8  # the band labels' column
GROUP_GAP = 3  # columns between layers
SIDE_COLOURS = {"kv": "#56b4e9", "q": "#e69f00"}  # Okabe-Ito blue and orange
IN_STYLE, OUT_STYLE, SELECTED_STYLE = "bold", "dim", "reverse bold"
_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))  # [row][column] of a braille cell


@dataclass(frozen=True)
class Shape:
    """How many layers and heads: all the layout needs."""

    encoder_layers: int
    decoder_layers: int
    heads: int

    @classmethod
    def of(cls, model) -> Shape:
        return cls(len(model.encoder), len(model.decoder), model.cfg.n_heads)

    def layers(self, band: str) -> int:
        return self.encoder_layers if band == "enc" else self.decoder_layers


def _box_width(shape: Shape, bracketed: bool) -> int:
    return len(str(shape.heads)) + (2 if bracketed else 0)


def text_width(shape: Shape, bracketed: bool = True) -> int:
    groups = max(shape.encoder_layers, shape.decoder_layers)
    box = _box_width(shape, bracketed)
    return LABEL + groups * (shape.heads * (box + 1) - 1) + (groups - 1) * GROUP_GAP


def _box_column(shape: Shape, layer: int, head: int, bracketed: bool) -> int:
    """The first column of head `head` of layer `layer` (0-based) in the text layout."""
    box = _box_width(shape, bracketed)
    group = shape.heads * (box + 1) - 1 + GROUP_GAP
    return LABEL + layer * group + head * (box + 1)


def circuit_text(shape: Shape, heads, edges, selected=None, width: int = 80) -> Text | None:
    """The diagram as Rich text within `width` columns, or None when the model is too wide for
    it. `heads`: the circuit's heads (objects with kind, layer, head), `edges`: its kept edges
    (sender, receiver.head, receiver.side), `selected`: the head under the cursor."""
    bracketed = text_width(shape, True) <= width
    if not bracketed and text_width(shape, False) > width:
        return None
    box = _box_width(shape, bracketed)
    total = text_width(shape, bracketed)
    kept = {(h.kind, h.layer, h.head) for h in heads}
    chosen = None if selected is None else (selected.kind, selected.layer, selected.head)
    box_row = {"enc": 1, "cross": 2 + LINE_ROWS, "self": 3 + 2 * LINE_ROWS}
    height = box_row["self"] + 1
    cells = [[" "] * total for _ in range(height)]
    styles: list[list[str]] = [[""] * total for _ in range(height)]
    dots = [[0] * total for _ in range(height)]
    dot_side: list[list[str]] = [[""] * total for _ in range(height)]

    def put(row: int, col: int, text: str, style: str) -> None:
        for i, ch in enumerate(text):
            if 0 <= col + i < total:
                cells[row][col + i], styles[row][col + i] = ch, style

    groups = max(shape.encoder_layers, shape.decoder_layers)
    for layer in range(groups):
        put(0, _box_column(shape, layer, 0, bracketed), f"L{layer + 1}", "bold")
    for band in BANDS:
        put(box_row[band], 0, BAND_LABELS[band], "")
        for layer in range(shape.layers(band)):
            for head in range(shape.heads):
                key = (band, layer, head)
                label = str(head + 1).rjust(len(str(shape.heads)))
                text = f"[{label}]" if bracketed else label
                style = SELECTED_STYLE if key == chosen else IN_STYLE if key in kept else OUT_STYLE
                put(box_row[band], _box_column(shape, layer, head, bracketed), text, style)

    def centre(kind: str, layer: int, head: int) -> int:  # in braille dots (2 per column)
        return 2 * (_box_column(shape, layer, head, bracketed) + box // 2)

    for sender, receiver, side in edges:
        from_band = sender.kind
        x0 = centre(from_band, sender.layer, sender.head)
        x1 = centre("cross", receiver.layer, receiver.head)
        if from_band == "enc":  # the band of lines between the encoder and cross-attention
            top, y0, y1 = box_row["enc"] + 1, 0, 4 * LINE_ROWS - 1
        else:  # between cross-attention and self-attention, drawn upwards
            top, y0, y1 = box_row["cross"] + 1, 4 * LINE_ROWS - 1, 0
        for x, y in _line(x0, y0, x1, y1):
            row, col = top + y // 4, x // 2
            if 0 <= col < total:
                dots[row][col] |= _DOTS[y % 4][x % 2]
                dot_side[row][col] = dot_side[row][col] or side
    out = Text()
    for row in range(height):
        for col in range(total):
            if dots[row][col]:
                out.append(chr(0x2800 + dots[row][col]), style=SIDE_COLOURS[dot_side[row][col]])
            else:
                out.append(cells[row][col], style=styles[row][col] or None)
        if row < height - 1:
            out.append("\n")
    return out


def _line(x0: int, y0: int, x1: int, y1: int):
    """The points of a straight line (Bresenham), both ends included."""
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    error = dx + dy
    while True:
        yield x0, y0
        if x0 == x1 and y0 == y1:
            return
        twice = 2 * error
        if twice >= dy:
            error += dy
            x0 += sx
        if twice <= dx:
            error += dx
            y0 += sy


# ---------------------------------------------------------------------------------------------
# SVG

BOX_W, BOX_H, BOX_GAP, LAYER_GAP, BAND_GAP, MARGIN, TOP = 30, 22, 6, 34, 90, 20, 56


def circuit_svg(shape: Shape, heads, edges, title: str, weights: dict | None = None) -> str:
    """The diagram as a standalone SVG document; `weights` ("sender -> receiver side" name ->
    path-patching effect) set each line's width."""
    groups = max(shape.encoder_layers, shape.decoder_layers)
    group_w = shape.heads * (BOX_W + BOX_GAP) - BOX_GAP
    left = MARGIN + 70
    legend = ("━ K/V: what the encoder gives", "━ Q: what the decoder asks",
              "dashed: outside the circuit (mean-ablated)")
    width = max(left + groups * group_w + (groups - 1) * LAYER_GAP + MARGIN,  # monospace: 12px ~ 7.3px
                int(2 * MARGIN + 8.6 * len(title)), int(2 * MARGIN + 7.3 * (sum(map(len, legend)) + 6)))
    band_y = {band: TOP + 20 + i * (BOX_H + BAND_GAP) for i, band in enumerate(BANDS)}
    height = band_y["self"] + BOX_H + MARGIN + 30
    kept = {(h.kind, h.layer, h.head) for h in heads}

    def x_of(layer: int, head: int) -> float:
        return left + layer * (group_w + LAYER_GAP) + head * (BOX_W + BOX_GAP)

    largest = max((abs(v) for v in (weights or {}).values()), default=0.0) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{MARGIN}" y="24" font-size="14" font-weight="bold">{escape(title)}</text>']
    for layer in range(groups):
        out.append(f'<text x="{x_of(layer, 0)}" y="{TOP}" font-weight="bold">L{layer + 1}</text>')
    for sender, receiver, side in edges:
        x0 = x_of(sender.layer, sender.head) + BOX_W / 2
        y0 = band_y[sender.kind] + (BOX_H if sender.kind == "enc" else 0)
        x1 = x_of(receiver.layer, receiver.head) + BOX_W / 2
        y1 = band_y["cross"] + (0 if sender.kind == "enc" else BOX_H)
        name = f"{_name(sender)} -> {_name(receiver)} {'K/V' if side == 'kv' else 'Q'}"
        effect = abs((weights or {}).get(name, 0.0))
        stroke = 1 + 4 * effect / largest
        out.append(f'<line x1="{x0:.1f}" y1="{y0}" x2="{x1:.1f}" y2="{y1}" stroke="{SIDE_COLOURS[side]}" '
                   f'stroke-width="{stroke:.2f}" stroke-opacity="0.8"><title>{escape(name)}</title></line>')
    for band in BANDS:
        out.append(f'<text x="{MARGIN}" y="{band_y[band] + 15}">{BAND_LABELS[band]}</text>')
        for layer in range(shape.layers(band)):
            for head in range(shape.heads):
                inside = (band, layer, head) in kept
                style = ('fill="#f0f0f0" stroke="black" stroke-width="1.5"' if inside
                         else 'fill="white" stroke="#aaaaaa" stroke-dasharray="3,2"')
                x = x_of(layer, head)
                out.append(f'<rect x="{x}" y="{band_y[band]}" width="{BOX_W}" height="{BOX_H}" rx="3" '
                           f'{style}><title>{band}:L{layer + 1}.H{head + 1}</title></rect>')
                colour = "black" if inside else "#aaaaaa"
                out.append(f'<text x="{x + BOX_W / 2}" y="{band_y[band] + 15}" text-anchor="middle" '
                           f'fill="{colour}">H{head + 1}</text>')
    legend_y = height - MARGIN
    out.append(f'<text x="{MARGIN}" y="{legend_y}" xml:space="preserve">'
               f'<tspan fill="{SIDE_COLOURS["kv"]}">{legend[0]}</tspan>   '
               f'<tspan fill="{SIDE_COLOURS["q"]}">{legend[1]}</tspan>   '
               f'<tspan fill="#888888">{legend[2]}</tspan></text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _name(head) -> str:
    return f"{head.kind}:L{head.layer + 1}.H{head.head + 1}"
