"""How much memory a fine-tune will take at its peak, estimated before anything is built, and
whether that fits the machine (`minitx train --init` refuses in one line, naming the options that
would make it fit, rather than being killed by the system half-way; the app's Train form shows the
estimate under the form).

The estimate adds up, in bytes:
- weights: every parameter at 4 bytes (float32), or the frozen ones at their precision where
  they are held in it (LoRA's base under bf16);
- gradients: the trained parameters at 4 bytes;
- optimiser: AdamW's two moments (8 bytes a trained parameter); Adafactor's factored second
  moment (a matrix's row and column sums, a vector's own: 4 bytes each);
- activations: what backward keeps of the largest batch (the training pairs' longest source and
  target, `batch_size` pairs at once): per layer and position, ACTIVATION_WIDTHS d_model-wide and
  d_ff-wide tensors and the attention probabilities; the logits, their log-softmax and their
  gradient (3 x positions x vocabulary); with checkpointing, each layer's input only, plus one
  layer's own when backward recomputes it; under bf16 autocast the products' outputs at 2 bytes;
- base: the model the fine-tune started from, kept beside it when watching measures it at
  every evaluation (--general pairs, core/training/watching.py; a LoRA's is itself with its
  adapters off, no second copy), and a bf16 LoRA's float32 weights where the caller keeps the
  base it loaded (the app) beside the bf16 copies of its matrices;
- process: Python, torch and the tokenisers (PROCESS_BYTES).
A bf16 LoRA of a base the caller gives up (the command line) has another peak, before training:
its float32 weights as they were read (`loading`), whose matrices then become bf16 one by one;
the estimate is the larger of that and the sum above (docs/training.md, NLLB-1.3B).
It is an estimate, within a factor of ESTIMATE_FACTOR of the peak measured
(tests/core/test_memory_estimate.py; benchmarks/fine_tune_memory.py at real sizes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.model import lora
from minitx.core.model.transformer import Seq2Seq

PROCESS_BYTES = 400 * 2**20  # python, torch, tokenisers and the data: `import torch` alone is ~220 MiB
# tensors backward keeps per layer and position, in units of d_model and of d_ff: the norms' and
# projections' inputs, q/k/v, the attention output, residual sums, dropout masks (encoder: self
# attention and a feed-forward block; decoder: self and cross attention and a feed-forward block)
ACTIVATION_WIDTHS = {"encoder": (12, 3), "decoder": (20, 3)}
ESTIMATE_FACTOR = 1.5  # the peak measured is within this factor of the estimate, either way
SMALLER_BATCHES = (8, 4, 2, 1)  # batch sizes a refusal tries, under the one asked for
SUGGESTED_LORA_RANK = 16  # the rank a refusal suggests
GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of each part of a fine-tune's peak."""

    weights: int
    gradients: int
    optimiser: int
    activations: int
    base: int
    process: int
    loading: int = 0  # a given base's float32 weights as read, before a bf16 LoRA makes them bf16

    @property
    def training(self) -> int:
        """The sum of the parts but `loading`: the peak while the run trains."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "loading")

    @property
    def loading_is_peak(self) -> bool:
        """Whether reading the base takes more than training will."""
        return self.loading + self.process > self.training

    @property
    def total(self) -> int:
        return max(self.training, self.loading + self.process)

    def parts(self) -> str:
        """'weights 0.30, gradients 0.30, optimiser 0.59, activations 0.21, process 0.42 GB', and
        where loading the base is the peak, 'loading 5.46, process 0.42 GB' before it."""
        shown = [f"{f.name} {getattr(self, f.name) / GB:.2f}" for f in fields(self)
                 if getattr(self, f.name) and f.name != "loading"]
        training = ", ".join(shown) + " GB"
        if not self.loading_is_peak:
            return training
        return f"loading {self.loading / GB:.2f}, process {self.process / GB:.2f} GB; then {training}"


def shapes_model(model_cfg: ModelConfig) -> Seq2Seq:
    """A model of `model_cfg` on torch's meta device: its parameters' shapes, no memory."""
    with torch.device("meta"):
        return Seq2Seq(model_cfg)


def optimiser_bytes(trained: list[torch.Tensor], optimizer: str) -> int:
    """The optimiser's state: AdamW two moments a parameter; Adafactor a matrix's row and column
    second moments (its factored estimate) and a vector's own."""
    if optimizer == "adafactor":
        return 4 * sum(p.shape[-2] + p.shape[-1] if p.dim() >= 2 else p.numel() for p in trained)
    return 8 * sum(p.numel() for p in trained)


