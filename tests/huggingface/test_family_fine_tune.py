"""Every family minitx opens fine-tunes as transformers trains it (core/families.py): on tiny
random mBART-50, mBART (cc25's tokeniser), NLLB (M2M100's network), Pegasus and UMT5 folders,
five AdamW steps of
`train --init` (minitx's Trainer, the family's defaults: weight decay 0.01 in Trainer's groups)
end at the weights of a plain transformers loop (model(..., labels=...), clip at 1,
torch.optim.AdamW in Trainer's two groups) on the same pairs, every tensor within 1e-5; the
tensors transformers keeps fixed (final_logits_bias, a buffer; NLLB's output bias, which it
lacks; Pegasus' sinusoid tables) are where they were, and UMT5's PAD rows learn.
Marian, T5 and BART are tests/huggingface/test_fine_tune_exact.py's."""

from __future__ import annotations

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.families import FAMILIES, OUTPUT_BIAS
from minitx.core.training import optim
from minitx.core.training.fine_tune import family_of, fine_tune_defaults
from minitx.core.training.optim import decayed_names
from minitx.core.training.trainer import Trainer
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.conftest import adamw_loop, labelled_batch
from tests.huggingface.test_fine_tune_exact import CLIP, PAIRS, close, pairs_of, trainer_groups
from tests.huggingface.tiny_folders import load_reference, save_model

STEPS = 5
LR = 1e-3  # larger than the defaults, so that a tensor trained by one side only shows at once
KEY = {"mbart50": "mbart", "nllb": "m2m_100", "pegasus": "pegasus", "umt5": "umt5", "mbart-cc25": "mbart"}
NAMES = {"mbart50": "mBART-50", "nllb": "NLLB-200", "pegasus": "Pegasus", "umt5": "UMT5",
         "mbart-cc25": "mBART"}
TIER_ONE = ("nllb", "umt5")
FOLDERS = [pytest.param(f, marks=() if f in TIER_ONE else pytest.mark.slow) for f in KEY]


def minitx_steps(path, data, **options):
    """The Trainer of `train --init path --data data` (its family's defaults, lr LR, `options`
    over them), every pair in each step, after STEPS steps; and each step's loss."""
    base = checkpoints.load(str(path))
    cfg = TrainConfig(task="data", data=str(data), valid=str(data), init=str(path),
                      **{**fine_tune_defaults(family_of(base.task)), "lr": LR, "batch_size": len(PAIRS),
                         "steps": STEPS, "eval_every": 0, "watch": False, "device": "cpu", **options})
    trainer = Trainer(base.model_config.replace(dropout=0.0), cfg, base=base)
    trainer.gradients = {}  # each trained parameter's gradient at each step, before clipping
    for name, param in trainer.model.named_parameters():
        if param.requires_grad:
            param.register_post_accumulate_grad_hook(
                lambda p, name=name: trainer.gradients.setdefault(name, []).append(p.grad.clone()))
    return base, trainer, [trainer.train_step().loss for _ in range(STEPS)]


def transformers_steps(path, reference, groups=None, gradients=None):
    """A plain transformers loop: the pairs as its tokeniser makes them (labels padded with
    -100), STEPS AdamW steps in `groups` (default: Trainer's, at decay 0.01), clipped at CLIP;
    each step's loss. `gradients`, where given, gets each parameter's gradient at each step
    (keyed by its id)."""
    batch, labels = labelled_batch(path, PAIRS)
    groups = trainer_groups(reference, 0.01) if groups is None else groups
    optimiser = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    return adamw_loop(reference, batch, labels, optimiser,
                      [p for p in reference.parameters() if p.requires_grad], CLIP, STEPS, gradients)


def coin_tosses(mine: list[torch.Tensor], theirs: list[torch.Tensor]) -> torch.Tensor:
    """Where a gradient of one tensor is zero but for rounding (under 1e-4 of the tensor's
    largest, near a float32 sum's error) and the two loops disagree on it by more than 1% at
    some step: a ReLU unit on the edge of dying in every position lands on either side of zero
    by the order of a matrix product's sums, and Adam turns that into a whole step of either
    sign. A mask, the tensor's shape."""
    return torch.stack([((m - t).abs() > 1e-2 * t.abs()) & (t.abs() < 1e-4 * t.abs().max())
                        for m, t in zip(mine, theirs)]).any(0)


