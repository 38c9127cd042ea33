"""Keys that do nothing here now say why, in one line; the footer and the ? screen list only the
keys that work.

A screen (and the app) answers `why_not(action, parameters)`: None when the action works now, else
the line that says why not. Its check_action is `why_not(...) is None` (ExplainedKeys), so a key
that would do nothing is off the footer and the help, both made from the enabled bindings. A key
pressed anyway reaches the app's on_key before Textual looks its bindings up; `refusal` finds
the binding of that key and the reason its screen gives, and the app shows it.

A screen is asked before it has composed its widgets too (a key typed as it opens: `s` then `c`
in quick succession, the footer of a screen being switched to): `key_reason` answers for it
then, so no why_not ever looks for a widget that is not there yet.
"""

from __future__ import annotations

from textual.actions import parse
from textual.binding import Binding
from textual.keys import format_key
from textual.screen import ModalScreen, Screen

OPENING = "one moment: this screen is still opening"


class ExplainedKeys:
    """Mixed into a Screen (before Screen): check_action from why_not."""

    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        """Why `action` does nothing now (None: it works). Asked only once the screen is mounted:
        its widgets are there to ask."""
        return None

    def key_reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        """why_not, safe at any time: before the screen has mounted (its compose and on_mount
        done) none of its keys can act yet, and none of its widgets can be asked."""
        if not self.is_mounted:
            return OPENING
        return self.why_not(action, parameters)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.key_reason(action, parameters) is None


def bound_keys(binding: Binding) -> list[str]:
    return [key.strip() for key in binding.key.split(",")]


def refusal(screen: Screen, key: str, elsewhere: tuple = ()) -> str | None:
    """Why `key` does nothing on `screen` now, or None: a binding of the key works there (it will
    run), or no binding says why, and no other place has the key. Of a screen's bindings of one
    key the last one's reason is given: a screen lists a key's own binding before the one of a
    view it shows at times (Explore's p: the positions, then the replay's play). A key of no
    binding here that another screen or view has (`elsewhere`: (its name, the key that goes
    there, its class)) says where it works, while no field has the focus: u on Explore is Train's."""
    active = screen.active_bindings.get(key)
    if active is not None and active.enabled:
        return None
    bound = [b for node in (screen, screen.app) for b in getattr(node, "BINDINGS", ())
             if isinstance(b, Binding) and key in bound_keys(b)]
    if not bound and not isinstance(screen, ModalScreen) and screen.focused is None:
        return works_elsewhere(screen, key, elsewhere)  # (a focused field's keys are its own)
    reason = None
    for node in (screen, screen.app):
        why_not = getattr(node, "key_reason", None) or getattr(node, "why_not", None)
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


def works_elsewhere(screen: Screen, key: str, elsewhere: tuple) -> str | None:
    """"u is Train's key, not this screen's: t goes there", or None: no other place of
    `elsewhere` ((name, the key that goes there, its class)) binds the key."""
    for name, reach, place in elsewhere:
        if isinstance(screen, place):
            continue
        for binding in place.BINDINGS:
            if isinstance(binding, Binding) and key in bound_keys(binding):
                return f"{format_key(key)} is {name}'s key, not this screen's: {reach}"
    return None
