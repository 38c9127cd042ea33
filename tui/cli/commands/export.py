"""`minitx export`: an inference-only copy of a checkpoint, a Hugging Face folder of it (`--format
hf`: core/importing/hf_export.py), or one decoding trace as a file (JSON, CSV, an SVG picture, or
one HTML page that needs no network: tui/render/trace_html.py)."""

from __future__ import annotations

import csv
import io
import json
import sys
import textwrap
from pathlib import Path

import click

from minitx.tui.cli.common import (
    MEAN_SOURCES_HELP,
    BadArgument,
    ablate_options,
    checkpoint_found,
    checkpoint_out,
    core_choice,
    interventions_for,
    language_options,
    load_checkpoint_arg,
    pairs_option,
)

# Metadata worth keeping in a shared file: how it was trained (not the state to resume it).
KEEP_METADATA = ("train_config",)
TRACE_FORMATS = ["json", "csv", "svg", "html"]
HF_FORMAT = "hf"  # a Hugging Face folder that transformers opens
PEFT_FORMAT = "peft"  # a LoRA fine-tune's adapters as a PEFT folder (peft's PeftModel opens it)


@click.command("export", short_help="Inference-only copy, Hugging Face folder, or a trace file.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@click.option(
    "--out",
    "out",
    type=click.Path(),
    help="File to write (for a trace, stdout when omitted); with --format hf or peft, the folder.",
)
@click.option(
    "--dtype",
    type=core_choice("checkpoint", "FLOAT_DTYPES"),
    default=None,
    help="Weight precision of the exported checkpoint. [default: float32]",
)
@click.option(
    "--trace",
    "trace_source",
    metavar="SOURCE",
    help="Instead of a checkpoint, export the decoding trace of SOURCE.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*TRACE_FORMATS, HF_FORMAT, PEFT_FORMAT]),
    default=None,
    help="Trace format [default: from --out's suffix, else json], or hf: the model as a Hugging Face "
         "folder (config.json, model.safetensors, generation_config.json, tokeniser files; a LoRA "
         "fine-tune merged), or peft: a LoRA fine-tune's adapters as a PEFT adapter folder.",
)
@click.option("--force", is_flag=True,
              help="With --format hf or peft: replace a folder --out that is not empty.")
@click.option(
    "--numbers/--no-numbers",
    default=True,
    show_default=True,
    help="Weights printed in the SVG's cells.",
)
@click.option("--history", "keep_history", is_flag=True,
              help="Keep the run's curves and attention snapshots in the exported checkpoint (minitx "
                   "curves draws them, the app's h replays them; snapshots thinned to 256 KB). "
                   "[default: weights only]")
