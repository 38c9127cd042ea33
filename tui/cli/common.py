"""Pieces shared by the subcommands: lazy choices, option parsers, checkpoint loading, consoles."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable

import click

_IMPORTED = time.perf_counter()  # early in every command: main imports this module at start-up


def process_started() -> float:
    """time.perf_counter()'s reading when this process started: from the kernel's record of the
    process (Linux), else when the command line was imported (the interpreter's own start-up,
    some tens of milliseconds, then goes uncounted)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of the whole line: start time after boot, in ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - started_ticks / os.sysconf("SC_CLK_TCK")
        return time.perf_counter() - max(0.0, age)
    except (OSError, ValueError, IndexError):
        return _IMPORTED


class LazyChoice(click.Choice):
    """A Choice whose values are computed on first use, so listing them (e.g. the task names,
    which live next to torch code) costs nothing until a command actually runs or shows help."""

    def __init__(self, load: Callable[[], Iterable[str]]) -> None:
        self._load = load
        self._loaded: tuple[str, ...] | None = None
        super().__init__([])

    @property
    def choices(self):  # type: ignore[override]
        if self._loaded is None:
            self._loaded = tuple(self._load())
        return self._loaded

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns; the loader wins
        pass


def core_choice(module: str, name: str) -> LazyChoice:
    """A Choice of the values core defines in minitx.core.<module>.<name> (the empty value, which
    means "none", left out): core's tuples are the one list, so the CLI can offer nothing else."""

    def load():
        import importlib

        return [value for value in getattr(importlib.import_module(f"minitx.core.{module}"), name) if value]

    return LazyChoice(load)


def task_names() -> list[str]:
    from minitx.core.data.tasks import TASKS

    return list(TASKS)


def recipe_names() -> list[str]:
    from minitx.core.config import RECIPES

    return list(RECIPES)


def bug_names() -> list[str]:
    from minitx.core.config import BUGS

    return list(BUGS)


