"""Re-run the commands behind the figures of the README and docs/, and report each figure that
changed. Run it whenever a recipe, a default or a bundled model changes:

    .venv/bin/python tools/doc_figures.py            # every figure (several minutes: some train)
    .venv/bin/python tools/doc_figures.py --only README.md --fast

Each FIGURE names the page, a pattern that finds the figure as the page prints it (one group:
the figure), the command that produces it and how to read the figure from the command's
output. The test suite checks that every pattern still finds its figure on its page
(tests/docs/test_doc_figures.py), so a page edited without its entry here, or an entry left
behind, fails there; this script checks the figures themselves. Figures that are timings are
left out: they depend on the machine (docs/performance.md gives their commands).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MINITX = str(Path(sys.executable).with_name("minitx"))


@dataclass(frozen=True)
class Figure:
    page: str  # relative to the repository
    pattern: str  # finds the figure on the page; group 1 is the figure as printed there
    command: list[str]  # minitx's arguments ({tmp}: a scratch folder, also the working folder)
    read: Callable[[str], str]  # the command's output -> the figure, printed as the page prints it
    slow: bool = False  # trains for a while (skipped with --fast)
    also: tuple[tuple[str, ...], ...] = ()  # more commands whose output follows the first's

    def documented(self) -> list[str]:
        return re.findall(self.pattern, (ROOT / self.page).read_text())


def percent(value: float) -> str:
    return f"{value:.1%}"


def accuracy_of(out: str) -> str:
    return percent(json.loads(out)["accuracy"])


def accuracy_counted(out: str) -> str:
    """'99.5% (995/1000)': the accuracy and how many of the n were right."""
    data = json.loads(out)
    return f"{percent(data['accuracy'])} ({round(data['accuracy'] * data['n'])}/{data['n']})"


def searched(pattern: str) -> Callable[[str], str]:
    """A reader that takes group 1 of `pattern` in the command's output."""
    def read(out: str) -> str:
        found = re.search(pattern, out)
        return found.group(1) if found else "(not in the output)"
    return read


def step_of(out: str) -> str:
    """The step a run stopped at its target, with a thousands comma as the pages print it."""
    found = re.search(r"exact match at step (\d+)", out)
    return f"{int(found.group(1)):,}" if found else "(not in the output)"


def alignment_range(layer: int) -> Callable[[str], str]:
    def read(out: str) -> str:
        scores = json.loads(out)["alignment"]["scores"][layer]
        return f"{min(scores):.3f}-{max(scores):.3f}"
    return read


def heads_floor(out: str) -> str:
    """The lowest exact match with one head ablated, the head that costs most loss, and the loss
    it raises: '96.5% (the costliest, `enc:L2.H2`, raises the teacher-forced loss from 0.0033 to 0.0167'."""
    data = json.loads(out)
    first = data["heads"][0]
    lowest = min(row["accuracy"] for row in data["heads"])
    return (f"{percent(lowest)} (the costliest, `{first['head']}`, raises the teacher-forced loss from "
            f"{data['baseline']['loss']:.4f} to {first['loss']:.4f}")


def cross_range(out: str) -> str:
    """The range of what layer 2's cross-attention heads recover alone in `patch --json`."""
    values = [value for name, value in json.loads(out)["heads"].items() if name.startswith("cross:L2.")]
    return f"{min(values):.2f}-{max(values):.2f}"


def agreement(out: str) -> str:
    """Attribution against exact patching over the heads and over whole stream positions, as the
    README words them."""
    data = json.loads(out)["agreement"]
    return (f"{data['heads']['r']:.3f} (a drawn pair; for a whole residual-stream position only "
            f"{data['streams']['r']:.3f}")


def circuit_summary(out: str) -> str:
    data = json.loads(out)
    heads = f"{len(data['heads'])} of {data['total_heads']} heads"
    return (f"{heads} and {len(data['edges'])} edges at faithfulness {data['faithfulness']:.3f}, measured by "
            f"running it alone (exact match {percent(data['accuracy'])} against the whole model's "
            f"{percent(data['model_accuracy'])})")


