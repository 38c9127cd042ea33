"""fp16's range, measured before any fp16 run: a tiny T5 folder whose feed-forward output
weights were scaled until one layer's activations pass 65504 (the T5 fp16 NaN of transformers
issues #5651, #9295, #14189), opened blind (no label says where), against transformers' own
forward in fp32 and fp16; and a healthy folder, where nothing overflows."""

from __future__ import annotations

import json

import pytest
import torch

from minitx.core.data.given_pairs import with_pairs
from minitx.core.doctor.code_checks import CAUSES
from minitx.core.doctor.precision import check_fp16_range
from minitx.core.importing.huggingface import open_folder
from minitx.core.interp.numerics import measure_numerics, recording_ranges
from minitx.core.model.kv_cache import IncrementalDecoder
from minitx.core.number_formats import FP16_MAX
from tests.cli.conftest import run_cli
from tests.huggingface.changed_folders import changed_copy, pairs_file, scaled
from tests.huggingface.tiny_folders import load_reference, save_model

SCALED = "encoder.block.1.layer.1.DenseReluDense.wo.weight"  # the encoder's second feed-forward
SCALE = 1e5  # its outputs, about 2 before, reach about 2e5


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(healthy, overflowing, pairs file): the same T5 folder, then with one layer's wo scaled."""
    root = tmp_path_factory.mktemp("precision")
    healthy = save_model(root / "healthy", "t5")
    overflowing = changed_copy(healthy, root / "overflowing", scaled(SCALED, SCALE))
    return healthy, overflowing, pairs_file(root / "pairs.tsv", 16, seed=3)


def _outputs_in_forward_order(model, dtype, ids, labels) -> list[tuple[str, torch.Tensor]]:
    """transformers' own sublayer outputs (attention's o, the feed-forward's wo), in forward order."""
    found = []
    names = ("SelfAttention.o", "EncDecAttention.o", "DenseReluDense.wo")
    handles = [module.register_forward_hook(lambda m, i, out, name=name: found.append((name, out.detach())))
               for name, module in model.named_modules() if name.endswith(names)]
    with torch.no_grad():
        model.to(dtype)(input_ids=ids, labels=labels)
    for handle in handles:
        handle.remove()
    return found


def test_transformers_overflows_fp16_exactly_where_the_scaled_feed_forward_is(folders):
    _, overflowing, _ = folders
    reference = load_reference(overflowing)
    ids, labels = torch.tensor([[5, 6, 7, 8, 9, 10, 1]]), torch.tensor([[11, 12, 13, 1]])
    fp32 = _outputs_in_forward_order(reference, torch.float32, ids, labels)
    names = [name for name, _ in fp32]
    first = next(i for i, (_, out) in enumerate(fp32) if out.abs().max() > FP16_MAX)
    assert names[first] == "encoder.block.1.layer.1.DenseReluDense.wo"  # the encoder's second ff
    fp16 = dict(_outputs_in_forward_order(reference, torch.float16, ids, labels))
    assert not fp16[names[first]].isfinite().all()  # fp16 turns it to inf
    assert all(fp16[name].isfinite().all() for name in names[:first])


def test_doctor_names_the_first_fp16_overflow_with_its_figure_and_what_to_do(folders):
    _, overflowing, pairs = folders
    opened = open_folder(overflowing)
    task = with_pairs(opened.task, pairs, opened.model.cfg.max_len)
    result = check_fp16_range(opened.model, task)
    assert result.passed is False
    assert result.first_overflow["stack"] == "encoder" and result.first_overflow["layer"] == 2
    assert result.first_overflow["sublayer"] == "feed-forward"
    # the figure is transformers' own: its wo output's largest |value| on the same pairs
    reference = load_reference(overflowing)
    batch = task.input_batch(32, torch.Generator().manual_seed(20240))
    wo = reference.encoder.block[1].layer[1].DenseReluDense.wo
    seen = []
    handle = wo.register_forward_hook(lambda m, i, out: seen.append(out.abs().max()))
    with torch.no_grad():
        reference(input_ids=batch.src, attention_mask=batch.src != opened.model.cfg.source_pad_id,
                  decoder_input_ids=batch.decoder_input)
    handle.remove()
    assert result.first_overflow["max"] == pytest.approx(float(seen[0]), rel=1e-4)
    assert "bf16" in result.figure and "keep that feed-forward block in fp32" in result.figure
    assert json.dumps(result.first_overflow)  # plain data for doctor --json


