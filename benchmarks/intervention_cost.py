"""What an intervention costs: greedy decoding of the bundled reverse model with nothing done to
it, with one head zero-ablated (that block takes the explicit attention path), and recording every
activation (what patching and the logit lens do), each as a ratio to the plain decode.

    .venv/bin/python benchmarks/intervention_cost.py [--smoke]

All variants run in the same process on the same inputs, alternating, so a burst of load on a
shared machine hits all of them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _options import add_run_options, apply_run_options

from minitx.checkpoints import load
from minitx.core.interp.decode import greedy_decode
from minitx.core.interp.interventions import Interventions, Recording, ablation


def timed_ms(model, src, interventions: Interventions) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    with interventions.applied(model):
        out = greedy_decode(model, src)
    if out.is_cuda:
        torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - start), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one repeat, to check the script runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    model = load("reverse").model.to(args.device)
    variants = {
        "nothing done": lambda: Interventions(),
        "cross:L2.H1 zero": lambda: ablation(model, ["cross:L2.H1"]),
        "every head zero": lambda: ablation(model, ["enc", "self", "cross"]),
        "recording all": lambda: Interventions(record=Recording()),
    }
    repeats = 1 if args.smoke else 15
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}")
    print(f"{'batch':>5} {'variant':<18} {'ms/decode':>10} {'ratio to plain':>15}")
    for batch in (1, 256):
        src = torch.randint(0, 10, (batch, 10), generator=torch.Generator().manual_seed(1)).to(args.device)
        times: dict[str, list[float]] = {name: [] for name in variants}
        ratios: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(repeats):
            plain, _ = timed_ms(model, src, Interventions())
            for name, make in variants.items():
                ms, _ = timed_ms(model, src, make())
                times[name].append(ms)
                ratios[name].append(ms / plain)
        for name in variants:
            print(f"{batch:>5} {name:<18} {statistics.median(times[name]):>10.2f} "
                  f"{statistics.median(ratios[name]):>14.2f}x")


if __name__ == "__main__":
    main()