def lab_params(variant: str) -> Callable[[str], str]:
    def read(out: str) -> str:
        rows = {row["variant"]: row for row in json.loads(out)["variants"]}
        return f"{rows[variant]['params']:,}"
    return read


def agreement_range(layer: int) -> Callable[[str], str]:
    """`attribute --agreement --json`: the range of one layer's heads' argmax agreement."""
    def read(out: str) -> str:
        rows = [r["argmax"] for r in json.loads(out)["rows"] if r["name"].startswith(f"cross:L{layer}.H")]
        return f"{100 * min(rows):.0f}-{100 * max(rows):.0f}%"
    return read


def at_task(method: str) -> Callable[[str], str]:
    """`attribute --agreement --json`: how often a row's argmax is where the task says."""
    return lambda out: f"{json.loads(out)['expected'][method]['argmax']:.1%}"


def check(name: str, field: str = "detail", form: str = "{}") -> Callable[[str], str]:
    """A reader of one check of `minitx doctor --json`: its detail, or its value formatted."""
    def read(out: str) -> str:
        found = {c["name"]: c for c in json.loads(out)["checks"]}[name]
        return form.format(found[field])
    return read


def summary(out: str) -> str:
    """`20 passed, 0 failed, 4 skipped` from `minitx doctor --json`."""
    statuses = [c["status"] for c in json.loads(out)["checks"]]
    return ", ".join(f"{statuses.count(s)} {word}" for s, word in
                     (("pass", "passed"), ("fail", "failed"), ("skip", "skipped")))


def step_range(out: str) -> str:
    """The first and last step the runs stopped at, as `750-800` (one step: `800`)."""
    steps = sorted(int(s.replace(",", "")) for s in re.findall(r"exact match at step ([\d,]+)", out))
    return f"{steps[0]:,}" if steps[0] == steps[-1] else f"{steps[0]:,}-{steps[-1]:,}"


def checked_list(out: str) -> str:
    """`100.0%, 99.7%, 99.9%, 100.0% and 100.0%`: each evaluation's exact match, in order."""
    found = re.findall(r"exact match (\S+) \(", out)
    return ", ".join(found[:-1]) + " and " + found[-1]


def log_table(out: str) -> str:
    """The rows of the training log's table: step, loss and the evaluation as the log prints them."""
    rows = []
    for step, loss, acc in re.findall(r"step +(\d+) +loss (\S+) .*?(?:acc (.*))?$", out, re.M):
        rows.append(f"| {int(step):,} | {loss} | {acc} |")
    return "\n".join(rows)


def names_tsv(tmp: str) -> None:
    """The worked example's data file, written by its generator (tools/make_names.py) in the
    scratch folder."""
    subprocess.run([sys.executable, str(ROOT / "tools/make_names.py")], cwd=tmp, check=True)
    (Path(tmp) / "data").mkdir()


def fine_tune_inputs(tmp: str) -> None:
    """What the fine-tunes' figures read, as the pages make it: the tiny Hugging Face folders,
    training.md's copy.tsv and reverse.tsv, and alignment.md's swapped language."""
    subprocess.run([sys.executable, str(ROOT / "tools/make_hf_folders.py"), "hf-tiny", "--families",
                    "marian"], cwd=tmp, check=True, capture_output=True)
    subprocess.run([sys.executable, str(ROOT / "tools/make_swapped_language.py")], cwd=tmp, check=True,
                   capture_output=True)
    rng = random.Random(0)  # training.md's generator of the two files, as the page prints it

    def line(order):
        digits = [str(rng.randrange(10)) for _ in range(rng.randint(4, 10))]
        return " ".join(digits) + "\t" + " ".join(order(digits)) + "\n"
    (Path(tmp) / "copy.tsv").write_text("".join(line(lambda s: s) for _ in range(1000)))
    (Path(tmp) / "reverse.tsv").write_text("".join(line(lambda s: s[::-1]) for _ in range(200)))


TINY = ["train", "--d-model", "32", "--layers", "1", "--steps", "300", "--threads", "1", "--log-every", "300",
        "--out", "{tmp}/tiny.safetensors", "--force"]
