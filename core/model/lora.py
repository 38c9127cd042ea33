"""LoRA adapters on minitx's own network, through peft (the field's library: its LoraConfig and its
injection into any torch module with nn.Linear layers), never hand-written low-rank layers.

A LoRA fine-tune (`minitx train --init MODEL --lora R`) freezes every weight of the base and
trains, beside each targeted linear layer W, two small matrices A (r x d_in) and B (d_out x r):
the layer computes x W^T + scale * (x A^T) B^T, scale = alpha / r (peft's rule). What this
module does with them:

- `add_adapters` injects them (peft's inject_adapter_in_model) into the targeted projections,
  named in minitx's module names (q_proj, k_proj, v_proj, out_proj of every attention block);
- `adapters_off` is peft's disable_adapter on the model itself: the base, with no second copy
  in memory (what watching a LoRA fine-tune measures against);
- `low_rank` gives an adapted layer's A, B and scale to code that reads weights instead of
  calling the layer (the cached decoder, core/model/kv_cache.py: x W^T + scale (x A^T) B^T as
  peft's forward, no merged copy of W);
- `adapter_tensors` / `load_adapter_tensors`: the adapters under minitx's names (what a LoRA
  file holds), `merge_file_adapters` folds a file's into the base for good, without peft (what
  a command opens: no seconds of importing transformers);
- `update_sizes`: each adapted layer's ||scale B A|| / ||W||, how far it moved from its base.

peft imports transformers (seconds), so it is imported here only when LoRA is used; without it,
LoraUnavailable says what to install in one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from minitx.core.config import DEFAULT_LORA_TARGETS, TrainConfig, check_lora
from minitx.core.model.transformer import Seq2Seq

ADAPTER = "default"  # peft's adapter name; a model carries one set of adapters
INSTALL = "pip install 'minitx[lora]'"


class LoraUnavailable(ImportError):
    """peft is not installed: one line naming the extra to install."""


def peft_module():
    """The peft package (imported on first use), or LoraUnavailable."""
    try:
        import peft
    except ImportError:
        raise LoraUnavailable(f"LoRA needs the peft package: {INSTALL}") from None
    return peft


@dataclass(frozen=True)
class LoraSpec:
    """A LoRA's settings: rank r, alpha (scale alpha / r), dropout on the adapters' input, and
    the projections it adapts (minitx's names, LORA_TARGETS)."""

    rank: int
    alpha: float = 8.0
    dropout: float = 0.0
    targets: tuple[str, ...] = DEFAULT_LORA_TARGETS

    def __post_init__(self) -> None:
        if isinstance(self.targets, list):  # as JSON gives it back
            object.__setattr__(self, "targets", tuple(self.targets))
        check_lora(self.rank, self.alpha, self.dropout, self.targets)

    @classmethod
    def of(cls, cfg: TrainConfig) -> LoraSpec | None:
        """A run's LoRA (None: a full fine-tune, or a run from scratch)."""
        if not cfg.lora_rank:
            return None
        return cls(cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout, cfg.lora_targets)

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    def to_dict(self) -> dict:
        return {"rank": self.rank, "alpha": self.alpha, "dropout": self.dropout,
                "targets": list(self.targets)}

    @classmethod
    def from_dict(cls, data: dict) -> LoraSpec:
        if not isinstance(data, dict):
            raise ValueError("the LoRA settings are not an object")
        return cls(data.get("rank"), data.get("alpha", 8.0), data.get("dropout", 0.0),
                   tuple(data.get("targets", DEFAULT_LORA_TARGETS)))

    def peft_config(self, modules: list[str]):
        """peft's LoraConfig adapting exactly `modules` (full module names)."""
        return peft_module().LoraConfig(r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout,
                                        target_modules=modules, bias="none")


@dataclass(frozen=True)
class LoraFile:
    """What a LoRA file says of its adapters: their settings, the record of the base they adapt
    (core/training/fine_tune.py's base_record: name, folder or model id, sha256 of its weights),
    and, read from a file, the adapters themselves (adapter_tensors' names)."""

    spec: LoraSpec
    base: dict
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {**self.spec.to_dict(), "base": self.base}

    @classmethod
    def from_dict(cls, data: dict) -> LoraFile:
        base = data.get("base") if isinstance(data, dict) else None
        if not isinstance(base, dict) or not isinstance(base.get("sha256"), str):
            raise ValueError("no record of the base (its sha256)")
        return cls(LoraSpec.from_dict(data), base)


def target_modules(model: Seq2Seq, spec: LoraSpec) -> list[str]:
    """The full names of the model's linear layers the spec adapts, in the model's order."""
    return [name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and name.rpartition(".")[2] in spec.targets
            and name.startswith(("encoder.", "decoder."))]


def add_adapters(model: Seq2Seq, spec: LoraSpec) -> list[str]:
    """Inject the spec's adapters into `model` in place (A drawn from torch's global RNG as peft
    draws it, B zeros: the model computes what it did); every other weight frozen. The adapted
    layers' names."""
    modules = target_modules(model, spec)
    for p in model.parameters():
        p.requires_grad_(False)
    peft_module().inject_adapter_in_model(spec.peft_config(modules), model, ADAPTER)
    return modules


def adapted_layers(model: nn.Module) -> dict[str, nn.Module]:
    """module name -> peft's LoRA layer, for every adapted layer of the model (none: {}, and peft
    not imported)."""
    if not has_adapters(model):
        return {}
    layer_type = peft_module().tuners.lora.LoraLayer
    return {name: m for name, m in model.named_modules() if isinstance(m, layer_type)}


def has_adapters(model: nn.Module) -> bool:
    """Whether the model carries LoRA adapters, asked without importing peft."""
    return any(name.endswith(".lora_A") for name, _ in model.named_modules())


@contextmanager
def adapters_off(model: nn.Module) -> Iterator[None]:
    """peft's disable_adapter on the model itself: within, it computes as its base did (the
    adapters' parameters keep their values and their requires_grad afterwards)."""
    layers = list(adapted_layers(model).values())
    trained = {id(p): p.requires_grad for layer in layers for p in layer.parameters()}
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)
            for p in layer.parameters():
                p.requires_grad_(trained[id(p)])


