"""Model and training configuration: validated dataclasses that round-trip through plain dicts.

Both go into checkpoint metadata as JSON, so every field is a plain int/float/str.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from minitx.core.data.pair_files import Columns
from minitx.core.data.task import DATA_TASK, EXPECTATIONS
from minitx.core.data.tasks import TASKS, get_task

NORMS = ("post", "pre")
NORM_KINDS = ("layer", "rms", "std")
# Each norm's eps when ModelConfig.norm_eps does not say: torch's LayerNorm default, minitx's
# RMSNorm, and the Annotated Transformer's LayerNorm (eps added to the unbiased std).
NORM_EPS = {"layer": 1e-5, "rms": 1e-6, "std": 1e-6}
# relu, gelu (exact, erf) and silu MLPs; gelu-tanh: GELU's tanh approximation (T5's gelu_new);
# gated: swiglu W2(silu(W1 x) * W3 x), geglu the same with the tanh GELU (T5 v1.1's gated-gelu),
# reglu with ReLU (T5's gated-relu).
ACTIVATIONS = ("relu", "gelu", "swiglu", "silu", "gelu-tanh", "geglu", "reglu")
GATED_ACTIVATIONS = ("swiglu", "geglu", "reglu")
# relative: T5's bucketed relative position bias, added to self-attention scores per head.
POSITION_ENCODINGS = ("sinusoidal", "learned", "rope", "none", "relative")
ATTENTIONS = ("explicit", "fused")
DEVICES = ("auto", "cpu", "cuda")
SCHEDULES = ("flat", "cosine", "linear")
# What --keep-best keeps and --patience watches: metric -> True where higher is better
KEEP_BEST = {"bleu": True, "chrf": True, "loss": False, "exact": True}
# adamw: Adam with decoupled weight decay (plain Adam at weight_decay 0, the scratch recipes');
# adafactor: torch.optim.Adafactor, what T5 was trained and is often fine-tuned with.
OPTIMIZERS = ("adamw", "adafactor")
PRECISIONS = ("fp32", "bf16")  # a training step's forward and backward: float32, or bfloat16 autocast
# LoRA (core/model/lora.py): the projections an adapter may target, by minitx's module name, and
# peft's default for T5 and BART (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING): q and v
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj")
DEFAULT_LORA_TARGETS = ("q_proj", "v_proj")
TOKENISATIONS = ("char", "word")

# The deliberate classic bugs a run can be trained (or a model built) with, to see what each looks
# like: name -> what it breaks. The model's own variants (MODEL_BUGS) are forward passes that
# core/model/transformer.py computes when ModelConfig.bug names one; the others change training
# (core/training/bug_presets.py).
BUGS = {
    "no-shift": "target not shifted right: the decoder sees the token it must predict",
    "no-causal-mask": "decoder self-attention sees future tokens",
    "no-scale": "attention scores not divided by sqrt(d_k)",
    "swap-cross": "cross-attention keys/values come from the decoder, not the encoder",
    "no-reverse": "data generation forgot to reverse: targets are copies",
    "no-warmup": "full learning rate from step 1",
}
MODEL_BUGS = ("no-causal-mask", "no-scale", "swap-cross")


def _require(condition: bool, field_name: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{field_name}: {message}")


def check_lora(rank: Any, alpha: Any, dropout: Any, targets: Any, allow_off: bool = False) -> None:
    """A LoRA's settings (TrainConfig's lora_* fields, a LoRA file's record): ValueError
    "field: message" for the first that is wrong; rank 0 (no LoRA) only with allow_off."""
    _require(isinstance(rank, int) and not isinstance(rank, bool) and rank >= (0 if allow_off else 1),
             "lora_rank", f"must be a rank of 1 or more{' (0: no LoRA)' if allow_off else ''}, got {rank!r}")
    _require(isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and math.isfinite(alpha)
             and alpha > 0, "lora_alpha", f"must be a positive number, got {alpha!r}")
    _require(isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and 0 <= dropout < 1,
             "lora_dropout", f"must be in [0, 1), got {dropout!r}")
    _require(isinstance(targets, tuple) and bool(targets) and all(t in LORA_TARGETS for t in targets),
             "lora_targets", f"must be some of {', '.join(LORA_TARGETS)}, got {targets!r}")


def _positive_int(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        _require(
            isinstance(value, int) and not isinstance(value, bool) and value > 0,
            name,
            f"must be a positive integer, got {value!r}",
        )


def _choice(obj: Any, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(obj, name)
    _require(value in choices, name, f"must be one of {', '.join(choices)}; got {value!r}")


def _without_defaults(data: dict[str, Any], names: tuple[str, ...],
                      defaults: dict[str, Any]) -> dict[str, Any]:
    """`data` without the fields of `names` that hold their defaults: a config that does not use
    options added later writes what it wrote before they existed."""
    return {k: v for k, v in data.items() if k not in names or v != defaults[k]}


class _DictMixin:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown {cls.__name__} field")
        return cls(**data)

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


# field of minitx 0.1's model config -> (its healthy value, the bug preset its other value meant)
LEGACY_BUG_FIELDS = {"scale_attention": (True, "no-scale"), "swap_cross_attention": (False, "swap-cross"),
                     "causal_mask": (True, "no-causal-mask")}


@dataclass(frozen=True)
class ModelConfig(_DictMixin):
    """The encoder-decoder's shape. Defaults are the reference model (docs/model.md): 235,981 params."""

    vocab_size: int = 13  # the target's vocabulary (and the source's, unless src_vocab_size says)
    pad_id: int = 10  # embedding rows for PAD stay zero (padding_idx)
    sos_id: int = 11  # the first decoder input; the task's vocabulary decides all three ids
    eos_id: int = 12
    d_model: int = 64  # width of every residual stream (an odd one: its sinusoids' last column is a sine)
    n_heads: int = 4  # d_model must divide evenly into heads (d_k = d_model / n_heads)
    d_ff: int = 256  # hidden width of each feed-forward block
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    dropout: float = 0.1
    max_len: int = 64  # longest sequence the positional table covers (target includes SOS/EOS)
    norm: str = "post"  # "post": x = LN(x + f(x)); "pre": x = x + f(LN(x)) plus final LayerNorms
    activation: str = ""  # "relu" | "gelu" | "swiglu"; empty: the norm's default (post relu, pre gelu)
    norm_kind: str = "layer"  # "layer": LayerNorm; "rms": RMSNorm (no mean, no bias), wherever a norm stands
    # "sinusoidal" (a fixed table added to the embeddings), "learned" (one trained table per side),
    # "rope" (rotary: queries and keys of self-attention turned by position), "none".
    position_encoding: str = "sinusoidal"
    kv_heads: int = 0  # K/V heads of every attention block (grouped-query when < n_heads); 0: n_heads
    # How training computes attention: "explicit" (softmax(QK^T)V by hand) | "fused"
    # (scaled_dot_product_attention). Inference uses the fused kernel unless weights are asked for.
    attention: str = "explicit"
    # A deliberate defect of the model itself (a core.bugs preset that patches the model, e.g.
    # "no-scale"), so a checkpoint of a broken model rebuilds broken; empty means none.
    bug: str = ""
    # The options of models trained by other code (`minitx import`, docs/import.md). Each one's
    # default is what minitx computed before it existed, and a config at the default does not
    # write it (to_dict), so files of minitx's own models read as they did.
    src_vocab_size: int = 0  # rows of the source embedding; 0: vocab_size (one shared vocabulary)
    src_pad_id: int = -1  # the source's PAD id (its padding mask); -1: pad_id
    final_norms: bool = False  # a norm after each stack on a post-norm model too (pre-norm always has them)
    norm_eps: float = 0.0  # every norm's eps; 0: the kind's default (NORM_EPS)
    log_softmax: bool = False  # the output layer returns log-probabilities, not logits
    # The components of the Hugging Face families (docs/huggingface.md), as the import options:
    # each default is what minitx computed before, and a config at the default omits it.
    d_head: int = 0  # width of one head's Q/K/V; 0: d_model / n_heads (T5 v1.1 may differ)
    bias: bool = True  # every linear layer has a bias (T5's have none)
    scale_scores: bool = True  # scores divided by sqrt(d_k) (T5 folds that into its initialisation)
    embed_scale: bool = True  # token vectors times sqrt(d_model) (Marian yes, T5 no, BART as set)
    embedding_norm: bool = False  # a LayerNorm on embeddings + positions, one per stack (BART)
    relative_buckets: int = 32  # T5's relative position bias ("relative"): buckets per direction
    relative_max_distance: int = 128  # ... and the distance from which all share the last bucket
    tie_embeddings: bool = False  # the source and target token tables are one table
    tie_output: bool = False  # the output layer's weight is the target token table
    scale_output: bool = False  # the decoder stream times d_model^-0.5 before the output (T5 v1.0)
    decoder_d_ff: int = 0  # the decoder's feed-forward width; 0: d_ff (BART-likes may differ)
    relative_per_layer: bool = False  # "relative": a bias table per self-attention layer (UMT5)

    def __post_init__(self) -> None:
        _positive_int(self, "vocab_size", "d_model", "n_heads", "d_ff", "max_len")
        _positive_int(self, "n_encoder_layers", "n_decoder_layers")
        _require(isinstance(self.d_head, int) and not isinstance(self.d_head, bool) and self.d_head >= 0,
                 "d_head", f"must be a positive integer (or 0: d_model / n_heads), got {self.d_head!r}")
        _require(
            bool(self.d_head) or self.d_model % self.n_heads == 0,
            "d_model",
            f"{self.d_model} is not divisible by n_heads={self.n_heads}",
        )
        for name in ("pad_id", "sos_id", "eos_id"):
            value = getattr(self, name)
            _require(
                isinstance(value, int) and not isinstance(value, bool) and 0 <= value < self.vocab_size,
                name,
                f"must be a token id below vocab_size={self.vocab_size}, got {value!r}",
            )
        # The decoder's start token may be PAD (T5, Marian) or EOS (BART), as Hugging Face's are.
        _require(self.pad_id != self.eos_id, "eos_id", "pad_id and eos_id must be different tokens")
        _require(
            isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0,
            "dropout",
            f"must be in [0, 1), got {self.dropout!r}",
        )
        _choice(self, "norm", NORMS)
        if not self.activation:
            object.__setattr__(self, "activation", "relu" if self.norm == "post" else "gelu")
        _choice(self, "activation", ACTIVATIONS)
        _choice(self, "norm_kind", NORM_KINDS)
        _choice(self, "position_encoding", POSITION_ENCODINGS)
        _require(isinstance(self.kv_heads, int) and not isinstance(self.kv_heads, bool)
                 and self.kv_heads >= 0, "kv_heads", f"must be a positive integer, got {self.kv_heads!r}")
        if not self.kv_heads:
            object.__setattr__(self, "kv_heads", self.n_heads)
        _require(self.n_heads % self.kv_heads == 0, "kv_heads",
                 f"n_heads={self.n_heads} cannot be split into groups sharing {self.kv_heads} K/V heads")
        _require(self.position_encoding != "rope" or self.d_k % 2 == 0, "position_encoding",
                 f"rope turns pairs of coordinates: it needs an even d_k (d_model / n_heads), got {self.d_k}")
        _choice(self, "attention", ATTENTIONS)
        _require(self.bug == "" or self.bug in MODEL_BUGS, "bug",
                 f"must be one of {', '.join(MODEL_BUGS)} (or empty); got {self.bug!r}")
        _require(isinstance(self.src_vocab_size, int) and not isinstance(self.src_vocab_size, bool)
                 and self.src_vocab_size >= 0, "src_vocab_size",
                 f"must be a positive integer (or 0: vocab_size), got {self.src_vocab_size!r}")
        _require(isinstance(self.src_pad_id, int) and not isinstance(self.src_pad_id, bool)
                 and -1 <= self.src_pad_id < self.source_vocab_size
                 and 0 <= self.source_pad_id < self.source_vocab_size, "src_pad_id",
                 f"must be a token id below the source's {self.source_vocab_size} tokens (or -1: "
                 f"pad_id), got {self.src_pad_id!r}")
        for name in ("final_norms", "log_softmax", "bias", "scale_scores", "embed_scale", "embedding_norm",
                     "tie_embeddings", "tie_output", "scale_output", "relative_per_layer"):
            _require(isinstance(getattr(self, name), bool), name, f"must be true or false, got "
                     f"{getattr(self, name)!r}")
        _require(isinstance(self.norm_eps, (int, float)) and not isinstance(self.norm_eps, bool)
                 and math.isfinite(self.norm_eps) and 0 <= self.norm_eps <= 0.1, "norm_eps",
                 f"must be a number in (0, 0.1] (or 0: the norm's default), got {self.norm_eps!r}")
        _positive_int(self, "relative_buckets", "relative_max_distance")
        _require(isinstance(self.decoder_d_ff, int) and not isinstance(self.decoder_d_ff, bool)
                 and self.decoder_d_ff >= 0, "decoder_d_ff",
                 f"must be a positive integer (or 0: d_ff), got {self.decoder_d_ff!r}")
        _require(self.position_encoding != "relative" or self.relative_buckets >= 4, "relative_buckets",
                 f"relative positions need at least 4 buckets, got {self.relative_buckets}")
        _require(not self.tie_embeddings or self.source_vocab_size == self.vocab_size, "tie_embeddings",
                 f"one token table for both sides needs one vocabulary size, not {self.source_vocab_size} "
                 f"and {self.vocab_size}")

    # -- the import options, resolved --------------------------------------------------------
    @property
    def source_vocab_size(self) -> int:
        """Rows of the source embedding."""
        return self.src_vocab_size or self.vocab_size

    @property
    def source_pad_id(self) -> int:
        """The source's PAD id: its embedding row stays zero, and its positions are masked."""
        return self.pad_id if self.src_pad_id == -1 else self.src_pad_id

    @property
    def separate_vocabularies(self) -> bool:
        return self.source_vocab_size != self.vocab_size or self.source_pad_id != self.pad_id

    @property
    def with_final_norms(self) -> bool:
        """A norm after the last layer of each stack: always with pre-norm, with post-norm when asked."""
        return self.final_norms or self.norm == "pre"

    @property
    def norm_epsilon(self) -> float:
        return self.norm_eps or NORM_EPS[self.norm_kind]

    def to_dict(self) -> dict[str, Any]:
        """Every field, but the import options only when they differ from their defaults."""
        return _without_defaults(super().to_dict(), IMPORT_FIELDS, _DEFAULTS)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """As every config, plus files written before presets had one field: three booleans
        (scale_attention, swap_cross_attention, causal_mask) become the bug they stood for."""
        if isinstance(data, dict) and LEGACY_BUG_FIELDS.keys() & data.keys():
            data = dict(data)
            for name, (healthy, bug) in LEGACY_BUG_FIELDS.items():
                if name in data and data.pop(name) != healthy:
                    data["bug"] = bug
        return super().from_dict(data)

    @property
    def decoder_ff_width(self) -> int:
        """The decoder's feed-forward width: d_ff unless decoder_d_ff says otherwise."""
        return self.decoder_d_ff or self.d_ff

    @property
    def d_k(self) -> int:
        """One head's query/key/value width."""
        return self.d_head or self.d_model // self.n_heads

    @property
    def attention_width(self) -> int:
        """The width of all query heads side by side: d_model, unless d_head says otherwise."""
        return self.n_heads * self.d_k


