"""`minitx inspect` and `minitx list`: what a checkpoint is (`minitx eval`, how good: evaluate.py)."""

from __future__ import annotations

import json

import click

from minitx.tui.cli.common import (
    checkpoint_found,
    console,
    echo_json,
    field_lines,
    json_option,
    load_checkpoint_arg,
    shown_value,
)


def inspect_data(ckpt, progress=None) -> dict:
    """Everything `inspect` shows, as plain data. `progress(step, cap)` while a model without
    examples decodes its example source (shown_head_scores)."""
    from minitx.core.checkpoint import describe_size
    from minitx.core.interp.alignment import shown_head_scores
    from minitx.core.model.components import components
    from minitx.core.model.transformer import block_parameters, parameter_breakdown

    meta, task, vocab = ckpt.metadata, ckpt.task, ckpt.task.vocab
    # 256 of the task's examples; without any (no pairs kept), each head on its example source
    measure, scores = shown_head_scores(ckpt.model, task, n=256, progress=progress)
    measured_on = "examples" if task.has_examples else f"the example source alone, {task.example()!r}"
    try:  # informational only: a file without it (or with a broken one) is still inspectable
        train_cfg = json.loads(meta["train_config"])
    except (KeyError, ValueError, TypeError, RecursionError):
        train_cfg = None
    return {
        "path": str(ckpt.path),
        "file_size_bytes": ckpt.size_bytes,
        "file_size": describe_size(ckpt.size_bytes),
        "dtype": ckpt.dtype,
        "format_version": meta.get("format_version"),
        "minitx_version": meta.get("minitx_version"),
        "resumable": ckpt.resumable,
        **({"lora": {**ckpt.lora.spec.to_dict(),
                     "adapter_params": sum(t.numel() for t in ckpt.lora.tensors.values())}}
           if ckpt.lora is not None else {}),
        "task": {
            **{k: v for k, v in task.to_dict().items() if k != "heldout"},  # ids: --json of eval
            "description": task.description,
            "expected_alignment": task.alignment_name,
            "evaluated_on": task.evaluated_on,
            **({"heldout_pairs_kept": len(task.heldout)} if task.heldout is not None else {}),
        },
        "vocabulary": list(vocab.tokens),
        "vocab": _vocab_facts(vocab),
        **({"src_vocabulary": list(task.src_vocab.tokens), "src_vocab": _vocab_facts(task.src_vocab)}
           if task.src_vocab is not vocab else {}),
        **({"imported": _imported_facts(task, ckpt.model_config)} if task.name == "imported" else {}),
        **({"huggingface": _hf_facts(ckpt)} if task.name == "huggingface" else {}),
        "model_config": ckpt.model_config.to_dict(),
        "train_config": train_cfg,
        "parameters": parameter_breakdown(ckpt.model),
        "blocks": block_parameters(ckpt.model),
        "components": components(ckpt.model_config),
        "alignment": {  # rows are decoder layers, columns heads; 256 of the task's examples
            "expected": task.alignment_name,
            "measure": measure,  # "alignment", or "sharpness" when no pattern is expected
            "scores": [[round(float(s), 4) for s in row] for row in scores],
            "measured_on": measured_on,  # "examples" (256 of them), or the example source alone
        },
        "training": ckpt.summary,
        "history": ckpt.history.to_dict() if ckpt.history is not None else None,
    }


def _vocab_facts(vocab) -> dict:
    return {"level": vocab.level, "size": vocab.size,
            "specials": {k: getattr(vocab, k) for k in ("pad", "sos", "eos", "unk")}}


def _imported_facts(task, cfg) -> dict:
    """Where an imported model came from, how its sources are fed, and its options in words."""
    from minitx.core.model.components import option_labels

    pairs = (None if task.heldout is None
             else {"file": task.provenance["data"]["file"], "kept": len(task.heldout)})
    return {**task.origin, "source_wrapping": task.wrapping(), "options": option_labels(cfg), "pairs": pairs}


