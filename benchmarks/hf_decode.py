"""Greedy decoding of a 40-piece source on a model of opus-mt's shape: minitx against
transformers' generate(num_beams=1, do_sample=False), whole decodes, in one process.

    .venv/bin/python benchmarks/hf_decode.py [--repeats 3] [--threads 1 2] [--folder DIR] [--smoke]

The folder (benchmarks/_hf_folder.py: 73.9M parameters, random weights, its Marian tokeniser) is
made once in a temporary folder, or DIR is used. Its generation settings make every decode
exactly --new-tokens tokens long (min_length = max_length), so both sides do the same work; the
tokens must be identical, or the script says so and exits 1. The source is typed text read by
minitx's tokeniser, cut to 40 pieces with its closing </s>, and checked against transformers'
MarianTokenizer's ids.

Timed, each a whole decode of that source (encoding included), after one untimed decode each:
- minitx `greedy_decode` (core/interp/decode.py, the KV cache of core/model/kv_cache.py);
- transformers `generate(num_beams=1, do_sample=False)` (its own KV cache);
- minitx's Stepper, what the app and `minitx decode` run: the same decode, and per step every
  head's attention rows, every decoder layer's logit lens and the top 5 (more work; no target).
The three take turns within each repeat, at each thread count (both sides the same count: 1,
and torch's default, every core). Reported: medians, and minitx's ratio to transformers
(target at most 1.2x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from _hf_folder import OPUS_MT, SMOKE, make_folder, quiet_transformers

from minitx.checkpoints import load
from minitx.core.interp.decode import Stepper, greedy_decode

SOURCE_PIECES = 40
TEXT = ("The weather in Zürich is nice today, so Anna and José drive to Köln on Monday; they "
        "bought 12 books for 34,50 euros, and the train leaves at 7:15 from platform 3. "
        "Why doesn't Chloé eat the cake? Because she has 5 apples.")


def source_ids(ckpt, tokenizer) -> list[int]:
    """TEXT in minitx's pieces, cut to SOURCE_PIECES with the tokeniser's closing </s>; the
    same ids as transformers' tokeniser gives, or exit 1."""
    task = ckpt.task
    ids = task.parse(TEXT)[: SOURCE_PIECES - 1] + [task.src_vocab.eos]
    theirs = tokenizer(TEXT, truncation=True, max_length=SOURCE_PIECES).input_ids
    if ids != theirs or len(ids) != SOURCE_PIECES:
        sys.exit(f"hf_decode: the source's pieces differ: minitx {ids}, transformers {theirs}")
    return ids


def timed(fn) -> tuple[float, list[int]]:
    start = time.perf_counter()
    tokens = fn()
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+",
                        help="thread counts, each for both sides (default: 1 and every core)")
    parser.add_argument("--new-tokens", type=int, default=40, help="tokens every decode makes (a new folder)")
    parser.add_argument("--folder", type=Path, help="make (or reuse) the folder here, not in a temporary one")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model, one repeat: checks the script runs")
    args = parser.parse_args()
    threads = args.threads or sorted({1, torch.get_num_threads()})
    repeats = 1 if args.smoke else args.repeats
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch) / "opus-mt-shaped"
        if not (folder / "config.json").is_file():
            print(f"making {folder} ...", flush=True)
            make_folder(folder, SMOKE if args.smoke else OPUS_MT, new_tokens=args.new_tokens)
        report(folder, threads, repeats)


def report(folder: Path, threads: list[int], repeats: int) -> None:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    quiet_transformers()
    ckpt = load(folder)
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MarianTokenizer recommends sacremoses, which it does not use
        ids = source_ids(ckpt, AutoTokenizer.from_pretrained(folder))
    src = torch.tensor([ids])  # (1, S)
    model, vocab = ckpt.model, ckpt.task.vocab
    cfg = model.cfg
    print(f"{folder}: {cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, d_model {cfg.d_model}, "
          f"vocab {cfg.vocab_size:,}; a {len(ids)}-piece source; {repeats} repeat(s), medians")

    def minitx() -> list[int]:
        return greedy_decode(model, src)[0].tolist()

    def transformers() -> list[int]:
        with torch.inference_mode():
            return theirs.generate(src, num_beams=1, do_sample=False)[0, 1:].tolist()  # without the start

    def stepper() -> list[int]:
        decoding = Stepper(model, ids, vocab=vocab)
        decoding.run()
        return decoding.tokens

    sides = {"minitx greedy_decode": minitx, "transformers generate": transformers, "minitx Stepper": stepper}
    print(f"{'threads':>7} {'':24} {'whole decode':>13} {'per token':>10} {'ratio to generate':>18}")
    identical = True
    for count in threads:
        torch.set_num_threads(count)
        expected = transformers()  # untimed: the first decode of each side at this count
        times: dict[str, list[float]] = {name: [] for name in sides}
        for fn in sides.values():
            identical &= fn() == expected
        for r in range(repeats):
            for name in (list(sides) if r % 2 == 0 else reversed(sides)):
                seconds, tokens = timed(sides[name])
                times[name].append(seconds)
                identical &= tokens == expected
        base = statistics.median(times["transformers generate"])
        for name in sides:
            t = statistics.median(times[name])
            print(f"{count:>7} {name:<24} {1000 * t:>10.0f} ms {1000 * t / len(expected):>7.1f} ms "
                  f"{t / base:>17.2f}x")
        print(f"{count:>7} ratio minitx greedy_decode / transformers generate: "
              f"{statistics.median(times['minitx greedy_decode']) / base:.2f}x (target <= 1.2x); "
              f"{len(expected)} tokens")
    print(f"tokens identical: {'yes' if identical else 'NO'} (every decode of the three, every thread count)")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
