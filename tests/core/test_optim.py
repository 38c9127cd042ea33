"""core/optim.FusedAdam: the Trainer's Adam, which must step exactly like torch.optim.Adam(fused=True)
and keep training start-up free of torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.optim import OWN_GRADIENT_BYTES, FusedAdam, decayed_names


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


# own_bytes: every parameter in the flat buffers (the default at this size), the bigger ones with
# gradients of their own (the tied token table among them), or all of them so
SPLITS = pytest.mark.parametrize("own_bytes", [OWN_GRADIENT_BYTES, 1024, 0], ids=["flat", "mixed", "own"])


@SPLITS
def test_fused_adam_steps_bit_for_bit_like_torchs_fused_adam(own_bytes):
    ours, ours_opt = _losses_and_weights(lambda p: FusedAdam(p, 1e-3, (0.9, 0.98), 1e-9, own_bytes=own_bytes))
    theirs, theirs_opt = _losses_and_weights(
        lambda p: torch.optim.Adam(p, lr=1e-3, betas=(0.9, 0.98), eps=1e-9, fused=True))
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    for a, b in zip(ours, theirs):
        mine, torchs = ours_opt.state[a], theirs_opt.state[b]
        assert set(mine) == set(torchs)
        assert all(torch.equal(mine[k], torchs[k]) and mine[k].dtype == torchs[k].dtype for k in mine)


@pytest.mark.slow  # tier 2: a whole process's imports
def test_a_training_step_does_not_import_torch_dynamo():
    code = ("import sys; from minitx.core.training.trainer import Trainer; from minitx.core.config import *; "
            "t = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=16), "
            "TrainConfig(steps=2, batch_size=4, min_source_len=3, max_source_len=5, eval_every=1, "
            "eval_size=8)); "
            "t.run(); print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _model_and_batch(**tied):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                                n_decoder_layers=1, max_len=16, dropout=0.0, **tied))
    batch = get_task("reverse", 3, 6).batch(8, torch.Generator().manual_seed(1))
    return model, batch


def _loss(model, batch):
    return torch.nn.functional.cross_entropy(model(batch.src, batch.decoder_input).flatten(0, 1),
                                             batch.labels.flatten(), ignore_index=10)


@SPLITS
def test_clip_grad_norm_over_the_flat_buffer_matches_torchs_clip(own_bytes):
    model, batch = _model_and_batch()
    twin = Seq2Seq(model.cfg)
    twin.load_state_dict(model.state_dict())
    optimizer = FusedAdam(list(model.parameters()), 1e-3, (0.9, 0.98), 1e-9, own_bytes=own_bytes)
    optimizer.zero_grad()
    (_loss(model, batch) * 50).backward()  # a norm well above 1, so clipping changes the grads
    _loss(twin, batch).mul(50).backward()
    ours = optimizer.clip_grad_norm(1.0)
    theirs = torch.nn.utils.clip_grad_norm_(list(twin.parameters()), 1.0)
    assert float(ours) > 1.0
    assert torch.allclose(ours, theirs, rtol=1e-5)
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-9)


@SPLITS
def test_parameters_and_grads_moved_by_other_code_are_still_trained(own_bytes):
    """model.zero_grad() drops .grad tensors and `p.data = ...` (what Module.to does) swaps a
    weight's storage: the optimizer takes both back instead of silently stepping buffers the
    model no longer uses."""
    model, batch = _model_and_batch()
    optimizer = FusedAdam(list(model.parameters()), 1e-2, (0.9, 0.98), 1e-9, own_bytes=own_bytes)
    for p in model.parameters():
        p.data = p.data + 0.5  # the model's weights live elsewhere now
    fresh = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer.zero_grad()
    model.zero_grad(set_to_none=True)  # and its grads are gone before backward
    _loss(model, batch).backward()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainable = [n for n, p in model.named_parameters() if p.grad is not None and bool(p.grad.any())]
    optimizer.step()
    assert all(torch.equal(v, fresh[k]) for k, v in before.items())  # it starts from the swapped weights
    moved = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert trainable and set(trainable) <= set(moved)
    assert optimizer.state  # and the moments are kept for a checkpoint


@SPLITS
def test_loaded_moments_continue_the_run_bit_for_bit(own_bytes):
    model, batch = _model_and_batch()
    twin = Seq2Seq(model.cfg)
    twin.load_state_dict(model.state_dict())
    first = FusedAdam(list(model.parameters()), 1e-3, (0.9, 0.98), 1e-9, own_bytes=own_bytes)
    for _ in range(3):
        first.zero_grad()
        _loss(model, batch).backward()
        first.step()
    twin.load_state_dict(model.state_dict())
    second = FusedAdam(list(twin.parameters()), 1e-3, (0.9, 0.98), 1e-9, own_bytes=own_bytes)
    names = dict(model.named_parameters())
    second.load_state({dict(twin.named_parameters())[n]: {k: v.clone() for k, v in first.state[p].items()}
                       for n, p in names.items()})
    for optimizer, m in ((first, model), (second, twin)):
        optimizer.zero_grad()
        _loss(m, batch).backward()
        optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))
    assert float(second.state[next(twin.parameters())]["step"]) == 4


def _decay_run(make_optimizer):
    """The parameters after five steps of `make_optimizer`'s (at weight decay 0.5: large, so a
    decay on the wrong tensors shows)."""
    return _losses_and_weights(make_optimizer)[0]


def _trainer_groups(params, decay, weight_decay):
    return [{"params": [p for p, d in zip(params, decay) if d], "weight_decay": weight_decay},
            {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0}]


@SPLITS
def test_adamw_with_a_decay_mask_steps_as_torchs_adamw_in_trainers_two_groups(own_bytes):
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                                max_len=16))
    decayed = decayed_names(model)
    decay = [n in decayed for n, _ in model.named_parameters()]
    assert any(decay) and not all(decay)
    ours = _decay_run(lambda p: FusedAdam(p, 1e-3, (0.9, 0.98), 1e-9, weight_decay=0.5, decay=decay,
                                          own_bytes=own_bytes))
    two_groups = _decay_run(lambda p: _OneLr(torch.optim.AdamW(
        _trainer_groups(p, decay, 0.5), lr=1e-3, betas=(0.9, 0.98), eps=1e-9, fused=True)))
    one_group = _decay_run(lambda p: _OneLr(torch.optim.AdamW(p, lr=1e-3, betas=(0.9, 0.98), eps=1e-9,
                                                              weight_decay=0.5, fused=True)))
    everywhere = _decay_run(lambda p: FusedAdam(p, 1e-3, (0.9, 0.98), 1e-9, weight_decay=0.5,
                                                own_bytes=own_bytes))
    assert all(torch.equal(a, b) for a, b in zip(ours, two_groups))
    assert all(torch.equal(a, b) for a, b in zip(everywhere, one_group))  # decay-all: one group
    spared = [a for a, b, d in zip(ours, one_group, decay) if not d and not torch.equal(a, b)]
    assert spared  # the two references differ exactly where the mask spares a tensor


class _OneLr:
    """A torch optimiser whose every group takes the lr the test sets on the first."""

    def __init__(self, optimizer):
        self._optim = optimizer
        self.param_groups = [{"lr": 0.0}]

    def zero_grad(self, set_to_none=True):
        self._optim.zero_grad(set_to_none=set_to_none)

    def step(self):
        for group in self._optim.param_groups:
            group["lr"] = self.param_groups[0]["lr"]
        self._optim.step()


def test_adams_moments_are_made_at_the_first_step_so_a_released_base_never_overlaps_them():
    """The weights and gradients move into their buffers at once; the two moments (half of
    Adam's memory) only at the first step or a resumed run's load, by when a fine-tune's caller
    has let go of its base: the same updates, and state empty before it as torch.optim's."""
    params = [torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(5))]
    adam = FusedAdam(params, lr=0.1, betas=(0.9, 0.999), eps=1e-8)
    assert adam._exp_avg is None and adam.state == {}
    reference = torch.optim.Adam([p.detach().clone().requires_grad_() for p in params], lr=0.1)
    for p, q in zip(params, reference.param_groups[0]["params"]):
        p.grad = q.grad = torch.ones_like(p)
    adam.step()
    reference.step()
    assert adam._exp_avg is not None
    for p, q in zip(params, reference.param_groups[0]["params"]):
        assert torch.allclose(p, q)
        assert torch.allclose(adam.state[p]["exp_avg"], reference.state[q]["exp_avg"])
    resumed = FusedAdam([torch.nn.Parameter(p.detach().clone()) for p in params], 0.1, (0.9, 0.999), 1e-8)
    resumed.load_state({r: adam.state[p] for r, p in zip(resumed.params, params)})
    assert all(torch.equal(resumed.state[r]["exp_avg_sq"], adam.state[p]["exp_avg_sq"])
               for r, p in zip(resumed.params, params))