def lengths_option_value(text: str | None, default: tuple[int, int]) -> tuple[int, int]:
    """--lengths MIN-MAX as (lo, hi), the default when not given; a bad value is a usage error."""
    from minitx.core.options import parse_lengths

    if text is None:
        return default
    try:
        return parse_lengths(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--lengths") from None


def sample_options(n_help: str):
    """--n and --seed: how many fresh random sequences, and which ones (eval, compare)."""

    def decorate(command):
        command = click.option(
            "--seed", type=click.IntRange(min=0), default=1234, show_default=True,
            help="Seed of the sequences (the same seed gives the same sequences).")(command)
        return click.option("--n", "n", type=click.IntRange(min=1), default=500,
                            show_default=True, help=n_help)(command)

    return decorate


def shown_value(key: str, value) -> str:
    """A config or summary value for a table: accuracies as percentages (like every other
    accuracy minitx prints), other floats to four figures, None as '-'."""
    if value is None:
        return "-"
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key.rsplit(".", 1)[-1] == "accuracy" and is_number:
        return f"{value:.1%}"
    return f"{value:.4g}" if isinstance(value, float) else (str(value) or '""')


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


class BadArgument(click.ClickException):
    """What a person gave cannot be used: a checkpoint, file or folder that cannot be found or
    read, a source, a data file, a value core refuses. Like a bad option it is a usage error
    (exit code 2), but its message is the whole story, so no pointer to --help follows it."""

    exit_code = 2


def checkpoint_found(ctx, param, value):
    """The callback of a CKPT argument: a name or path that names no checkpoint is a one-line
    error (exit 2, a close bundled name suggested) at once, before anything loads torch."""
    names = value if isinstance(value, tuple) else (value,)
    from minitx import checkpoints  # finding a file imports no torch
    from minitx.core.checkpoint_errors import CheckpointError

    for name in names:
        if name is not None:
            try:
                checkpoints.resolve(name)
            except CheckpointError as e:
                raise BadArgument(str(e)) from None
    return value


LANGUAGES_KEY = "minitx.languages"  # where --src-lang / --tgt-lang wait for the checkpoint to load


def language_value(ctx, param, value):
    """A --src-lang / --tgt-lang value, kept where load_checkpoint_arg applies it to the model."""
    if value is not None:
        ctx.meta.setdefault(LANGUAGES_KEY, {})[param.name] = value
    return value


def language_options(command):
    """--src-lang and --tgt-lang, on every command that decodes: a multilingual model's languages
    (mBART-50, NLLB-200), applied as load_checkpoint_arg loads the model."""
    command = click.option(
        "--tgt-lang", metavar="CODE", default=None, expose_value=False, callback=language_value,
        help="A multilingual model's output language (e.g. fra_Latn, fr_XX): the decoder's forced first "
             "token, as generate(forced_bos_token_id=...). minitx inspect lists the codes.")(command)
    return click.option(
        "--src-lang", metavar="CODE", default=None, expose_value=False, callback=language_value,
        help="A multilingual model's source language (e.g. eng_Latn, en_XX): its code where the "
             "tokeniser puts it (default: the folder's src_lang).")(command)


def load_checkpoint_arg(name_or_path: str | None, device: str = "cpu", pairs: str | None = None):
    """A bundled name or a path -> core Checkpoint; one that cannot be found or read is a
    BadArgument (every command that takes a checkpoint exits 2 for it). With `pairs` (a
    command's --pairs FILE) its task measures on that file's pairs (core/data/given_pairs.py);
    the command's --src-lang / --tgt-lang (language_options) set a multilingual model's languages."""
    from minitx import checkpoints
    from minitx.core.checkpoint import CheckpointError
    from minitx.core.training.trainer import resolve_device
    from minitx.tui.cli.progress import Progress

    context = click.get_current_context(silent=True)
    command = context.info_name if context is not None else "minitx"
    params = context.params if context is not None else {}
    # A big folder's reading takes seconds: a bar on a terminal, which goes when done (piped, the
    # command's own progress lines follow soon enough; --json and --quiet: nothing).
    with Progress(command or "minitx", enabled=not (params.get("as_json") or params.get("quiet")),
                  plain=False) as progress:
        progress.stage("loading the model")  # torch first: seconds before the folder says a word

        def told(what: str, fraction: float) -> None:
            progress.update(round(100 * fraction), 100, f"loading: {what} (%)")

        try:
            checkpoint = checkpoints.load(name_or_path, device=str(resolve_device(device)), progress=told)
        except CheckpointError as e:
            raise BadArgument(str(e)) from None
    chosen = (context.meta.get(LANGUAGES_KEY) if context is not None else None) or {}
    from minitx.core.data.languages import LanguageError, languages, with_languages

    # On a model without language codes the languages only name the pair file's fields (a
    # translation set's keys or header): a multilingual model takes them as its codes too.
    reads_pairs = (pairs or params.get("pairs") or params.get("data")) is not None
    if chosen and (languages(checkpoint.task) or not reads_pairs):
        try:
            checkpoint.task, checkpoint.model.generation = with_languages(
                checkpoint.task, checkpoint.model.generation, chosen.get("src_lang"), chosen.get("tgt_lang"))
        except LanguageError as e:
            raise BadArgument(str(e)) from None
    if pairs is not None:
        checkpoint.task = task_on_pairs(checkpoint.task, pairs, checkpoint.model_config.max_len)
    line = checkpoint.model.generation.not_computed_line
    if line:  # a folder's setting minitx does not compute: every command that loads it says so
        click.echo(f"note: {line}", err=True)
    return checkpoint


def not_computed_data(ckpt) -> dict:
    """What a --json output adds for a model whose generation settings hold what minitx does not
    compute: {"not_computed": ["do_sample true", ...]}; {} otherwise."""
    names = list(ckpt.model.generation.not_computed)
    return {"not_computed": names} if names else {}


def checkpoint_out(path, flag: str = "--out") -> None:
    """A checkpoint is written only to a name the pickers and `minitx list` find: FILE.safetensors
    (a usage error, before any work, naming the flag)."""
    from minitx.checkpoints import SUFFIX

    if not str(path).endswith(SUFFIX):
        stem = str(path).rsplit(".", 1)[0] if "." in str(path).rsplit("/", 1)[-1] else str(path)
        raise click.BadParameter(f"{path}: a checkpoint's name ends in {SUFFIX}, which minitx list and the "
                                 f"app's pickers look for (e.g. {stem}{SUFFIX})", param_hint=flag)


def pair_columns():
    """Which fields of a --pairs file are the source and the target: the languages of the
    command's --src-lang / --tgt-lang (a translation set's keys or header), core's Columns."""
    from minitx.core.data.pair_files import Columns

    context = click.get_current_context(silent=True)
    chosen = (context.meta.get(LANGUAGES_KEY) if context is not None else None) or {}
    return Columns(chosen.get("src_lang"), chosen.get("tgt_lang"))


def task_on_pairs(task, pairs: str, positions: int):
    """`task` measuring on the pairs of the file `pairs` (their sides picked by the command's
    languages); a bad file is a BadArgument (one line naming the file and line, exit 2)."""
    from minitx.core.data.given_pairs import with_pairs
    from minitx.core.data.pair_files import DataError

    try:
        return with_pairs(task, pairs, positions, columns=pair_columns())
    except DataError as e:
        raise BadArgument(f"--pairs: {e}") from None


# --pairs FILE, on every command that measures on examples with known answers.
PAIRS_HELP = ("Measure on the source/target pairs of FILE (.tsv, .csv or .jsonl, as for train --data) "
              "instead of the model's own examples: what a model that keeps none needs.")
MEAN_SOURCES_HELP = ("The sources --ablate-kind mean averages over: those of FILE's source/target pairs "
                     "(.tsv, .csv or .jsonl), for a model that keeps no examples of its own.")


def pairs_option(help: str = PAIRS_HELP):
    return click.option("--pairs", "pairs", type=click.Path(), metavar="FILE", default=None,
                        help=help)


# What a command that has --pairs adds to "this imported model keeps no example pairs".
PAIRS_HINT = "give --pairs FILE (source/target pairs of its task: .tsv, .csv or .jsonl)"


def json_text(data) -> str:
    """What --json prints: indented, tensors and paths made plain, no NaN."""
    return json.dumps(data, indent=2, allow_nan=False, default=_jsonable)


def echo_json(data) -> None:
    click.echo(json_text(data))


def _jsonable(value):
    """Tensors and paths in JSON output: lists and strings."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def console(file=None, **kwargs):
    """A Rich console on the current stdout (read at call time, so CliRunner captures it).
    Into a file or a pipe it writes no spaces at line ends."""
    from rich.console import Console

    file = file or sys.stdout
    if not getattr(file, "isatty", lambda: False)():
        file = NoTrailingSpaces(file)
    return Console(file=file, **kwargs)


class NoTrailingSpaces:
    """A text file that drops the spaces before each line end. Rich pads table cells, panels
    and wrapped lines to the console's width: invisible on a terminal, noise in a file or a
    pipe (diffs, grep, `wc -L`)."""

    def __init__(self, file) -> None:
        self._file = file
        self._spaces = ""  # the end of the last write, until it is known what follows it

    def write(self, text: str) -> int:
        joined = self._spaces + text
        body = joined.rstrip(" ")
        self._spaces = joined[len(body):]
        self._file.write(re.sub(r" +\n", "\n", body))
        return len(text)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding: the file's own
        return getattr(self._file, name)


def field_lines(fields, width: int, separator: str = " · "):
    """Fields (str or rich Text) joined by `separator` into lines of at most `width` cells,
    broken between fields, never inside one; a broken line ends with the separator's mark so
    it reads as continued. A field wider than `width` gets a line of its own."""
    from rich.text import Text

    mark = separator.rstrip()
    texts = [f if isinstance(f, Text) else Text(f) for f in fields]
    lines: list[Text] = []
    line = Text()
    for i, field in enumerate(texts):
        room = width if i == len(texts) - 1 else width - len(mark)  # a later break needs the mark
        if line and line.cell_len + len(separator) + field.cell_len > room:
            if line.cell_len + len(mark) <= width:
                line.append(mark)
            lines.append(line)
            line = Text()
        elif line:
            line.append(separator)
        line.append_text(field)
    lines.append(line)
    return Text("\n").join(lines)


device_option = click.option(
    "--device", type=core_choice("config", "DEVICES"), default="cpu", show_default=True,
    help="Where the model runs (auto: the GPU when there is one).")

threads_option = click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="CPU threads for torch. [default: every core but one, or OMP_NUM_THREADS if set]",
)


def apply_threads(threads: int | None) -> None:
    """torch's thread count for this command: --threads, or minitx's default (core/training/threads.py)."""
    from minitx.core.training.threads import set_threads

    set_threads(threads)


def ablate_options(*sides: str):
    """--ablate HEAD (repeatable) and --ablate-kind; with sides ("a", "b"), --ablate-a and
    --ablate-b instead, one for each model of a comparison."""

    def decorate(command):
        command = click.option(
            "--ablate-kind", type=core_choice("interp.interventions", "ABLATIONS"), default="zero",
            show_default=True,
            help="What an ablated head outputs: 0, or its mean over 256 fresh sources.")(command)
        for side in reversed(sides or ("",)):
            flag = f"--ablate-{side}" if side else "--ablate"
            whose = f" of model {side.upper()}" if side else ""
            command = click.option(
                flag, f"ablate_{side}" if side else "ablate", multiple=True, metavar="HEAD",
                help=f"Knock out heads{whose}: KIND:Ll.Hh (KIND enc, self or cross; from 1), "
                     "KIND:Ll for a layer's heads, KIND for all. Repeatable.")(command)
        return command

    return decorate


def interventions_for(ckpt, specs, kind: str, flag: str = "--ablate", pairs: str | None = None):
    """The ablation of `specs` on this checkpoint's model (empty when none); a bad HEAD name is a
    usage error naming the flag. A mean ablation averages over the task's examples, or over the
    sources of the --pairs file `pairs` when one is given."""
    from minitx.core.interp.interventions import Interventions, ablation

    if not specs:
        return Interventions()
    task = ckpt.task
    if pairs is not None and kind == "mean":
        task = task_on_pairs(task, pairs, ckpt.model_config.max_len)
    try:
        return ablation(ckpt.model, list(specs), kind, task)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=flag) from None


def ablated_name(name: str, interventions, n_heads: int | None = None) -> str:
    """'reverse' or 'reverse without cross:L2 (zero)': what a report calls an ablated model."""
    from minitx.core.interp.interventions import without_heads

    return without_heads(name, interventions.ablated, n_heads, "zero" if interventions.zero else "mean")


# -- checkpoint and sources, as `decode` takes them ----------------------------------------------
def looks_like_source(text: str) -> bool:
    """Sources are digits (and spaces); a checkpoint name or path has other characters. Text
    with spaces that is not a file is a (possibly mistyped) source, so its error is about
    tokens, not about an unknown checkpoint."""
    from pathlib import Path

    stripped = text.strip()
    if not stripped:
        return True  # an empty source, whose error should say so
    try:
        if Path(stripped).exists():
            return False
    except OSError:  # e.g. a name too long for a file: certainly not a checkpoint
        return True
    return stripped.replace(" ", "").isdigit() or any(c.isspace() for c in stripped)


def checkpoint_and_sources(args, device: str) -> tuple:
    """`[CKPT] SOURCE...` -> (the checkpoint, the source arguments left): the first argument is
    the checkpoint unless it looks like a source (then the bundled reverse model decodes)."""
    args = list(args)
    name = None
    if args and args[0] != "-" and not looks_like_source(args[0]):
        name = args.pop(0)
    return load_sources_checkpoint(name, device, alone=not args), args


def source_texts(args: list[str], example: str, keep_blank: bool = False) -> list[str | None]:
    """Sources from the arguments; "-" (or none, when piped) reads one per line from stdin.
    `example`: the command line a person could type instead. keep_blank: stdin's blank lines
    stay in their places as None, for a command that answers each line with one, so its
    outputs line up with its inputs (a blank argument is still a source, refused as empty);
    stdin of blank lines alone is still no source."""
    if not args or args == ["-"]:
        if not args and sys.stdin.isatty():
            raise click.UsageError(f"give a source, e.g. {example}")
        lines = sys.stdin.read().splitlines()
        if not any(line.strip() for line in lines):
            raise click.UsageError("no sources on stdin (one per line)")
        if keep_blank:
            return [line if line.strip() else None for line in lines]
        return [line for line in lines if line.strip()]
    return args


def load_sources_checkpoint(name: str | None, device: str, alone: bool):
    """The checkpoint; when its name is the only argument and names nothing, say that it is not
    a source either (`decode "3,1,4"` is more likely a mistyped source than a checkpoint)."""
    try:
        return load_checkpoint_arg(name, device)
    except BadArgument as e:
        if not (alone and name is not None and "/" not in name and not name.endswith(".safetensors")):
            raise
        if "did you mean" in str(e):  # close to a bundled name: a mistyped checkpoint, most likely
            raise
        from minitx.core.data.tasks import get_task
        from minitx.core.data.vocab import TaskInputError

        try:
            get_task("reverse").parse(name)
        except TaskInputError as why:
            raise click.BadParameter(f"{name!r} is neither a checkpoint (see minitx list) nor a "
                                     f"source: {why}", param_hint="[CKPT] SOURCE") from None
        raise
