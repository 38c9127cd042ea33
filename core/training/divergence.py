"""Where a diverged step first went non-finite: the layer a person looks at first.

The step is computed again under forward hooks on every module, in the order the modules run;
the first whose output holds NaN or infinity is named (none: the forward pass was finite and
the gradient overflowed).
"""

from __future__ import annotations

import torch


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


@torch.no_grad()
def first_non_finite_layer(model: torch.nn.Module, src: torch.Tensor,
                           decoder_input: torch.Tensor) -> str | None:
    """The first module (by name, in the order they ran) whose output is not finite on this
    batch ((B, S) sources, (B, T) decoder inputs); None when the forward pass is finite."""
    found: list[str] = []
    handles = []

    def hook(name):
        def check(module, args, output):
            if not found and any(t.is_floating_point() and not bool(torch.isfinite(t).all())
                                 for t in _tensors(output)):
                found.append(name)
        return check

    for name, module in model.named_modules():
        if name and not list(module.children()):  # the leaves: the layers that compute
            handles.append(module.register_forward_hook(hook(name)))
    try:
        model(src, decoder_input)
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None