def test_a_healthy_folder_has_no_fp16_overflow_and_its_headroom(folders):
    healthy, _, pairs = folders
    opened = open_folder(healthy)
    result = check_fp16_range(opened.model, with_pairs(opened.task, pairs, opened.model.cfg.max_len))
    assert result.passed is True and result.first_overflow is None
    assert 0 < result.value < FP16_MAX and "headroom" in result.detail


def test_numerics_give_every_layers_gradient_norm_and_leave_gradients_alone(folders):
    healthy, _, _ = folders
    model = open_folder(healthy).model
    src, tgt_in = torch.tensor([[5, 6, 7, 1]]), torch.tensor([[0, 11, 12]])
    labels = torch.tensor([[11, 12, 1]])
    before = {name: torch.full_like(p, 0.5) for name, p in model.named_parameters()}
    for name, p in model.named_parameters():
        p.grad = before[name].clone()
    numerics = measure_numerics(model, src, tgt_in, labels)
    assert [(g.stack, g.layer) for g in numerics.gradients] == [("encoder", 1), ("encoder", 2),
                                                               ("decoder", 1), ("decoder", 2)]
    # each layer's norm is its parameters' gradient of the loss, computed apart
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), labels.flatten()).backward()
    expected = torch.stack([p.grad.norm() for p in model.decoder[1].parameters()]).norm()
    assert numerics.gradients[3].norm == pytest.approx(float(expected), rel=1e-5)
    model.zero_grad(set_to_none=True)
    for name, p in model.named_parameters():
        p.grad = before[name].clone()
    outside = [p for name, p in model.named_parameters() if not name.startswith(("encoder.", "decoder."))]
    made = []  # the token tables' and output layer's gradients are no layer's: never made
    hooks = [p.register_post_accumulate_grad_hook(made.append) for p in outside]
    measure_numerics(model, src, tgt_in, labels)
    assert outside and not made and all(p.requires_grad for p in outside)
    for hook in hooks:
        hook.remove()
    assert all(torch.equal(p.grad, before[name]) for name, p in model.named_parameters())
    # the points in forward order: encoder sublayers, then the decoder's three per layer
    assert [(a.stack, a.sublayer) for a in numerics.activations[:2]] == [
        ("encoder", "self-attention"), ("encoder", "residual after self-attention")]
    assert len(numerics.activations) == 2 * (2 * 2 + 2 * 3)


def test_the_cached_decoder_refuses_a_sublayer_hook_it_would_not_run(folders):
    healthy, _, _ = folders
    model = open_folder(healthy).model
    memory, mask = model.encode(torch.tensor([[5, 6, 1]]))
    with recording_ranges(model), pytest.raises(ValueError, match="full forwards only"):
        IncrementalDecoder(model, memory, mask)


@pytest.mark.slow  # two whole doctor runs (about 3 s)
def test_doctor_json_carries_the_first_overflow_and_null_for_a_healthy_folder(folders):
    healthy, overflowing, pairs = folders
    run = run_cli("doctor", str(overflowing), "--quick", "--pairs", str(pairs), "--threads", "1", "--json")
    data = json.loads(run.stdout)
    first = data["precision"]["first_overflow"]
    assert (first["stack"], first["layer"], first["sublayer"]) == ("encoder", 2, "feed-forward")
    assert first["max"] > FP16_MAX and run.exit_code == 1
    assert CAUSES["fp16-overflow"] in data["causes"]
    run = run_cli("doctor", str(healthy), "--quick", "--pairs", str(pairs), "--threads", "1", "--json")
    data = json.loads(run.stdout)
    assert data["precision"]["first_overflow"] is None and data["precision"]["measured"] is True
    assert next(c for c in data["checks"] if c["name"] == "fp16-range")["status"] == "pass"
    text = run_cli("doctor", str(overflowing), "--quick", "--pairs", str(pairs), "--threads", "1").stdout
    assert "encoder layer 2 feed-forward reaches" in " ".join(text.split())
