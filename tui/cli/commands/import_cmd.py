"""`minitx import`: a Transformer trained by other code (its state_dict and vocabularies, or a
Hugging Face model folder) -> a minitx checkpoint that every command and the app can open
(docs/import.md, docs/huggingface.md)."""

from __future__ import annotations

import click

from minitx.tui.cli.common import BadArgument, core_choice, echo_json, json_option


@click.command("import", short_help="Bring your own model: a Hugging Face folder, or a state_dict of "
                                    "nn.Transformer or the Annotated Transformer.")
@click.argument("file", required=False)
@click.option("--layout", type=core_choice("importing.importer", "LAYOUTS"),
              help="Whose code trained it: PyTorch's nn.Transformer tutorial (Seq2SeqTransformer) or "
                   "Harvard NLP's Annotated Transformer (EncoderDecoder).")
@click.option("--mapping", type=click.Path(dir_okay=False),
              help="Any other layout: a JSON mapping of minitx's tensor names to the file's keys "
                   "(--print-mapping writes one to edit).")
@click.option("--src-vocab", type=click.Path(dir_okay=False),
              help="The source vocabulary: one token per line, line number (from 0) = id.")
@click.option("--tgt-vocab", type=click.Path(dir_okay=False), help="The target vocabulary, likewise.")
@click.option("--out", type=click.Path(dir_okay=False), help="The checkpoint to write (.safetensors).")
@click.option("--heads", type=click.IntRange(min=1), help="Attention heads (a state_dict does not say).")
@click.option("--tokens", type=core_choice("config", "TOKENISATIONS"),
              help="How typed text becomes tokens: words split at spaces, or every character.")
@click.option("--specials", metavar="ROLE=TOKEN,...",
              help="The special tokens, where not spelled as usual (<pad>/<blank>, <bos>/<s>, "
                   "<eos>/</s>, <unk>), e.g. pad=[PAD],bos=[CLS],eos=[SEP].")
@click.option("--src-specials", metavar="ROLE=TOKEN,...", help="The source file's, where they differ.")
@click.option("--norm", type=core_choice("config", "NORMS"),
              help="Norm placement [default: the layout's; needed with --mapping].")
@click.option("--norm-kind", type=core_choice("config", "NORM_KINDS"),
              help="LayerNorm, RMSNorm, or std (the Annotated Transformer's) [default: the layout's].")
@click.option("--norm-eps", type=click.FloatRange(0, 0.1, min_open=True), metavar="EPS",
              help="The norms' eps, if not the layout's default (nn.Transformer's layer_norm_eps).")
@click.option("--activation", type=core_choice("config", "ACTIVATIONS"),
              help="The feed-forward activation [default: relu; swiglu where the file has a gate].")
@click.option("--final-norms/--no-final-norms", "final_norms", default=None,
              help="A norm after each stack [default: whether the file has them].")
@click.option("--log-softmax/--no-log-softmax", "log_softmax", default=None,
              help="The output layer ends in log-softmax [default: the layout's].")
@click.option("--wrap-source/--no-wrap-source", "wrap_source", default=None,
              help="Feed sources wrapped in start and end tokens, as both layouts' pipelines do "
                   "[default: the layout's, wrapped].")
@click.option("--positions", type=click.IntRange(min=3),
              help="Positions the model keeps [default: the file's table, at most 512].")
@click.option("--pairs", type=click.Path(dir_okay=False),
              help="Example pairs of its task (.tsv, .csv, .jsonl; up to 1,000 kept), so eval, heads, "
                   "doctor and compare work from the checkpoint alone.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help='The same settings as a JSON object, e.g. {"heads": 8, "tokens": "word"}; '
                   "options win.")
@click.option("--print-mapping", is_flag=True,
              help="Print the --layout's built-in mapping as JSON (a start for --mapping) and exit.")
