"""The whole reference run: the reference recipe must learn to reverse, with an anti-diagonal."""

import pytest
import torch

from minitx.core.config import recipe
from minitx.core.training.trainer import Trainer


@pytest.mark.slow
def test_reference_recipe_learns_reversal_with_an_anti_diagonal_cross_attention():
    ref = recipe("reference")
    trainer = Trainer(ref.model, ref.train.replace(eval_every=0, device="cpu"))
    trainer.run()
    assert trainer.evaluate(500, seed=2024).accuracy >= 0.99

    task, model = trainer.task, trainer.model.eval()
    batch = task.batch(200, torch.Generator().manual_seed(7))
    with torch.no_grad():
        _, maps = model(batch.src, batch.decoder_input, return_attention=True)
    last_layer = maps.cross[-1].mean(dim=1)  # (B, T, S), averaged over heads
    argmax = last_layer.argmax(dim=-1)  # (B, T)
    expected = task.alignment(batch.src, batch.lengths)  # (B, S_out, S)
    rows = expected.any(-1)  # output positions with an expected source position
    S = batch.src.shape[1]
    hit = expected.gather(2, argmax[:, :S, None]).squeeze(-1)  # (B, S)
    assert hit[rows].float().mean() >= 0.9
