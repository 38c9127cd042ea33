"""The Textual driver of the app that `minitx serve` runs for each browser tab.

It is Textual's web driver with one change: every way the browser can go away ends the app the
way a closed terminal does (MinitxApp.close_saving: a run with unsaved steps is saved first, and
the server's terminal is told where). Textual's own driver ends the app at once on each of them,
which would throw the run away:

- the tab is closed, reloaded or its connection drops: textual-serve sends a "quit" packet;
- the server is stopped with Ctrl-C: the terminal sends SIGINT to the app too (same process group);
- the server is killed: the app's stdin ends, and writing to its stdout fails from then on.
"""

from __future__ import annotations

import signal

from textual.drivers.web_driver import WebDriver


class BrowserDriver(WebDriver):
    def start_application_mode(self) -> None:
        super().start_application_mode()
        # Textual's driver ends the app on SIGINT and SIGTERM; here they close it as `q` + `s`
        # would. (The app replaces SIGTERM's handler with the same once it has mounted.)
        for number in (signal.SIGINT, signal.SIGTERM):
            self._loop.add_signal_handler(number, self._close_saving)

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "quit":  # the browser went away: runs on the input thread
            self._loop.call_soon_threadsafe(self._close_saving)
            return
        super().on_meta(packet_type, payload)

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():  # stdin ended before the app did: the server is gone
            self._loop.call_soon_threadsafe(self._close_saving)

    def write(self, data: str) -> None:
        try:
            super().write(data)
        except OSError:  # the server is gone (EPIPE): nobody sees the screen, the save goes on
            pass

    def write_meta(self, data: dict[str, object]) -> None:
        try:
            super().write_meta(data)
        except OSError:
            pass

    def _close_saving(self) -> None:
        close = getattr(self._app, "close_saving", None)
        if close is None:
            self._app.exit()
        else:
            close()
