"""The web server of `minitx serve`: textual-serve's Server, which starts one app process per
browser tab and relays its terminal over a websocket, with these changes.

- Its own page, which needs nothing but this server: textual-serve's asks a font host on the
  internet for Roboto Mono, where this one names the copy textual-serve ships.
- The page's URLs follow the address the browser used (an SSH tunnel may map any local port),
  where textual-serve writes the host and port it listens on into them.
- No login exists, so while it listens on loopback it answers only requests addressed to
  loopback, and a websocket only from its own page: another web page open in the same browser
  cannot drive the app (cross-site websockets, DNS rebinding).
- A tab's handler waits for its app to exit once the tab has gone (the app is saving a run),
  and stopping the server closes every tab's app as closing the tab does.
- It prints two lines once the port listens, instead of a banner and a log line per request.
- A file the app delivers (the export key: tui/app/exports.py) downloads through a link of the
  page, not a new window (textual-serve's page opens one, which a popup blocker may stop), and
  its address answers under the same rules as the page.
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import logging
import signal
import socket
import sys
from urllib.parse import urlsplit

import click
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from minitx.tui.cli.main import EXIT_INTERRUPTED

LOOPBACK_NAMES = ("localhost",)
WILDCARDS = ("0.0.0.0", "::", "")  # every address of the machine: its name says where to go
# What a page costs the browser: textual-serve's own script, style and font, from this server.
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="stylesheet" href="/static/css/xterm.css">
<link rel="preload" href="/static/fonts/RobotoMono-VariableFont_wght.ttf" as="font" type="font/ttf"
      crossorigin>
<style>
@font-face {{
  font-family: "Roboto Mono"; font-style: normal; font-weight: 100 700;
  src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
}}
@font-face {{
  font-family: "Roboto Mono"; font-style: italic; font-weight: 100 700;
  src: url("/static/fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype");
}}
html, body {{ margin: 0; height: 100%; background: #0c181f; color: #dde; overflow: hidden; }}
#terminal {{ position: absolute; inset: 0; }}
.note {{ position: absolute; inset: 0; display: flex; align-items: center; justify-content: center;
         font: 16px "Roboto Mono", monospace; }}
body.-first-byte .starting, .ended {{ display: none; }}
body.-closed .ended {{ display: flex; background: #0c181fe6; z-index: 10; }}
.ended a {{ color: #8cf; margin-left: 1ch; }}
</style>
<script src="/static/js/textual.js"></script>
<script>
// Keys go to the app at once, without a click first (textual.js builds the terminal on load).
window.addEventListener("load", () => setTimeout(() => {{
  const keys = document.querySelector(".xterm-helper-textarea");
  if (keys) keys.focus();
}}));
// A file the app delivers (the export key) is a download of this page: textual.js opens it in a
// new window, which a popup blocker may stop and which flashes a blank tab.
const openWindow = window.open.bind(window);
window.open = (url, target, features) => {{
  if (typeof url === "string" && new URL(url, location.href).pathname.startsWith("/download/")) {{
    const link = document.createElement("a");
    link.href = url;
    link.download = "";
    document.body.append(link);
    link.click();
    link.remove();
    return null;
  }}
  return openWindow(url, target, features);
}};
</script>
</head>
<body>
<div class="note starting">starting {title}…</div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{websocket}"
     data-font-size="{font_size}"></div>
<div class="note ended">{title} has ended.<a href="/">Start it again</a></div>
</body>
</html>
"""


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 possibly in brackets) is this machine only."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(authority: str) -> str:
    """'localhost:8000' -> 'localhost', '[::1]:8000' -> '::1' (the Host header's name part)."""
    return urlsplit(f"//{authority}").hostname or ""


