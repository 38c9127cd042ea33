"""The run's evaluation is cheap but tells the same truth: teacher-forced exact match equals
greedy decoding's, sequence by sequence, and an evaluation that can no longer reach --until
stops at the batch that shows it."""

from __future__ import annotations

import torch

from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.interp.decode import exact_match, greedy_decode
from minitx.core.training.evaluation import evaluate, teacher_forced_exact_match
from minitx.core.training.trainer import Trainer


def _half_trained(tiny_model_cfg, tiny_train_cfg, eval_size: int = 32) -> Trainer:
    """A tiny model partway through learning: some sequences right, some wrong."""
    trainer = Trainer(tiny_model_cfg.replace(dropout=0.0),
                      tiny_train_cfg.replace(task="copy", min_source_len=1, max_source_len=3, steps=60,
                                             lr=5e-3, eval_size=eval_size))
    trainer.run()
    return trainer


def test_teacher_forced_exact_match_is_greedy_decodings_sequence_by_sequence(tiny_model_cfg,
                                                                              tiny_train_cfg):
    trainer = _half_trained(tiny_model_cfg, tiny_train_cfg)
    batch = trainer.task.batch(400, torch.Generator().manual_seed(7))
    model, cfg = trainer.model, trainer.model.cfg
    cap = trainer.task.decode_cap(batch.src.shape[1], cfg.max_len)
    forced = teacher_forced_exact_match(model, batch, cap)
    greedy = exact_match(greedy_decode(model, batch.src, max_new_tokens=cap), batch.labels,
                         eos=cfg.eos_id, pad=cfg.pad_id)
    assert 0 < int(greedy.sum()) < len(greedy)  # a mix, so the comparison can fail
    assert torch.equal(forced, greedy)


def test_a_model_without_its_causal_mask_is_judged_by_greedy_decoding(tiny_model_cfg):
    """Without the mask the decoder sees the answer under teacher forcing, so the shortcut would
    be wrong there: evaluate() decodes instead."""
    model = Trainer(tiny_model_cfg, _cfg()).model
    model.causal = False
    task = get_task("reverse", 3, 6)
    forced = evaluate(model, task, 64, teacher_forced=True).accuracy
    assert forced == evaluate(model, task, 64).accuracy


def _cfg():
    from minitx.core.config import TrainConfig

    return TrainConfig(steps=1, batch_size=8, min_source_len=3, max_source_len=6, eval_every=0, device="cpu")


def test_an_evaluation_that_cannot_reach_the_target_stops_at_the_first_batch_showing_it():
    model = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                                n_decoder_layers=1, max_len=16), _cfg()).model  # untrained
    task = get_task("reverse", 3, 6)
    result = evaluate(model, task, 500, batch_size=100, teacher_forced=True, stop_below=0.99)
    assert result.n == 100 and result.accuracy < 0.99
    assert evaluate(model, task, 500, batch_size=100, teacher_forced=True).n == 500


def test_a_run_reaching_until_is_judged_on_all_its_evaluation_sequences(tiny_model_cfg,
                                                                         tiny_train_cfg):
    """The early stop only ends evaluations that fail: the one meeting --until saw every sequence."""
    trainer = _half_trained(tiny_model_cfg, tiny_train_cfg, eval_size=300)  # 3 batches of 100
    low = trainer.evaluate(stop_below=1.0)
    assert low.n < trainer.cfg.eval_size
    met = trainer.evaluate(stop_below=low.accuracy / 2)
    assert met.n == trainer.cfg.eval_size and met.accuracy >= low.accuracy / 2
    assert trainer.eval_seconds > 0
