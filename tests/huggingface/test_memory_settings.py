"""How a fine-tune's step holds its memory (TrainConfig.precision, gradient_checkpointing): on a
tiny Marian folder made by transformers, checkpointing each layer gives the gradients of the
step without it (dropout on, so its random masks must be replayed), keeps fewer activations for
backward, and a bf16 step's loss stays near fp32's."""

from __future__ import annotations

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.trainer import Trainer
from tests.huggingface.changed_folders import pairs_file
from tests.huggingface.tiny_folders import save_model

# bf16 keeps 8 significant bits: each product and sum is rounded by up to 2^-9 relative, and the
# rounding of the logits (B, T, V) averages out over a loss of many tokens rather than adding up.
# 2% of the loss is far above that (0.01% to 0.1% here over 5 steps) and far below what a wrong autocast would
# give (fp16 overflow, a lost scale: the loss off by whole units).
BF16_LOSS_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory")
    return save_model(root / "marian", "marian"), pairs_file(root / "pairs.tsv", 24, seed=1)


def trainer_of(marian, dropout: float = 0.1, base=None, base_given: bool = False, **fields) -> Trainer:
    folder, data = marian
    base = base or checkpoints.load(str(folder))
    cfg = TrainConfig(task="data", data=str(data), valid=str(data), init=str(folder),
                      **{**fine_tune_defaults("marian"), "lr": 1e-3, "batch_size": 8, "steps": 5,
                         "eval_every": 0, "device": "cpu", "watch": False, **fields})
    return Trainer(base.model_config.replace(dropout=dropout), cfg, base=base, base_given=base_given)


def gradients(trainer: Trainer) -> dict[str, torch.Tensor]:
    trainer.train_step()
    return {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def test_gradient_checkpointing_gives_the_same_gradients_with_dropout_on(marian):
    plain = gradients(trainer_of(marian))
    checked = trainer_of(marian, gradient_checkpointing=True)
    assert checked.model.checkpoint_layers
    again = gradients(checked)
    assert plain.keys() == again.keys()
    for name, grad in plain.items():
        assert float((again[name] - grad).abs().max()) <= 1e-6 * max(1.0, float(grad.abs().max())), name


def saved_bytes(trainer: Trainer) -> int:
    """Bytes of the tensors autograd keeps for backward during one forward of the step's batch."""
    total = 0

    def pack(tensor):
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    src, decoder_input, _ = trainer._feed(trainer.next_batch())
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        trainer.model(src, decoder_input)
    return total


def test_gradient_checkpointing_keeps_fewer_activations_for_backward(marian):
    plain, checked = trainer_of(marian), trainer_of(marian, gradient_checkpointing=True)
    assert saved_bytes(checked) < 0.7 * saved_bytes(plain)


def test_checkpointing_is_only_for_training_with_gradients(marian):
    trainer = trainer_of(marian, gradient_checkpointing=True)
    trainer.model.eval()
    src, decoder_input, _ = trainer._feed(trainer.next_batch())
    with torch.no_grad():  # an evaluation's forward: the layers run as they are
        plain = trainer_of(marian).model.eval()
        assert torch.equal(trainer.model(src, decoder_input), plain(src, decoder_input))


def test_a_bf16_step_loss_stays_within_tolerance_of_fp32(marian):
    fp32, bf16 = trainer_of(marian, dropout=0.0), trainer_of(marian, dropout=0.0, precision="bf16")
    for _ in range(5):
        want, got = fp32.train_step().loss, bf16.train_step().loss
        assert abs(got - want) <= BF16_LOSS_TOLERANCE * want, (got, want)
        assert got != want  # the step did run in bf16
    # the weights the optimiser keeps stay float32
    assert {p.dtype for p in bf16.model.parameters()} == {torch.float32}


def test_bf16_and_checkpointing_are_kept_in_the_run_config_and_omitted_at_their_defaults():
    cfg = TrainConfig(precision="bf16", gradient_checkpointing=True)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert not {"precision", "gradient_checkpointing"} & TrainConfig().to_dict().keys()
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp16")


def test_under_lora_bf16_holds_the_frozen_matrices_in_bf16_and_the_loss_stays_near_fp32(marian):
    fp32 = trainer_of(marian, dropout=0.0, lora_rank=4)
    bf16 = trainer_of(marian, dropout=0.0, lora_rank=4, precision="bf16")
    frozen = [p for p in bf16.model.parameters() if not p.requires_grad and p.dim() >= 2]
    assert frozen and {p.dtype for p in frozen} == {torch.bfloat16}
    assert {p.dtype for p in bf16.trainable()} == {torch.float32}  # the adapters train in float32
    for _ in range(3):
        want, got = fp32.train_step().loss, bf16.train_step().loss
        assert abs(got - want) <= BF16_LOSS_TOLERANCE * want, (got, want)
    assert bf16.evaluate().n > 0  # evaluation and watching run on the bf16 base too


def test_a_given_base_is_the_runs_alone_and_the_run_is_a_kept_bases_step_for_step(marian):
    # the command line gives its base to the run: the run holds its tensors alone (so a bf16
    # LoRA's float32 matrices are freed as they are converted), the file still records the
    # float32 base, and the adapters are made as on a kept base, in float32
    kept = trainer_of(marian, dropout=0.0, lora_rank=4, precision="bf16")
    base = checkpoints.load(str(marian[0]))
    given = trainer_of(marian, dropout=0.0, lora_rank=4, precision="bf16", base=base, base_given=True)
    assert {p.device.type for p in base.model.parameters()} == {"meta"}  # holds nothing now
    frozen = [p for p in given.model.parameters() if not p.requires_grad and p.dim() >= 2]
    assert frozen and {p.dtype for p in frozen} == {torch.bfloat16}
    assert {p.dtype for p in given.trainable()} == {torch.float32}
    assert given.base_info["sha256"] == kept.base_info["sha256"]
    for _ in range(4):
        assert given.train_step().loss == kept.train_step().loss


def test_gradient_checkpointing_gives_a_loras_adapters_the_same_gradients(marian):
    plain = gradients(trainer_of(marian, lora_rank=4))
    again = gradients(trainer_of(marian, lora_rank=4, gradient_checkpointing=True))
    assert plain.keys() == again.keys() and all("lora" in name for name in plain)
    for name, grad in plain.items():
        assert float((again[name] - grad).abs().max()) <= 1e-6 * max(1.0, float(grad.abs().max())), name


@pytest.mark.parametrize("fast", [True, False])
def test_train_says_once_when_bf16_is_emulated_on_this_device(marian, tmp_path, monkeypatch, fast):
    from click.testing import CliRunner

    import minitx.core.training.memory_estimate as memory_estimate
    from minitx.tui.cli.main import main

    monkeypatch.setattr(memory_estimate, "bf16_is_fast", lambda device: fast)
    folder, data = marian
    result = CliRunner().invoke(main, ["train", "--init", str(folder), "--data", str(data), "--steps", "1",
                                       "--precision", "bf16", "--threads", "1", "--no-watch",
                                       "--out", str(tmp_path / "ft.safetensors")])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if "no bf16 instructions" in line]
    assert notes == ([] if fast else [f"note: {memory_estimate.BF16_EMULATED}"])