def _hf_facts(ckpt) -> dict:
    """Where a Hugging Face model came from, its options in words and its generation settings."""
    from minitx.core.data.languages import current, languages
    from minitx.core.model.components import option_labels

    task = ckpt.task
    source, target = current(task)
    spoken = {"languages": {"codes": list(languages(task)), "source": source, "target": target}} \
        if source is not None else {}
    pairs = (None if task.heldout is None
             else {"file": task.provenance["data"]["file"], "kept": len(task.heldout)})
    return {**task.origin, "options": option_labels(ckpt.model_config),
            "generation": ckpt.model.generation.to_dict(), "notes": ckpt.summary.get("notes", []),
            "pairs": pairs, **spoken}


def describe_history(history) -> str:
    """One line: how much of the run the file's history holds (or that it holds none)."""
    if history is None or history.empty:
        return "history: none (a file from before minitx kept curves, or an export)"
    parts = []
    steps = list(history.steps)
    if steps:
        parts.append(f"{len(steps)} points of steps {steps[0]}-{steps[-1]}")
    evaluations = history.evaluations()
    if evaluations:  # best: of the complete ones; one that stopped early (--until) measured too few
        best, rough = history.best_accuracy(), sum(not complete for *_, complete in evaluations)
        notes = ([f"best {best[1]:.1%} at step {best[0]}"] if best else []) + (
            [f"{rough} stopped early"] if rough else [])
        parts.append(f"{len(evaluations)} evaluations" + (f" ({', '.join(notes)})" if notes else ""))
    if history.snapshot_steps:
        parts.append(f"{len(history.snapshot_steps)} attention snapshots")
    return "history: " + ", ".join(parts) + " · draw it: minitx curves FILE"


