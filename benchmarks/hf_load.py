"""Opening a Hugging Face folder of opus-mt's shape: minitx's load against transformers'
from_pretrained of the same folder, time and peak memory, each in a fresh process.

    .venv/bin/python benchmarks/hf_load.py [--rounds 3] [--folder DIR] [--smoke]

The folder (benchmarks/_hf_folder.py: 73.9M parameters, random weights, its Marian tokeniser)
is made once in a temporary folder, or DIR is used (made there if it is empty or missing). Each
round starts one process per side, the sides taking turns; each process imports its library,
then times its load:

- minitx: `checkpoints.load(folder)`, what every command and the app call: config.json, the
  weights read and checked (every name, shape and value), the model built on the meta device
  with the file's tensors as its weights, the generation settings and both tokenisers;
- transformers: `AutoModelForSeq2SeqLM.from_pretrained(folder)`, the model alone (the target's
  baseline), and again with `AutoTokenizer.from_pretrained(folder)`, what a transformers user
  needs before translating anything; and a second from_pretrained in one process, timed alone:
  most of a first one's time is importing transformers' modelling code, which it does lazily.

Then each process runs one forward pass (a 40-piece source, the decoder's first position), so
"load + first forward" includes the reading of weights that a lazy load leaves to the first
use. Memory is the process's peak resident set (VmHWM, reset after the imports through
/proc/self/clear_refs) less its resident set after the imports, over the size of the weights
file: the weights themselves count (safetensors maps the file; the pages a process touches are
resident), so 1.0x is what holding the weights costs. "launch to loaded" is a whole process:
from starting Python to the load's end. Reported: each figure's median over the rounds, and
minitx's ratio to transformers (targets: load at most 1.5x, peak memory at most 2x the file).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _hf_folder import OPUS_MT, SMOKE, make_folder, weights_bytes

SIDES = {
    "minitx": "minitx checkpoints.load",
    "transformers": "transformers from_pretrained",
    "transformers+tokeniser": "transformers, model + tokeniser",
    "transformers-again": "transformers, a second load",
}
EXTRA = ("transformers+tokeniser", "transformers-again")  # left out of --smoke
SOURCE_PIECES = 40


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> bool:
    """Start VmHWM afresh at the current resident set (Linux 4.0+); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(side: str, folder: str) -> None:
    """One side's process: import, then load and one forward pass, measured; one JSON line."""
    import torch

    if side == "minitx":
        from minitx.checkpoints import load
        from minitx.core.training.threads import set_threads

        set_threads()  # minitx's default, as its commands set it

        def open_model():
            model = load(folder).model
            return model, lambda src, start: model.decode(start, *model.encode(src))
    else:
        from _hf_folder import quiet_transformers
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        quiet_transformers()

        def open_model():
            model = AutoModelForSeq2SeqLM.from_pretrained(folder)
            if side == "transformers+tokeniser":
                AutoTokenizer.from_pretrained(folder)
            return model, lambda src, start: model(input_ids=src, decoder_input_ids=start).logits
    if side == "transformers-again":  # its code imported and its caches filled: the loading alone
        model, forward = open_model()
        del model, forward
        gc.collect()
    base = _status_kb("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    model, forward = open_model()
    loaded_at = time.time()
    load_s = time.perf_counter() - start
    peak_load = _status_kb("VmHWM")
    config = json.loads((Path(folder) / "config.json").read_text())
    src = torch.randint(2, config["vocab_size"] - 1, (1, SOURCE_PIECES))  # (1, S)
    src[0, -1] = config["eos_token_id"]
    first = torch.tensor([[config["decoder_start_token_id"]]])  # (1, 1)
    start = time.perf_counter()
    with torch.inference_mode():
        logits = forward(src, first)  # (1, 1, V)
    forward_s = time.perf_counter() - start
    assert logits.shape[-1] == config["vocab_size"]
    print(json.dumps({"load_s": load_s, "forward_s": forward_s, "loaded_at": loaded_at,
                      "peak_load_kb": peak_load - base if reset else None,
                      "peak_forward_kb": _status_kb("VmHWM") - base if reset else None,
                      "threads": torch.get_num_threads()}))


def run_side(side: str, folder: Path) -> dict:
    launched = time.time()
    run = subprocess.run([sys.executable, __file__, "--child", side, str(folder)], capture_output=True,
                         text=True)
    if run.returncode != 0:
        sys.exit(f"hf_load: the {side} process failed:\n{run.stderr[-3000:]}")
    result = json.loads(run.stdout.strip().splitlines()[-1])
    result["launch_s"] = result["loaded_at"] - launched
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--folder", type=Path, help="make (or reuse) the folder here, not in a temporary one")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model, one round, no tokeniser side: checks the script runs")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    rounds = 1 if args.smoke else args.rounds
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch) / "opus-mt-shaped"
        if not (folder / "config.json").is_file():
            print(f"making {folder} ...", flush=True)
            make_folder(folder, SMOKE if args.smoke else OPUS_MT)
        report(folder, rounds, [s for s in SIDES if not (args.smoke and s in EXTRA)])


