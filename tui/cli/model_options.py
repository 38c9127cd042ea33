"""The command-line options that describe a model and a training run, shared by `train` (all of
them) and `doctor` (the model's, for a fresh model), and their conversion to configs through
minitx.core.options, the one place named values become configs.

Every option defaults to None so that "not given" is visible: the recipe (or a saved run)
supplies every value the person did not type.
"""

from __future__ import annotations

import click

from minitx.tui.cli.common import LazyChoice, bug_names, core_choice, language_value, recipe_names, task_names

FROM_RECIPE = "[default: recipe]"


class Accuracy(click.ParamType):
    """An exact-match accuracy: 0.99 or 99% (0: none, which turns `until` off)."""

    name = "ACC"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"expected an accuracy such as 0.99 or 99%, got {value!r}", param, ctx)
        if not 0 <= number <= 1:
            self.fail(f"must be from 0 (off) to 1 (100%), got {value!r}", param, ctx)
        return number


class Rise(click.ParamType):
    """A rise in percent, 20 or 20%, as a fraction (0.2); 0% to 1000% (forgetting.py's rule)."""

    name = "PCT"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        from minitx.core.training.forgetting import check_forget_alarm  # torch: only when given

        text = str(value).strip().removesuffix("%")
        try:
            return check_forget_alarm(float(text) / 100)
        except ValueError as e:
            self.fail(str(e) if text.replace(".", "", 1).lstrip("-").isdigit() or "inf" in text.lower()
                      or "nan" in text.lower() else f"expected a percentage such as 20, got {value!r}",
                      param, ctx)


def _recipe_option():
    return click.option("--recipe", type=LazyChoice(recipe_names), default=None,
                        help="Named starting configuration: fast, reference, or modern (fast's "
                             "training with pre-norm, RMSNorm, rotary positions, SwiGLU and 2 K/V "
                             "heads); the options override it. [default: fast]")


# The model's shape: the same names and help in `train` and `doctor`.
MODEL_OPTIONS = [
    click.option("--d-model", type=click.IntRange(min=2), help=f"Model width. {FROM_RECIPE}"),
    click.option("--heads", type=click.IntRange(min=1), help=f"Attention heads. {FROM_RECIPE}"),
    click.option("--layers", type=click.IntRange(min=1), help="Encoder and decoder layers (sets both)."),
    click.option("--encoder-layers", type=click.IntRange(min=1), help=f"Encoder layers. {FROM_RECIPE}"),
    click.option("--decoder-layers", type=click.IntRange(min=1), help=f"Decoder layers. {FROM_RECIPE}"),
    click.option("--d-ff", type=click.IntRange(min=1),
                 help="Feed-forward width. [default: the recipe's ratio to --d-model, 4x]"),
    click.option("--dropout", type=float, help=f"Dropout probability. {FROM_RECIPE}"),
    click.option("--positions", type=click.IntRange(min=3),
                 help="Longest sequence the model takes (its max_len, the length of its "
                      "position tables). "
                      "[default: the recipe's, or longer if --lengths needs it]"),
    click.option("--norm", type=core_choice("config", "NORMS"),
                 help=f"Norm placement: after each residual sum, or before each sublayer. {FROM_RECIPE}"),
    click.option("--norm-kind", type=core_choice("config", "NORM_KINDS"),
                 help="LayerNorm, RMSNorm (no mean subtraction, no bias), or std: the Annotated "
                      f"Transformer's LayerNorm (eps added to the unbiased std). {FROM_RECIPE}"),
    click.option("--norm-eps", type=click.FloatRange(0, 0.1), metavar="EPS",
                 help="Every norm's eps (0: the kind's own, 1e-5 for LayerNorm, 1e-6 otherwise). "
                      f"{FROM_RECIPE}"),
    click.option("--final-norms/--no-final-norms", "final_norms", default=None,
                 help="A norm after each stack of a post-norm model too, as torch.nn.Transformer "
                      f"has (pre-norm always has them). {FROM_RECIPE}"),
    click.option("--log-softmax/--no-log-softmax", "log_softmax", default=None,
                 help=f"The output layer returns log-probabilities instead of logits. {FROM_RECIPE}"),
    click.option("--activation", type=core_choice("config", "ACTIVATIONS"),
                 help="Feed-forward block: a ReLU, GELU, SiLU or tanh-GELU MLP, or gated SwiGLU or "
                      "GEGLU (a third linear). [default: the recipe's; with --norm, relu for "
                      "post-norm, gelu for pre]"),
    click.option("--position-encoding", type=core_choice("config", "POSITION_ENCODINGS"),
                 help="How positions reach the model: a fixed sinusoidal table, learned tables, "
                      f"rotary (RoPE) in self-attention, none, or T5's relative bias. {FROM_RECIPE}"),
    click.option("--relative-buckets", type=click.IntRange(min=4),
                 help="Relative positions: buckets per direction. [default: 32]"),
    click.option("--relative-max-distance", type=click.IntRange(min=1),
                 help="Relative positions: the distance from which all share a bucket. [default: 128]"),
    click.option("--relative-per-layer/--no-relative-per-layer", "relative_per_layer", default=None,
                 help="Relative positions: a bias table in every self-attention layer (UMT5), not one "
                      "per stack. [default: one per stack]"),
    click.option("--decoder-d-ff", type=click.IntRange(min=0),
                 help="The decoder's feed-forward width, where it differs from --d-ff. [default: --d-ff]"),
    click.option("--d-head", type=click.IntRange(min=1),
                 help="Width of one head's queries, keys and values. [default: d_model / heads]"),
    click.option("--bias/--no-bias", "bias", default=None,
                 help="Biases in every linear layer (T5 has none). [default: with]"),
    click.option("--scale-scores/--no-scale-scores", "scale_scores", default=None,
                 help="Scores divided by sqrt(d_k) (T5 folds it into its initialisation). [default: yes]"),
    click.option("--embed-scale/--no-embed-scale", "embed_scale", default=None,
                 help="Token vectors times sqrt(d_model). [default: yes]"),
    click.option("--embedding-norm/--no-embedding-norm", "embedding_norm", default=None,
                 help="A norm on embeddings plus positions, per stack (BART's). [default: no]"),
    click.option("--tie-embeddings/--no-tie-embeddings", "tie_embeddings", default=None,
                 help="One token table for source and target. [default: two]"),
    click.option("--tie-output/--no-tie-output", "tie_output", default=None,
                 help="The output layer is the target's token table. [default: its own]"),
    click.option("--scale-output/--no-scale-output", "scale_output", default=None,
                 help="The decoder stream times d_model^-0.5 before the output (T5 v1.0). [default: no]"),
    click.option("--kv-heads", type=click.IntRange(min=1),
                 help="K/V heads per attention block; fewer than --heads is grouped-query "
                      "attention. [default: the recipe's heads per K/V head]"),
    click.option("--attention", type=core_choice("config", "ATTENTIONS"),
                 help=f"How training computes attention: by hand, or one fused kernel. {FROM_RECIPE}"),
]