def activation_bytes(cfg: ModelConfig, batch: int, source: int, target: int, checkpointing: bool,
                     bf16: bool) -> int:
    """What backward keeps of one batch of `batch` pairs of `source` and `target` positions."""
    size = 2 if bf16 else 4
    d, ff, h = cfg.d_model, cfg.d_ff, cfg.n_heads
    wide_e, ff_e = ACTIVATION_WIDTHS["encoder"]
    wide_d, ff_d = ACTIVATION_WIDTHS["decoder"]
    # per layer, one pair: (its positions x widths) and the attention probabilities (h x q x k, twice:
    # softmax's output and dropout's)
    encoder = source * (wide_e * d + ff_e * ff) + 2 * h * source * source
    decoder = target * (wide_d * d + ff_d * cfg.decoder_ff_width) + 2 * h * target * (target + source)
    if checkpointing:  # each layer's input kept; one layer's own while backward recomputes it
        layers = cfg.n_encoder_layers * source * d + cfg.n_decoder_layers * target * d + max(encoder, decoder)
    else:
        layers = cfg.n_encoder_layers * encoder + cfg.n_decoder_layers * decoder
    logits = 3 * target * cfg.vocab_size * 4  # the logits, their log-softmax, their gradient: float32
    return batch * (layers * size + logits)


def estimate(model_cfg: ModelConfig, train_cfg: TrainConfig, source: int, target: int,
             model: Seq2Seq | None = None, watched_base: bool = False,
             base_kept: bool = True) -> MemoryEstimate:
    """The peak of a fine-tune of `model_cfg` under `train_cfg` whose longest training pair has
    `source` and `target` positions. `model`: the model as it will train (which parameters
    train, their dtypes: a LoRA model), else one of model_cfg's, every parameter trained.
    `watched_base`: the base is kept beside it (watching with general pairs). `base_kept`: the
    caller holds the base it loaded through the run (else it gives it to the run)."""
    bf16 = train_cfg.precision == "bf16"
    spec = lora.LoraSpec.of(train_cfg)
    model = model if model is not None else shapes_model(model_cfg)
    params = list({id(p): p for p in model.parameters()}.values())  # a tied table once
    read = 4 * sum(p.numel() for p in params)  # the base's weights as loaded: float32
    if spec is None:
        trained = [p for p in params if p.requires_grad]
        weights = sum(p.numel() * (4 if p.requires_grad else p.element_size()) for p in params)
    else:  # every weight frozen (its matrices in bf16 under bf16), rank x (in + out) adapters trained
        trained = [torch.empty(spec.rank, m.in_features + m.out_features, device="meta")
                   for m in map(model.get_submodule, lora.target_modules(model, spec))]
        weights = sum(p.numel() * (2 if bf16 and p.dim() >= 2 else 4) for p in params) \
            + 4 * sum(t.numel() for t in trained)
    return MemoryEstimate(
        weights=weights,
        gradients=4 * sum(p.numel() for p in trained),
        optimiser=optimiser_bytes(trained, train_cfg.optimizer),
        activations=activation_bytes(model_cfg, train_cfg.batch_size, source, target,
                                     train_cfg.gradient_checkpointing, bf16),
        base=(weights if watched_base and spec is None else 0) + (read if spec and bf16 and base_kept else 0),
        process=PROCESS_BYTES,
        loading=read if spec and bf16 and not base_kept else 0)


def available_bytes(device: torch.device) -> int:
    """What a run on `device` may take: a GPU's memory, or the RAM free now (MemAvailable) plus
    what this process holds already (the base it loaded counts in the estimate)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory + PROCESS_BYTES
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        with open("/proc/self/statm", encoding="ascii") as f:
            held = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return free + held
    except (OSError, StopIteration, ValueError):  # not Linux: nothing to compare with
        return 0


BF16_EMULATED = ("this device has no bf16 instructions (a CPU without avx512_bf16 or AMX): --precision bf16 "
                 "saves memory but its matrix products are emulated, many times slower than fp32")


def bf16_is_fast(device: torch.device) -> bool:
    """Whether `device` multiplies bfloat16 matrices in hardware: a GPU that supports bf16, or a
    CPU with avx512_bf16 or AMX. Elsewhere torch emulates them, many times slower than float32
    (docs/performance.md measured 110x on an avx2 CPU), so bf16 saves memory only."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:  # torch's own probes of the CPU's instructions
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except AttributeError:  # an older torch: assume the hardware does
        return True


