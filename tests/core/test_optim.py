"""core/optim.FusedAdam: the Trainer's Adam, which must step exactly like torch.optim.Adam(fused=True)
and keep training start-up free of torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import torch

from minitx.core.config import ModelConfig
from minitx.core.model import Seq2Seq
from minitx.core.optim import FusedAdam
from minitx.core.tasks import get_task


def _losses_and_weights(make_optimizer, steps=5):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                                n_decoder_layers=1, max_len=16))
    params = list(model.parameters())
    optimizer = make_optimizer(params)
    task, generator = get_task("reverse", 3, 6), torch.Generator().manual_seed(1)
    for step in range(steps):
        batch = task.batch(8, generator)
        optimizer.param_groups[0]["lr"] = 1e-3 * (step + 1)  # the Trainer's schedule, by hand
        loss = torch.nn.functional.cross_entropy(model(batch.src, batch.decoder_input).flatten(0, 1),
                                                 batch.labels.flatten(), ignore_index=10)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return params, optimizer


def test_fused_adam_steps_bit_for_bit_like_torchs_fused_adam():
    ours, ours_opt = _losses_and_weights(lambda p: FusedAdam(p, 1e-3, (0.9, 0.98), 1e-9))
    theirs, theirs_opt = _losses_and_weights(
        lambda p: torch.optim.Adam(p, lr=1e-3, betas=(0.9, 0.98), eps=1e-9, fused=True))
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    for a, b in zip(ours, theirs):
        mine, torchs = ours_opt.state[a], theirs_opt.state[b]
        assert set(mine) == set(torchs)
        assert all(torch.equal(mine[k], torchs[k]) and mine[k].dtype == torchs[k].dtype for k in mine)


def test_a_training_step_does_not_import_torch_dynamo():
    code = ("import sys; from minitx.core.train import Trainer; from minitx.core.config import *; "
            "t = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=16), "
            "TrainConfig(steps=2, batch_size=4, min_len=3, max_len=5, eval_every=1, eval_size=8)); "
            "t.run(); print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
