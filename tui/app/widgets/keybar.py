"""A footer that shows every active key, wrapping onto more lines instead of scrolling.

Textual's Footer scrolls sideways when the keys do not fit, which hides keys in an 80x24
terminal; this one wraps at key boundaries so every key stays visible.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar { height: auto; dock: bottom; background: $panel; }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _screen) -> None:
        self.refresh(layout=True)

    def items(self) -> list[tuple[str, str]]:
        """(key as shown, description) for every shown binding; keys that share a description
        share an entry ("→/n step", "[/] layer")."""
        seen: dict[str, tuple[str, str]] = {}
        for _node, binding, enabled, _tip in self.screen.active_bindings.values():
            if not binding.show or not enabled:
                continue
            key = self.app.get_key_display(binding)
            if binding.description in seen:
                shown, description = seen[binding.description]
                seen[binding.description] = (f"{shown}/{key}", description)
            else:
                seen[binding.description] = (key, binding.description)
        return list(seen.values())

    def _lines(self, width: int) -> list[Text]:
        lines: list[Text] = [Text()]
        for key, description in self.items():
            piece = Text.assemble((key, "bold reverse"), f" {description}")
            gap = "  " if lines[-1].cell_len else ""  # between keys only, never at a line's end
            if gap and lines[-1].cell_len + len(gap) + piece.cell_len > width:
                lines.append(Text())
                gap = ""
            lines[-1].append(gap)
            lines[-1].append_text(piece)
        return lines

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self._lines(max(1, width)))

    def render(self) -> Text:
        return Text("\n").join(self._lines(max(1, self.size.width)))