TASK_OPTIONS = [
    click.option("--task", type=LazyChoice(task_names), help=f"What to learn. {FROM_RECIPE}"),
    click.option("--lengths", metavar="MIN-MAX", help=f"Source lengths, e.g. 4-10. {FROM_RECIPE}"),
    click.option("--seed", type=click.IntRange(min=0),
                 help=f"Seed for initialisation and data. {FROM_RECIPE}"),
    click.option("--bug", type=LazyChoice(lambda: ["none", *bug_names()]),
                 help="Build or train with a deliberate classic bug, to see what it looks like."),
    click.option("--data", type=click.Path(),
                 help="Train on your own pairs: a .tsv (source<TAB>target), .csv, .jsonl or .parquet file "
                      "(docs/data.md). 5% (at least 100 pairs) is held out unless --valid is given."),
    click.option("--src-lang", metavar="CODE", callback=language_value,
                 help="The source's language: the key or column of --data, --valid and --general that "
                      "holds it (a translation set's 'en'), and a multilingual model's code (eng_Latn, "
                      "en_XX), whose first part names the key too."),
    click.option("--tgt-lang", metavar="CODE", callback=language_value,
                 help="The target's language, as --src-lang: the data's key, a multilingual model's "
                      "code (its labels' code and the forced first token)."),
    click.option("--valid", type=click.Path(),
                 help="Held-out pairs to measure accuracy on, instead of holding out part of --data."),
    click.option("--tokens", type=core_choice("config", "TOKENISATIONS"),
                 help="How --data text becomes tokens: every character, or whitespace-separated "
                      "words. [default: char]"),
    click.option("--expect", type=core_choice("config", "EXPECTATIONS"),
                 help="The cross-attention pattern --data should show (copy-like: diagonal, "
                      "reversal: anti-diagonal), so it can be scored. [default: none, sharpness shown]"),
]

