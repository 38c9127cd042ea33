"""Whole-process peak memory of a fine-tune and of `eval`: minitx's commands against a plain
transformers loop doing the same, each in a fresh process (getrusage's ru_maxrss of the child).

    .venv/bin/python benchmarks/fine_tune_memory.py [--steps 3] [--batch-size 16] [--folder DIR]
                                                    [--variants full,lora,lora-bf16,full+ckpt,...]
                                                    [--lora 16] [--only train|eval] [--held 64] [--smoke]

The folder is opus-mt's shape (benchmarks/_hf_folder.py: 73.9M parameters, random weights, a
Marian tokeniser of 58,101 ids), or with --shape nllb-600m / nllb-1.3b NLLB's (d_model 1024,
12+12 layers and d_ff 4096, or 24+24 and 8192; 256,206 pieces; benchmarks/nllb_decode.py's
folder and tokeniser), made once in a temporary folder or in DIR. The pairs: the test
corpus's (tests/huggingface/changed_folders.py), 400 to train on and 64 held out (--held N: N;
fewer make a bf16 run on a CPU without bf16 instructions affordable).

- fine-tune: `minitx train --init FOLDER --data PAIRS --valid HELD --steps N --batch-size B
  --eval-every 0 --threads 1 --quiet --out FILE` (the base's and the last evaluation, watching,
  the resumable save: the whole command) against a Python process that loads the model and the
  tokeniser, tokenises the same pairs (`text_target`, padding labelled -100), takes N steps of
  torch.optim.AdamW (lr 2e-5, weight decay 0.01, gradient norm clipped at 1) on B pairs each in
  the file's order, and saves the model (save_pretrained);
- each --variants fine-tune: `full` as above; `lora` adds `--lora R` to minitx's command and
  peft's get_peft_model (LoraConfig r=R, alpha 8, q_proj and v_proj) to the loop; `-bf16` adds
  `--precision bf16`, and bf16 autocast with the model loaded in bfloat16 (peft keeps the
  adapters float32) to the loop; `+ckpt` adds `--gradient-checkpointing`, and
  gradient_checkpointing_enable(use_reentrant=False) to the loop;
- eval: `minitx eval FOLDER --pairs HELD --threads 1` (greedy outputs, the loss, BLEU and chrF)
  against loading the model and the tokeniser, the labels loss of the held-out pairs and their
  greedy outputs (generate, num_beams=1) in one batch, under inference_mode.
Reported: each peak in MiB and minitx's ratio (goals: a fine-tune at most 1.1x, eval 1.2x).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from _hf_folder import OPUS_MT, ROOT, SMOKE, make_folder, quiet_transformers

TRAIN_PAIRS, HELD_PAIRS = 400, 64
# --shape: the folder's shape (random weights, made offline); NLLB's as benchmarks/nllb_decode.py
# makes them, with 256,206 pieces
NLLB_600M = dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                 decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096,
                 max_position_embeddings=1024)
NLLB_1_3B = {**NLLB_600M, "encoder_layers": 24, "decoder_layers": 24, "encoder_ffn_dim": 8192,
             "decoder_ffn_dim": 8192}
SHAPES = {"opus-mt": None, "nllb-600m": NLLB_600M, "nllb-1.3b": NLLB_1_3B}
LR, WEIGHT_DECAY, CLIP = 2e-5, 0.01, 1.0

TRANSFORMERS_TRAIN = """
import contextlib, sys, torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from transformers.utils import logging
logging.set_verbosity_error()
torch.set_num_threads(1)
folder, pairs, steps, batch, out, lr, decay, clip, rank, precision, checkpointing = sys.argv[1:]
steps, batch, rank, bf16 = int(steps), int(batch), int(rank), precision == "bf16"
rows = [line.rstrip("\\n").split("\\t") for line in open(pairs, encoding="utf-8")]
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.bfloat16 if bf16 and rank else None).train()
if checkpointing == "1":
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
if rank:  # peft's LoRA on q_proj and v_proj, alpha 8, the adapters in float32
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                             lora_dropout=0.0))
trained = [p for p in model.parameters() if p.requires_grad]
precision = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
optimiser = torch.optim.AdamW(trained, lr=float(lr), weight_decay=float(decay))
for step in range(steps):
    chunk = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
    enc = tokenizer([s for s, _ in chunk], text_target=[t for _, t in chunk], padding=True,
                    return_tensors="pt")
    labels = enc["labels"].masked_fill(enc["labels"] == tokenizer.pad_token_id, -100)
    with precision:
        loss = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trained, float(clip))
    optimiser.step()
    optimiser.zero_grad()
