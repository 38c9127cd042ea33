"""LoRA fine-tunes (`train --init MODEL --lora R`, core/model/lora.py) held to transformers + peft:
on tiny folders made by transformers, each of five steps of minitx's Trainer is the loss and
gradients of transformers' model with peft's LoraConfig at the same adapters, and torch's AdamW
step of them; the file holds the adapters and its base's record and opens through the base; a
PEFT folder exported from it loads into transformers' model with no missing or unexpected key
and decodes as minitx."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from minitx import checkpoints
from minitx.core.checkpoint import CheckpointError, read_raw
from minitx.core.config import TrainConfig
from minitx.core.importing.hf_export import export_folder
from minitx.core.importing.peft_export import PEFT_PREFIX, export_peft, hf_module_names
from minitx.core.interp.decode import greedy_decode
from minitx.core.model import lora
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.trainer import Trainer
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.conftest import labelled_batch, reference_tokeniser
from tests.huggingface.test_exact import assert_same_but_ties, generate, generated
from tests.huggingface.test_fine_tune_exact import close
from tests.huggingface.tiny_folders import load_reference, save_model

peft = pytest.importorskip("peft")

PAIRS = [("the cat sat on the mat", "die Katze sass auf der Matte"),
         ("a red house", "ein rotes Haus"),
         ("green trees and blue sky over the old town", "gruene Baeume und blauer Himmel"),
         ("good morning", "guten Morgen"),
         ("where is the station", "wo ist der Bahnhof")]
STEPS = 5
LR = 1e-2  # large enough that five steps move every adapter well past rounding
# of a gradient's norm: float32's rounding through the network, up to 1e-5 seen (Marian's A at
# step 2, where B is still one step from zero); a wrong scale or module is off by 1e-2 or more
GRADIENT_TOL = 1e-4


@pytest.fixture(scope="module", params=("marian", "t5"))
def folder(request, tmp_path_factory):
    return request.param, save_model(tmp_path_factory.mktemp(request.param) / request.param, request.param)


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    return save_model(tmp_path_factory.mktemp("marian") / "marian", "marian")


def lora_config(data, path, family: str, **fields) -> TrainConfig:
    """Every pair in every step (the whole file trains, and is what the run is measured on)."""
    return TrainConfig(task="data", data=str(data), valid=str(data), init=str(path),
                       **{**fine_tune_defaults(family), "lr": LR, "batch_size": len(PAIRS), "steps": STEPS,
                          "eval_every": 0, "device": "cpu", "lora_rank": 4, "lora_alpha": 16.0, **fields})


def lora_trainer(family, path, tmp_path, **fields) -> Trainer:
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    base = checkpoints.load(str(path))
    cfg = lora_config(data, path, family, **fields)
    return Trainer(base.model_config.replace(dropout=0.0), cfg, base=base)


def test_each_lora_step_is_transformers_and_peft_gradient_and_adamw_step(folder, tmp_path):
    """Five steps of minitx's Trainer, each held to transformers + peft from the adapters minitx
    had at that step: peft's model (LoraConfig of the same rank, alpha and modules) gives the
    same loss and the same gradient of every adapter; and torch.optim.AdamW, fed those gradients
    and clipped as transformers' Trainer clips, reaches minitx's adapters. Two loops run apart
    instead would part by more than rounding: Adam divides each element's step by the root of
    its second moment, so at this learning rate the order of a matrix product's sums (a
    different memory layout is enough) grew to 4e-4 of an adapter's norm in five steps."""
    family, path = folder
    trainer = lora_trainer(family, path, tmp_path)
    trained = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all(".lora_" in n for n in trained)  # only the adapters train
    my_gradients = {}  # adapter -> each gradient backward made (the first: the watch's numerics pass)
    for name, layer in lora.adapted_layers(trainer.model).items():
        for part in ("lora_A", "lora_B"):
            getattr(layer, part)[lora.ADAPTER].weight.register_post_accumulate_grad_hook(
                lambda p, key=f"{name}.{part}": my_gradients.setdefault(key, []).append(p.grad.clone()))
    before, losses = [], []  # the adapters each step started from; each step's loss
    for _ in range(STEPS):
        before.append({k: t.clone() for k, t in lora.adapter_tensors(trainer.model).items()})
        losses.append(trainer.train_step().loss)
    mine = lora.adapter_tensors(trainer.model)
    my_gradients = {name: steps[-STEPS:] for name, steps in my_gradients.items()}

    reference = load_reference(path)
    names = hf_module_names(family, trainer.model)
    config = peft.LoraConfig(r=4, lora_alpha=16.0, lora_dropout=0.0,
                             target_modules=sorted(names[m.removesuffix(".lora_A")] for m in mine
                                                   if m.endswith(".lora_A")))
    reference = peft.get_peft_model(reference, config).eval()
    theirs = {}  # minitx's adapter name -> peft's parameter
    for name in mine:
        module, _, part = name.rpartition(".")
        theirs[name] = reference.get_parameter(f"{PEFT_PREFIX}{names[module]}.{part}.default.weight")
    assert {id(p) for p in theirs.values()} == {id(p) for p in reference.parameters() if p.requires_grad}
    batch, labels = labelled_batch(path, PAIRS)
    bad = []
    for step, adapters in enumerate(before):
        with torch.no_grad():  # minitx's adapters at this step (peft draws its own A at random)
            for name, t in adapters.items():
                theirs[name].copy_(t)
        reference.zero_grad()
        loss = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         labels=labels).loss
        loss.backward()
        assert losses[step] == pytest.approx(loss.item(), rel=1e-5), f"step {step + 1}'s loss"
        bad += [f"step {step + 1}: {name}" for name, p in theirs.items()
                if not close(my_gradients[name][step], p.grad, tol=GRADIENT_TOL)]
    assert not bad, f"{family} adapters' gradients differ from peft's: {bad}"
    assert all(not torch.equal(t, before[0][name]) for name, t in mine.items())  # every adapter moved

    adapters = {name: t.clone().requires_grad_() for name, t in before[0].items()}
    cfg = trainer.cfg
    optimiser = torch.optim.AdamW(adapters.values(), lr=LR, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                                  weight_decay=cfg.weight_decay)
    for step in range(STEPS):
        for name, t in adapters.items():
            t.grad = my_gradients[name][step].clone()
        torch.nn.utils.clip_grad_norm_(list(adapters.values()), cfg.clip_grad_norm)
        optimiser.step()
    bad = [name for name, t in mine.items() if not close(t, adapters[name].detach())]
    assert not bad, f"{family} adapters after {STEPS} steps differ from torch's AdamW's: {bad}"