# How to train: every TrainConfig field that TASK_OPTIONS does not already set.
TRAINING_OPTIONS = [
    click.option("--steps", type=click.IntRange(min=1), help=f"Optimiser steps in total. {FROM_RECIPE}"),
    click.option("--batch-size", type=click.IntRange(min=1), help=f"Sequences per step. {FROM_RECIPE}"),
    click.option("--lr", type=float, help=f"Peak learning rate (Adam). {FROM_RECIPE}"),
    click.option("--beta1", type=float, help=f"Adam beta1. {FROM_RECIPE}"),
    click.option("--beta2", type=float, help=f"Adam beta2. {FROM_RECIPE}"),
    click.option("--eps", type=float, help=f"Adam epsilon. {FROM_RECIPE}"),
    click.option("--warmup", type=click.IntRange(min=0), help=f"Linear warmup steps. {FROM_RECIPE}"),
    click.option("--schedule", type=core_choice("config", "SCHEDULES"),
                 help="Learning rate after warmup: flat, a cosine decay to --lr-floor, or linear "
                      f"to 0 (transformers' Trainer's default). {FROM_RECIPE}"),
    click.option("--lr-floor", type=float,
                 help=f"Where the cosine decay ends, as a fraction of --lr (0.1: 10%). {FROM_RECIPE}"),
    click.option("--clip-grad-norm", type=float, help=f"Gradient-norm clipping. {FROM_RECIPE}"),
    click.option("--device", type=core_choice("config", "DEVICES"),
                 help=f"Where to train. {FROM_RECIPE}"),
    click.option("--eval-every", type=click.IntRange(min=0),
                 help=f"Held-out exact-match evaluation every N steps (0: only at the end). {FROM_RECIPE}"),
    click.option("--eval-size", type=click.IntRange(min=1), help=f"Sequences per evaluation. {FROM_RECIPE}"),
    click.option("--bucket-lengths/--mixed-lengths", "bucket_lengths", default=None,
                 help="One source length per batch (no padding), or lengths mixed in each batch. "
                      f"{FROM_RECIPE}"),
    click.option("--length-power", type=click.FloatRange(0, 8), metavar="P",
                 help="Draw a generated source of length L with probability proportional to L**P "
                      f"(0: every length equally often; 2 favours the long ones). {FROM_RECIPE}"),
    click.option("--until", type=Accuracy(),
                 help="Stop at the first evaluation whose exact match is at least ACC (0.99 or "
                      "99%), and save; --steps stays the cap; 0 trains every step. "
                      "[default: recipe; fast stops at 99.9%]"),
    click.option("--probe", "--probe-source", "probe_source", metavar="TEXT", multiple=True,
                 help="A source to watch, as the task reads it ('3 1 4 1 5'; a line's source for "
                      "--data): from scratch, the one whose cross-attention the checkpoint keeps "
                      "snapshots of; fine-tuning, repeatable: each one's output and attention at "
                      "every evaluation. [default: the task's own; fine-tuning, 3 held-out sources]"),
]


# Fine-tuning (`train --init`) and how a step is made: train's own (docs/training.md, "Fine-tuning").
FINE_TUNE_OPTIONS = [
    click.option("--init", metavar="MODEL",
                 help="Fine-tune MODEL (a Hugging Face folder or cache id, an imported or any minitx "
                      "checkpoint, a bundled name) on --data: its architecture, weights and tokenisers; "
                      "the fine-tuning defaults of its family (docs/training.md)."),
    click.option("--accumulate", type=click.IntRange(min=1),
                 help="Micro-batches of --batch-size whose gradients make one step (a step takes "
                      "batch size x accumulate x processes pairs). [default: 1]"),
    click.option("--label-smoothing", type=click.FloatRange(0, 1, max_open=True), metavar="EPS",
                 help="Label smoothing of the loss, as torch's CrossEntropyLoss(label_smoothing). "
                      "[default: 0]"),
    click.option("--weight-decay", type=click.FloatRange(0), metavar="WD",
                 help="AdamW's decoupled weight decay: a fine-tune's spares biases and norms, as "
                      "transformers' Trainer does. [default: 0.01 fine-tuning, 0 from scratch]"),
    click.option("--decay-all/--no-decay-all", "decay_all", default=None,
                 help="Weight decay on every parameter of a fine-tune, biases and norms too. "
                      "[default: no-decay-all]"),
    click.option("--optimizer", type=core_choice("config", "OPTIMIZERS"),
                 help="adamw (Adam at weight decay 0), or torch's Adafactor (T5's, at lr 1e-3). "
                      "[default: adamw]"),
    click.option("--general", type=click.Path(dir_okay=False), metavar="PAIRS",
                 help="Pairs the model should still handle (a general-domain sample): their loss and "
                      "the KL to the base at each evaluation, and an alarm when it forgets. "
                      "[default: none; the KL on the probes stands in]"),
    click.option("--forget-alarm", type=Rise(), metavar="PCT",
                 help="Alarm when the --general loss rises more than PCT over the base's (0-1000). "
                      "[default: 20]"),
    click.option("--watch/--no-watch", "watch", default=None,
                 help="Probes, forgetting and numerics at each evaluation of a fine-tune. "
                      "[default: watch]"),
    click.option("--max-length", type=click.IntRange(min=2), metavar="N",
                 help="Cut sources and targets to N tokens (the end token kept), as a tokeniser's "
                      "truncation does; counted. [default: the model's positions]"),
]