def test_a_big_parameter_keeps_the_gradient_backward_made_and_lets_it_go_after_the_step():
    """The tied token table (both embeddings and the output layer) over own_bytes: its gradient is
    the very tensor backward summed its three uses into (not copied into a slot beside it, which
    would hold a big table's gradient twice), and it is dropped once the step used it; the small
    parameters' stay views into the one buffer."""
    model, batch = _model_and_batch(tie_embeddings=True, tie_output=True)  # NLLB's, BART's
    table = model.src_embed.weight
    assert table is model.tgt_embed.weight and table is model.output.weight
    optimizer = FusedAdam(list(model.parameters()), 1e-3, (0.9, 0.98), 1e-9,
                          own_bytes=table.numel() * table.element_size())
    optimizer.zero_grad()
    assert table.grad is None
    made = []
    table.register_post_accumulate_grad_hook(lambda p: made.append(p.grad.data_ptr()))
    _loss(model, batch).backward()
    start = optimizer._grads.data_ptr()

    def in_buffer(grad):
        return start <= grad.data_ptr() < start + optimizer._grads.nbytes

    assert made == [table.grad.data_ptr()] and not in_buffer(table.grad)
    small = model.encoder[0].ff[0].bias
    assert in_buffer(small.grad)
    optimizer.step()
    assert table.grad is None and small.grad is not None