@ablate_options()
@pairs_option(MEAN_SOURCES_HELP)
@language_options
def export_cmd(ckpt, out, dtype, trace_source, fmt, force, numbers, keep_history, ablate, ablate_kind,
               pairs) -> None:
    """Share CKPT (default: reverse) without its training state, or export a decoding trace.

    \b
    Examples:
      minitx export run.safetensors --out small.safetensors --dtype float16
      minitx export run.safetensors --out shared.safetensors --history
      minitx export tuned.safetensors --format hf --out opus-mt-en-de-tuned/
      minitx export lora.safetensors --format peft --out opus-mt-en-de-lora/
      minitx export reverse --trace "3 1 4 1 5" --format svg --out reverse.svg
      minitx export reverse --trace "3 1 4 1 5" --format csv > trace.csv
      minitx export reverse --trace "3 1 4 1 5" --format html --out trace.html
      minitx export reverse --trace 31415 --ablate cross:L2.H1 --out ablated.svg
      minitx export dates --trace "1 dec 26" --format svg --out dates.svg

    --ablate applies to --trace exports: a checkpoint keeps every head. An html trace is one
    file with every layer and head of cross, decoder self- and encoder self-attention (buttons
    switch them, a cell's weight shows on hover) and each step's output and top-k; it fetches
    nothing, so it opens offline.

    --format hf writes a folder that transformers' AutoModelForSeq2SeqLM.from_pretrained and
    AutoTokenizer open, whose generate() gives minitx's outputs: a Marian, T5 or BART model as
    its family (docs/huggingface.md); a model of minitx's own as the family whose options it
    has, or refused naming the option none has. --format peft writes a LoRA fine-tune's
    adapters as a PEFT folder that peft's PeftModel.from_pretrained puts on its base
    (--format hf writes the merged model).
    """
    from minitx.core.checkpoint import save_checkpoint, write_atomic

    if fmt in (HF_FORMAT, PEFT_FORMAT):
        _export_folder(ckpt, out, force, dtype, trace_source, keep_history, ablate, fmt)
        return
    if force:
        raise click.UsageError("--force applies to --format hf or peft")

    if trace_source is not None and dtype is not None:
        raise click.UsageError("--dtype applies to checkpoint exports, not to --trace")
    if trace_source is not None and out is None and sys.stdout.isatty():  # hundreds of lines scrolling by
        raise click.UsageError("a trace is a file: give --out FILE (trace.json, .csv, .svg or .html), "
                               "or send it to one: minitx export ... --trace SOURCE > trace.json")
    dtype = dtype or "float32"
    if trace_source is None and out is not None:
        checkpoint_out(out)  # before the file is read
    checkpoint = load_checkpoint_arg(ckpt)
    if trace_source is None:
        if ablate:
            raise click.UsageError("--ablate applies to --trace exports, not to checkpoints")
        if fmt is not None:
            raise click.UsageError("--format applies to --trace exports only")
        if keep_history and checkpoint.history is None:
            raise click.BadParameter(f"{ckpt} has no history to keep", param_hint="--history")
        if out is None:
            raise click.UsageError("give --out FILE.safetensors (or --trace SOURCE for a trace)")
        extra = {k: checkpoint.metadata[k] for k in KEEP_METADATA if k in checkpoint.metadata}
        save_checkpoint(
            out,
            checkpoint.model,
            checkpoint.task,
            checkpoint.summary,
            train_state=None,
            extra_metadata=extra,
            dtype=dtype,
            history=checkpoint.history.for_sharing() if keep_history else None,
        )
        click.echo(f"exported {out} ({dtype}, inference only, {Path(out).stat().st_size / 1024:.0f} KB)")
        return
    from minitx.tui.cli.trace import trace_of

    fmt = fmt or (Path(out).suffix.lstrip(".").lower() if out else "json")
    if fmt not in TRACE_FORMATS:
        raise click.UsageError(f"cannot tell the format from {out!r}: give --format "
                               f"{'|'.join(TRACE_FORMATS)}")
    interventions = interventions_for(checkpoint, ablate, ablate_kind, pairs=pairs)
    trace = trace_of(checkpoint, trace_source, interventions=interventions, every_kind=fmt == "html")
    title = f"minitx · {Path(str(checkpoint.path)).name} · {checkpoint.task.name}"
    if fmt == "html":
        trace.update(_head_scores(checkpoint, interventions))
    text = {"json": _json, "csv": _csv, "svg": _svg, "html": _html}[fmt](trace, title, numbers)
    if out is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    write_atomic(Path(out), text.encode("utf-8"))
    click.echo(f"wrote the {fmt} trace of {trace['source']!r} to {out}", err=True)