# The Hugging Face course's workflow (docs/training.md, "The course's workflow"): train's own.
COURSE_OPTIONS = [
    click.option("--eval-bleu", "eval_bleu", is_flag=True, default=None,
                 help="Decode the held-out pairs at each evaluation: loss, BLEU and chrF "
                      "(sacrebleu) into the curves. [default: on fine-tuning, off from scratch]"),
    click.option("--keep-best", type=core_choice("config", "KEEP_BEST"),
                 help="Also keep the best evaluation's weights, by this metric, beside the run's "
                      "file (NAME.best.safetensors). [default: off]"),
    click.option("--patience", type=click.IntRange(min=0), metavar="N",
                 help="Stop after N evaluations in a row without a better --keep-best metric (or "
                      "held-out loss; exact match from scratch). [default: 0, never]"),
]


# How a step holds its memory (`train`'s own; docs/training.md, "Memory").
MEMORY_OPTIONS = [
    click.option("--precision", type=core_choice("config", "PRECISIONS"),
                 help="A step's forward and backward: fp32, or bf16 autocast (the weights the "
                      "optimiser updates stay float32). [default: fp32]"),
    click.option("--gradient-checkpointing/--no-gradient-checkpointing", "gradient_checkpointing",
                 default=None,
                 help="Recompute each layer's activations in backward instead of keeping them: "
                      "the same gradients, less memory, a slower step. [default: off]"),
    click.option("--memory-check/--no-memory-check", "memory_check", default=True,
                 help="Before a fine-tune starts, estimate its peak memory and refuse one that "
                      "will not fit, naming options that would. [default: check]"),
]


def _targets(ctx, param, value):
    """--lora-targets q_proj,v_proj -> ('q_proj', 'v_proj'); core checks the names."""
    if value is None:
        return None
    return tuple(t.strip() for t in value.split(",") if t.strip())


# LoRA (`train --init MODEL --lora R`, core/model/lora.py, docs/training.md "LoRA")
LORA_OPTIONS = [
    click.option("--lora", "--lora-rank", "lora_rank", type=click.IntRange(min=1), metavar="R",
                 help="Train only rank-R LoRA adapters of the base's attention projections (peft's "
                      "LoRA); the file holds the adapters and a record of the base. [default: off, "
                      "a full fine-tune]"),
    click.option("--lora-alpha", "lora_alpha", type=click.FloatRange(min=0, min_open=True), metavar="A",
                 help="The adapters' scale is A / R. [default: 8, peft's]"),
    click.option("--lora-dropout", "lora_dropout", type=click.FloatRange(0, 1, max_open=True), metavar="P",
                 help="Dropout on the adapters' input. [default: 0]"),
    click.option("--lora-targets", "lora_targets", callback=_targets, metavar="NAMES",
                 help="The projections adapted, comma-separated: q_proj, k_proj, v_proj, out_proj. "
                      "[default: q_proj,v_proj]"),
]


# Guided alignment (docs/alignment.md, "Guided training"): train's own.
GUIDED_OPTIONS = [
    click.option("--alignments", type=click.Path(dir_okay=False), metavar="FILE",
                 help="Word links of --data's pairs (Pharaoh/talp i-j, line i = pair i; gold or "
                      "fast_align's): taught to --guided-head. Needs --guided-head."),
    click.option("--guided-head", metavar="L:H",
                 help="The decoder layer's cross-attention head (from 1) taught --alignments' links; "
                      "its AER on held-out gold at every evaluation."),
    click.option("--guided-weight", type=click.FloatRange(0, min_open=True), metavar="W",
                 help="The guided loss's weight beside the translation loss. [default: 0.1, "
                      "Marian's]"),
    click.option("--valid-alignments", type=click.Path(dir_okay=False), metavar="FILE",
                 help="Gold links of --valid's pairs, for the head's AER. [default: the held-out "
                      "share of --alignments' lines]"),
]


def apply(options):
    """A decorator that adds `options` (a list of click.option decorators) in order."""

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def recipe_option(f):
    return _recipe_option()(f)


def configs(model_cfg, train_cfg, values: dict):
    """core's configs_from_options() for the options of this module that `values` holds; a bad
    value is a usage error (exit code 2) that names the option."""
    from minitx.core.options import OptionError, configs_from_options, option_names

    known = set(option_names())
    try:
        return configs_from_options(model_cfg, train_cfg, {k: v for k, v in values.items() if k in known})
    except OptionError as e:
        raise click.BadParameter(e.message, param_hint=f"--{e.option.replace('_', '-')}") from None


def recipe_configs(name: str | None):
    """The named recipe's (model, train) configs; the default recipe for None."""
    from minitx.core.config import DEFAULT_RECIPE, recipe

    chosen = recipe(name or DEFAULT_RECIPE)
    return chosen.model, chosen.train
