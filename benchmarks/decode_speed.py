"""Greedy decoding speed: per-token latency with and without the KV cache, and 1,000-sequence eval.

    .venv/bin/python benchmarks/decode_speed.py [--smoke]

Both variants run in the same process on the same model and inputs; the cache's speed-up is
reported as a ratio, together with a check that both produce identical tokens.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _options import add_run_options, apply_run_options

from minitx.core.config import ModelConfig
from minitx.core.interp.decode import greedy_decode
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.evaluation import evaluate


def never_stopping_model() -> Seq2Seq:
    """The reference model with EOS made impossible, so every decode runs to its length cap
    (the arithmetic per token is the same as a trained model's)."""
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig()).eval()
    with torch.no_grad():
        model.output.bias[model.cfg.eos_id] = -1e4
    return model


def decode_ms(model, src, new_tokens: int, use_cache: bool) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = greedy_decode(model, src, max_new_tokens=new_tokens, use_cache=use_cache)
    if out.is_cuda:
        torch.cuda.synchronize()  # the clock stops when the GPU is done, not when work is queued
    return 1000 * (time.perf_counter() - start), out


def compare_cache(model, src, new_tokens: int, repeats: int) -> tuple[float, float, float, bool]:
    """Alternate uncached and cached runs, so a burst of load on a shared machine hits both.

    Returns median ms/token without and with the cache, the median of the per-pair ratios,
    and whether the two produced identical tokens.
    """
    slow, fast, ratios, identical = [], [], [], True
    for _ in range(repeats):
        a_ms, a = decode_ms(model, src, new_tokens, use_cache=False)
        b_ms, b = decode_ms(model, src, new_tokens, use_cache=True)
        slow.append(a_ms / new_tokens)
        fast.append(b_ms / new_tokens)
        ratios.append(a_ms / b_ms)
        identical &= torch.equal(a, b)
    median = statistics.median
    return median(slow), median(fast), median(ratios), identical


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    repeats = 1 if args.smoke else 15
    lengths = [10] if args.smoke else [10, 32, 63]  # 63 new tokens + SOS fill max_len=64
    batches = [1] if args.smoke else [1, 256]
    model = never_stopping_model().to(args.device)
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}")
    print(f"{'batch':>5} {'tokens':>6} {'no cache ms/tok':>16} {'cache ms/tok':>13} "
          f"{'speed-up':>9} identical")
    for batch in batches:
        src = torch.randint(0, 10, (batch, 10), generator=torch.Generator().manual_seed(1)).to(args.device)
        for n in lengths:
            slow, fast, ratio, identical = compare_cache(model, src, n, repeats if batch == 1 else 5)
            print(f"{batch:>5} {n:>6} {slow:>16.3f} {fast:>13.3f} {ratio:>8.2f}x {identical}")

    from minitx.checkpoints import load

    trained = load("reverse").model.to(args.device)
    from minitx.core.data.tasks import get_task

    evaluate(trained, get_task("reverse"), 100, seed=0)  # warm-up
    start = time.perf_counter()
    result = evaluate(trained, get_task("reverse"), 100 if args.smoke else 1000, seed=3, batch_size=1000)
    print(f"eval of {result.n} sequences (bundled reverse): {time.perf_counter() - start:.3f} s, "
          f"accuracy {result.accuracy:.3f}")


if __name__ == "__main__":
    main()