@json_option
def import_cmd(file, layout, mapping, src_vocab, tgt_vocab, out, heads, tokens, specials, src_specials,
               norm, norm_kind, norm_eps, activation, final_norms, log_softmax, wrap_source, positions,
               pairs, config_file, print_mapping, as_json) -> None:
    """Import FILE, a state_dict saved by your own code (a .safetensors file, or a torch .pt read
    with torch.load(weights_only=True): a pickled model is refused), with its two vocabularies,
    as a minitx checkpoint. The shapes give the layers, widths, vocabulary sizes and positions;
    what they cannot (the heads, the tokenisation) comes from options or --config. Everything is
    checked before --out is written: a bad file is one line naming its key or line, exit 2.

    FILE may also be a Hugging Face model folder (Marian/opus-mt, T5, Flan-T5, BART) or a model
    id in your Hugging Face cache: it is converted once, weights, tokenisers and generation
    settings, into a file that computes exactly what the folder does (only --out, --pairs and
    --json apply; every command also opens the folder itself).

    \b
    Examples:
      minitx import Helsinki-NLP/opus-mt-en-de --out en-de.safetensors
      minitx import model.pt --layout nn-transformer --heads 8 --tokens word \\
          --src-vocab de.vocab --tgt-vocab en.vocab --out mine.safetensors
      minitx import model.safetensors --layout annotated --heads 8 \\
          --tokens word --src-vocab src.txt --tgt-vocab tgt.txt \\
          --pairs test.tsv --out mine.safetensors
      minitx import --print-mapping --layout nn-transformer > map.json

    Then: minitx inspect mine.safetensors, minitx decode mine.safetensors "ein Haus", minitx tui
    mine.safetensors. docs/import.md says how to save the files from each code.
    """
    from minitx.core.importing.errors import ImportFileError

    if file is not None and not print_mapping and _is_model_folder(file):
        given = {"--layout": layout, "--mapping": mapping, "--src-vocab": src_vocab, "--tgt-vocab": tgt_vocab,
                 "--heads": heads, "--tokens": tokens, "--specials": specials, "--src-specials": src_specials,
                 "--norm": norm, "--norm-kind": norm_kind, "--norm-eps": norm_eps, "--activation": activation,
                 "--final-norms": final_norms, "--log-softmax": log_softmax, "--wrap-source": wrap_source,
                 "--positions": positions, "--config": config_file}
        extra = next((flag for flag, value in given.items() if value is not None), None)
        if extra is not None:
            raise click.UsageError(f"{extra} does not apply to a Hugging Face folder: its config.json and "
                                   "tokeniser files say all of it")
        if out is None:
            raise click.UsageError("missing --out: minitx import FOLDER --out X.safetensors")
        _import_folder(file, out, pairs, as_json)
        return
    if print_mapping:
        if layout is None:
            raise click.UsageError("--print-mapping prints a built-in mapping: give --layout")
        from minitx.core.importing.mapping import builtin_mapping

        click.echo(builtin_mapping(layout).to_json(), nl=False)
        return
    needed = (("FILE", file), ("--src-vocab", src_vocab), ("--tgt-vocab", tgt_vocab), ("--out", out))
    missing = [flag for flag, value in needed if value is None]
    if missing:
        raise click.UsageError(f"missing {missing[0]}: minitx import FILE --layout L --src-vocab F "
                               "--tgt-vocab F --out X.safetensors")
    if (layout is None) == (mapping is None):
        raise click.UsageError("give --layout nn-transformer|annotated, or --mapping FILE for any other "
                               "layout")
    from pathlib import Path

    from minitx.core.checkpoint import CheckpointError, check_writable, save_checkpoint
    from minitx.core.data.pair_files import DataError
    from minitx.core.importing.importer import ImportSettings, import_model, read_settings

    out_path = Path(out)
    try:
        check_writable(out_path)  # before reading anything: the one problem not in a file read
        given = ImportSettings(heads=heads, tokens=tokens, norm=norm, norm_kind=norm_kind, norm_eps=norm_eps,
                               activation=activation, final_norms=final_norms, log_softmax=log_softmax,
                               wrap_source=wrap_source, positions=positions, specials=specials or "",
                               src_specials=src_specials or "")
        read = {Path(p).resolve() for p in (file, src_vocab, tgt_vocab, pairs, config_file, mapping) if p}
        if out_path.resolve() in read:
            raise ImportFileError(f"--out {out} is one of the files being read; choose another name")
        if config_file is not None:
            given = given.merged(read_settings(config_file))
        imported = import_model(file, src_vocab, tgt_vocab, given, layout=layout or "",
                                mapping=mapping or "", pairs=pairs or "")
        save_checkpoint(out_path, imported.model, imported.task, imported.summary)
    except (ImportFileError, DataError, CheckpointError) as e:
        raise BadArgument(str(e)) from None
    for note in imported.notes:
        click.echo(f"note: {note}", err=True)
    task, cfg = imported.task, imported.model.cfg
    facts = {"checkpoint": str(out_path), "layout": layout or "mapping", "model_config": cfg.to_dict(),
             "source_wrapping": task.wrapping(), "pairs_kept": len(task.heldout) if task.heldout else 0,
             "origin": task.origin.to_dict()}
    if as_json:
        echo_json(facts)
        return
    from minitx.core.model.transformer import parameter_breakdown

    params = parameter_breakdown(imported.model)["total"]
    click.echo(f"imported {Path(file).name} ({layout or 'mapping'}): "
               f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, d_model {cfg.d_model}, "
               f"{cfg.n_heads} heads, d_ff {cfg.d_ff}, {params:,} parameters; "
               f"{task.src_vocab.size} source and {task.vocab.size} target tokens; sources fed "
               f"{task.wrapping()}")
    click.echo(f"wrote {out_path} · next: minitx inspect {out_path}")


