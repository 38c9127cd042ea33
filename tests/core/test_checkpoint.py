import json
import os

import pytest
import torch
from safetensors.torch import save_file

from minitx.core.checkpoint import CheckpointError, load_checkpoint, read_raw, save_checkpoint
from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.model.components import VARIANTS
from minitx.core.model.transformer import Seq2Seq

COMPONENT_FIELDS = ("norm_kind", "position_encoding", "kv_heads")  # the component switches


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(norm="pre", d_model=32, n_heads=2)).eval()
    path = save_checkpoint(tmp_path / "m.safetensors", model, get_task("sort"),
                           {"steps": 7, "loss": 0.5})
    return model, path


def test_round_trip_gives_identical_logits_from_the_file_alone(saved):
    model, path = saved
    ckpt = load_checkpoint(path)
    assert ckpt.model_config == model.cfg and ckpt.task.name == "sort"
    assert ckpt.summary == {"steps": 7, "loss": 0.5}
    assert ckpt.metadata["format_version"] == "1" and ckpt.metadata["minitx_version"]
    src, tgt = torch.tensor([[1, 2, 3]]), torch.tensor([[11, 1, 2]])
    with torch.no_grad():
        assert torch.equal(model(src, tgt), ckpt.model(src, tgt))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_files_load_as_float32(tmp_path, saved, dtype):
    model, _ = saved
    path = save_checkpoint(tmp_path / "h.safetensors", model, get_task("sort"), dtype=dtype)
    ckpt = load_checkpoint(path)
    assert ckpt.dtype == dtype and next(ckpt.model.parameters()).dtype == torch.float32
    assert os.path.getsize(path) < os.path.getsize(tmp_path / "m.safetensors")


def test_saving_over_a_file_replaces_it_atomically_and_leaves_no_temp_files(tmp_path, saved):
    model, path = saved
    save_checkpoint(path, model, get_task("copy"))
    assert load_checkpoint(path).task.name == "copy"
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]


def test_unwritable_destination_is_one_clear_error(tmp_path, saved):
    model, _ = saved
    with pytest.raises(CheckpointError, match="does not exist"):
        save_checkpoint(tmp_path / "nope" / "m.safetensors", model, get_task("copy"))
    with pytest.raises(CheckpointError, match="directory"):
        save_checkpoint(tmp_path, model, get_task("copy"))


def _rewrite(path, mutate_tensors=None, mutate_meta=None):
    tensors, meta = read_raw(path)
    if mutate_tensors:
        mutate_tensors(tensors)
    if mutate_meta:
        mutate_meta(meta)
    save_file(tensors, str(path), metadata=meta)


def _set_config(meta, **changes):
    cfg = json.loads(meta["model_config"])
    cfg.update(changes)
    meta["model_config"] = json.dumps(cfg)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: p.unlink(), "no such file"),
        (lambda p: p.write_bytes(b""), "not a safetensors file"),
        (lambda p: p.write_bytes(p.read_bytes()[:200]), "truncated or corrupt"),
        (lambda p: p.write_bytes(b"\x80\x04\x95" + os.urandom(300)), "not a safetensors file"),
        (lambda p: _rewrite(p, mutate_meta=lambda m: m.pop("model_config")), "no 'model_config'"),
        (lambda p: _rewrite(p, mutate_meta=lambda m: m.update(model_config="{oops")), "malformed"),
        (lambda p: _rewrite(p, mutate_meta=lambda m: m.update(format_version="9")), "version '9'"),
        (lambda p: _rewrite(p, mutate_meta=lambda m: m.update(format="other")), "not a minitx"),
        (lambda p: _rewrite(p, mutate_meta=lambda m: _set_config(m, n_heads=3)), "invalid metadata"),
        (lambda p: _rewrite(p, mutate_meta=lambda m: _set_config(m, d_model=4096)), "shape"),
        (lambda p: _rewrite(p, lambda t: t.pop("model.output.bias")), "missing tensor"),
        (lambda p: _rewrite(p, lambda t: t.update({"model.extra": torch.ones(1)})), "does not use"),
        (lambda p: _rewrite(p, lambda t: t["model.output.bias"].fill_(float("nan"))), "NaN"),
        (lambda p: _rewrite(p, lambda t: t.update({"model.output.bias": torch.ones(13).long()})),
         "dtype"),
    ],
)
def test_each_broken_file_gives_one_clear_error(saved, damage, message):
    _, path = saved
    damage(path)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(path)
    assert "\n" not in str(info.value)


