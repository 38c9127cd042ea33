"""Each benchmark script still runs (a tiny smoke run; benchmarks themselves are not timed here).

Scripts break silently when the code they drive changes; these runs catch that. No speed is
asserted: numbers from a shared CI machine mean nothing.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SMOKE_RUNS = {
    "decode_speed.py": (["--smoke", "--threads", "1"], "identical"),
    "beam_speed.py": (["--smoke", "--threads", "1"], "ratio minitx / transformers"),
    "intervention_cost.py": (["--smoke", "--threads", "1"], "ratio to plain"),
    "train_speed.py": (["--smoke", "--threads", "1"], "one-length"),
    "time_to_accuracy.py": (["--smoke", "--threads", "1"], "ratio fast/reference"),
    "checkpoint_load.py": (["--repeats", "1"], "reverse"),
    "memory.py": (["--steps", "3"], "peak RSS"),
    "tui_latency.py": (["--smoke"], "first paint of minitx-tui"),
    "data_load.py": (["--smoke", "--threads", "1"], "x reverse"),
    "busy_machine.py": (["--smoke"], "default / best"),
    "process_time_to_accuracy.py": (["--smoke"], "ratio minitx process / reference training"),
    "scaling.py": (["--smoke", "--threads", "1"], "the ratio to the reference model"),
    "tui_big_model.py": (["--smoke"], "a (all 2 heads) -> rendered"),
    "precision_compile.py": (["--smoke", "--threads", "1"], "loss on one batch"),
    "optimizer_step.py": (["--smoke", "--threads", "1"], "ratio flat buffer / per tensor"),
    "circuit_speed.py": (["--smoke", "--threads", "1"], "ratio attribution / exact patching"),
    "doctor_time.py": (["--smoke", "--threads", "1"], "x the decode"),
    "attribution_speed.py": (["--smoke", "--threads", "1"], "ig (32 steps) / occlusion"),
    "hf_load.py": (["--smoke"], "ratio minitx / transformers: load"),
    "hf_decode.py": (["--smoke", "--threads", "1"], "tokens identical: yes"),
    "hf_train_step.py": (["--smoke", "--threads", "1"], "ratio minitx / transformers: time per step"),
    "tui_hf_model.py": (["--smoke"], "every head at once (48)"),
    "watch_cost.py": (["--smoke"], "over the training seconds"),
    "nllb_decode.py": (["--smoke"], "tokens identical: yes"),
    "attribution_memory.py": (["--smoke"], "occlusion of every step"),
    "align_speed.py": (["--smoke", "--threads", "1"], "ratio minitx align --heads all / transformers"),
    "guided_step.py": (["--smoke", "--threads", "1"], "ratio guided / plain"),
    "fine_tune_memory.py": (["--smoke", "--variants", "full,lora-bf16+ckpt"], "lora-bf16+ckpt, 1 steps"),
    "fine_tune_stages.py": (["--smoke", "--", "--lora=4"], "peak of the whole run"),
}


@pytest.mark.parametrize("script", sorted(SMOKE_RUNS))
def test_benchmark_script_runs_to_its_report(script):
    args, expected = SMOKE_RUNS[script]
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert expected in run.stdout
    assert "Traceback" not in run.stderr


def test_every_benchmark_script_has_a_smoke_run():
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(SMOKE_RUNS)


@pytest.mark.parametrize("script", ["decode_speed.py", "train_speed.py", "time_to_accuracy.py",
                                    "process_time_to_accuracy.py", "scaling.py", "tui_big_model.py",
                                    "precision_compile.py"])
def test_benchmark_asked_for_a_missing_gpu_says_so_in_one_line(script):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke", "--device", "cuda"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "no CUDA GPU is available" in run.stderr and "Traceback" not in run.stderr


def test_the_gpu_check_runs_benchmarks_that_exist_and_falls_back_to_their_cpu_smoke_runs():
    """Its --list with --cpu: the steps it would run without a GPU, each an existing script with
    a smoke row here, in its --smoke version on the CPU."""
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--list", "--cpu"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    steps = [line.split() for line in run.stdout.splitlines()]
    scripts = {Path(words[1]).name for words in steps}
    assert {"train_speed.py", "decode_speed.py", "time_to_accuracy.py", "tui_big_model.py",
            "precision_compile.py"} <= scripts <= set(SMOKE_RUNS)
    assert all("--smoke" in words and words[words.index("--device") + 1] == "cpu" for words in steps)
