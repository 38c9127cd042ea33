"""Path patching and circuits as Rich renderables: the sender x receiver tables and the circuit's
summary, for `minitx circuit` and the app's circuit view."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from minitx.tui.render.patch_tables import fraction_text

CELL = 6  # "+24.4" and a space
NAME = 12  # "cross:L2.H1" and a space


def percent_text(value: float) -> Text:
    """A recovered fraction in percent to one decimal (path effects are often a few percent),
    coloured as fraction_text colours it."""
    return Text(f"{100 * value:+.1f}", style=fraction_text(value).style)


def _receiver_name(receiver: str) -> str:
    """"cross:L2.H1 K/V" -> "L2.H1" (the table's title says the kind and the side)."""
    return receiver.split(" ")[0].split(":")[1]


def path_tables(paths, width: int = 80) -> list:
    """core.path_patching.PathPatching -> a K/V table (senders x cross-attention heads' keys and
    values) and a Q table, each cut into column groups that fit `width`; blank: no such edge."""
    edges: dict[str, dict[str, dict[str, float]]] = {"K/V": {}, "Q": {}}  # side -> sender -> receiver
    for name, value in paths.edges.items():
        sender, receiver = name.split(" -> ")
        side = receiver.split(" ")[1]
        edges[side].setdefault(sender, {})[_receiver_name(receiver)] = value
    titles = {"K/V": "K/V: what the encoder gives each cross-attention head",
              "Q": "Q: what the decoder asks each cross-attention head"}
    parts: list = []
    room = max(1, (width - NAME - 2 * CELL) // CELL)
    for side, senders in edges.items():
        if not senders:
            continue
        receivers = list(dict.fromkeys(r for row in senders.values() for r in row))
        parts.append(Text(titles[side], style="bold"))
        for start in range(0, len(receivers), room):
            chunk = receivers[start : start + room]
            last = start + room >= len(receivers)
            table = Table(box=None, padding=(0, 1, 0, 0), header_style="bold")
            table.add_column("sender")
            for receiver in chunk:
                table.add_column(receiver, justify="right")
            if last:
                table.add_column("all", justify="right")
                table.add_column("alone", justify="right")
            for sender, row in senders.items():
                cells = [percent_text(row[r]) if r in row else Text("") for r in chunk]
                if last:
                    cells += [percent_text(paths.through_all[sender]), percent_text(paths.total[sender])]
                table.add_row(sender, *cells)
            parts.append(table)
    parts.append(Text("all: through every input it reaches at once · alone: its output patched, "
                      "every path", style="dim"))
    return parts


def kept_edges_lines(edges, n_heads: int) -> list[Text]:
    """Kept edges grouped by receiver: 'cross:L2.H1 K/V <- enc:L2.H1, enc:L2.H3'."""
    from minitx.core.interp.interventions import describe_heads

    by_receiver: dict = {}
    for edge in sorted(edges):
        by_receiver.setdefault(edge.receiver, []).append(edge.sender)
    return [Text(f"  {receiver} <- {describe_heads(senders, n_heads)}")
            for receiver, senders in by_receiver.items()]


def circuit_summary(result, n_heads: int) -> Group:
    """core.circuit.CircuitResult -> what was kept and how faithful it is."""
    from minitx.core.interp.interventions import describe_heads

    circuit = result.circuit
    lines = [
        Text(f"the circuit: at least {result.keep:.0%} of the logit difference kept, everything outside "
             f"it {result.ablation}-ablated", style="bold"),
        Text(f"heads         {len(circuit.heads)} of {result.total_heads}: "
             f"{describe_heads(circuit.heads, n_heads)}"),
        Text(f"edges         {len(circuit.edges)} of the {result.candidate_edges} among them "
             f"({result.total_edges} in "
             "the model)"),
        Text.assemble("faithfulness  ", (f"{result.faithfulness:.3f}", "bold"),
                      f" measured by running the circuit alone (its heads with every edge among them: "
                      f"{result.heads_faithfulness:.3f})"),
        Text(f"exact match   {result.accuracy:.1%} alone, {result.model_accuracy:.1%} the whole model "
             f"({result.accuracy_on or f'{result.accuracy_n} sequences'}, greedy)"),
    ]
    if circuit.edges:
        lines.append(Text("kept edges (receiver <- senders):"))
        lines += kept_edges_lines(circuit.edges, n_heads)
    return Group(*lines)
