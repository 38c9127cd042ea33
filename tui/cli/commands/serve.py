"""`minitx serve [CKPT ...]`: the app in a web browser, through textual-serve (tui/app/web/server.py).

Each browser tab gets an app process of its own: `minitx-tui [CKPT ...]` of this installation
(tui/app/web/entry.py), in this folder, so its runs are saved here.
"""

from __future__ import annotations

import shlex
import sys

import click

from minitx.tui.cli.common import checkpoint_found, load_checkpoint_arg

TITLE = "minitx"


def app_command(checkpoints: list[str]) -> str:
    """The shell command textual-serve runs per tab: this interpreter, so the app is the one of
    this installation whatever PATH says (a venv, a wheel, an editable checkout). `exec`: the
    app is then the only process holding its pipes (tui/app/web/entry.py relies on that)."""
    return "exec " + shlex.join([sys.executable, "-m", "minitx.tui.app.web.entry", *checkpoints])


def check_checkpoints(names: list[str]) -> None:
    """A checkpoint that cannot be opened stops the command here (exit 2, as in every command),
    not in each tab as it opens."""
    if len(names) > 2:
        raise click.UsageError(f"got {len(names)} checkpoints; give one to explore it, "
                               "or two to compare them")
    for name in names:  # none: the bundled default, and torch stays unimported
        load_checkpoint_arg(name)


def tunnel_hint(port: int) -> str:
    """What to type on one's own machine to reach a server on HOST's loopback (<= 75 columns)."""
    return f"tunnel: ssh -L {port}:localhost:{port} HOST, then open http://localhost:{port}"


@click.command("serve", short_help="Serve the app to a web browser (local by default).")
@click.argument("ckpt", nargs=-1, callback=checkpoint_found)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but this machine's own needs --public.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True,
              help="Port to listen on.")
@click.option("--public", is_flag=True,
              help="Allow a --host other machines can reach. The app has no login: anyone who "
                   "reaches the port uses it, and can read and write files as you.")
def serve_cmd(ckpt: tuple[str, ...], host: str, port: int, public: bool) -> None:
    """Serve the app (`minitx-tui`) to a web browser: every key works as in a terminal, and each
    tab runs an app of its own in this folder. Closing a tab, or stopping the server with Ctrl-C,
    closes its app the way closing the terminal does: a run in progress is saved here first.

    \b
    On a remote machine, tunnel the port over SSH and open the page locally:
      ssh -L 8000:localhost:8000 HOST     # on your machine, then on HOST:
      minitx serve                        # then open http://localhost:8000

    \b
    Examples:
      minitx serve                        # the bundled reverse model
      minitx serve reverse my-run.safetensors --port 8080
    """
    from minitx.tui.app.web.server import is_loopback

    check_checkpoints(list(ckpt))
    if not is_loopback(host) and not public:
        raise click.BadParameter(
            f"{host} is not a loopback address and the app has no login; tunnel over SSH "
            "instead, or add --public to serve it to anyone who can reach it", param_hint="--host")
    if not is_loopback(host):
        click.echo(f"Warning: serving to anyone who can reach {host}:{port}; the app has no login",
                   err=True)
    from minitx.tui.app.web.server import MinitxServer

    hint = tunnel_hint(port) if is_loopback(host) else ""
    MinitxServer(app_command(list(ckpt)), host, port, TITLE, hint).serve()