def report(folder: Path, rounds: int, sides: list[str]) -> None:
    size = weights_bytes(folder)
    config = json.loads((folder / "config.json").read_text())
    print(f"{folder}: {config['encoder_layers']}+{config['decoder_layers']} layers, "
          f"d_model {config['d_model']}, vocab {config['vocab_size']:,}; "
          f"model.safetensors {size / 1e6:.1f} MB; {rounds} round(s), each side a fresh process, medians")
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else reversed(sides)):
            runs[side].append(run_side(side, folder))
    med = {side: {key: _median([x[key] for x in results]) for key in results[0]}
           for side, results in runs.items()}
    print(f"{'':34} {'load':>8} {'launch to':>10} {'+ first':>9} {'peak memory / weights file':>27}")
    print(f"{'':34} {'':>8} {'loaded':>10} {'forward':>9} {'load':>13} {'with forward':>13}")
    for side in sides:
        m, name = med[side], SIDES[side]
        launch = "" if side == "transformers-again" else f"{m['launch_s']:.2f}s"
        print(f"{name:<34} {m['load_s']:>7.2f}s {launch:>10} {m['load_s'] + m['forward_s']:>8.2f}s "
              f"{_memory(m['peak_load_kb'], size):>13} {_memory(m['peak_forward_kb'], size):>13}")
    mine, theirs = med["minitx"], med["transformers"]
    both, again = med.get("transformers+tokeniser"), med.get("transformers-again")
    with_tokeniser = f"; {mine['load_s'] / both['load_s']:.2f}x of model + tokeniser" if both else ""
    with_tokeniser += f"; {mine['load_s'] / again['load_s']:.2f}x of a second load" if again else ""
    print(f"ratio minitx / transformers: load {mine['load_s'] / theirs['load_s']:.2f}x (target <= 1.5x"
          f"{with_tokeniser}), launch to loaded "
          f"{mine['launch_s'] / theirs['launch_s']:.2f}x, load + first forward "
          f"{(mine['load_s'] + mine['forward_s']) / (theirs['load_s'] + theirs['forward_s']):.2f}x")
    if mine["peak_load_kb"] is not None:
        print(f"peak memory over the weights file: minitx {1024 * mine['peak_load_kb'] / size:.2f}x "
              f"(target <= 2x), transformers {1024 * theirs['peak_load_kb'] / size:.2f}x; with the first "
              f"forward {1024 * mine['peak_forward_kb'] / size:.2f}x and "
              f"{1024 * theirs['peak_forward_kb'] / size:.2f}x")
    print(f"threads: minitx {mine['threads']:.0f}, transformers {theirs['threads']:.0f} "
          "(each side's default)")


def _median(values):
    return None if any(v is None for v in values) else statistics.median(values)


def _memory(kb: float | None, size: int) -> str:
    if kb is None:
        return "n/a"
    return f"{kb / 1024:.0f} MB {1024 * kb / size:.2f}x"


if __name__ == "__main__":
    main()