SWAPS = ["lab", "baseline", "rms", "learned", "rope", "swiglu", "gqa", "mqa", "modern", "--steps", "1",
         "--seeds", "0", "--eval-size", "10", "--eval-every", "1", "-q", "--threads", "1", "--json"]
NAMES = ["train", "--data", "names.tsv", "--threads", "1", "--out", "names.safetensors"]
UNTIL = ["train", "--until", "99%", "--steps", "3000", "--threads", "1"]
STOPS = [("train", "--seed", str(seed), "--threads", "1", "--out", f"{{tmp}}/seed{seed}.safetensors")
         for seed in range(5)]
CHECKS = [("eval", f"{{tmp}}/seed{seed}.safetensors", "--n", "1000", "--lengths", "4-10", "--seed", "98765")
          for seed in range(5)]  # the STOPS' models, so after them
LOG = ["train", "--seed", "0", "--log-every", "100", "--threads", "1", "--out", "{tmp}/log.safetensors"]
NO_MASK = ["doctor", "reverse-no-causal-mask", "--quick", "--json"]
BEAM = ["decode", "sort", "0 8 0", "--beams", "4", "--threads", "1"]
EMPTY_WINS = ["decode", "reverse-swap-cross", "2 9 4 3", "--beams", "4", "--length-penalty", "0",
              "--search-check", "--threads", "1"]
AGREEMENT = ["attribute", "reverse", "--agreement", "--threads", "1", "--json", "--method"]
# training.md's fine-tunes of the tiny Marian folder ({tmp}/hf-tiny, made by tools/make_hf_folders.py) on
# docs/examples/ ({root}), and of the bundled reverse model taught to copy; alignment.md's guided run
EXAMPLES = "{root}/docs/examples"
COURSE = ["train", "--init", "hf-tiny/marian", "--data", f"{EXAMPLES}/en-fr.tsv", "--valid",
          f"{EXAMPLES}/en-fr.tsv",
          *("--lr 3e-3 --dropout 0 --steps 300 --batch-size 12 --schedule linear --warmup 30 --eval-every 50 "
            "--eval-bleu --keep-best bleu --patience 3 --log-every 100 --threads 1 "
            "--out ft.safetensors").split()]
LORA = ["train", "--init", "hf-tiny/marian", "--data", f"{EXAMPLES}/greetings.tsv", "--valid",
        f"{EXAMPLES}/greetings.tsv",
        *("--lora 8 --lora-alpha 16 --lr 1e-2 --dropout 0 --steps 200 --batch-size 8 --eval-every 100 "
          "--log-every 100 --threads 1 --out lora.safetensors").split()]
TO_COPY = ["train", "--init", "reverse", "--data", "copy.tsv", "--general", "reverse.tsv", "--steps", "400",
           "--eval-every", "100", "--lr", "1e-3", "--probe", "3 1 4 1 5", "--probe", "7 2 9 9 0 4", "--out",
           "reverse-to-copy.safetensors", "--log-every", "100", "--threads", "1"]
GUIDED = ("train --data swapped.tsv --tokens word --d-model 32 --heads 2 --layers 1 --steps 300 --threads 1 "
          "--alignments swapped.talp --guided-head 1:1 --out guided.safetensors --json").split()