def test_lora_file_holds_adapters_and_opens_through_its_base(marian, tmp_path):
    trainer = lora_trainer("marian", marian, tmp_path, steps=3)
    trainer.run()
    out = trainer.save(tmp_path / "ft.safetensors")
    tensors, _ = read_raw(out)
    assert not [k for k in tensors if k.startswith("model.")]  # no base weights: its record instead
    adapters = {k for k in tensors if k.startswith("lora.")}
    assert adapters == {f"lora.{k}" for k in lora.adapter_tensors(trainer.model)}
    opened = checkpoints.load(str(out))
    assert opened.lora is not None and opened.lora.base["sha256"]
    assert not lora.has_adapters(opened.model)  # merged: an ordinary model for every command
    src = torch.tensor([opened.task.parse(s) for s, _ in PAIRS[:1]])
    # the adapters merged into the file's model, or beside the trainer's base in the cached decoder
    assert_same_but_ties(opened.model, src, greedy_decode(opened.model, src, 12).tolist(),
                         greedy_decode(trainer.model, src, 12).tolist())
    assert all(float(b.abs().max()) > 0 for k, b in opened.lora.tensors.items() if k.endswith("lora_B"))


def test_lora_file_says_when_its_adapters_are_broken_or_its_base_missing_or_changed(tmp_path):
    path = save_model(tmp_path / "marian", "marian")
    trainer = lora_trainer("marian", path, tmp_path, steps=1)
    trainer.run()
    out = trainer.save(tmp_path / "ft.safetensors")
    weights = path / "model.safetensors"
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    with safe_open(str(out), framework="pt") as f:  # an adapter taken out, or reshaped
        tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    name = next(k for k in tensors if k.endswith("lora_B"))
    save_file({k: t for k, t in tensors.items() if k != name}, str(tmp_path / "cut.safetensors"), metadata)
    with pytest.raises(CheckpointError, match=f"missing tensor '{name}'"):
        checkpoints.load(str(tmp_path / "cut.safetensors"))
    bent = {**tensors, name: tensors[name][:, :1].contiguous()}
    save_file(bent, str(tmp_path / "bent.safetensors"), metadata)
    with pytest.raises(CheckpointError, match=f"{name} has shape"):
        checkpoints.load(str(tmp_path / "bent.safetensors"))
    state = load_file(str(weights))
    changed = {k: (t + 0.01 if k.endswith("fc1.weight") else t) for k, t in state.items()}
    save_file(changed, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="whose weights have changed"):
        checkpoints.load(str(out))
    moved = tmp_path / "elsewhere"
    path.rename(moved)
    with pytest.raises(CheckpointError, match="LoRA fine-tune of .*cannot be opened") as e:
        checkpoints.load(str(out))
    assert "\n" not in str(e.value)


