"""The Trainer's step with one flat buffer for weights, gradients and Adam moments, against the
same step over a list of tensors (what minitx did before), side by side in one run.

    .venv/bin/python benchmarks/optimizer_step.py [--steps 300] [--smoke]

Two Trainers of the default recipe (same seed, same data) take turns step by step; one keeps
core/optim.FusedAdam's flat buffers, the other is given a per-tensor optimizer: torch's
clip_grad_norm_(foreach=True) and the fused Adam kernel over the 88 parameter tensors, gradients
dropped after each step. Reported: milliseconds per whole training step for each, and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _options import add_run_options, apply_run_options

from minitx.core.config import fast_recipe
from minitx.core.training.trainer import Trainer


class PerTensorAdam:
    """The step as a list of tensors: one norm and one Adam update per parameter tensor."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float], eps: float):
        self.params, self.param_groups, self.betas, self.eps = params, [{"lr": lr}], betas, eps
        self.steps = [torch.zeros(()) for _ in params]
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        return torch.nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True)

    @torch.no_grad()
    def step(self) -> None:
        torch._foreach_add_(self.steps, 1)
        torch._fused_adam_(self.params, [p.grad for p in self.params], [m for m, _ in self.moments],
                           [v for _, v in self.moments], [], self.steps, amsgrad=False,
                           lr=self.param_groups[0]["lr"], beta1=self.betas[0], beta2=self.betas[1],
                           weight_decay=0.0, eps=self.eps, maximize=False, grad_scale=None,
                           found_inf=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="5 timed steps")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    steps = 5 if args.smoke else args.steps
    recipe = fast_recipe()
    cfg = recipe.train.replace(until=0.0, eval_every=0, steps=10**6, device=args.device)
    trainers = {"flat buffer": Trainer(recipe.model, cfg), "per tensor": Trainer(recipe.model, cfg)}
    listed = trainers["per tensor"]
    listed.optimizer = PerTensorAdam(list(listed.model.parameters()), cfg.lr, (cfg.beta1, cfg.beta2),
                                     cfg.eps)
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for step in range(10 + steps):  # the first 10: warm-up
        for name, trainer in trainers.items():
            start = time.perf_counter()
            trainer.train_step()
            if step >= 10:
                times[name].append(time.perf_counter() - start)
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}, "
          f"{steps} timed steps each, default recipe (batch {cfg.batch_size})")
    for name, values in times.items():
        print(f"{name:>12}: {statistics.median(values) * 1e3:6.2f} ms a step (median), "
              f"{sum(values) / len(values) * 1e3:6.2f} ms (mean)")
    ratio = sum(times["flat buffer"]) / sum(times["per tensor"])
    print(f"ratio flat buffer / per tensor = {ratio:.3f}")


if __name__ == "__main__":
    main()