FORGETTING = r"general-domain loss \S+ -> (\S+ \(\+\d+%\)) at step 100"
FIGURES = [
    Figure("README.md", r"--seed 0 +# exact match (\S+ \(\d+/1000\))",
           ["eval", "reverse", "--n", "1000", "--seed", "0", "--json"], accuracy_counted),
    Figure("README.md", r"the alignment table\); layer 1's put (\S+)\.", ["inspect", "reverse", "--json"],
           alignment_range(0)),
    Figure("README.md", r"Layer 2's four cross-attention heads put (\S+) of their weight",
           ["inspect", "reverse", "--json"], alignment_range(1)),
    Figure("README.md", r"`compare` prints exact match (\S+) for `reverse`",
           ["compare", "reverse", "reverse-no-shift", "--n", "200", "--json"],
           lambda out: percent(json.loads(out)["a"]["accuracy"])),
    Figure("README.md", r"and a weight distance of (\S+) \(the third command\)",
           ["compare", "reverse", "reverse-no-shift", "--n", "200", "--json"],
           lambda out: f"{json.loads(out)['weight_distance']:.4f}"),
    Figure("README.md", r"has ([\d,]+) parameters and reaches \S+ exact match after its 300 steps", TINY,
           searched(r"· ([\d,]+) params"), slow=True),
    Figure("README.md", r"parameters and reaches (\S+) exact match after its 300 steps", TINY,
           searched(r"final exact match (\S+) on"), slow=True),
    Figure("README.md", r"--seed 2024 +# (\S+ \(\d+/1000\))",
           ["eval", "dates", "--n", "1000", "--seed", "2024", "--json"], accuracy_counted),
    Figure("README.md", r"exact match falls from \S+ to (\S+ \(\d+/1000\))",
           ["eval", "reverse", "--ablate", "cross:L2", "--n", "1000", "--seed", "0", "--json"],
           accuracy_counted),
    Figure("README.md", r"outputs its mean instead of 0\) it is (\S+)\.",
           ["eval", "reverse", "--ablate", "cross:L2", "--ablate-kind", "mean", "--n", "1000", "--seed", "0",
            "--json"], accuracy_of),
    Figure("README.md", r"without `cross:L2\.H1` it is still (\S+)\.",
           ["eval", "reverse", "--ablate", "cross:L2.H1", "--n", "1000", "--seed", "0", "--json"],
           accuracy_of),
    Figure("README.md", r"no single head drops exact match below (\S+ \(the costliest, `[^`]+`, raises\s+the "
                        r"teacher-forced loss from \S+ to [\d.]+)",
           ["heads", "reverse", "--n", "200", "--seed", "0", "--json"], heads_floor),
    Figure("README.md", r"layer 2's cross-attention heads recovers (\S+) of the clean answer alone",
           ["patch", "reverse", "--clean", "3 1 4 1 5", "--corrupt", "2 7 1 8 2", "--json"], cross_range),
    Figure("README.md", r"over the 24 heads at r = "
                        r"(\S+ \(a drawn\s+pair; for a whole residual-stream position only [\d.]+)",
           ["patch", "reverse", "--json"], agreement),
    Figure("README.md", r"(?s)the circuit keeps\s+(\d+ of .*?against the whole model's \S+\))",
           ["circuit", "reverse", "--json"], circuit_summary),
    Figure("README.md", r"`minitx decode reverse \"3 1 4 1 5\" --ablate cross:L2` prints `([\d ]+)`",
           ["decode", "reverse", "3 1 4 1 5", "--ablate", "cross:L2"], lambda out: out.strip()),
    Figure("README.md", r"minitx doctor reverse --quick +# ([^\n]+)",
           ["doctor", "reverse", "--quick"], searched(r"(\d+ passed, \d+ failed, \d+ skipped)")),
    Figure("README.md", r"reverse-no-shift --quick +# (\d+ passed, \d+ failed, \d+ skipped)",
           ["doctor", "reverse-no-shift", "--quick"], searched(r"(\d+ passed, \d+ failed, \d+ skipped)")),
    Figure("README.md", r"\*\*([\d,]+) parameters\*\* \(embeddings", ["inspect", "reverse", "--json"],
           lambda out: f"{json.loads(out)['parameters']['total']:,}"),
    Figure("README.md", r"with a 63-token vocabulary: ([\d,]+)", ["inspect", "dates", "--json"],
           lambda out: f"{json.loads(out)['parameters']['total']:,}"),
    Figure("README.md", r"--lengths 11-16 --n 1000 --seed 0`\s+gives\s+(\S+)\.",
           ["eval", "reverse", "--lengths", "11-16", "--n", "1000", "--seed", "0", "--json"], accuracy_of),
    Figure("README.md", r"`rms` ([\d,]+),", SWAPS, lab_params("rms"), slow=True),
    Figure("README.md", r"`swiglu` ([\d,]+),", SWAPS, lab_params("swiglu"), slow=True),
    Figure("README.md", r"`modern` ([\d,]+)\.", SWAPS, lab_params("modern"), slow=True),
    Figure("README.md", r"held out 250 of the 5,000 pairs and stopped at step ([\d,]+), at", NAMES,
           step_of, slow=True),
    Figure("README.md", r"and stopped at step [\d,]+, at (\S+), after", NAMES,
           searched(r"reached (\S+) exact match at step"), slow=True),
    Figure("README.md", r"minitx eval names.safetensors +# (\S+ \(\d+/\d+\)) held-out pairs",
           ["eval", "names.safetensors"], searched(r"exact match (\S+ \(\d+/\d+\))"), slow=True),
    Figure("README.md", r"The last one stopped at step ([\d,]+) with", UNTIL,
           step_of, slow=True),
    Figure("README.md", r"The last one stopped at step [\d,]+ with (\S+) exact match", UNTIL,
           searched(r"final exact match (\S+) on"), slow=True),
    Figure("docs/data.md", r"minitx doctor dates --quick +# ([^\n]+)",
           ["doctor", "dates", "--quick", "--json"],
           lambda out: f"{summary(out)}; alignment {check('alignment', 'value', '{:.3f}')(out)}"),
    Figure("docs/data.md", r"# reached ([^\n]+)\n# final exact match \S+ on 250", NAMES,
           searched(r"reached ([^\n]+)"), slow=True),
    Figure("docs/data.md", r"# final exact match (\S+ on 250 held-out pairs · last batch's loss \S+)", NAMES,
           searched(r"final exact match (\S+ on \d+ held-out pairs · last batch's loss \S+)"), slow=True),
    Figure("docs/data.md", r"# (data: exact match \S+ \(\d+/\d+\))\n", ["eval", "names.safetensors"],
           searched(r"(data: exact match \S+ \(\d+/\d+\))"), slow=True),
    Figure("docs/data.md", r"\"Kalo Mira\" \"Suvi Tonemi\"\n# ([^\n]+)\n",
           ["decode", "names.safetensors", "Kalo Mira", "Suvi Tonemi"], lambda out: out.splitlines()[0],
           slow=True),
    Figure("docs/data.md", r"minitx doctor names.safetensors --quick +# ([^:\n]+)",
           ["doctor", "names.safetensors", "--quick"], searched(r"(\d+ passed, \d+ failed, \d+ skipped)"),
           slow=True),
    Figure("docs/data.md", r"\| a folder \| `([^`]+)` \|", ["eval", "reverse", "--data", "data/"],
           searched(r"Error: ([^\n]+)")),
    Figure("docs/training.md", r"runs stopped at steps (\S+) \(seeds 0-4\)", STOPS[0], step_range, slow=True,
           also=STOPS[1:]),
    Figure("docs/training.md", r"98765`: (\S+, \S+, \S+, \S+ and \S+%)\.", CHECKS[0], checked_list, slow=True,
           also=CHECKS[1:]),
    Figure("docs/training.md", r"(?s)--log-every 100 --threads 1` \(\d+ s.*?\|---:\|---:\|---:\|\n(.*?)\n\n",
           LOG, log_table, slow=True),
    Figure("docs/checks.md",
           r"`minitx doctor reverse-no-shift --quick`: (\d+ passed, \d+\s+failed, \d+ skipped)",
           ["doctor", "reverse-no-shift", "--quick"], searched(r"(\d+ passed, \d+ failed, \d+ skipped)")),
    Figure("docs/checks.md", r"`future-leakage-values` (\S+) and", NO_MASK,
           check("future-leakage-values", "value", "{:.2f}")),
    Figure("docs/checks.md", r"`trained-without-mask` (0% -> \S+ \(loss \S+\s+-> \S+);", NO_MASK,
           lambda out: check("trained-without-mask")(out).removeprefix("exact ").replace("; loss", " (loss")),
    Figure("docs/beam.md", r"  1 +(-\d\.\d{4}) +-\d\.\d{4}  0 0 0 8\n", BEAM,
           searched(r"  1 +(-\d\.\d{4}) ")),
    Figure("docs/beam.md", r"  case: (model error)\n", [*BEAM, "--search-check"],
           searched(r"case: ([^\n]+)")),
    Figure("docs/beam.md", r"beam 64 +(-\d\.\d{4}) +-\d\.\d{4}  \(empty", EMPTY_WINS,
           searched(r"beam 64 +(-\d\.\d{4})")),
    Figure("README.md", r"points where ig's attribution does on\s+(\S+) of the steps", [*AGREEMENT, "ig"],
           agreement_range(2)),
    Figure("README.md", r"mirrored source position on (\S+) of the digit\s+steps", [*AGREEMENT, "ig"],
           at_task("ig")),
    Figure("README.md", r"input x gradient finds it on only (\S+) \(", [*AGREEMENT, "ixg"], at_task("ixg")),
    Figure("docs/interventions.md", r"its largest entry is the mirrored position on (\S+) of the digit steps",
           [*AGREEMENT, "ixg"], at_task("ixg")),
    Figure("docs/training.md", r"BLEU reached (\S+) at step 200 and stayed", COURSE,
           searched(r"best BLEU (\S+) at step"), slow=True),
    Figure("docs/training.md",
           r"(?s)--lora 8 --lora-alpha 16.*?base -> fine-tuned \(8 held-out pairs\): loss \S+ -> (\S+) ·",
           LORA, searched(r"base -> fine-tuned \(8 held-out pairs\): loss \S+ -> (\S+) ·"), slow=True),
    Figure("docs/training.md", r"forgetting: general-domain loss 0\.00165 -> (\S+ \(\+\d+%\)) at step 100",
           TO_COPY, searched(FORGETTING), slow=True),
    Figure("README.md", r"forgetting: general-domain loss 0\.00165 ->\s+(\S+ \(\+\d+%\)) at step 100",
           TO_COPY, searched(FORGETTING), slow=True),
    Figure("docs/alignment.md", r"\(default\) \| \S+ \| \S+ at step 0 → \S+ \| (\S+) \|", GUIDED,
           lambda out: percent(json.loads(out)["summary"]["accuracy"]), slow=True),
]


