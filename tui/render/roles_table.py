"""Head roles as a Rich table (`minitx heads --roles`): a score per named pattern, the strongest
role last; the strongest score is bold, a pattern that does not apply to the head is a dash."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

# role -> its column header (short: eight scores, a head's name and its role fit 80 columns)
HEADERS = {"diagonal": "diag", "anti-diagonal": "anti", "previous": "prev", "first": "first",
           "last": "last", "broad": "broad", "expected": "expect", "identity": "ident"}


def roles_table(table) -> Table:
    """core.roles.RoleTable -> one row per head."""
    from minitx.core.interp.roles import ROLES

    out = Table(box=None, padding=(0, 1, 0, 0), header_style="bold")
    out.add_column("head")
    for role in ROLES:
        out.add_column(HEADERS[role], justify="right")
    out.add_column("strongest")
    for head in table.heads:
        best = head.strongest()
        cells = []
        for role in ROLES:
            score = head.scores[role]
            if score is None:
                cells.append(Text("-", style="dim"))
            else:
                cells.append(Text(f"{score:.2f}", style="bold" if best and best[0] == role else ""))
        out.add_row(head.head, *cells, best[0] if best else Text("none", style="dim"))
    return out