class WontFit(ValueError):
    """A fine-tune whose estimated peak is more than the machine has."""


def option_flags(train_cfg: TrainConfig, asked: TrainConfig) -> str:
    """The command-line options that turn `asked` into `train_cfg`."""
    flags = []
    if train_cfg.lora_rank != asked.lora_rank:
        flags.append(f"--lora {train_cfg.lora_rank}")
    if train_cfg.precision != asked.precision:
        flags.append(f"--precision {train_cfg.precision}")
    if train_cfg.gradient_checkpointing and not asked.gradient_checkpointing:
        flags.append("--gradient-checkpointing")
    if train_cfg.batch_size != asked.batch_size:
        flags.append(f"--batch-size {train_cfg.batch_size}")
    return " ".join(flags)


def check_fits(model_cfg: ModelConfig, train_cfg: TrainConfig, source: int, target: int,
               device: torch.device, watched_base: bool = False,
               available: int | None = None, bf16_fast: bool | None = None,
               base_kept: bool = True) -> MemoryEstimate:
    """The estimate, or WontFit: one line with the estimate, what the machine has, and the first
    settings (checkpointing, bf16, both, then LoRA with each, then the leanest of them without
    bf16 and with it at smaller batches) that would fit; where the device emulates bf16
    (bf16_is_fast), the settings without it first, bf16 only where nothing else fits, and said
    to be slow."""
    have = available_bytes(device) if available is None else available
    fast = bf16_is_fast(device) if bf16_fast is None else bf16_fast

    def needs(cfg: TrainConfig) -> MemoryEstimate:
        return estimate(model_cfg, cfg, source, target, watched_base=watched_base, base_kept=base_kept)

    need = needs(train_cfg)
    if not have or need.total <= have:
        return need
    tries = [train_cfg.replace(gradient_checkpointing=True), train_cfg.replace(precision="bf16"),
             train_cfg.replace(precision="bf16", gradient_checkpointing=True)]
    if not train_cfg.lora_rank:  # then LoRA: adapters only, the base frozen
        tries += [cfg.replace(lora_rank=SUGGESTED_LORA_RANK) for cfg in (train_cfg, *tries)]
    leanest = [*[c for c in tries if c.precision != "bf16"][-1:], tries[-1]]  # without bf16, with it
    tries += [cfg.replace(batch_size=b) for b in SMALLER_BATCHES if b < train_cfg.batch_size
              for cfg in leanest]
    if not fast:  # emulated bf16 costs far more time than it saves: the others first
        tries = [c for c in tries if c.precision != "bf16"] + [c for c in tries if c.precision == "bf16"]
    where = "on the GPU" if device.type == "cuda" else "of RAM"
    line = (f"memory: this fine-tune needs about {need.total / GB:.1f} GB at its peak ({need.parts()}) "
            f"and {have / GB:.1f} GB {where} is available")
    tried = []
    for cfg in tries:
        fits = needs(cfg)
        tried.append((fits, cfg))
        if fits.total <= have:
            slow = " (slow here: this device has no bf16 instructions)" \
                if cfg.precision == "bf16" and train_cfg.precision != "bf16" and not fast else ""
            raise WontFit(f"{line}; it would fit with {option_flags(cfg, train_cfg)} "
                          f"(about {fits.total / GB:.1f} GB){slow}")
    lowest, least = min(tried, key=lambda pair: pair[0].total)
    why = "its base's float32 weights, as they are read, are too many for it" if lowest.loading_is_peak else \
        "the weights, their gradients and the optimiser's moments alone are too many for it"
    raise WontFit(f"{line}; even {option_flags(least, train_cfg)} needs {lowest.total / GB:.1f} GB: {why}")


def check_fine_tune(model_cfg: ModelConfig, train_cfg: TrainConfig, task,
                    device: torch.device, base_kept: bool = True) -> MemoryEstimate:
    """check_fits of a planned fine-tune: its task's longest training pairs make its biggest
    batch (plus the start and end tokens), and watching keeps the base for --general pairs."""
    train = task.train
    return check_fits(model_cfg, train_cfg, int(train.source_lengths().max()) + 2,
                      int(train.target_lengths().max()) + 2, device,
                      watched_base=bool(train_cfg.general and train_cfg.watch), base_kept=base_kept)
