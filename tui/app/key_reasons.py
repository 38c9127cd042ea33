"""Keys that do nothing here now say why, in one line; the footer and the ? screen list only the
keys that work.

A screen (and the app) answers `why_not(action, parameters)`: None when the action works now, else
the line that says why not. Its check_action is `why_not(...) is None` (ExplainedKeys), so a key
that would do nothing is off the footer and the help, both made from the enabled bindings. A key
pressed anyway reaches the app's on_key before Textual looks its bindings up; `refusal` finds
the binding of that key and the reason its screen gives, and the app shows it.
"""

from __future__ import annotations

from textual.actions import parse
from textual.binding import Binding
from textual.screen import Screen


class ExplainedKeys:
    """Mixed into a Screen (before Screen): check_action from why_not."""

    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.why_not(action, parameters) is None


def bound_keys(binding: Binding) -> list[str]:
    return [key.strip() for key in binding.key.split(",")]


def refusal(screen: Screen, key: str) -> str | None:
    """Why `key` does nothing on `screen` now, or None: a binding of the key works there (it will
    run), or no binding of the screen or the app has the key, or none says why. Of a screen's
    bindings of one key the last one's reason is given: a screen lists a key's own binding
    before the one of a view it shows at times (Explore's p: the positions, then the replay's play)."""
    active = screen.active_bindings.get(key)
    if active is not None and active.enabled:
        return None
    reason = None
    for node in (screen, screen.app):
        why_not = getattr(node, "why_not", None)
        if why_not is None:
            continue
        for binding in getattr(node, "BINDINGS", ()):
            if not isinstance(binding, Binding) or key not in bound_keys(binding):
                continue
            namespace, action, parameters = parse(binding.action)
            if namespace:  # 'app.switch_mode(...)': the app's action, which always works
                continue
            reason = why_not(action, parameters) or reason
        if reason:
            return reason
    return None