def _export_folder(ckpt, out, force, dtype, trace_source, keep_history, ablate, fmt=HF_FORMAT) -> None:
    """--format hf: the checkpoint as a Hugging Face folder; --format peft: a LoRA fine-tune's
    adapters as a PEFT adapter folder."""
    for given, flag in ((trace_source, "--trace"), (dtype, "--dtype"), (keep_history, "--history"),
                        (ablate, "--ablate")):
        if given:
            raise click.UsageError(f"{flag} does not apply to --format {fmt}")
    if out is None:
        raise click.UsageError(f"--format {fmt} writes a folder: give --out DIR")
    from minitx.core.importing.hf_export import ExportError, check_out, export_folder

    try:
        check_out(Path(out), force)  # before the checkpoint is read
    except ExportError as e:
        raise BadArgument(f"--out: {e}") from None
    checkpoint = load_checkpoint_arg(ckpt)
    if fmt == PEFT_FORMAT:
        _export_peft(checkpoint, ckpt, out, force)
        return
    try:
        done = export_folder(checkpoint.model, checkpoint.task, out, force)
    except ExportError as e:
        raise BadArgument(f"{ckpt or 'reverse'}: {e}") from None
    how = "the family whose options it has" if done.matched else "its own family"
    click.echo(f"exported {out}: a {done.family} folder ({how}) that transformers opens")
    click.echo(textwrap.fill(", ".join(done.files), width=78, initial_indent="  ", subsequent_indent="  "))


def _export_peft(checkpoint, ckpt, out, force) -> None:
    """--format peft: the adapters of a LoRA fine-tune, named as transformers' model names its layers."""
    from minitx.core.importing.hf_export import ExportError
    from minitx.core.importing.peft_export import export_peft
    from minitx.core.model.lora import LoraUnavailable

    if checkpoint.lora is None:
        raise BadArgument(f"{ckpt or 'reverse'} is no LoRA fine-tune (train --init MODEL --lora R makes "
                          "one); --format hf writes a whole model")
    try:
        files = export_peft(checkpoint.model, checkpoint.task, checkpoint.lora, out, force)
    except (ExportError, LoraUnavailable) as e:
        raise BadArgument(f"{ckpt}: {e}") from None
    click.echo(f"exported {out}: the LoRA adapters as a PEFT folder (PeftModel.from_pretrained on "
               f"{checkpoint.lora.base.get('init')} opens it)")
    click.echo(textwrap.fill(", ".join(files), width=78, initial_indent="  ", subsequent_indent="  "))


def _json(trace: dict, title: str, numbers: bool) -> str:
    return json.dumps({"title": title, **trace}, indent=2) + "\n"


def _csv(trace: dict, title: str, numbers: bool) -> str:
    """One row per (step, layer, head, source position): a tidy table for pandas or a sheet."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["step", "token", "p", "layer", "head", "source_position", "source_token", "weight"])
    source = trace["source_tokens"]
    for layer, heads in enumerate(trace["cross_attention"]):
        for head, grid in enumerate(heads):
            for step, row in zip(trace["steps"], grid, strict=True):
                for position, weight in enumerate(row):
                    writer.writerow(
                        [
                            step["index"],
                            step["text"],
                            f"{step['top_k'][0]['p']:.6f}",
                            layer + 1,
                            head + 1,
                            position,
                            source[position],
                            f"{weight:.6f}",
                        ]
                    )
    return buffer.getvalue()


def _svg(trace: dict, title: str, numbers: bool) -> str:
    from rich.console import Console

    from minitx.tui.render.grid import trace_renderable

    recorder = Console(record=True, width=100, file=io.StringIO(), color_system="truecolor")
    recorder.print(trace_renderable(trace, numbers, title))
    return recorder.export_svg(title=title)


def _html(trace: dict, title: str, numbers: bool) -> str:
    from minitx.tui.render.trace_html import trace_html

    return trace_html(trace, title)


def _head_scores(checkpoint, interventions) -> dict:
    """The cross-attention heads' alignment (or sharpness) on the task's examples, and the best
    head: the page opens on it, as the app does."""
    from minitx.core.interp.alignment import best_head, shown_head_scores

    with interventions.applied(checkpoint.model):
        measure, scores = shown_head_scores(checkpoint.model, checkpoint.task)
    return {"measure": measure, "scores": [[round(float(v), 4) for v in row] for row in scores.tolist()],
            "best": list(best_head(scores))}
