"""Adam for the Trainer: torch's fused Adam kernel, called directly.

torch.optim.Adam(fused=True) runs the same kernel, but its methods are wrapped to keep
torch.compile out of them, and the first call of any of them imports torch._dynamo (and sympy):
1.5 to 2.5 s of every training process, more than the whole start-up otherwise (cProfile of
`minitx train --steps 1` on this project's 2-core machine). This class keeps its state the way
torch.optim does (`state[param]` = step, exp_avg, exp_avg_sq; `param_groups[0]["lr"]`), so the
Trainer and its checkpoints read it unchanged, and its steps are bit for bit those of
torch.optim.Adam(fused=True) (tests/core/test_optim.py checks it).
"""

from __future__ import annotations

import torch


class FusedAdam:
    """Adam without weight decay over a fixed list of parameters on one device."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float],
                 eps: float) -> None:
        self.params = list(params)
        self.param_groups = [{"lr": lr}]  # the Trainer sets each step's lr here
        self.betas, self.eps = betas, eps
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        params = [p for p in self.params if p.grad is not None]
        if not params:
            return
        for p in params:
            if p not in self.state:  # as torch.optim does: the step count is a float32 scalar
                self.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=p.device),
                                 "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        states = [self.state[p] for p in params]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params, [p.grad for p in params], [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states], [], steps, amsgrad=False,
            lr=self.param_groups[0]["lr"], beta1=self.betas[0], beta2=self.betas[1],
            weight_decay=0.0, eps=self.eps, maximize=False, grad_scale=None, found_inf=None)
