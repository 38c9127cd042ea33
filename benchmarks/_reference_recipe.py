"""The reference recipe as a plain training script, the baseline of process_time_to_accuracy.py.

    .venv/bin/python benchmarks/_reference_recipe.py SEED [--max-steps 6000] [--device cpu]

What a person following docs/training.md would write: the reference model (dropout 0.1), Adam
(lr 1e-3, betas 0.9/0.98, eps 1e-9, torch's fused kernel), a linear warmup over 400 steps then
flat, clipping at 1.0, a fresh vectorised batch of 64 (lengths 4-10, padded) every step. Every
50 steps it measures exact match on 1,000 fresh sequences (lengths 4-10) and stops at 99.8%.
Prints one JSON line: steps, the seconds spent training (evaluations excluded) and the accuracy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.tasks import get_task
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.evaluation import evaluate

TARGET = 0.998


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("--max-steps", type=int, default=6000)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(seed=args.seed)  # the reference recipe's training settings
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = Seq2Seq(ModelConfig()).to(device)
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                                 fused=True)
    task, data = get_task("reverse", 4, 10), torch.Generator().manual_seed(args.seed)
    importlib.import_module("torch._dynamo")  # torch.optim's first step imports it (seconds):
    # done here, out of the training clock, so the baseline's figure is its training alone
    seconds, accuracy, step = 0.0, 0.0, 0
    while step < args.max_steps:
        start = time.perf_counter()
        step += 1
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr_at(step)
        batch = task.batch(cfg.batch_size, data)
        model.train()
        logits = model(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.labels.to(device).flatten(),
                               ignore_index=model.cfg.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.clip_grad_norm)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds += time.perf_counter() - start
        if step % args.eval_every == 0:
            accuracy = evaluate(model, task, 1000, seed=10_000 + args.seed, batch_size=1000,
                                teacher_forced=True).accuracy
            if accuracy >= TARGET:
                break
    print(json.dumps({"steps": step, "train_seconds": round(seconds, 3), "accuracy": accuracy}))


if __name__ == "__main__":
    main()