def test_exported_peft_and_merged_folders_load_in_transformers_and_decode_as_minitx(folder, tmp_path):
    from peft import PeftModel

    family, path = folder
    trainer = lora_trainer(family, path, tmp_path, steps=3)
    trainer.run()
    saved = checkpoints.load(str(trainer.save(tmp_path / "ft.safetensors")))
    out = tmp_path / "adapter"
    files = export_peft(saved.model, saved.task, saved.lora, out)
    assert files == ["adapter_config.json", "adapter_model.safetensors"]
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PeftModel.from_pretrained(load_reference(path), str(out)).eval()
    told = [str(w.message).lower() for w in caught]
    assert not [w for w in told if "missing" in w or "unexpected" in w]
    loaded = model.load_adapter(str(out), adapter_name="again")
    assert not loaded.unexpected_keys
    assert not [k for k in loaded.missing_keys if "lora_" in k]
    tokeniser = reference_tokeniser(path)
    batch = tokeniser([s for s, _ in PAIRS], padding=True, return_tensors="pt")
    src, mask = batch["input_ids"], batch["attention_mask"]
    with torch.no_grad():
        start = torch.full((len(src), 1), saved.model.cfg.sos_id)  # (B, 1): the first step's logits
        base = checkpoints.load(str(path)).model
        assert not torch.allclose(saved.model(src, start), base(src, start), atol=1e-6)  # it moved
        ours = generated(saved.model, src)
        assert_same_but_ties(saved.model, src, ours, generate(model, src, mask))
        # --format hf: the merged model as a whole folder, which transformers alone decodes alike
        export_folder(saved.model, saved.task, tmp_path / "merged")
        assert_same_but_ties(saved.model, src, ours, generate(load_reference(tmp_path / "merged"), src, mask))


def test_a_lora_file_of_a_base_named_by_a_relative_path_opens_from_another_folder(marian, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.chdir(marian.parent)
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    base = checkpoints.load("marian")
    cfg = lora_config(data, "marian", "marian", steps=1)
    trainer = Trainer(base.model_config.replace(dropout=0.0), cfg, base=base)
    trainer.run()
    out = trainer.save(tmp_path / "ft.safetensors")
    monkeypatch.chdir(tmp_path)  # "marian" names nothing here
    opened = checkpoints.load(str(out))
    assert opened.lora.base["init"] == "marian" and opened.lora.base["path"] == str(marian.resolve())
