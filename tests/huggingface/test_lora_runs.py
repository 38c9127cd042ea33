"""LoRA runs end to end on a tiny Marian folder: `train --init --lora` and the commands that open its
file through the base, the base said missing in one line, a stopped run resumed to the
uninterrupted adapters bit for bit, watching against the model itself with its adapters off, and
(tier 2) two torchrun processes giving one process's adapters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.interp.decode import greedy_decode
from minitx.core.model import lora
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.trainer import Trainer
from minitx.tui.cli.main import main
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.tiny_folders import save_model

pytest.importorskip("peft")

PAIRS = [("the cat", "die katze"), ("a red house", "ein rotes haus"), ("good morning", "guten morgen"),
         ("the dog", "der hund"), ("where is it", "wo ist es"), ("thank you", "danke"),
         ("blue sky", "blauer himmel"), ("old town", "alte stadt")]


def run(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "400"})
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def marian(tmp_path_factory) -> Path:
    return save_model(tmp_path_factory.mktemp("lora") / "marian", "marian")


def test_lora_train_makes_a_file_every_command_opens_through_its_base(marian, tmp_path):
    folder = tmp_path / "opus-mt-tiny"
    shutil.copytree(marian, folder)
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    out = tmp_path / "lora.safetensors"
    code, text = run("train", "--init", folder, "--data", data, "--valid", data, "--steps", 2,
                     "--batch-size", 4, "--lora", 4, "--lora-targets", "q_proj,k_proj,v_proj,out_proj",
                     "--out", out, "--threads", 1, "--log-every", 1)
    assert code == 0, text
    assert "lr 0.001" in text  # LoRA's default
    assert "LoRA rank 4, alpha 8 on q_proj, k_proj, v_proj, out_proj: 24 layers," in text
    code, text = run("inspect", out)
    assert code == 0, text
    assert "LoRA adapters, rank 4, alpha 8 on q_proj, k_proj, v_proj, out_proj" in text
    code, text = run("decode", out, "the cat")
    assert code == 0, text
    code, text = run("export", out, "--format", "peft", "--out", tmp_path / "adapter")
    assert code == 0 and (tmp_path / "adapter" / "adapter_model.safetensors").is_file(), text
    code, text = run("export", out, "--format", "hf", "--out", tmp_path / "merged")
    assert code == 0, text
    merged = checkpoints.load(str(tmp_path / "merged"))
    opened = checkpoints.load(str(out))
    src = torch.tensor([opened.task.parse(s) for s, _ in PAIRS[:1]])
    assert torch.equal(greedy_decode(merged.model, src), greedy_decode(opened.model, src))
    shutil.rmtree(folder)  # the base is gone
    code, text = run("decode", out, "the cat")
    assert code != 0 and len(text.strip().splitlines()) == 1, text
    assert "is a LoRA fine-tune of" in text and "cannot be opened" in text


def lora_config(data, folder, **fields) -> TrainConfig:
    return TrainConfig(task="data", data=str(data), valid=str(data), init=str(folder),
                       **{**fine_tune_defaults("marian", lora=True), "batch_size": 4, "steps": 4,
                          "eval_every": 2, "eval_size": 4, "device": "cpu", "lora_rank": 4,
                          "lora_dropout": 0.1, **fields})


@pytest.mark.parametrize("precision", ["fp32", "bf16"])  # bf16: the resumed base made bf16 where it is
def test_a_lora_run_saved_and_resumed_gives_the_uninterrupted_adapters_bit_for_bit(marian, tmp_path,
                                                                                   precision):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    base = checkpoints.load(str(marian))
    straight = Trainer(base.model_config, lora_config(data, marian, precision=precision), base=base)
    straight.run()
    stopped = Trainer(base.model_config, lora_config(data, marian, precision=precision),
                      base=checkpoints.load(str(marian)))
    stopped.run(until_step=2)
    path = stopped.save(tmp_path / "half.safetensors")
    resumed = Trainer.resume(path, open_base=checkpoints.open_base)
    assert resumed.lora == straight.lora and resumed.step_count == 2
    resumed.run()
    mine, theirs = lora.adapter_tensors(resumed.model), lora.adapter_tensors(straight.model)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    # the base's weights were never touched by the evaluations' merged decoding
    ref = dict(checkpoints.load(str(marian)).model.named_parameters())
    for name, p in straight.model.named_parameters():
        if ".lora_" not in name:
            assert torch.equal(p, ref[name.replace(".base_layer", "")].to(p.dtype)), name


def test_a_lora_run_is_watched_against_its_own_model_with_the_adapters_off(marian, tmp_path):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    base = checkpoints.load(str(marian))
    trainer = Trainer(base.model_config, lora_config(data, marian, lr=3e-2, lora_dropout=0.0), base=base)
    assert trainer.watcher.base is trainer.model  # no second copy of the base
    trainer.run()
    w = trainer.history.watched
    assert w.kl_to_base[0] == pytest.approx(0.0, abs=1e-6) and w.kl_to_base[-1] > 1e-4
    # the base's outputs were read with the adapters off: what the base folder itself writes
    plain = checkpoints.load(str(marian)).model
    for record in [r for r in w.probes if r.step == w.probes[-1].step]:
        src = torch.tensor([trainer.task.parse(record.source)])
        assert trainer.task.format(greedy_decode(plain, src)[0].tolist()) == record.base_output


@pytest.mark.slow
def test_two_torchrun_processes_give_one_process_lora_adapters(marian, tmp_path):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS * 2)
    common = ["--init", str(marian), "--data", str(data), "--valid", str(data), "--batch-size", "4",
              "--dropout", "0", "--lora", "4", "--threads", "1", "--quiet", "--eval-every", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two.safetensors"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    done = subprocess.run([*torchrun, "-m", "minitx", "train", *common, "--steps", "3", "--out", str(two)],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    one = tmp_path / "one.safetensors"
    code, text = run("train", *common, "--accumulate", "2", "--steps", "3", "--out", one)
    assert code == 0, text
    a, b = checkpoints.load(str(two)).lora.tensors, checkpoints.load(str(one)).lora.tensors
    assert a.keys() == b.keys()
    assert all(float((a[k] - b[k]).abs().max()) <= 1e-4 for k in a)


def test_lora_update_sizes_are_recorded_drawn_and_compared(marian, tmp_path):
    from safetensors.torch import load_file

    from minitx.core.importing.hf_weights import layer_names

    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    out = tmp_path / "lora.safetensors"
    code, text = run("train", "--init", marian, "--data", data, "--valid", data, "--steps", 4,
                     "--eval-every", 2, "--batch-size", 4, "--lora", 2, "--lora-alpha", 4, "--out", out,
                     "--threads", 1, "--quiet")
    assert code == 0, text
    saved = checkpoints.load(str(out))
    w = saved.history.watched
    assert w.steps == [0, 2, 4] and len(w.adapters) == 12 and len(w.update_size) == 3
    assert all(size == 0.0 for size in w.update_size[0])  # B starts at zero: the base itself
    # the last evaluation's sizes, by hand: ||alpha / r * B A|| / ||W|| on the folder's own weights
    theirs = load_file(str(marian / "model.safetensors"))
    names = layer_names("marian", saved.model_config)
    for module, size in zip(w.adapters, w.update_size[-1]):
        a, b = saved.lora.tensors[f"{module}.lora_A"], saved.lora.tensors[f"{module}.lora_B"]
        weight = theirs["model." + names[f"{module}.weight"]]
        assert size == pytest.approx(float((4 / 2 * b @ a).norm() / weight.norm()), rel=1e-5)
    code, text = run("curves", out, "--chart", "lora_updates")
    assert code == 0 and "LoRA update size" in text and "dec L2 cross v" in text, text
    code, text = run("compare", marian, out, "--pairs", data, "--n", 4, "--json")
    assert code == 0, text
    compared = {c["module"]: c["size"] for c in json.loads(text)["changes"]["adapters"]}
    assert compared == pytest.approx(dict(zip(w.adapters, w.update_size[-1])), rel=1e-4)


@pytest.mark.parametrize("args, message", [
    (["--lora", "4"], "--lora: LoRA adapts a model: give --init MODEL"),
    (["--lora", "0"], "--lora"),
    (["--lora-targets", "q_proj,ff"], "--lora-targets: must be some of q_proj, k_proj, v_proj, out_proj"),
    (["--lora-dropout", "1"], "--lora-dropout"),
])
def test_bad_lora_options_are_one_line_exit_2_and_nothing_written(marian, tmp_path, args, message):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    init = ["--init", marian] if args[0] != "--lora" or args[1] != "4" else []
    code, text = run("train", *init, "--data", data, "--out", tmp_path / "x.safetensors", "--lora", 4,
                     *args)
    assert code == 2 and message in text and len(text.strip().splitlines()) == 1, text
    assert not (tmp_path / "x.safetensors").exists()


def test_lora_without_peft_is_one_line_naming_the_extra(marian, tmp_path, monkeypatch):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft raises ImportError
    code, text = run("train", "--init", marian, "--data", data, "--lora", 4,
                     "--out", tmp_path / "x.safetensors")
    assert code == 1 and "pip install 'minitx[lora]'" in text and len(text.strip().splitlines()) == 1, text