IMPORT_FIELDS = ("src_vocab_size", "src_pad_id", "final_norms", "norm_eps", "log_softmax", "d_head", "bias",
                 "scale_scores", "embed_scale", "embedding_norm", "relative_buckets", "relative_max_distance",
                 "tie_embeddings", "tie_output", "scale_output", "decoder_d_ff", "relative_per_layer")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig)}

FINE_TUNE_FIELDS = ("init", "accumulate", "label_smoothing", "weight_decay", "optimizer", "max_length",
                    "decay_all", "probes", "general", "forget_alarm", "watch", "src_lang", "tgt_lang",
                    "lora_rank", "lora_alpha", "lora_dropout", "lora_targets")
COURSE_FIELDS = ("eval_bleu", "keep_best", "patience")  # omitted at their defaults too
GUIDED_FIELDS = ("alignments", "valid_alignments", "guided_head", "guided_weight")  # omitted at defaults too
# how a step holds its memory (precision, gradient checkpointing): omitted at their defaults too
MEMORY_FIELDS = ("precision", "gradient_checkpointing")
_TRAIN_DEFAULTS: dict[str, Any] = {}  # filled below, once TrainConfig exists

# field of a TrainConfig before minitx 0.3 -> its name now (max_len meant the longest source there)
LEGACY_LENGTH_FIELDS = {"min_len": "min_source_len", "max_len": "max_source_len"}