def _is_model_folder(text: str) -> bool:
    """A folder, or a model id for the Hugging Face cache (owner/name, nothing of that name here)."""
    from pathlib import Path

    from minitx.core.importing.hf_cache import looks_like_model_id

    return Path(text).expanduser().is_dir() or looks_like_model_id(text)


def _import_folder(name: str, out: str, pairs: str | None, as_json: bool) -> None:
    """A Hugging Face folder (or cached model id) -> a minitx checkpoint at `out`."""
    from pathlib import Path

    from minitx import checkpoints
    from minitx.core.checkpoint import CheckpointError, check_writable, save_checkpoint
    from minitx.core.data.pair_files import DataError
    from minitx.core.importing.errors import ImportFileError
    from minitx.core.importing.hf_cache import looks_like_model_id
    from minitx.core.importing.huggingface import open_folder
    from minitx.core.importing.importer import kept_pairs
    from minitx.core.model.transformer import parameter_breakdown

    out_path = Path(out)
    try:
        check_writable(out_path)
        folder = checkpoints.resolve(name)
        if not folder.is_dir():
            raise ImportFileError(f"{name} is a file; a Hugging Face model is a folder with a config.json")
        opened = open_folder(folder, model_id=name if looks_like_model_id(name) else "", hashes=True)
        task, notes = opened.task, list(opened.notes)
        if pairs:
            task, pair_notes = kept_pairs(task, Path(pairs), opened.model.cfg.max_len)
            notes += pair_notes
        summary = {**opened.summary, **({"notes": opened.notes} if opened.notes else {})}
        save_checkpoint(out_path, opened.model, task, summary)
    except (ImportFileError, DataError, CheckpointError) as e:
        raise BadArgument(str(e)) from None
    for note in notes:
        click.echo(f"note: {note}", err=True)
    cfg = opened.model.cfg
    if as_json:
        echo_json({"checkpoint": str(out_path), "family": task.origin.family,
                   "model_config": cfg.to_dict(),
                   "pairs_kept": len(task.heldout) if task.heldout else 0, "origin": task.origin.to_dict(),
                   "generation": opened.model.generation.to_dict()})
        return
    params = parameter_breakdown(opened.model)["total"]
    click.echo(f"imported {name} ({task.origin.family}): {cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
               f"layers, d_model {cfg.d_model}, {cfg.n_heads} heads, d_ff {cfg.d_ff}, {params:,} parameters; "
               f"{task.vocab.size:,} target pieces")
    click.echo(f"wrote {out_path} · next: minitx inspect {out_path}")
