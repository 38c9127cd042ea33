"""Opening and greedy-decoding a folder of NLLB-200-distilled-600M's shape: minitx against
transformers, as whole processes and in one process, and how much of a decode the 256k-piece
output layer takes.

    .venv/bin/python benchmarks/nllb_decode.py [--repeats 2] [--folder DIR] [--smoke]

The folder is made once (in a temporary folder, or DIR, reused when it holds one): transformers'
M2M100Config and M2M100ForConditionalGeneration of NLLB-600M's shape (12+12 layers, d_model
1024, 16 heads, d_ff 4096, 256,206 pieces, 1,024 positions, ReLU, scaled embeddings; 615M
parameters, random weights, 2.46 GB of float32) saved with save_pretrained, and an NllbTokenizer
of as many ids (the tiny test tokeniser's pieces and merges, then filler pieces, then NLLB's 202
language codes and <mask>). Its generation settings make every greedy decode exactly
--new-tokens tokens long (min_length = max_length), so both sides do the same work; the tokens
must be identical, or the script says so and exits 1. Every decode translates TEXT from
eng_Latn to fra_Latn (the code before the source, fra_Latn forced first, as
generate(forced_bos_token_id=...) forces it).

Timed, the sides taking turns:
- whole process, from starting Python to the translation printed: `minitx decode FOLDER TEXT
  --src-lang eng_Latn --tgt-lang fra_Latn` against a Python process that imports transformers,
  loads the model and the tokeniser and prints generate's translation;
- in one process (after one untimed round): opening (`checkpoints.load`; from_pretrained of
  the model and of the tokeniser) and one greedy decode (`greedy_decode`; generate; and the
  Stepper, what `minitx decode` and the app run: per step every head's attention rows, every
  decoder layer's logit lens, which is an output layer per layer, and the top 5);
- the output layer: one decoder position's logits, (1, 1024) x (1024, 256,206) plus the bias,
  timed alone, against minitx's time per token.
Reported: medians, and minitx's ratio to transformers. Peak memory is not measured here
(benchmarks/hf_load.py measures it for opus-mt's shape).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _hf_folder import ROOT, quiet_transformers

TEXT = "The weather in Zürich is nice today, so Anna and José drive to Köln on Monday."
SOURCE_LANG, TARGET_LANG = "eng_Latn", "fra_Latn"
VOCAB = 256_206  # NLLB-200's config.json vocab_size (its tokeniser's 256,204 ids, two rows more)
SHAPE = dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
             decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096,
             max_position_embeddings=1024)
SMOKE_SHAPE = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                   max_position_embeddings=128)
LANGUAGE_CODES = 202  # NllbTokenizer's default codes, added with <mask> after the pieces

TRANSFORMERS_SCRIPT = """
import sys, torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from transformers.utils import logging
logging.set_verbosity_error()
folder, text, source, target = sys.argv[1:]
tokenizer = AutoTokenizer.from_pretrained(folder, src_lang=source)
model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
with torch.inference_mode():
    out = model.generate(**tokenizer(text, return_tensors="pt"), num_beams=1, do_sample=False,
                         forced_bos_token_id=tokenizer.convert_tokens_to_ids(target))