def guided_head_parts(text: str) -> tuple[int, int]:
    """'LAYER:HEAD' (from 1) -> (layer, head); ValueError ('guided_head: ...') otherwise."""
    parts = str(text).strip().split(":")
    if len(parts) == 2 and all(p.isdigit() and int(p) >= 1 for p in parts):
        return int(parts[0]), int(parts[1])
    raise ValueError(f"guided_head: expected LAYER:HEAD such as 2:3 (each from 1), got {text!r}")


@dataclass(frozen=True)
class TrainConfig(_DictMixin):
    """How to train. Defaults are the reference recipe (docs/training.md)."""

    task: str = "reverse"  # a built-in task, or "data" for a file of pairs (`data`)
    # The digit tasks' source lengths, drawn from [min_source_len, max_source_len] (`lengths`). Not
    # ModelConfig.max_len, the positions the model holds: sources plus SOS and EOS must fit them.
    min_source_len: int = 4
    max_source_len: int = 10
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-9
    warmup: int = 400  # linear warmup steps, then the schedule
    schedule: str = "flat"  # after warmup: "flat", "cosine" to lr * lr_floor at `steps`, "linear" to 0
    lr_floor: float = 0.1  # where the cosine ends, as a fraction of lr
    clip_grad_norm: float = 1.0
    seed: int = 0
    device: str = "auto"  # "auto" = CUDA when available, else CPU
    eval_every: int = 500  # held-out exact-match evaluation period (0 = never)
    eval_size: int = 500
    bucket_lengths: bool = False  # one source length per batch: no padding, less compute per step
    # Generated sources (the digit tasks) have length L with probability proportional to
    # L ** length_power: 0 draws every length equally often, 2 favours the long sources, where
    # exact match fails first. A data file's pairs and the dates task keep their own lengths.
    length_power: float = 0.0
    bug: str = ""  # a deliberate bug preset from core.bugs (empty = none)
    until: float = 0.0  # stop at the first evaluation with at least this exact match (0 = off)
    probe_source: str = ""  # source whose attention the history snapshots (empty: the task's)
    data: str = ""  # a file of source/target pairs (TSV, CSV or JSONL): task "data"
    valid: str = ""  # held-out pairs; empty: a seeded share of `data` is held out
    tokens: str = "char"  # how a data file's text becomes tokens: "char" or "word"
    expect: str = ""  # the cross-attention pattern a data file should show, if one is known
    # Fine-tuning (docs/training.md, "Fine-tuning"); each default is what a run computed before
    # the field existed, and a config at the default omits it (to_dict), as ModelConfig's do.
    init: str = ""  # the model a fine-tune starts from (folder, model id, checkpoint, bundled name)
    accumulate: int = 1  # micro-batches of batch_size whose gradients make one optimiser step
    label_smoothing: float = 0.0  # torch's CrossEntropyLoss(label_smoothing), transformers' label_smoother
    weight_decay: float = 0.0  # AdamW's decoupled weight decay (0: Adam)
    decay_all: bool = False  # a fine-tune decays biases and norms too (default: as Trainer, not them)
    optimizer: str = "adamw"
    max_length: int = 0  # tokens a source or target (end token included) is cut to; 0: the model's positions
    # Watching a fine-tune (core/training/watching.py, docs/training.md "Watching a fine-tune")
    probes: tuple[str, ...] = ()  # sources decoded at each evaluation (empty: three held-out ones)
    general: str = ""  # pairs the model should still handle: forgetting measured on them
    forget_alarm: float = 0.2  # alarm: general loss this much above the base's (forgetting.py)
    watch: bool = True  # probes, forgetting and numerics at each evaluation of a fine-tune
    # The pair's languages (--src-lang/--tgt-lang): a multilingual model's codes, and the keys or
    # columns of a translation set's records that hold each side (core/data/pair_files.Columns).
    src_lang: str = ""
    tgt_lang: str = ""
    # The course's workflow (core/training/best.py, docs/training.md "The course's workflow"):
    # BLEU and chrF by generation at each evaluation (always on for a fine-tune), the best
    # evaluation's weights kept beside the run's file, and early stopping.
    eval_bleu: bool = False  # a data-file run from scratch also decodes its held-out pairs: loss, BLEU, chrF
    keep_best: str = ""  # "" or a KEEP_BEST metric: its best evaluation's weights in NAME.best.safetensors
    patience: int = 0  # stop after this many evaluations without improvement (0: never)
    # Memory (docs/training.md "Memory"; core/training/memory_estimate.py says what a run needs):
    # bf16 runs each step's forward and backward under bfloat16 autocast, the weights the
    # optimiser keeps staying float32; gradient checkpointing keeps no layer's activations for
    # backward but recomputes them there (torch.utils.checkpoint), the same gradients for less memory
    precision: str = "fp32"
    gradient_checkpointing: bool = False
    # LoRA (core/model/lora.py, docs/training.md "LoRA"): a fine-tune that trains only low-rank
    # adapters of the targeted projections (rank 0: a full fine-tune); peft's defaults otherwise
    lora_rank: int = 0
    lora_alpha: float = 8.0  # the adapters' scale is alpha / rank
    lora_dropout: float = 0.0  # dropout on the adapters' input
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS

    # Guided alignment (core/training/guided_alignment.py, docs/alignment.md "Guided training")
    alignments: str = ""  # word links (Pharaoh/talp) per pair of `data`: line i is pair i's
    valid_alignments: str = ""  # gold links of `valid`'s pairs: the head's AER at each evaluation
    guided_head: str = ""  # "LAYER:HEAD" (from 1): the cross-attention head taught the links
    # the guided loss's weight in a step's loss: Marian's --guided-alignment-weight default (its cost
    # "ce" too), a tenth of the translation loss, so one head is shaped without trading translation
    guided_weight: float = 0.1


    def to_dict(self) -> dict[str, Any]:
        """Every field, but the fine-tuning, course, guided and memory ones only when they differ
        from their defaults."""
        return _without_defaults(super().to_dict(), FINE_TUNE_FIELDS + COURSE_FIELDS + GUIDED_FIELDS
                                 + MEMORY_FIELDS, _TRAIN_DEFAULTS)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """As every config, plus files written before the source lengths had their own names:
        min_len and max_len there are min_source_len and max_source_len."""
        if isinstance(data, dict) and LEGACY_LENGTH_FIELDS.keys() & data.keys():
            data = {LEGACY_LENGTH_FIELDS.get(k, k): v for k, v in data.items()}
        return super().from_dict(data)

    @property
    def columns(self) -> Columns:
        """Which fields of the pair files are the source and the target (their languages)."""
        return Columns(self.src_lang or None, self.tgt_lang or None)

    @property
    def step_pairs(self) -> int:
        """Pairs one optimiser step takes in one process (all processes: times their number)."""
        return self.batch_size * self.accumulate

    def __post_init__(self) -> None:
        _positive_int(self, "min_source_len", "max_source_len", "steps", "batch_size", "eval_size",
                      "accumulate")
        _require(
            self.min_source_len <= self.max_source_len,
            "min_source_len",
            f"min_source_len={self.min_source_len} is larger than max_source_len={self.max_source_len}",
        )
        for name in ("lr", "eps", "clip_grad_norm"):
            value = getattr(self, name)
            _require(
                isinstance(value, (int, float)) and value > 0 and math.isfinite(value),
                name,
                f"must be a positive finite number, got {value!r}",
            )
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            _require(
                isinstance(value, (int, float)) and 0 <= value < 1,
                name,
                f"must be in [0, 1), got {value!r}",
            )
        for name in ("warmup", "eval_every", "seed"):
            value = getattr(self, name)
            _require(
                isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                name,
                f"must be a non-negative integer, got {value!r}",
            )
        _choice(self, "schedule", SCHEDULES)
        _require(isinstance(self.length_power, (int, float)) and not isinstance(self.length_power, bool)
                 and 0 <= self.length_power <= 8, "length_power",
                 f"must be a number in 0-8 (0: every length equally often), got {self.length_power!r}")
        _require(isinstance(self.lr_floor, (int, float)) and not isinstance(self.lr_floor, bool)
                 and 0 <= self.lr_floor <= 1, "lr_floor",
                 f"must be a fraction of lr in 0-1, got {self.lr_floor!r}")
        _require(
            self.bug == "" or self.bug in BUGS,
            "bug",
            f"must be one of {', '.join(BUGS)}; got {self.bug!r}",
        )
        _choice(self, "device", DEVICES)
        _require(
            self.task in TASKS or self.task == DATA_TASK, "task",
            f"must be one of {', '.join(TASKS)}; got {self.task!r}"
        )
        _require(bool(self.data) == (self.task == DATA_TASK), "data",
                 "a data file is its own task (task 'data'), and task 'data' needs a data file")
        _require(self.data or not self.valid, "valid", "held-out pairs need a data file to train on")
        _choice(self, "tokens", TOKENISATIONS)
        _choice(self, "expect", EXPECTATIONS)
        _require(isinstance(self.until, (int, float)) and not isinstance(self.until, bool)
                 and 0 <= self.until <= 1, "until", f"must be an accuracy in 0-1, got {self.until!r}")
        _require(not self.until or self.eval_every > 0, "until",
                 "needs evaluations to stop at: eval_every must be above 0")
        _require(isinstance(self.probe_source, str), "probe_source", "must be text such as '3 1 4'")
        if isinstance(self.probes, list):  # as JSON gives it back
            object.__setattr__(self, "probes", tuple(self.probes))
        _require(isinstance(self.probes, tuple)
                 and all(isinstance(p, str) and p.strip() for p in self.probes),
                 "probes", "must be sources as text, none empty")
        _require(not self.probes or self.init, "probes",
                 "several probes are a fine-tune's (--init); a run from scratch snapshots one --probe")
        _require(isinstance(self.general, str), "general", "must name a file of pairs")
        _require(not self.general or self.init, "general", "measures a fine-tune's forgetting: give --init")
        _require(isinstance(self.forget_alarm, (int, float)) and not isinstance(self.forget_alarm, bool),
                 "forget_alarm", f"must be a rise such as 0.2 (20%), not {self.forget_alarm!r}")
        _require(isinstance(self.watch, bool), "watch", "must be true or false")
        for name in ("src_lang", "tgt_lang"):
            _require(isinstance(getattr(self, name), str), name, "must be a code such as en or fra_Latn")
        self._check_lora()
        _choice(self, "optimizer", OPTIMIZERS)
        _require(isinstance(self.eval_bleu, bool), "eval_bleu", "must be true or false")
        _require(not self.eval_bleu or self.task == DATA_TASK, "eval_bleu",
                 "scores the outputs of a file's pairs as text: give --data FILE")
        _require(self.keep_best == "" or self.keep_best in KEEP_BEST, "keep_best",
                 f"must be one of {', '.join(KEEP_BEST)}; got {self.keep_best!r}")
        _require(self.keep_best in ("", "exact") or self.init or self.eval_bleu, "keep_best",
                 f"{self.keep_best} is measured by a fine-tune's evaluations (--init) or --eval-bleu's")
        _require(isinstance(self.patience, int) and not isinstance(self.patience, bool)
                 and self.patience >= 0, "patience",
                 f"must be a number of evaluations from 0 (off), got {self.patience!r}")
        _require(not (self.keep_best or self.patience) or self.eval_every > 0,
                 "keep_best" if self.keep_best else "patience",
                 "compares evaluations: eval_every must be above 0")
        self._check_guided()
        _choice(self, "precision", PRECISIONS)
        _require(isinstance(self.gradient_checkpointing, bool), "gradient_checkpointing",
                 "must be true or false")
        for name, top in (("label_smoothing", 1.0), ("weight_decay", math.inf)):
            value = getattr(self, name)
            _require(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                     and 0 <= value < top, name, f"must be a finite number from 0 (off), got {value!r}"
                     + (" (below 1)" if top == 1.0 else ""))
        _require(isinstance(self.max_length, int) and not isinstance(self.max_length, bool)
                 and (self.max_length == 0 or self.max_length >= 2), "max_length",
                 f"must be 2 or more tokens (0: the model's positions), got {self.max_length!r}")
        _require(isinstance(self.init, str), "init", "must name a model")
        _require(not self.init or self.task == DATA_TASK, "init",
                 "a fine-tune learns a file of pairs: give --data FILE")
        _require(not self.init or not self.bug, "bug", "a fine-tune trains the model it starts from, "
                 "without a deliberate bug")
        if self.probe_source and self.task != DATA_TASK:  # a data file's vocabulary is its own
            try:
                get_task(self.task, self.min_source_len, self.max_source_len).parse(self.probe_source)
            except ValueError as e:
                raise ValueError(f"probe_source: {e}") from None

    def _check_lora(self) -> None:
        if isinstance(self.lora_targets, (list, str)):  # as JSON (or one name) gives it back
            targets = (self.lora_targets,) if isinstance(self.lora_targets, str) else self.lora_targets
            object.__setattr__(self, "lora_targets", tuple(targets))
        check_lora(self.lora_rank, self.lora_alpha, self.lora_dropout, self.lora_targets, allow_off=True)
        _require(not self.lora_rank or self.init, "lora_rank", "LoRA adapts a model: give --init MODEL")
    def _check_guided(self) -> None:
        """Guided alignment's fields go together: a head and links to teach it, on a data file."""
        for name in ("alignments", "valid_alignments", "guided_head"):
            _require(isinstance(getattr(self, name), str), name, "must be text")
        if self.guided_head:
            guided_head_parts(self.guided_head)
        _require(bool(self.alignments) == bool(self.guided_head), "guided_head" if self.alignments
                 else "alignments", "guided alignment needs both --alignments FILE and --guided-head L:H")
        _require(not self.alignments or self.task == DATA_TASK, "alignments",
                 "links are a data file's pairs': give --data FILE")
        _require(not self.valid_alignments or (self.valid and self.alignments), "valid_alignments",
                 "gold links of --valid's pairs need --valid FILE and --alignments FILE")
        _require(isinstance(self.guided_weight, (int, float)) and not isinstance(self.guided_weight, bool)
                 and math.isfinite(self.guided_weight) and self.guided_weight > 0, "guided_weight",
                 f"must be a positive finite number, got {self.guided_weight!r}")

    def lr_at(self, step: int, restart: tuple[int, float] | None = None, schedule_from: int = 0) -> float:
        """Learning rate for 1-based `step`: linear warmup, then flat or cosine; or "linear",
        transformers' Trainer's default schedule as Trainer steps it (linear_factor).

        `restart` = (step k, lr at k): a run resumed at step k with a different `steps` decays
        from where it was (never higher) to the floor at the new `steps` (docs/curves.md).
        `schedule_from` = k: a run resumed at step k with a new schedule (`--restart-schedule`)
        warms up and decays again over steps k+1 to `steps`, as a fresh run of steps - k would."""
        if restart is not None and step > restart[0]:
            start, start_lr = restart
            if self.schedule == "linear":  # on down to 0 at the new `steps`
                return start_lr * max(0.0, (self.steps - step + 1) / max(1, self.steps - start))
            floor = self.lr_floor * self.lr if self.schedule == "cosine" else start_lr
            progress = min(1.0, (step - start) / max(1, self.steps - start))
            return floor + (start_lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))
        if schedule_from and step > schedule_from:
            step -= schedule_from
        else:
            schedule_from = 0
        if self.schedule == "linear":
            return self.lr * linear_factor(step - 1, self.warmup, self.steps - schedule_from)
        if self.warmup and step <= self.warmup:
            return self.lr * step / self.warmup
        if self.schedule == "flat":
            return self.lr

        span = max(1, self.steps - schedule_from - self.warmup)
        progress = min(1.0, (step - self.warmup) / span)
        floor = self.lr_floor
        return self.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


