"""`minitx align --heads all` on 1,000 pairs of a model of opus-mt's shape, against transformers'
own forward with output_attentions=True over the same batches, in one process.

    .venv/bin/python benchmarks/align_speed.py [--pairs 1000] [--batch-size 64] [--repeats 1]
        [--threads N] [--device cpu|cuda] [--folder DIR] [--smoke]

The folder (benchmarks/_hf_folder.py: 73.9M parameters, random weights, its Marian tokeniser) is
made once in a temporary folder, or DIR is used. The pairs are the tests' English-German corpus
(tests/huggingface/tiny_tokenisers.py), the gold a made-up diagonal (the scores mean nothing:
the weights are random; the work is what is timed).

Timed, after one untimed run of each:
- minitx: core/interp/word_alignment.score_heads, what `align --heads all --gold` runs: for
  every batch, the words of each pair's pieces, one teacher-forced pass, every layer x head and
  every layer's mean turned into word links, and each scored against the gold;
- transformers: AutoModelForSeq2SeqLM (attn_implementation "eager", the one that returns
  attention) called on the same batches (input_ids, attention_mask, decoder_input_ids) with
  output_attentions=True: the attention alone, no links, no scores.
Reported: medians, and minitx's ratio to transformers (target at most 1.0x).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _hf_folder import OPUS_MT, ROOT, SMOKE, make_folder, quiet_transformers
from _options import add_run_options, apply_run_options

from minitx.checkpoints import load
from minitx.core.interp import word_alignment as wa
from minitx.core.training.trainer import resolve_device

sys.path.insert(0, str(ROOT))
from tests.huggingface.tiny_tokenisers import corpus  # noqa: E402


def write_pairs(folder: Path, count: int) -> tuple[Path, list[tuple[str, str]]]:
    pairs = corpus(count)
    path = folder / "pairs.jsonl"
    lines = (json.dumps({"source": s, "target": t}, ensure_ascii=False) + "\n" for s, t in pairs)
    path.write_text("".join(lines), encoding="utf-8")
    return path, pairs


def diagonal_gold(pairs) -> list[wa.Gold]:
    gold = []
    for source, target in pairs:
        links = frozenset((i, i) for i in range(min(len(source.split()), len(target.split()))))
        gold.append(wa.Gold(links, links))
    return gold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--folder", type=Path, help="make (or reuse) the folder here, not in a temporary one")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, 40 pairs: checks the script runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    count = 40 if args.smoke else args.pairs
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch) / "opus-mt-shaped"
        if not (folder / "config.json").is_file():
            print(f"making {folder} ...", flush=True)
            make_folder(folder, SMOKE if args.smoke else OPUS_MT)
        pairs_path, pairs = write_pairs(Path(scratch), count)
        report(folder, pairs_path, pairs, args.batch_size, 1 if args.smoke else args.repeats, args.device)


def report(folder: Path, pairs_path: Path, pairs, batch_size: int, repeats: int, device: str) -> None:
    from transformers import AutoModelForSeq2SeqLM

    quiet_transformers()
    where = resolve_device(device)
    ckpt = load(folder, device=str(where))
    model, cfg = ckpt.model, ckpt.model_config
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval().to(where)
    read = wa.AlignmentPairs(ckpt.task, pairs_path, cfg.max_len)
    gold = diagonal_gold(pairs)
    heads = wa.every_head(cfg.n_decoder_layers, cfg.n_heads)
    batches = [batch for _, batch, _ in read.batches(batch_size)]  # the same batches, for transformers
    pieces = sum(int((b.labels != cfg.pad_id).sum()) for b in batches)
    print(f"{folder}: {cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers x {cfg.n_heads} heads, d_model "
          f"{cfg.d_model}, vocab {cfg.vocab_size:,}; {len(read):,} pairs ({pieces:,} target pieces), batches "
          f"of {batch_size}, {where}, {torch.get_num_threads()} threads; {repeats} repeat(s), medians")

    def sync() -> None:
        if where.type == "cuda":
            torch.cuda.synchronize()

    def minitx() -> list[wa.Score]:
        scores = wa.score_heads(model, read, gold, heads, "output", batch_size)
        sync()
        return scores

    def transformers() -> int:
        seen = 0
        with torch.inference_mode():
            for batch in batches:
                src = batch.src.to(where)
                out = theirs(input_ids=src, attention_mask=(src != cfg.source_pad_id).long(),
                             decoder_input_ids=batch.decoder_input.to(where), output_attentions=True)
                seen += len(out.cross_attentions)
        sync()
        return seen

    sides = {"minitx align --heads all": minitx, "transformers output_attentions": transformers}
    for fn in sides.values():  # untimed: the first run of each
        fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(repeats):
        for name in (list(sides) if r % 2 == 0 else reversed(sides)):
            start = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["transformers output_attentions"])
    for name in sides:
        t = statistics.median(times[name])
        print(f"{name:<32} {t:>8.2f} s {1000 * t / len(read):>8.2f} ms per pair {t / base:>6.2f}x")
    ratio = statistics.median(times["minitx align --heads all"]) / base
    print(f"ratio minitx align --heads all / transformers forward with output_attentions: {ratio:.2f}x "
          f"(target <= 1.0x); {len(heads)} heads scored")


if __name__ == "__main__":
    main()