print(tokenizer.decode(out[0], skip_special_tokens=True))
"""


def make_folder(folder: Path, smoke: bool, new_tokens: int, shape: dict | None = None) -> None:
    """The NLLB-shaped folder: weights, generation settings and a tokeniser of VOCAB ids (`shape`:
    other layer counts and widths than NLLB-600M's, such as NLLB-1.3B's)."""
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    from tests.huggingface.tiny_tokenisers import _nllb

    quiet_transformers()
    vocab = 1_000 if smoke else VOCAB
    tiny = json.loads(_nllb(400)._tokenizer.to_str())["model"]  # pieces and merges text tokenises to
    pieces = dict(tiny["vocab"])  # <s> <pad> </s> <unk>, then the trained pieces
    for name in [p for p in pieces if p in ("deu_Latn", "eng_Latn", "fra_Latn", "spa_Latn", "<mask>")]:
        del pieces[name]  # the tiny tokeniser's codes: the real list comes after the pieces
    filler = 0
    while len(pieces) < vocab - LANGUAGE_CODES - 1:
        pieces.setdefault(f"▁w{filler}", len(pieces))
        filler += 1
    tokenizer = NllbTokenizer(vocab=pieces, merges=[tuple(m) for m in tiny["merges"]])
    if len(tokenizer) != vocab:
        sys.exit(f"nllb_decode: the tokeniser has {len(tokenizer)} ids, not {vocab}")
    layers = SMOKE_SHAPE if smoke else shape or SHAPE
    config = M2M100Config(vocab_size=vocab, **layers, scale_embedding=True, activation_function="relu",
                          pad_token_id=1, eos_token_id=2, bos_token_id=0, decoder_start_token_id=2)
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration(config).eval()
    model.generation_config.max_length = new_tokens + 1  # the start token counts
    model.generation_config.min_length = new_tokens + 1
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    del model
    tokenizer.save_pretrained(folder)


def seconds(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def whole_processes(folder: Path, repeats: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Wall time of each side's whole process, and what each printed."""
    minitx = Path(sys.executable).parent / "minitx"
    commands = {
        "minitx decode": [str(minitx), "decode", str(folder), TEXT, "--src-lang", SOURCE_LANG,
                          "--tgt-lang", TARGET_LANG],
        "transformers": [sys.executable, "-c", TRANSFORMERS_SCRIPT, str(folder), TEXT, SOURCE_LANG,
                         TARGET_LANG],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    printed: dict[str, str] = {}
    for r in range(repeats):
        for name in (list(commands) if r % 2 == 0 else reversed(commands)):
            start = time.perf_counter()
            run = subprocess.run(commands[name], capture_output=True, text=True, cwd=ROOT)
            took = time.perf_counter() - start
            if run.returncode != 0:
                sys.exit(f"nllb_decode: {name} failed: {run.stderr[-2000:]}")
            times[name].append(took)
            printed[name] = run.stdout.strip()
    return times, printed


def one_round(folder: Path) -> tuple[dict[str, float], bool, int, int]:
    """Each in-process figure once, whether the two decodes' tokens are identical, the source's
    pieces and the new tokens."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from minitx.checkpoints import load
    from minitx.core.data.languages import with_languages
    from minitx.core.interp.decode import Stepper, greedy_decode

    took, ckpt = seconds(lambda: load(folder))
    ckpt.task, ckpt.model.generation = with_languages(ckpt.task, ckpt.model.generation, SOURCE_LANG,
                                                      TARGET_LANG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        took_theirs, theirs = seconds(lambda: AutoModelForSeq2SeqLM.from_pretrained(folder).eval())
        took_tokeniser, tokenizer = seconds(lambda: AutoTokenizer.from_pretrained(folder,
                                                                                  src_lang=SOURCE_LANG))
    ids = ckpt.task.src_vocab.encode_text(TEXT)
    if ids != tokenizer(TEXT).input_ids:
        sys.exit("nllb_decode: the source's ids differ between minitx and transformers")
    src = torch.tensor([ids])  # (1, S)
    target = tokenizer.convert_tokens_to_ids(TARGET_LANG)

    def generate() -> list[int]:
        with torch.inference_mode():
            out = theirs.generate(src, num_beams=1, do_sample=False, forced_bos_token_id=target)
        return out[0, 1:].tolist()  # without the start token

    took_ours, ours = seconds(lambda: greedy_decode(ckpt.model, src)[0].tolist())
    took_generate, tokens = seconds(generate)

    def step_through() -> list[int]:
        decoding = Stepper(ckpt.model, ids, vocab=ckpt.task.vocab)
        decoding.run()
        return decoding.tokens

    took_stepper, stepped = seconds(step_through)
    output_layer = output_share(ckpt.model, src)
    figures = {"open: minitx checkpoints.load": took, "open: transformers model": took_theirs,
               "open: transformers model + tokeniser": took_theirs + took_tokeniser,
               "decode: minitx greedy_decode": took_ours, "decode: transformers generate": took_generate,
               "decode: minitx Stepper (app, decode)": took_stepper,
               "output layer's share of greedy_decode": output_layer}
    return figures, ours == tokens == stepped, len(ids), len(tokens)


def output_share(model, src) -> float:
    """The share of one greedy_decode's operator time spent in the output layer: torch's
    profiler, the time of every op one of whose inputs has the vocabulary's width (the
    (V, d) weight, the (V,) bias, the (1, V) logits the rules then read), over all ops' time."""
    from torch.profiler import ProfilerActivity, profile

    from minitx.core.interp.decode import greedy_decode

    vocab = model.cfg.vocab_size
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        greedy_decode(model, src)
    events = [e for e in prof.key_averages(group_by_input_shape=True) if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in events)
    wide = sum(e.self_cpu_time_total for e in events if e.key in ("aten::addmm", "aten::mm", "aten::linear")
               and any(vocab in shape for shape in e.input_shapes if isinstance(shape, list)))
    return wide / total if total else float("nan")