def test_a_directory_is_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="directory"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("bug, legacy_fields", [
    ("", {"scale_attention": True, "swap_cross_attention": False, "causal_mask": True}),
    ("no-scale", {"scale_attention": False, "swap_cross_attention": False, "causal_mask": True}),
    ("swap-cross", {"scale_attention": True, "swap_cross_attention": True, "causal_mask": True}),
    ("no-causal-mask", {"scale_attention": True, "swap_cross_attention": False, "causal_mask": False}),
])
def test_a_file_written_by_minitx_0_1_loads_as_the_same_model(tmp_path, bug, legacy_fields):
    # 0.1 called the output layer "generator" and recorded model bugs as three booleans.
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=12, bug=bug)).eval()
    path = save_checkpoint(tmp_path / "new.safetensors", model, get_task("reverse"))
    tensors, metadata = read_raw(path)
    tensors = {k.replace("model.output.", "model.generator."): t for k, t in tensors.items()}
    config = json.loads(metadata["model_config"])
    for name in ("bug", *COMPONENT_FIELDS):  # fields 0.1 did not have
        del config[name]
    metadata["model_config"] = json.dumps({**config, **legacy_fields})
    save_file(tensors, str(tmp_path / "old.safetensors"), metadata=metadata)
    old = load_checkpoint(tmp_path / "old.safetensors")
    assert old.model_config == model.cfg
    src, tgt = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[11, 4, 3, 2]])
    with torch.no_grad():
        assert torch.equal(model(src, tgt), old.model(src, tgt))


@pytest.mark.parametrize("changes", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_component_variant_round_trips_through_a_file(tmp_path, changes):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=4, d_ff=32, max_len=12, **changes)).eval()
    path = save_checkpoint(tmp_path / "v.safetensors", model, get_task("reverse"))
    ckpt = load_checkpoint(path)
    assert ckpt.model_config == model.cfg
    assert all(getattr(ckpt.model_config, k) == v for k, v in changes.items())
    assert ckpt.model.state_dict().keys() == model.state_dict().keys()
    src, tgt = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[11, 4, 3, 2]])
    with torch.no_grad():
        assert torch.equal(model(src, tgt), ckpt.model(src, tgt))


def test_a_file_from_before_the_component_switches_loads_as_layernorm_sinusoids_and_full_heads(tmp_path):
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=12)).eval()
    path = save_checkpoint(tmp_path / "m.safetensors", model, get_task("reverse"))
    _rewrite(path, mutate_meta=lambda m: m.update(model_config=json.dumps(
        {k: v for k, v in json.loads(m["model_config"]).items() if k not in COMPONENT_FIELDS})))
    assert not set(COMPONENT_FIELDS) & set(json.loads(read_raw(path)[1]["model_config"]))
    cfg = load_checkpoint(path).model_config
    assert (cfg.norm_kind, cfg.position_encoding, cfg.kv_heads) == ("layer", "sinusoidal", 2)
    assert cfg == model.cfg


def test_a_variant_whose_tensors_do_not_fit_its_config_is_refused(tmp_path):
    torch.manual_seed(0)
    gqa = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=12, kv_heads=1))
    path = save_checkpoint(tmp_path / "g.safetensors", gqa, get_task("reverse"))
    _rewrite(path, mutate_meta=lambda m: _set_config(m, kv_heads=2))  # K/V would be twice as wide
    with pytest.raises(CheckpointError, match="k_proj.weight has shape"):
        load_checkpoint(path)
    _rewrite(path, mutate_meta=lambda m: _set_config(m, kv_heads=1, position_encoding="learned"))
    with pytest.raises(CheckpointError, match="missing tensor 'model.src_positions.weight'"):
        load_checkpoint(path)


def test_rotary_positions_keep_no_table_that_a_claimed_max_len_could_inflate(tmp_path):
    model = Seq2Seq(ModelConfig(d_model=16, n_heads=2, d_ff=32, max_len=12, position_encoding="rope"))
    path = save_checkpoint(tmp_path / "r.safetensors", model, get_task("reverse"))
    _rewrite(path, mutate_meta=lambda m: _set_config(m, max_len=2**40))
    ckpt = load_checkpoint(path)  # nothing of the model's size depends on max_len
    assert ckpt.model_config.max_len == 2**40
    assert sum(t.numel() for t in ckpt.model.state_dict().values()) == sum(
        t.numel() for t in model.state_dict().values())
