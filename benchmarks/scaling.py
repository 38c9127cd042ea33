"""How decode, evaluation and training times grow with source length and model size.

    .venv/bin/python benchmarks/scaling.py [--lengths 10 20 40 64] [--repeats 5] [--smoke]

Models (all reverse-task encoder-decoders, untrained: the arithmetic per token is the same as a
trained model's, and EOS is made impossible so every decode runs to its full length):
- reference: d_model 64, 4 heads, 2+2 layers (the reference model, 235,981 parameters at 64
  positions);
- medium: d_model 128, 4 heads, 4+4 layers;
- big: d_model 256, 8 heads, 6+6 layers (48 self-attention heads per side).
For each model and each source length L (every source exactly L tokens):
- decode: one source greedily decoded token by token with the KV cache, as the app steps
  (L + 1 tokens), milliseconds;
- eval: 500 sources greedily decoded in one batch, as `minitx eval` does, seconds;
- train: one training step of a batch of 64 (fused attention, no dropout: the default recipe's
  setting), milliseconds.
All cells run in this one process, model by model, each the median of --repeats; the baseline
is the reference model at the first length, and every cell is also shown as a ratio to it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from _options import add_run_options, apply_run_options

from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.interp.decode import greedy_decode
from minitx.core.model.transformer import Seq2Seq

MODELS = {
    "reference": {},
    "medium": {"d_model": 128, "n_heads": 4, "d_ff": 512, "n_encoder_layers": 4, "n_decoder_layers": 4},
    "big": {"d_model": 256, "n_heads": 8, "d_ff": 1024, "n_encoder_layers": 6, "n_decoder_layers": 6},
}


def build(name: str, positions: int, device: str) -> Seq2Seq:
    torch.manual_seed(0)
    cfg = ModelConfig(dropout=0.0, attention="fused", max_len=positions, **MODELS[name])
    model = Seq2Seq(cfg).to(device)
    with torch.no_grad():
        model.output.bias[cfg.eos_id] = -1e4  # never stops early: every decode runs its full length
    return model


def clock(fn, repeats: int, device: str) -> float:
    """Median seconds of fn() over `repeats` runs, after one warm-up run."""
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(model: Seq2Seq, length: int, repeats: int, eval_n: int, device: str) -> dict[str, float]:
    task = get_task("reverse", length, length)
    generator = torch.Generator().manual_seed(length)
    one = task.batch(1, generator).src.to(device)
    many = task.batch(eval_n, generator).src.to(device)
    train_batch = task.batch(64, generator)
    src, dec_in = train_batch.src.to(device), train_batch.decoder_input.to(device)
    labels = train_batch.labels.to(device)
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=1e-6)  # the step's own cost is not what is measured

    def decode_one():
        with torch.inference_mode():
            greedy_decode(model.eval(), one, max_new_tokens=length + 1)

    def evaluate_many():
        with torch.inference_mode():
            greedy_decode(model.eval(), many, max_new_tokens=length + 1)

    def train_step():
        model.train()
        logits = model(src, dec_in)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=model.cfg.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    return {"decode": 1000 * clock(decode_one, repeats, device),
            "eval": clock(evaluate_many, max(1, repeats // 2), device),
            "train": 1000 * clock(train_step, repeats, device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40, 64])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--eval-n", type=int, default=500, help="sources of each eval cell")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks it runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    if args.smoke:
        args.lengths, args.models, args.repeats, args.eval_n = [4, 8], ["reference"], 1, 8
    positions = max(args.lengths) + 2  # SOS and EOS
    print(f"threads {torch.get_num_threads()}, device {args.device}; decode: ms for one source, "
          f"eval: s for {args.eval_n} sources, train: ms per step of 64")
    rows, base = [], None
    for name in args.models:
        model = build(name, positions, args.device)
        params = sum(p.numel() for p in model.parameters())
        for length in args.lengths:
            cells = measure(model, length, args.repeats, args.eval_n, args.device)
            base = base or cells
            rows.append((name, params, length, cells))
            print(f"  measured {name} at length {length}", flush=True)
    print(f"{'model':>10} {'params':>10} {'length':>6} {'decode ms':>16} {'eval s':>16} {'train ms':>16}")
    for name, params, length, cells in rows:
        shown = "".join(f" {cells[k]:8.2f} ({cells[k] / base[k]:5.1f}x)" for k in ("decode", "eval", "train"))
        print(f"{name:>10} {params:>10,} {length:>6}{shown}")
    print(f"(x: the ratio to the {args.models[0]} model at length {args.lengths[0]})")


if __name__ == "__main__":
    main()