def delta(lora_a: torch.Tensor, lora_b: torch.Tensor, scale: float) -> torch.Tensor:
    """(B @ A) * scale, (d_out, d_in): what an adapter adds to its layer's weight, computed as
    peft's get_delta_weight computes it (so a merge here is peft's, to the bit)."""
    return (lora_b @ lora_a) * scale


def delta_weight(layer: nn.Module) -> torch.Tensor:
    """delta() of one adapted layer, (d_out, d_in), in its weight's dtype."""
    return delta(layer.lora_A[ADAPTER].weight, layer.lora_B[ADAPTER].weight, layer.scaling[ADAPTER])


def low_rank(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """(A (r, d_in), B (d_out, r), scale) of an adapted layer whose adapter is on now, for code
    that reads a layer's weights rather than calling it (the cached decoder,
    core/model/kv_cache.py); None for any other layer, or with its adapters off."""
    adapters = dict(module.named_children()).get("lora_A")
    if adapters is None or module.disable_adapters or module.merged:
        return None
    return module.lora_A[ADAPTER].weight, module.lora_B[ADAPTER].weight, module.scaling[ADAPTER]


def hold_base_in(model: nn.Module, dtype: torch.dtype) -> None:
    """A LoRA's frozen base held in `dtype` (bf16: half its memory): its matrices, every parameter
    of two or more dimensions but the adapters; norms and biases stay float32. Each matrix's old
    tensor is let go as its copy is made, so one nothing else holds is freed there and then."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and ".lora_" not in name:
                p.data = p.data.to(dtype)


def base_in_float32(model: nn.Module, original: nn.Module | None = None) -> None:
    """A bf16 run's frozen base (held in bf16 under LoRA) back in float32, for use outside the
    run's autocast (the app explores an ended run): `original`'s own weights where given (the
    model the run started from, its names without peft's `base_layer`), else the bf16 values
    widened (what they were rounded to)."""
    source = dict(original.named_parameters()) if original is not None else {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dtype != torch.bfloat16:
                continue
            kept = source.get(name.replace(".base_layer", ""))
            usable = kept is not None and kept.shape == p.shape and kept.dtype == torch.float32
            p.data = kept.detach().clone() if usable else p.data.float()


def adapter_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters under minitx's names: '<module>.lora_A' (r, d_in) and '<module>.lora_B'
    (d_out, r) for each adapted layer (what a LoRA file holds)."""
    out = {}
    for name, layer in adapted_layers(model).items():
        out[f"{name}.lora_A"] = layer.lora_A[ADAPTER].weight.detach()
        out[f"{name}.lora_B"] = layer.lora_B[ADAPTER].weight.detach()
    return out


def expected_adapter_shapes(model: Seq2Seq, spec: LoraSpec) -> dict[str, tuple[int, int]]:
    """What adapter_tensors() of this model with these adapters holds: name -> shape."""
    shapes = {}
    modules = dict(model.named_modules())
    for name in target_modules(model, spec):
        linear = modules[name]
        shapes[f"{name}.lora_A"] = (spec.rank, linear.in_features)
        shapes[f"{name}.lora_B"] = (linear.out_features, spec.rank)
    return shapes


def load_adapter_tensors(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy adapter_tensors()-named tensors into the model's adapters (every one present)."""
    layers = adapted_layers(model)
    with torch.no_grad():
        for name, layer in layers.items():
            layer.lora_A[ADAPTER].weight.copy_(tensors[f"{name}.lora_A"])
            layer.lora_B[ADAPTER].weight.copy_(tensors[f"{name}.lora_B"])


def merge_file_adapters(model: Seq2Seq, adapters: LoraFile) -> Seq2Seq:
    """Fold a LoRA file's adapters into a plain model's weights (W + scale B A), without peft:
    an ordinary Seq2Seq computing the adapted model (what every command opens)."""
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name in adapters.tensors:
            if name.endswith(".lora_A"):
                module = name.removesuffix(".lora_A")
                weight = modules[module].weight
                update = delta(adapters.tensors[name], adapters.tensors[f"{module}.lora_B"],
                               adapters.spec.scale)
                weight.data = weight.data + update.to(weight.device, weight.dtype)
    return model


def relative_update(update: torch.Tensor, weight: torch.Tensor) -> float:
    """||update|| / ||weight|| (Frobenius norms): an adapter's update as a share of the base's
    weight it is added to (inf on a zero weight)."""
    norm = float(weight.float().norm())
    return float(update.float().norm()) / norm if norm else float("inf")


def update_sizes(model: nn.Module) -> list[tuple[str, float]]:
    """(module name, ||scale B A|| / ||W||) for each adapted layer: how far the fine-tune moved
    the layer from its base, as a share of the base's weight."""
    with torch.no_grad():
        return [(name, relative_update(delta_weight(layer), layer.get_base_layer().weight))
                for name, layer in adapted_layers(model).items()]


def file_update_sizes(adapters: LoraFile, base: nn.Module) -> list[tuple[str, float]]:
    """update_sizes() of a LoRA file's adapters on `base` (its base's weights), without peft."""
    weights = dict(base.named_parameters())
    sizes = []
    with torch.no_grad():
        for name in adapters.tensors:
            if name.endswith(".lora_A"):
                module = name.removesuffix(".lora_A")
                update = delta(adapters.tensors[name], adapters.tensors[f"{module}.lora_B"],
                               adapters.spec.scale)
                sizes.append((module, relative_update(update, weights[f"{module}.weight"])))
    return sizes
