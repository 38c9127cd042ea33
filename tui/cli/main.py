"""The `minitx` command line (Click) and the `minitx-tui` entry point.

Every error a person can cause ends as one line on stderr and a non-zero exit code; tracebacks
are only shown with MINITX_DEBUG=1. Options can also come from environment variables named
MINITX_<COMMAND>_<OPTION>, e.g. MINITX_TRAIN_STEPS=500.
"""

from __future__ import annotations

import os
import sys

import click

from minitx.core.training.threads import prepare_environment
from minitx.tui.cli.common import BadArgument
from minitx.tui.render.text_fit import end_cut

prepare_environment()  # before anything imports torch: it reads these settings once, at import

EXIT_INTERRUPTED = 130  # the shell convention for "stopped by Ctrl-C" (128 + SIGINT)


MAX_MESSAGE = 300  # messages can quote input (a 10,000-character paste); keep them readable


def _one_line(text: str) -> str:
    message = " ".join(str(text).split()) or "unknown error"
    return end_cut(message, MAX_MESSAGE)


# The rule of every command's exit status: 2 when the input is to blame (an option, a source, a
# data file, a checkpoint or path named on the command line), 1 when the work failed on its own.
INPUT_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


def _core_error(e: Exception, module: str, name: str) -> bool:
    """Whether `e` is minitx.core's `name` (looked up only if core was imported: if it was not,
    it cannot have been raised)."""
    found = sys.modules.get(module)
    return found is not None and isinstance(e, getattr(found, name))


def input_is_to_blame(e: Exception) -> bool:
    """Exit 2 for `e`: core's checks of what a person gave (ValueError: options, sources, data
    files; CheckpointError: a file that cannot be used), or a path that is missing or not ours
    to read. A checkpoint that fails while being written is the work failing: 1."""
    if _core_error(e, "minitx.core.checkpoint", "CheckpointWriteError"):
        return False
    return isinstance(e, INPUT_ERRORS) or _core_error(e, "minitx.core.checkpoint", "CheckpointError")


