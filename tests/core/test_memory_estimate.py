"""A fine-tune's peak memory, estimated before it starts (core/training/memory_estimate.py): its
parts by the rule (weights, gradients, optimiser state), what checkpointing and bf16 save, the
one-line refusal of `train --init` naming the options that would fit, and the estimate against
the peak a run measures."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training import memory_estimate
from minitx.core.training.memory_estimate import (
    ESTIMATE_FACTOR,
    PROCESS_BYTES,
    WontFit,
    check_fits,
    estimate,
    shapes_model,
)
from tests.cli.conftest import assert_one_line_error, run_cli
from tests.huggingface.changed_folders import pairs_file
from tests.huggingface.tiny_folders import save_model

CFG = ModelConfig(d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2, vocab_size=500)
TRAIN = TrainConfig(task="data", data="pairs.tsv", init="base", batch_size=16)  # a fine-tune


def unique_parameters(cfg: ModelConfig) -> int:
    model = shapes_model(cfg)
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def test_adamw_holds_weights_gradients_and_two_moments_in_float32():
    n = unique_parameters(CFG)
    got = estimate(CFG, TRAIN, 20, 20)
    assert (got.weights, got.gradients, got.optimiser) == (4 * n, 4 * n, 8 * n)
    assert got.base == 0 and got.process == PROCESS_BYTES
    assert estimate(CFG, TRAIN, 20, 20, watched_base=True).base == 4 * n  # kept for --general


def test_adafactor_factors_its_second_moment_far_below_adams():
    adam = estimate(CFG, TRAIN, 20, 20).optimiser
    assert estimate(CFG, TRAIN.replace(optimizer="adafactor"), 20, 20).optimiser < adam / 10


def test_a_frozen_base_in_bf16_is_counted_at_two_bytes_and_only_what_trains_has_state():
    model = shapes_model(CFG)
    for name, p in model.named_parameters():
        if "encoder" in name:
            p.requires_grad_(False)
            p.data = p.data.to(torch.bfloat16)
    frozen = sum(p.numel() for n, p in model.named_parameters() if "encoder" in n)
    trained = unique_parameters(CFG) - frozen
    got = estimate(CFG, TRAIN, 20, 20, model=model)
    assert got.weights == 2 * frozen + 4 * trained and got.gradients == 4 * trained


def test_lora_trains_rank_times_in_plus_out_for_each_adapted_projection_and_bf16_halves_the_base():
    n, r = unique_parameters(CFG), 8
    # q_proj and v_proj (peft's default) of 2 encoder self-attentions and 2 decoder self- and
    # cross-attentions: 12 projections of 64 -> 64
    adapters = 12 * r * (64 + 64)
    got = estimate(CFG, TRAIN.replace(lora_rank=r), 20, 20)
    assert (got.gradients, got.optimiser) == (4 * adapters, 8 * adapters)
    assert got.weights == 4 * n + 4 * adapters
    matrices = sum(p.numel() for p in {id(p): p for p in shapes_model(CFG).parameters()}.values()
                   if p.dim() >= 2)
    half = estimate(CFG, TRAIN.replace(lora_rank=r, precision="bf16"), 20, 20)
    assert half.weights == 2 * matrices + 4 * (n - matrices) + 4 * adapters
    # the base's float32 weights as read: beside the bf16 copies where the caller keeps the base
    # (the app), else the peak before training, each matrix then made bf16 where it is
    assert got.base == 0 and half.base == 4 * n and half.loading == 0
    given = estimate(CFG, TRAIN.replace(lora_rank=r, precision="bf16"), 20, 20, base_kept=False)
    assert given.base == 0 and given.loading == 4 * n
    assert given.total == max(given.training, 4 * n + PROCESS_BYTES) < half.total
    assert estimate(CFG, TRAIN.replace(lora_rank=r), 20, 20, base_kept=False) == got  # float32: shared


def test_checkpointing_bf16_and_a_smaller_batch_each_take_fewer_activations():
    plain = estimate(CFG, TRAIN, 40, 40).activations
    assert estimate(CFG, TRAIN.replace(gradient_checkpointing=True), 40, 40).activations < plain
    assert estimate(CFG, TRAIN.replace(precision="bf16"), 40, 40).activations < plain
    assert estimate(CFG, TRAIN.replace(batch_size=4), 40, 40).activations == pytest.approx(plain / 4)
    assert estimate(CFG, TRAIN, 80, 80).activations > 2 * plain  # longer pairs, more (attention: squared)


def test_a_run_that_will_not_fit_is_refused_naming_settings_that_would():
    cpu = torch.device("cpu")
    need = estimate(CFG, TRAIN, 40, 40)
    lighter = estimate(CFG, TRAIN.replace(precision="bf16", gradient_checkpointing=True), 40, 40)
    assert lighter.total < need.total
    with pytest.raises(WontFit) as refused:  # a CPU with bf16 instructions
        check_fits(CFG, TRAIN, 40, 40, cpu, available=lighter.total + 1, bf16_fast=True)
    line = str(refused.value)
    assert "\n" not in line and line.startswith("memory: ")
    assert "--precision bf16" in line and "--gradient-checkpointing" in line and "slow" not in line
    assert check_fits(CFG, TRAIN, 40, 40, cpu, available=need.total) == need
    lightest = TRAIN.replace(lora_rank=16, precision="bf16", gradient_checkpointing=True)
    with_lora = estimate(CFG, lightest, 40, 40)
    with pytest.raises(WontFit, match="would fit with --lora 16 --precision bf16 --gradient-checkpointing"):
        check_fits(CFG, TRAIN, 40, 40, cpu, available=with_lora.total + 1, bf16_fast=True)
    with pytest.raises(WontFit, match="--batch-size 1 needs.*optimiser's moments alone"):  # nothing fits:
        check_fits(CFG, TRAIN, 40, 40, cpu, available=PROCESS_BYTES)  # says what cannot
    # a given base (the command line) of many weights and short pairs: the leanest is a bf16
    # LoRA, whose peak is reading the base
    wide = CFG.replace(vocab_size=50_000)
    with pytest.raises(WontFit, match="--lora 16 --precision bf16.*base's float32 weights, as they are read"):
        check_fits(wide, TRAIN, 4, 4, cpu, available=PROCESS_BYTES, bf16_fast=True, base_kept=False)


def test_where_bf16_is_emulated_the_settings_without_it_come_first_and_bf16_is_said_to_be_slow():
    cpu, asked = torch.device("cpu"), TRAIN.replace(gradient_checkpointing=True)
    with_bf16 = estimate(CFG, asked.replace(precision="bf16"), 40, 40)
    with_lora = estimate(CFG, asked.replace(lora_rank=16), 40, 40)
    room = max(with_bf16.total, with_lora.total) + 1  # both fit: the hardware decides which is named
    assert room <= estimate(CFG, asked, 40, 40).total
    with pytest.raises(WontFit) as fast:
        check_fits(CFG, asked, 40, 40, cpu, available=room, bf16_fast=True)
    assert "--precision bf16" in str(fast.value) and "slow" not in str(fast.value)
    with pytest.raises(WontFit) as emulated:
        check_fits(CFG, asked, 40, 40, cpu, available=room, bf16_fast=False)
    assert "with --lora 16 (about" in str(emulated.value) and "bf16" not in str(emulated.value)
    # where a float32 LoRA fits only at a smaller batch, that comes before bf16 at this one
    lora_fp32 = estimate(CFG, asked.replace(lora_rank=16), 40, 40)
    smaller = estimate(CFG, asked.replace(lora_rank=16, batch_size=8), 40, 40)
    with pytest.raises(WontFit, match=r"would fit with --lora 16 --batch-size 8 \(about"):
        check_fits(CFG, asked, 40, 40, cpu, available=smaller.total + 1, bf16_fast=False)
    assert smaller.total < lora_fp32.total
    # bf16 alone fits (a given base: its float32 weights as read are its peak, below a float32
    # LoRA's at the same batch): it is named, as slow
    leanest_fp32 = estimate(CFG, asked.replace(lora_rank=16, batch_size=1), 40, 40, base_kept=False)
    lora_bf16 = estimate(CFG, asked.replace(lora_rank=16, precision="bf16", batch_size=1), 40, 40,
                         base_kept=False)
    assert lora_bf16.total < leanest_fp32.total
    with pytest.raises(WontFit, match=r"--lora 16 --precision bf16 --batch-size 1 \(about.*\(slow here: "
                                      r"this device has no bf16"):
        check_fits(CFG, asked, 40, 40, cpu, available=lora_bf16.total + 1, bf16_fast=False, base_kept=False)


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    root = tmp_path_factory.mktemp("estimate")
    return save_model(root / "marian", "marian"), pairs_file(root / "pairs.tsv", 24, seed=1)


def test_train_init_refuses_in_one_line_and_no_memory_check_lets_it_run(marian, tmp_path, monkeypatch):
    folder, data = marian
    monkeypatch.setattr(memory_estimate, "available_bytes", lambda device: PROCESS_BYTES)
    args = ("train", "--init", str(folder), "--data", str(data), "--steps", "1", "--eval-every", "0",
            "--device", "cpu", "--threads", "1", "--quiet", "--out", str(tmp_path / "ft.safetensors"))
    line = assert_one_line_error(run_cli(*args))
    assert "memory: this fine-tune needs about" in line and "is available" in line
    assert not (tmp_path / "ft.safetensors").exists()
    assert run_cli(*args, "--no-memory-check").exit_code == 0


MEASURE = textwrap.dedent("""
    import json, resource, sys
    import torch
    torch.set_num_threads(1)
    from minitx import checkpoints
    from minitx.core.config import TrainConfig
    from minitx.core.training.fine_tune import fine_tune_defaults
    from minitx.core.training.trainer import Trainer
    folder, data, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    base = checkpoints.load(folder)
    cfg = TrainConfig(task="data", data=data, valid=data, init=folder, **{**fine_tune_defaults("marian"),
                      "batch_size": batch, "steps": 2, "eval_every": 0, "device": "cpu", "watch": False})
    trainer = Trainer(base.model_config, cfg, base=base, check_memory=True)
    del base
    for _ in range(2):
        trainer.train_step()
    print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "estimate": trainer.memory.total}))
""")


@pytest.mark.slow
def test_the_estimate_is_within_its_factor_of_the_peak_a_fine_tune_measures(tmp_path):
    # wide enough that the tensors, not Python and torch, are most of the process
    folder = save_model(tmp_path / "marian", "marian", d_model=512, d_ff=2048, layers=3, heads=8)
    data = pairs_file(tmp_path / "pairs.tsv", 64, seed=1)
    for batch in (4, 32):
        done = subprocess.run([sys.executable, "-c", MEASURE, str(folder), str(data), str(batch)],
                              capture_output=True, text=True, check=True)
        got = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = got["peak"] / got["estimate"]
        assert 1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR, (batch, got)