class MinitxServer(Server):
    def __init__(self, command: str, host: str, port: int, title: str, hint: str) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.loopback_only = is_loopback(host)
        self.hint = hint  # the line under the URL
        self.handlers: set[asyncio.Task] = set()  # one per open tab
        self.stopping = False

    def request_exit(self) -> None:
        """Ctrl-C: stop, once every tab's app has closed (saving its run); a second Ctrl-C stops
        at once (each app got the SIGINT too, and saves its run with no server)."""
        if self.stopping:
            click.echo("minitx serve: stopped without waiting for the apps", err=True)
            raise SystemExit(EXIT_INTERRUPTED)
        self.stopping = True
        super().request_exit()

    def initialize_logging(self) -> None:
        """Warnings and errors only (no line per request), each on one line."""
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("minitx serve: %(message)s"))
        for name in ("textual-serve", "aiohttp"):
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            logger.setLevel(logging.WARNING)
            logger.propagate = False

    def serve(self, debug: bool = False) -> None:
        """Serve until Ctrl-C (or SIGTERM). textual-serve's own serve() prints its banner before
        the port listens; here the address is printed once it does."""
        self.debug = debug
        self.initialize_logging()
        # textual-serve writes what each app said on exit (where its run was saved) to stdout
        # without a flush: into a pipe or a log file it would wait for the buffer to fill.
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(line_buffering=True)
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, self.request_exit)
        web.run_app(self._make_app(), host=self.host, port=self.port, loop=loop,
                    handle_signals=False, access_log=None, print=lambda _: self.announce())

    def announce(self) -> None:
        host = socket.gethostname() if self.host in WILDCARDS else self.host
        host = f"[{host}]" if ":" in host else host
        click.echo(f"minitx serve: the app is at http://{host}:{self.port} (Ctrl-C stops)")
        if self.hint:
            click.echo(self.hint)

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: textual-serve prints its banner here."""

    async def on_shutdown(self, app: web.Application) -> None:
        """End every tab's handler: each then tells its app to quit (a run is saved) and waits for
        it to exit; aiohttp waits for the handlers."""
        for task in list(self.handlers):
            task.cancel()

    def refusal(self, request: web.Request) -> str | None:
        """Why this request is refused, or None."""
        if self.loopback_only and not is_loopback(host_name(request.host)):
            return (f"minitx serve answers only addresses of this machine (localhost, 127.0.0.1), "
                    f"not {request.host!r}")
        origin = request.headers.get("Origin")
        if request.path == "/ws" and origin is not None and urlsplit(origin).netloc != request.host:
            return f"websocket from another site ({origin!r}) refused"
        return None

    async def handle_index(self, request: web.Request) -> web.Response:
        if (refused := self.refusal(request)) is not None:
            raise web.HTTPForbidden(text=refused)
        scheme = "wss" if request.secure else "ws"
        font_size = request.query.get("fontsize", "16")
        page = PAGE.format(
            title=html.escape(self.title),
            websocket=html.escape(f"{scheme}://{request.host}/ws"),
            font_size=int(font_size) if font_size.isdigit() else 16,
        )
        return web.Response(text=page, content_type="text/html")

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        """A file an app delivers (the export key): asked for by its page, under the same rules."""
        if (refused := self.refusal(request)) is not None:
            raise web.HTTPForbidden(text=refused)
        return await super().handle_download(request)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        """One tab: its app's terminal both ways, until the tab goes; then the app is told to
        quit and waited for. textual-serve's own handler stops relaying, and stops waiting for
        the app, at the first frame it cannot send to a closed tab: the app was still saving,
        and what it said on stderr (where the run went) was lost."""
        if (refused := self.refusal(request)) is not None:
            raise web.HTTPForbidden(text=refused)
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        service = AppService(self.command, write_bytes=unless_gone(websocket.send_bytes),
                             write_str=unless_gone(websocket.send_str), close=websocket.close,
                             download_manager=self.download_manager, debug=self.debug)
        self.handlers.add(asyncio.current_task())
        try:
            await service.start(cells(request, "width", 80), cells(request, "height", 24))
            await self._process_messages(websocket, service)
        finally:
            self.handlers.discard(asyncio.current_task())
            await service.stop()  # until the app's stdout ends
            process = getattr(service, "_process", None)
            if process is not None:  # and it has exited: the loop must outlive its child watcher
                await process.wait()
        return websocket


def unless_gone(send):
    """`send`, doing nothing once the tab has gone (the app goes on until it has closed)."""

    async def sending(data) -> None:
        try:
            await send(data)
        except (ConnectionError, RuntimeError):
            pass

    return sending


def cells(request: web.Request, name: str, default: int) -> int:
    """The terminal's width or height the page asked for."""
    value = request.query.get(name, "")
    return int(value) if value.isdigit() and 0 < int(value) < 10_000 else default
