"""A fine-tuning step of a model of opus-mt's shape: minitx's Trainer (`train --init`) against a
plain transformers loop with the same optimiser, the same batch and the same threads.

    .venv/bin/python benchmarks/hf_train_step.py [--repeats 2] [--steps 3] [--threads 1] [--folder DIR]
                                                [--device cuda] [--lora R] [--precision bf16] [--smoke]

The folder (benchmarks/_hf_folder.py: 73.9M parameters, random weights) is made once in a
temporary folder, or DIR is used. The batch: 16 pairs, sources and targets of 20-30 pieces each
(seeded random ordinary pieces, a source closed by </s>, a target's labels by </s>), the same
for both sides. One step on each side is what a fine-tune runs:
- minitx: Trainer.train_step (forward, the labels' cross-entropy, backward, gradient-norm
  clipping at 1, AdamW lr 2e-5 weight decay 0.01 on its flat buffer), the batch fed in place of
  the sampler's;
- transformers: model(input_ids, attention_mask, labels) with padding labelled -100, backward,
  clip_grad_norm_(1.0), torch.optim.AdamW(lr 2e-5, weight_decay 0.01), zero_grad.
Dropout as the folder's config says (0.1) on both sides. With --lora R both sides train rank-R
adapters of q_proj and v_proj only (alpha 8): minitx's `--lora R`, and peft's get_peft_model on
the transformers model; with --precision bf16 both run the step under bf16 autocast (a LoRA's
frozen base held in bf16 on both sides).

Each side runs in a process of its own (so its peak memory is its own): load, 2 untimed steps,
then --steps timed steps; the sides take turns, --repeats times each. Reported: the median step,
target tokens per second, the peak resident memory of the process (CPU) or torch's peak CUDA
memory, and minitx's ratios to transformers (goals: <= 1.0x the time, <= 1.2x the memory).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _hf_folder import OPUS_MT, SMOKE, make_folder, quiet_transformers

BATCH = 16
PIECES = (20, 30)
LR, WEIGHT_DECAY, CLIP = 2e-5, 0.01, 1.0
LORA_RANK, PRECISION = [0], ["fp32"]  # --lora and --precision, set once by the child process


def batch_ids(vocab: int, eos: int, pad: int, seed: int = 0):
    """(sources, targets): BATCH lists of ids of 20-30 pieces, each ending in </s>."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    ordinary = [i for i in range(2, vocab) if i not in (eos, pad)]
    rows = []
    for _ in range(2 * BATCH):
        n = int(torch.randint(PIECES[0], PIECES[1] + 1, (1,), generator=generator))
        picks = torch.randint(0, len(ordinary), (n - 1,), generator=generator).tolist()
        rows.append([ordinary[i] for i in picks] + [eos])
    return rows[:BATCH], rows[BATCH:]


def padded(rows, pad):
    import torch

    out = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


def peak_memory(device) -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run_minitx(folder: Path, device, steps: int) -> dict:
    """Trainer.train_step on the batch: what `minitx train --init` runs."""
    import torch

    from minitx.checkpoints import load
    from minitx.core.config import TrainConfig
    from minitx.core.data.batch import Batch
    from minitx.core.training.fine_tune import fine_tune_defaults, folder_dropout
    from minitx.core.training.trainer import Trainer

    base = load(folder)
    cfg = base.model_config
    sources, targets = batch_ids(cfg.vocab_size, cfg.eos_id, cfg.pad_id)
    src = padded(sources, cfg.pad_id)  # (B, S)
    tgt = padded([[cfg.sos_id, *t] for t in targets], cfg.pad_id)  # (B, T + 1): start, labels
    batch = Batch(src=src, tgt=tgt, lengths=torch.tensor([len(s) for s in sources]))
    with tempfile.TemporaryDirectory() as scratch:  # the Trainer reads a pairs file; the batch is fed
        pairs = Path(scratch) / "pairs.tsv"
        pairs.write_text("a\tb\n" * BATCH, encoding="utf-8")
        train_cfg = TrainConfig(task="data", data=str(pairs), valid=str(pairs), init=str(folder),
                                **{**fine_tune_defaults("marian"), "lr": LR, "weight_decay": WEIGHT_DECAY,
                                   "clip_grad_norm": CLIP, "batch_size": BATCH, "device": device.type,
                                   "eval_every": 0, "steps": 10_000, "lora_rank": LORA_RANK[0],
                                   "precision": PRECISION[0]})
        trainer = Trainer(cfg.replace(dropout=folder_dropout(base.task) or 0.0), train_cfg, base=base)
    trainer.next_batch = lambda: batch
    trainer.base_scores = {}  # no evaluation of the base before the first step: a step is timed
    del base

    def step():
        trainer.train_step()

    return timed(step, device, steps, int((tgt[:, 1:] != cfg.pad_id).sum()))