def close_but_coin_tosses(mine: torch.Tensor, theirs: torch.Tensor, tossed: torch.Tensor) -> bool:
    """`close` over the elements that were no coin toss; at most one in a hundred may be (or one
    of a smaller tensor)."""
    return (int(tossed.sum()) <= max(1, tossed.numel() // 100)
            and close(mine[~tossed], theirs[~tossed]))


@pytest.fixture
def one_thread():
    """Both loops on one thread, whatever an earlier test of the process set: Adam turns the last
    bits of a near-zero gradient into whole steps, and a reduction split over threads sums in
    another order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("folder_family", FOLDERS)
def test_five_adamw_steps_of_a_fine_tune_end_at_a_transformers_loops_weights(folder_family, tmp_path,
                                                                               one_thread, monkeypatch):
    path = save_model(tmp_path / folder_family, folder_family)
    key = KEY[folder_family]
    if key == "m2m_100":  # its tied token table keeps its own gradient, as at NLLB's real size
        table = checkpoints.load(str(path)).model.src_embed.weight
        monkeypatch.setattr(optim, "OWN_GRADIENT_BYTES", table.numel() * table.element_size())
    base, trainer, losses = minitx_steps(path, write_pairs(tmp_path / "pairs.tsv", PAIRS))
    assert family_of(base.task) == key and base.task.family_name() == NAMES[folder_family]

    reference = load_reference(path)  # eval(): no dropout, as minitx's run above
    if key == "pegasus":  # its sinusoids are nn.Embedding(_freeze=True); from_pretrained unfreezes them
        for stack in (reference.model.encoder, reference.model.decoder):
            stack.embed_positions.weight.requires_grad_(False)
    their_gradients = {}
    their_losses = transformers_steps(path, reference, gradients=their_gradients)
    assert losses == pytest.approx(their_losses, rel=1e-5)
    if key == "m2m_100":  # the table's own gradient: let go after each step, not a slot kept
        assert trainer.model.src_embed.weight.grad is None

    trained = {n: p.detach() for n, p in trainer.model.named_parameters() if p.requires_grad}
    fixed = {n for n, p in trainer.model.named_parameters() if not p.requires_grad}
    assert fixed == set(FAMILIES[key].frozen)  # what transformers does not train, no more
    mapped = [m for m in pairs_of(reference, trainer.model_cfg, key) if m[0] in trained]
    assert {m for m, _, _ in mapped} == set(trained)  # every trained tensor compared
    # a key bias's gradient is zero but for rounding (softmax ignores what adds to every score):
    # Adam moves it by a coin toss on both sides, so it is left out; so is any element whose
    # two gradients differ at some step (see coin_tosses)
    bad = [mine for mine, theirs, rows in mapped if "k_proj.bias" not in mine
           and not close_but_coin_tosses(trained[mine], theirs.detach()[rows],
                                         coin_tosses(trainer.gradients[mine],
                                                     [g[rows] for g in their_gradients[id(theirs)]]))]
    assert not bad, f"{key} weights after {STEPS} AdamW steps differ: {bad}"

    before = dict(base.model.named_parameters())
    for name in fixed:  # as the base has them
        assert torch.equal(dict(trainer.model.named_parameters())[name], before[name])
    if key in ("mbart", "pegasus"):  # final_logits_bias: a buffer, the base's still
        assert torch.equal(trainer.model.output.bias, reference.final_logits_bias[0])
    if key == "m2m_100":  # no output bias at all: minitx's stays zeros
        assert OUTPUT_BIAS in fixed and not trainer.model.output.bias.any()
    if FAMILIES[key].pad_row_trained:  # no padding_idx: the decoder's start row (PAD) learns
        pad = trainer.model_cfg.pad_id
        assert not torch.equal(trained["src_embed.weight"][pad], before["src_embed.weight"][pad])


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("folder_family", ["mbart50", "umt5"])
def test_minitx_decays_the_parameters_transformers_trainer_decays(folder_family, tmp_path):
    """Biases, every norm's weight (LayerNorm, T5's RMSNorm, layernorm_embedding) and T5's
    relative position bias spared; token and position tables and projections decayed."""
    from transformers import Trainer as HfTrainer

    path = save_model(tmp_path / folder_family, folder_family)
    base, reference = checkpoints.load(str(path)), load_reference(path)
    theirs = {id(p) for n, p in reference.named_parameters()
              if n in set(HfTrainer.get_decay_parameter_names(None, reference))}
    ours = decayed_names(base.model)
    key = KEY[folder_family]
    own = {n for n, _ in base.model.named_parameters()} - set(FAMILIES[key].frozen)
    mapped = [(mine, id(p)) for mine, p, _ in pairs_of(reference, base.model_config, key) if mine in own]
    assert len(mapped) == len(own)  # every tensor a fine-tune trains
    differ = [mine for mine, param in mapped if (mine in ours) != (param in theirs)]
    assert not differ, differ
    assert any(mine not in ours for mine, _ in mapped) and any(mine in ours for mine, _ in mapped)


@pytest.mark.filterwarnings("ignore")
def test_decay_all_decays_every_parameter_as_one_adamw_group(tmp_path):
    path = save_model(tmp_path / "nllb", "nllb")
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    _, trainer, losses = minitx_steps(path, data, weight_decay=0.5, decay_all=True)
    reference = load_reference(path)
    one_group = [{"params": [p for p in reference.parameters() if p.requires_grad], "weight_decay": 0.5}]
    assert losses == pytest.approx(transformers_steps(path, reference, one_group), rel=1e-5)
    _, spared, _ = minitx_steps(path, data, weight_decay=0.5)  # the default: Trainer's groups
    trained = dict(trainer.model.named_parameters())
    for mine, theirs, rows in pairs_of(reference, trainer.model_cfg, "m2m_100"):
        if mine in trained and "k_proj.bias" not in mine:
            assert close(trained[mine].detach(), theirs.detach()[rows]), mine
    norm = "encoder_norm.weight"  # a norm's weight: decayed by --decay-all only
    assert not close(dict(spared.model.named_parameters())[norm].detach(), trained[norm].detach(), tol=1e-4)