@click.command("inspect", short_help="Config, task, parameters and training summary.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@json_option
def inspect_cmd(ckpt, as_json) -> None:
    """Config, task, vocabulary, parameter counts and training summary of CKPT (default: reverse).
    A model of your own pairs also shows the data file it was trained on (name, size, sha256,
    pair counts) and its vocabulary.

    \b
    Examples:
      minitx inspect reverse
      minitx inspect dates
      minitx inspect my-run.safetensors --json
    """
    from minitx.tui.cli.progress import Progress

    checkpoint = load_checkpoint_arg(ckpt)
    with Progress("inspect", enabled=not as_json) as progress:
        progress.stage("scoring the heads")  # a model without examples decodes its example source
        info = inspect_data(checkpoint,
                            lambda done, cap: progress.update(done, cap, "decoding its example, step"))
    if as_json:
        echo_json(info)
        return
    from rich.table import Table

    out = console()
    task = info["task"]
    from rich.text import Text

    header = [Text(info["path"], style="bold"), info["file_size"], info["dtype"],
              f"format v{info['format_version']}", f"minitx {info['minitx_version']}",
              "resumable" if info["resumable"] else "inference only"]
    out.print(field_lines(header, out.width), highlight=False)
    pattern = (f"a trained model's cross-attention is {task['expected_alignment']}"
               if task["expected_alignment"] else "no expected cross-attention pattern")
    about = [Text.assemble("task ", (task["name"], "bold"), f": {task['description']}"),
             *([] if "huggingface" in info else [f"source lengths {task['min_len']}-{task['max_len']}"]),
             pattern]
    out.print(field_lines(about, out.width), highlight=False)
    base = info["training"].get("base")
    if isinstance(base, dict):  # a fine-tune (`train --init`): what it started from
        from rich.markup import escape

        out.print(escape(f"fine-tuned from {base.get('init')} ({base.get('family')}; the base's weights: "
                         f"sha256 {str(base.get('sha256'))[:16]}…)"), highlight=False)
    if "lora" in info:  # the file holds adapters; the base was opened and they were merged into it
        a = info["lora"]
        out.print(f"LoRA adapters, rank {a['rank']}, alpha {a['alpha']:g} on {', '.join(a['targets'])} "
                  f"({a['adapter_params']:,} params), applied to the base", highlight=False)
    if "imported" in info:
        out.print(_imported(info["imported"]), highlight=False)
    elif "huggingface" in info:
        out.print(_huggingface(info["huggingface"]), highlight=False)
        if info["huggingface"]["generation"].get("sources"):
            out.print(_generation_table(info["huggingface"]["generation"]))
    elif "provenance" in task:
        out.print(_provenance(task), highlight=False)
    if "src_vocab" in info and checkpoint.task.src_vocab.tokens == checkpoint.task.vocab.tokens:
        out.print(_vocabulary(checkpoint.task.vocab, "vocabulary (both sides)"), highlight=False)
    elif "src_vocab" in info:
        out.print(_vocabulary(checkpoint.task.src_vocab, "source vocabulary"), highlight=False)
        out.print(_vocabulary(checkpoint.task.vocab, "target vocabulary"), highlight=False)
    else:
        out.print(_vocabulary(checkpoint.task.vocab), highlight=False)
    params = Table(title="parameters", title_justify="left")
    params.add_column("component")
    params.add_column("count", justify="right")
    params.add_column("share", justify="right")
    total = info["parameters"]["total"]
    for name, count in info["parameters"].items():
        share = "" if name == "total" else f"{count / total:.1%}"
        params.add_row(name, f"{count:,}", share, style="bold" if name == "total" else None)
    out.print(params)
    out.print(_blocks_table(info["blocks"], info["components"]))
    out.print(f"positions: {info['components']['positions']}")
    out.print(_alignment_table(info["alignment"]))
    from rich.columns import Columns

    panels = [_key_values("model", info["model_config"])]
    if info["train_config"]:
        panels.append(_key_values("training config", info["train_config"]))
    shown = {k: v for k, v in info["training"].items() if k != "base"}  # the base has its own line
    panels.append(_key_values("training summary", shown))
    out.print(Columns(panels))
    out.print(describe_history(checkpoint.history), markup=False)


def _blocks_table(blocks: dict, parts: dict):
    """One block of each kind: its parameters and which component it is."""
    from rich.table import Table

    table = Table(title="one block of each kind", title_justify="left")
    table.add_column("block")
    table.add_column("count", justify="right")
    table.add_column("what it is")
    share = blocks["feed-forward block"] / blocks["encoder layer"]
    rows = [
        ("attention block", "attention block", parts["attention"]),
        ("  queries, output", "queries and output", "Q and output projections, d x d each"),
        ("  keys, values", "keys and values", "K and V projections, d -> d_k per K/V head"),
        ("feed-forward block", "feed-forward block", f"{parts['feed-forward']}, {share:.0%} of a layer"),
        ("norm", "norm", parts["norm"]),
        ("encoder layer", "encoder layer", "attention, feed-forward, 2 norms"),
        ("decoder layer", "decoder layer", "2 attention blocks, feed-forward, 3 norms"),
    ]
    for label, key, what in rows:
        table.add_row(label, f"{blocks[key]:,}", what)
    return table


SHOWN_TOKENS = 300  # a word vocabulary can hold 50,000: --json lists them all


def _vocabulary(vocab, name: str = "vocabulary"):
    """'vocabulary 0:0 1:1 ...' for the digits; else the size and every token's label."""
    from rich.markup import escape

    if vocab.level == "digits":
        return f"{name} " + " ".join(f"{i}:{t}" for i, t in enumerate(vocab.tokens))
    real = vocab.real_ids()
    what = {"char": "characters", "word": "words", "subword": "pieces"}[vocab.level]
    shown = " ".join(vocab.label(i) for i in real[:SHOWN_TOKENS])
    more = f" … and {len(real) - SHOWN_TOKENS:,} more (--json lists them)" if len(real) > SHOWN_TOKENS else ""
    specials = " ".join(f"{i}:{vocab.tokens[i]}" for i in vocab.specials)
    legend = {"char": " (␣ is a space)", "subword": " (· starts a word)"}.get(vocab.level, "")
    return escape(f"{name}: {len(real):,} {what}{legend} and {specials}: {shown}{more}")


def _imported(facts: dict) -> str:
    """Where an imported model came from, its options and how its sources are fed."""
    from rich.markup import escape

    weights = facts["weights"]
    pairs = (f"; {facts['pairs']['kept']:,} example pairs of {facts['pairs']['file']}" if facts["pairs"]
             else "; no example pairs (import with --pairs FILE for eval, heads, doctor)")
    return escape(f"imported from {weights['file']} ({weights['format']}, {weights['size']:,} bytes, sha256 "
                  f"{weights['sha256'][:16]}…) with the {facts['mapping']} mapping; vocabularies "
                  f"{facts['src_vocab']['file']} (source) and {facts['tgt_vocab']['file']} (target); "
                  f"options: {', '.join(facts['options'])}; sources fed {facts['source_wrapping']}; "
                  f"positions: {facts['positions']}{pairs}")


def _huggingface(facts: dict) -> str:
    """Where a Hugging Face model came from, its options and how it generates."""
    from rich.markup import escape

    g = facts["generation"]
    files = ", ".join(f"{name} ({f['size']:,} bytes)" for name, f in facts["files"].items())
    where = f"{facts['model_id']} ({facts['folder']})" if facts.get("model_id") else facts["folder"]
    generation = (f"decoder starts at {g['start']}, ends at {'/'.join(map(str, g['eos']))}, at most "
                  f"{g['max_new_tokens'] or g['max_length'] - 1} new tokens"
                  + (f", a beam of {g['num_beams']} in generate()" if g["num_beams"] > 1 else ""))
    pairs = (f"; {facts['pairs']['kept']:,} example pairs of {facts['pairs']['file']}" if facts["pairs"]
             else "; no example pairs (give --pairs FILE to measure)")
    notes = "".join(f"; note: {n}" for n in facts["notes"])
    spoken = facts.get("languages")
    languages = (f"; {len(spoken['codes'])} languages (--src-lang, --tgt-lang; source {spoken['source']}): "
                 f"{' '.join(spoken['codes'])}" if spoken else "")
    return escape(f"Hugging Face {facts['family']} model from {where}: {files}; options: "
                  f"{', '.join(facts['options'])}; {generation}{pairs}{notes}{languages}")


def _generation_table(generation: dict):
    """Each generation setting, its value and the file it came from (generation_config.json,
    config.json, or generate()'s default); the ones minitx does not compute marked."""
    from rich.table import Table
    from rich.text import Text

    missing = {n.split(" ")[0] for n in generation.get("not_computed", [])}
    table = Table(title="generation settings (as transformers reads them)", title_justify="left")
    for column in ("setting", "value", "from"):
        table.add_column(column, overflow="fold")
    for key, value, file in generation["sources"]:
        where = file + (" · not computed by minitx" if key in missing else "")
        table.add_row(Text(key), Text(value), Text(where),
                      style="dim" if file == "default" else ("bold" if key in missing else None))
    return table


def _provenance(task: dict) -> str:
    from rich.markup import escape

    p, c = task["provenance"], task["counts"]
    data = p["data"]
    held = (f"held out: {p['valid']['file']} ({p['valid']['pairs']:,} pairs)" if p.get("valid")
            else f"{c['heldout']:,} held out (seed {p['seed']})")
    text = (f"trained on {data['file']} ({data['format']}, {data['size']:,} bytes, sha256 "
            f"{data['sha256'][:16]}…): {c['read']:,} pairs read, {c['train']:,} trained on, {held}; "
            f"{p['tokens']} tokens")
    if c.get("skipped_too_long"):
        text += f"; {c['skipped_too_long']:,} skipped as too long"
    if c.get("unknown_heldout_tokens"):
        text += f"; {c['unknown_heldout_tokens']:,} held-out tokens unseen in training (read as <unk>)"
    return escape(text)


def _alignment_table(alignment: dict):
    """Each decoder layer's and head's alignment score (or sharpness, when the task expects no
    pattern), from core; the best head in bold."""
    from rich.markup import escape
    from rich.table import Table

    scores = alignment["scores"]
    table = Table()
    table.add_column("layer")
    for head in range(max((len(row) for row in scores), default=0)):
        table.add_column(f"H{head + 1}", justify="right")
    best = max((s for row in scores for s in row), default=None)
    for layer, row in enumerate(scores):
        table.add_row(f"L{layer + 1}", *(f"[bold]{s:.3f}[/]" if s == best else f"{s:.3f}" for s in row))
    from rich.console import Group

    heading = (
        "[bold]alignment score[/] per layer/head: cross-attention mass on the source position the "
        f"task expects ({alignment['expected']}); 1 is a perfect head, uniform attention scores ~1/length"
    )
    if alignment["measure"] == "sharpness":
        heading = ("[bold]sharpness[/] per layer/head (no alignment score: the task names no "
                   "expected pattern; a data file's does with --expect diagonal or anti-diagonal): each "
                   "head's largest weight over the source, averaged over outputs; 1 looks at one "
                   "position, uniform attention ~1/length")
    if alignment["measured_on"] != "examples":  # no pairs kept: minitx heads --pairs FILE ranks them
        heading += (f"; measured on {escape(alignment['measured_on'])}, as the model keeps no "
                    "example pairs (`minitx heads MODEL --pairs FILE` ranks its heads on yours)")
    return Group(heading, table)


def _key_values(title: str, data: dict):
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    for key, value in data.items():
        table.add_row(key, "" if value is None else shown_value(key, value))
    from rich.panel import Panel

    return Panel(table, title=title, title_align="left", expand=False)


@click.command("list", short_help="Bundled checkpoints and those in a folder.")
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False))
@json_option
def list_cmd(folder, as_json) -> None:
    """The bundled checkpoints, and the *.safetensors files in FOLDER.

    \b
    Examples:
      minitx list
      minitx list runs/ --json
    """
    from minitx import checkpoints
    listings = checkpoints.list_checkpoints(folder)
    if as_json:
        echo_json(
            [
                {
                    "name": x.name,
                    "path": str(x.path),
                    "task": x.task,
                    "size_bytes": x.size_bytes,
                    "accuracy": x.accuracy,
                    "steps": x.steps,
                    "bug": x.bug,
                    "error": x.error,
                }
                for x in listings
            ]
        )
        return
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from minitx import checkpoints as bundled

    # No vertical rules, the bundled models first and FOLDER's files after a gap, every row on
    # one line: at 80 columns each name and note reads whole (a very long file name is cut).
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("name", no_wrap=True, overflow="ellipsis")
    table.add_column("task", no_wrap=True)
    for column in ("size", "accuracy", "steps"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("note", no_wrap=True)
    section, unreadable, rows = True, [], []
    for x in listings:
        is_bundled = x.path.parent == bundled.BUNDLED_DIR and x.name == x.path.stem
        if not is_bundled and section:
            table.add_section()
            section = False
        name = x.name if is_bundled else x.path.name  # the folder is already on the command line
        if x.error:  # under the table, on lines of their own: a row would squeeze every column
            unreadable.append(f"[red]unreadable[/] {escape(name)}: {escape(x.error)}")
            continue
        acc = f"{x.accuracy:.1%}" if x.accuracy is not None else "?"
        note = f"bug: {x.bug}" if x.bug else ""
        steps = str(x.steps) if x.steps is not None else "?"
        rows.append((name, x.task, f"{x.size_bytes / 1024:.0f} KB", acc, steps, note))
    out = console()
    # Too narrow a terminal cuts the names only: every other column keeps its widest cell.
    others = 0
    for column, cells in list(zip(table.columns, zip(*rows)))[1:]:
        column.min_width = max(len(column.header), *map(len, cells))
        others += column.min_width + 2  # and the gap before it
    table.columns[0].max_width = max(8, out.width - others - 2)
    for row in rows:
        table.add_row(*row)
    if not listings:
        click.echo("no checkpoints found")
        return
    out.print(table)
    out.print(f"first the bundled checkpoints (open one by its name), then the files of {escape(folder)}"
              if folder else "bundled checkpoints: open one by its name")
    for line in unreadable:
        out.print(line)