def run_transformers(folder: Path, device, steps: int) -> dict:
    import torch
    from transformers import AutoModelForSeq2SeqLM

    quiet_transformers()
    bf16 = PRECISION[0] == "bf16"
    frozen_dtype = torch.bfloat16 if bf16 and LORA_RANK[0] else None  # a LoRA's base held in bf16
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=frozen_dtype)
    model = model.to(device).train()
    config = model.config
    if LORA_RANK[0]:  # peft's LoRA on q_proj and v_proj, alpha 8: what `--lora R` trains
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=LORA_RANK[0], lora_alpha=8, lora_dropout=0.0,
                                                 target_modules=["q_proj", "v_proj"]))
    sources, targets = batch_ids(config.vocab_size, config.eos_token_id, config.pad_token_id)
    src = padded(sources, config.pad_token_id).to(device)
    labels = padded(targets, -100).to(device)  # padding labelled -100, as DataCollatorForSeq2Seq does
    mask = (src != config.pad_token_id).long()
    trained = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trained, lr=LR, weight_decay=WEIGHT_DECAY)

    precision = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def step():
        with precision:
            loss = model(input_ids=src, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, CLIP)
        optimiser.step()
        optimiser.zero_grad()

    return timed(step, device, steps, int((labels != -100).sum()))


def timed(step, device, steps: int, tokens: int) -> dict:
    import torch

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(2):  # untimed: first calls, allocator warm-up
        step()
    sync()
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        seconds.append(time.perf_counter() - start)
    return {"seconds": seconds, "peak_bytes": peak_memory(device), "tokens": tokens}


def child(args) -> None:
    import torch

    from minitx.core.training.threads import set_threads

    set_threads(args.threads or None)
    LORA_RANK[0], PRECISION[0] = args.lora, args.precision
    device = torch.device(args.device)
    run = run_minitx if args.side == "minitx" else run_transformers
    print(json.dumps(run(args.folder, device, args.steps)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="processes per side, taking turns")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per process")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads, both sides (0: minitx's default)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--folder", type=Path, help="make (or reuse) the folder here, not in a temporary one")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one step: checks the script runs")
    parser.add_argument("--lora", type=int, default=0,
                        help="a LoRA step of rank R on both sides (transformers + peft) [default: 0, full]")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: autocast on both sides (under LoRA the frozen base in bf16)")
    parser.add_argument("--side", choices=["minitx", "transformers"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        child(args)
        return
    repeats, steps = (1, 1) if args.smoke else (args.repeats, args.steps)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch) / "opus-mt-shaped"
        if not (folder / "config.json").is_file():
            print(f"making {folder} ...", flush=True)
            make_folder(folder, SMOKE if args.smoke else OPUS_MT)
        results = {"minitx": [], "transformers": []}
        for r in range(repeats):
            for side in (("minitx", "transformers") if r % 2 == 0 else ("transformers", "minitx")):
                command = [sys.executable, __file__, "--side", side, "--folder", str(folder), "--steps",
                           str(steps), "--threads", str(args.threads), "--device", args.device,
                           "--lora", str(args.lora), "--precision", args.precision]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"hf_train_step: the {side} process failed:\n{done.stderr[-3000:]}")
                results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    report(results, args)


def report(results: dict, args) -> None:
    memory = "peak CUDA memory" if args.device == "cuda" else "peak RSS"
    rows = {}
    print(f"a training step{f' of LoRA rank {args.lora}' if args.lora else ''} ({args.precision}): "
          f"batch {BATCH} of {PIECES[0]}-{PIECES[1]} pieces a side, AdamW lr {LR:g} "
          f"wd {WEIGHT_DECAY:g}, clip {CLIP:g}; device {args.device}, threads {args.threads or 'default'}; "
          f"{len(results['minitx'])} process(es) x {len(results['minitx'][0]['seconds'])} step(s) a side")
    print(f"{'':14} {'median step':>12} {'target tok/s':>13} {memory:>17}")
    for side, runs in results.items():
        step = statistics.median(s for run in runs for s in run["seconds"])
        peak = max(run["peak_bytes"] for run in runs)
        rows[side] = (step, peak)
        print(f"{side:14} {1000 * step:>9.0f} ms {runs[0]['tokens'] / step:>13,.0f} "
              f"{peak / 2**20:>13,.0f} MiB")
    (mine_step, mine_peak), (their_step, their_peak) = rows["minitx"], rows["transformers"]
    print(f"ratio minitx / transformers: time per step {mine_step / their_step:.2f}x (goal <= 1.0x), "
          f"{memory} {mine_peak / their_peak:.2f}x (goal <= 1.2x)")


if __name__ == "__main__":
    main()