model.save_pretrained(out)
"""

TRANSFORMERS_EVAL = """
import sys, torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from transformers.utils import logging
logging.set_verbosity_error()
torch.set_num_threads(1)
folder, pairs = sys.argv[1:]
rows = [line.rstrip("\\n").split("\\t") for line in open(pairs, encoding="utf-8")]
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
enc = tokenizer([s for s, _ in rows], text_target=[t for _, t in rows], padding=True, return_tensors="pt")
labels = enc["labels"].masked_fill(enc["labels"] == tokenizer.pad_token_id, -100)
with torch.inference_mode():
    loss = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
    out = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], num_beams=1,
                         do_sample=False)
print(float(loss), len(tokenizer.batch_decode(out, skip_special_tokens=True)))
"""


def peak_mib(command: list[str]) -> float:
    """The child's peak resident memory (MiB), measured alone through a wrapper process."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "if done.returncode: sys.exit(done.stderr[-3000:])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"fine_tune_memory: {' '.join(command[:3])} ... failed:\n{out.stderr[-3000:]}")
    return int(out.stdout.strip().splitlines()[-1]) / 1024  # ru_maxrss is in KiB on Linux


def write_pairs(folder: Path, held: int = HELD_PAIRS) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT))
    from tests.huggingface.changed_folders import pairs_file

    return (pairs_file(folder / "train.tsv", TRAIN_PAIRS, seed=1),
            pairs_file(folder / "held.tsv", held, seed=2))


def shaped_folder(folder: Path, shape: str, smoke: bool) -> Path:
    """The folder of `shape` (SHAPES), made in `folder` unless it is there already."""
    if not (folder / "config.json").is_file():
        print(f"making {folder} ...", flush=True)
        quiet_transformers()
        if shape == "opus-mt":
            make_folder(folder, SMOKE if smoke else OPUS_MT)
        else:
            from nllb_decode import make_folder as make_nllb

            make_nllb(folder, smoke, 40, SHAPES[shape])
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--folder", type=Path, help="make (or reuse) the folder here, not in a temporary one")
    parser.add_argument("--only", choices=["train", "eval"], help="measure one command only")
    parser.add_argument("--variants", default="full",
                        help="comma-separated fine-tunes: full, lora, lora-bf16, each with +ckpt "
                             "(gradient checkpointing) [default: full]")
    parser.add_argument("--lora", type=int, default=16, help="the LoRA rank [default: 16]")
    parser.add_argument("--shape", choices=list(SHAPES), default="opus-mt",
                        help="the folder's shape (NLLB's: d_model 1024, 256,206 pieces) [default: opus-mt]")
    parser.add_argument("--held", type=int, default=HELD_PAIRS,
                        help=f"held-out pairs minitx evaluates (and eval scores) [default: {HELD_PAIRS}]")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one step: checks the script runs")
    args = parser.parse_args()
    steps = 1 if args.smoke else args.steps
    minitx = str(Path(sys.executable).with_name("minitx"))
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        folder = shaped_folder(args.folder or scratch / f"{args.shape}-shaped", args.shape, args.smoke)
        train, held = write_pairs(scratch, args.held)
        for variant in (args.variants.split(",") if args.only in (None, "train") else []):
            rank = args.lora if variant.startswith("lora") else 0
            bf16, checkpointing = "bf16" in variant, variant.endswith("+ckpt")
            flags = ([f"--lora={rank}"] if rank else []) + (["--precision=bf16"] if bf16 else []) \
                + (["--gradient-checkpointing"] if checkpointing else [])
            mine = peak_mib([minitx, "train", "--init", str(folder), "--data", str(train),
                             "--valid", str(held), *flags, "--no-memory-check",
                             "--steps", str(steps), "--batch-size", str(args.batch_size), "--eval-every", "0",
                             "--threads", "1", "--quiet", "--force",
                             "--out", str(scratch / "ft.safetensors")])
            theirs = peak_mib([sys.executable, "-c", TRANSFORMERS_TRAIN, str(folder), str(train), str(steps),
                               str(args.batch_size), str(scratch / "hf-out"), str(LR), str(WEIGHT_DECAY),
                               str(CLIP), str(rank), "bf16" if bf16 else "fp32",
                               "1" if checkpointing else "0"])
            rows.append((f"{variant}, {steps} steps of batch {args.batch_size}", mine, theirs, 1.1))
        if args.only in (None, "eval"):
            mine = peak_mib([minitx, "eval", str(folder), "--pairs", str(held), "--threads", "1"])
            theirs = peak_mib([sys.executable, "-c", TRANSFORMERS_EVAL, str(folder), str(held)])
            rows.append((f"eval of {args.held} pairs", mine, theirs, 1.2))
    print(f"whole-process peak RSS, {'smoke, ' if args.smoke else ''}{args.shape} shape, 1 thread")
    print(f"{'':36} {'minitx':>10} {'transformers':>13} {'ratio':>7}")
    for name, mine, theirs, goal in rows:
        print(f"{name:36} {mine:>6,.0f} MiB {theirs:>9,.0f} MiB {mine / theirs:>6.2f}x  (goal <= {goal}x)")


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