def run(figure: Figure, tmp: str, outputs: dict) -> str:
    """The figure from the command's output (each command runs once, for all its figures)."""
    texts = []
    for command in (figure.command, *figure.also):
        key = tuple(command)
        if key not in outputs:
            argv = [MINITX, *(a.replace("{tmp}", tmp).replace("{root}", str(ROOT)) for a in command)]
            done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=3600)
            # the doctor exits 1 for a model that fails a check; an error is a figure when it is
            # the one the page shows (the error messages' table), so stderr follows stdout
            outputs[key] = done.stdout + done.stderr
        texts.append(outputs[key])
    try:
        return figure.read("\n".join(texts))
    except (ValueError, KeyError, IndexError, AttributeError) as error:
        return f"(not read: {error!r}; output began {texts[0][:200]!r})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one page, e.g. README.md")
    parser.add_argument("--fast", action="store_true", help="leave out the figures that train")
    args = parser.parse_args(argv)
    changed = 0
    outputs: dict[tuple, tuple] = {}
    with tempfile.TemporaryDirectory() as tmp:
        names_tsv(tmp)
        if not args.fast:
            fine_tune_inputs(tmp)
        for figure in FIGURES:
            if (args.only and figure.page != args.only) or (args.fast and figure.slow):
                continue
            shown = [" ".join(text.split()) for text in figure.documented()]  # as if unwrapped
            now = run(figure, tmp, outputs)
            same = shown == [" ".join(now.split())]
            changed += not same
            print(f"{'same   ' if same else 'CHANGED'}  {figure.page}: {shown[0] if shown else '(not found)'}"
                  f" -> {now}   (minitx {' '.join(figure.command)})", flush=True)
    print(f"{changed} figure{'s' if changed != 1 else ''} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