def in_process(folder: Path, repeats: int) -> None:
    quiet_transformers()
    times: dict[str, list[float]] = {}
    identical = True
    for r in range(repeats + 1):  # the first round untimed: imports and the first reads of the file
        figures, same, pieces, tokens = one_round(folder)
        identical &= same
        if r:
            for name, value in figures.items():
                times.setdefault(name, []).append(value)
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"in one process ({repeats} repeat(s), medians; a {pieces}-piece source, {tokens} new tokens):")
    for name, value in median.items():
        print(f"  {name:<40} {value:>8.3f}" + ("" if "share" in name else " s"))
    print(f"  ratio open, minitx / transformers model + tokeniser: "
          f"{median['open: minitx checkpoints.load'] / median['open: transformers model + tokeniser']:.2f}x")
    decode = median["decode: minitx greedy_decode"]
    print(f"  ratio decode, minitx / transformers: {decode / median['decode: transformers generate']:.2f}x")
    per_token = decode / tokens
    share = median["output layer's share of greedy_decode"]
    print(f"  output layer: {share:.0%} of greedy_decode's time ({1000 * share * per_token:.0f} ms of "
          f"{1000 * per_token:.0f} ms per token); the Stepper's lens runs it once per decoder layer too")
    print(f"tokens identical: {'yes' if identical else 'NO'}")
    if not identical:
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=30,
                        help="tokens every decode makes (a new folder)")
    parser.add_argument("--folder", type=Path,
                        help="make (or reuse) the folder here, not in a temporary one")
    parser.add_argument("--in-process-only", action="store_true",
                        help="skip the whole-process runs")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model, one repeat: checks the script runs")
    args = parser.parse_args()
    repeats = 1 if args.smoke else args.repeats
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch) / "nllb-shaped"
        if not (folder / "config.json").is_file():
            print(f"making {folder} ...", flush=True)
            took, _ = seconds(lambda: make_folder(folder, args.smoke, args.new_tokens))
            print(f"  made in {took:.0f} s", flush=True)
        if not args.in_process_only:
            times, printed = whole_processes(folder, repeats)
            print(f"whole process, launch to translation printed ({repeats} repeat(s), medians):")
            for name, values in times.items():
                print(f"  {name:<40} {statistics.median(values):>8.2f} s")
            ratio = statistics.median(times["minitx decode"]) / statistics.median(times["transformers"])
            print(f"  ratio minitx / transformers: {ratio:.2f}x; the same translation: "
                  f"{'yes' if printed['minitx decode'] == printed['transformers'] else 'NO'}")
        in_process(folder, repeats)


if __name__ == "__main__":
    main()