_TRAIN_DEFAULTS.update({f.name: f.default for f in dataclasses.fields(TrainConfig)})


def linear_factor(done: int, warmup: int, total: int) -> float:
    """transformers' get_linear_schedule_with_warmup after `done` scheduler steps: up from 0 over
    `warmup` steps, then down to 0 at `total`. Trainer steps the scheduler after each optimiser
    step, so its 1-based step k uses the factor after k - 1 (0 at the first step when warming up)."""
    if done < warmup:
        return done / max(1, warmup)
    return max(0.0, (total - done) / max(1, total - warmup))


@dataclass(frozen=True)
class Recipe:
    """A named pair of configs: how a model is shaped and trained."""

    name: str
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def reference_recipe() -> Recipe:
    """The reference recipe exactly (docs/training.md): post-norm, explicit attention, dropout
    0.1, batch 64, warmup 400, then flat."""
    return Recipe("reference", ModelConfig(), TrainConfig())


def fast_recipe() -> Recipe:
    """minitx's default: the same 235,981-parameter model, trained to 99.9% exact match on its
    held-out evaluation in a fraction of the reference's time. What each setting changes, why,
    and what else was tried: docs/training.md, "The default (fast) recipe"."""
    return Recipe(
        "fast",
        ModelConfig(dropout=0.0, attention="fused"),
        TrainConfig(lr=3e-3, warmup=50, schedule="cosine", lr_floor=0.01, steps=900, batch_size=32,
                    bucket_lengths=True, length_power=2.0, eval_every=50, eval_size=2000,
                    until=0.999),
    )


# The parts in which current large models differ from the reference, as ModelConfig fields (the
# option names are the same, so the lab applies them like typed options).
MODERN_COMPONENTS = {"norm": "pre", "norm_kind": "rms", "position_encoding": "rope",
                     "activation": "swiglu", "kv_heads": 2}


def modern_recipe() -> Recipe:
    """The fast recipe's training with every modern swap at once: pre-norm with RMSNorm, rotary
    positions, a SwiGLU feed-forward and 2 K/V heads for the 4 query heads (docs/components.md
    measures what it reaches)."""
    fast = fast_recipe()
    return Recipe("modern", fast.model.replace(**MODERN_COMPONENTS), fast.train)


RECIPES = {"fast": fast_recipe, "reference": reference_recipe, "modern": modern_recipe}
DEFAULT_RECIPE = "fast"  # what `minitx train` and the TUI start from


def recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"recipe: must be one of {', '.join(RECIPES)}; got {name!r}")
    return RECIPES[name]()