def _message(e: Exception) -> str:
    """What a person reads: an OSError names its file in words ('cannot open x.tsv: No such file
    or directory'), never as '[Errno 2] ...'."""
    if isinstance(e, OSError) and e.strerror:
        return f"cannot open {e.filename}: {e.strerror}" if e.filename else e.strerror
    return str(e)


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean the work failed in a way the message explains (a full disk, a diverged
    run): one line, exit 1."""
    kinds: list[type[BaseException]] = [OSError]
    checkpoint = sys.modules.get("minitx.core.checkpoint")
    train = sys.modules.get("minitx.core.training.trainer")
    if checkpoint is not None:
        kinds.append(checkpoint.CheckpointError)
    if train is not None:
        kinds.append(train.TrainingDiverged)
    adapters = sys.modules.get("minitx.core.model.lora")
    if adapters is not None:  # peft missing: the line names the extra to install
        kinds.append(adapters.LoraUnavailable)
    return tuple(kinds)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (e.g. under CliRunner)
        pass


class OneLineErrors:
    """Mixed into a Click command or group: every error becomes one line on stderr."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:  # `minitx ... | head` closed the pipe: nothing to report
            _silence_stdout()
            ctx.exit(1)
        except Exception as e:
            if os.environ.get("MINITX_DEBUG"):
                raise
            if _core_error(e, "minitx.core.data.imported_task", "MissingPairs"):
                raise BadArgument(_one_line(f"{e}; {_pairs_hint(ctx)}")) from None
            if input_is_to_blame(e):
                raise BadArgument(_one_line(_message(e))) from None  # like a bad option: exit 2
            if isinstance(e, _expected_errors()):
                raise click.ClickException(_one_line(_message(e))) from None
            raise click.ClickException(
                f"unexpected {type(e).__name__}: {_one_line(str(e))} (MINITX_DEBUG=1 shows details)"
            ) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Like Click's standalone mode, but usage errors are one line too (Click prints the
        usage, a hint and the error on three lines)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            _blame_the_variable(e)
            command = e.ctx.command_path if e.ctx else "minitx"
            click.echo(f"Error: {_one_line(e.format_message())} (see '{command} --help')", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            click.echo(f"Error: {_one_line(e.format_message())}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(rv if isinstance(rv, int) else 0)


def _blame_the_variable(e: click.UsageError) -> None:
    """A bad value that came from MINITX_<COMMAND>_<OPTION> names the variable, not the option
    nobody typed."""
    from click.core import ParameterSource

    param = getattr(e, "param", None)
    if param is None or e.ctx is None or not getattr(param, "envvar", None):
        return
    if e.ctx.get_parameter_source(param.name) == ParameterSource.ENVIRONMENT:
        e.param_hint = f"{param.envvar} (the environment's {max(param.opts, key=len)})"


def _pairs_hint(ctx: click.Context) -> str:
    """How to give pairs to the command that needed them: its --pairs FILE, or else at import."""
    from minitx.tui.cli.common import PAIRS_HINT

    command = ctx.command
    if isinstance(command, click.Group) and ctx.invoked_subcommand in command.commands:
        command = command.commands[ctx.invoked_subcommand]
    if any(param.name == "pairs" for param in command.params):
        return PAIRS_HINT
    return "import it again with --pairs FILE (source/target pairs of its task)"


class MinitxGroup(OneLineErrors, click.Group):
    pass


class MinitxCommand(OneLineErrors, click.Command):
    pass


CONTEXT = {
    "auto_envvar_prefix": "MINITX",
    "help_option_names": ["-h", "--help"],
    "max_content_width": 100,
}


@click.group(cls=MinitxGroup, context_settings=CONTEXT)
@click.version_option(package_name="minitx", prog_name="minitx")
def main() -> None:
    """minitx: a small encoder-decoder Transformer to train, take apart and watch think.

    \b
    Examples:
      minitx decode "3 1 4 1 5"            # the bundled reverse model: 5 1 4 1 3
      minitx train --task copy --out copy.safetensors
      minitx decode copy.safetensors "2 7 1" --attention
      minitx eval reverse --n 1000 --lengths 4-10
      minitx tui                           # the terminal app

    CKPT arguments take a bundled name (see `minitx list`) or a .safetensors path.
    Options can be set with MINITX_<COMMAND>_<OPTION> environment variables, e.g.
    MINITX_TRAIN_STEPS=500. MINITX_DEBUG=1 shows tracebacks.
    """


def _run_app(checkpoint_args: list[str]) -> int:
    """Run the app; its return code (1: a checkpoint named here could not be opened, said in one
    line on stderr)."""
    if len(checkpoint_args) > 2:
        raise click.UsageError(f"got {len(checkpoint_args)} checkpoints; give one to explore it, "
                               "or two to compare them")
    try:
        from minitx.tui.app.main import create_app
    except ImportError as e:
        raise click.ClickException(f"the terminal app is not available ({e})") from None
    from minitx import checkpoints  # finding a file imports no torch
    from minitx.core.checkpoint_errors import CheckpointError
    from minitx.tui.app.loaded import open_error

    for name in checkpoint_args:  # said before the app paints, not after a screen of it
        try:
            checkpoints.resolve(name)
        except CheckpointError as e:
            click.echo(f"minitx-tui: {open_error(name, str(e))}", err=True)
            return 2  # as the app's own exit for a checkpoint it cannot open
    app = create_app(checkpoint_args or None, exit_on_start_error=True)
    app.run()
    return app.return_code or 0


@main.command("tui", short_help="The terminal app: explore one checkpoint or compare two.")
@click.argument("ckpt", nargs=-1)
def tui_cmd(ckpt: tuple[str, ...]) -> int:
    """Open the terminal app, optionally on one checkpoint (explore it) or two (compare them).

    \b
    Example:
      minitx tui reverse my-run.safetensors
    """
    return _run_app(list(ckpt))


def _add_subcommands(group: click.Group) -> None:
    """Every Click command defined in a module of tui/cli/commands joins the group, so a new
    command (say `compare` or `doctor`) is one new file there and no edit here. The modules
    import only Click at the top, which keeps this cheap."""
    import importlib
    import pkgutil

    import minitx.tui.cli.commands

    for info in sorted(pkgutil.iter_modules(minitx.tui.cli.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"minitx.tui.cli.commands.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, click.Command)
                and value.name not in group.commands
                and getattr(value.callback, "__module__", None) == module.__name__
            ):
                group.add_command(value)  # defined there, not merely imported there
    for command in group.commands.values():
        name_env_vars(command, f"MINITX_{command.name.upper()}")


def name_env_vars(command: click.Command, prefix: str) -> None:
    """MINITX_<COMMAND>_<OPTION> for every option, OPTION spelled as on the command line
    (--json is MINITX_DECODE_JSON, --batch-size MINITX_TRAIN_BATCH_SIZE). Click's own rule
    uses the Python parameter name instead (as_json), which no help text shows."""
    for param in command.params:
        if not isinstance(param, click.Option) or param.envvar is not None:
            continue
        longs = [opt for opt in param.opts if opt.startswith("--")]
        if longs:
            param.envvar = f"{prefix}_{longs[0][2:].upper().replace('-', '_')}"


_add_subcommands(main)


@click.command(cls=MinitxCommand, context_settings=CONTEXT)
@click.argument("ckpt", nargs=-1)
def _tui_entry(ckpt: tuple[str, ...]) -> int:
    """Open the minitx terminal app, optionally on one checkpoint (explore it) or two (compare
    them).

    \b
    Example:
      minitx-tui reverse my-run.safetensors
    """
    return _run_app(list(ckpt))


def tui_main() -> None:
    """The `minitx-tui [CKPT ...]` entry point: `minitx tui` without the group."""
    _tui_entry.main(prog_name="minitx-tui")


if __name__ == "__main__":
    main()
