"""The rules that break one part of a valid checkpoint at a time (its JSON header, its
metadata, its tensors, its training history), for the corpus in tests/reliability/corpus.py.
Each returns {case name: the changed part}; the corpus writes each case to a file."""

from __future__ import annotations

import json
import random

import torch


def header_tweaks(rng: random.Random, header: dict, data_len: int) -> dict[str, dict]:
    names = sorted(k for k in header if k != "__metadata__")
    by_start = sorted(names, key=lambda k: header[k]["data_offsets"][0])
    first, second, last = by_start[0], by_start[1], by_start[-1]
    out: dict[str, dict] = {}

    def edit(name: str, tensor: str, **fields) -> None:
        h = json.loads(json.dumps(header))
        h[tensor].update(fields)
        out[name] = h

    begin, end = header[second]["data_offsets"]
    edit("overlapping_offsets", second, data_offsets=[begin - 4, end - 4])
    edit("offsets_past_the_end", last, data_offsets=[data_len - 4, data_len + 60])
    edit("offsets_reversed", first, data_offsets=list(reversed(header[first]["data_offsets"])))
    edit("offsets_negative", first, data_offsets=[-64, 0])
    edit("offsets_not_numbers", first, data_offsets=["0", "64"])
    edit("shape_disagrees_with_offsets", first, shape=[3, 3])
    edit("shape_enormous", first, shape=[2**31, 2**31])
    edit("shape_negative", first, shape=[-1])
    edit("unknown_dtype", first, dtype="F128")
    edit("dtype_not_a_string", first, dtype=7)
    h = json.loads(json.dumps(header))
    h["__metadata__"]["format_version"] = 1  # metadata values must be strings
    out["metadata_value_not_a_string"] = h
    h = json.loads(json.dumps(header))
    h["__metadata__"] = ["format", "minitx-checkpoint"]
    out["metadata_not_an_object"] = h
    h = json.loads(json.dumps(header))
    del h[rng.choice(names)]
    out["tensor_entry_removed_from_header"] = h
    return out


def metadata_tweaks(metadata: dict[str, str]) -> dict[str, dict[str, str]]:
    model_cfg = json.loads(metadata["model_config"])
    out: dict[str, dict[str, str]] = {}

    def with_(**changes) -> dict[str, str]:
        meta = dict(metadata)
        for key, value in changes.items():
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
        return meta

    def cfg(**changes) -> str:
        return json.dumps({**model_cfg, **changes})

    for key in ("format", "format_version", "model_config", "task", "training"):
        out[f"metadata_{key}_missing"] = with_(**{key: None})
    out["metadata_format_unknown"] = with_(format="someone-elses-format")
    for version in ("2", "0", "1.0", "", "one"):
        out[f"metadata_format_version_{version or 'empty'}"] = with_(format_version=version)
    out["metadata_model_config_not_json"] = with_(model_config="{d_model: 16")
    out["metadata_model_config_a_list"] = with_(model_config="[16, 2]")
    out["metadata_model_config_null"] = with_(model_config="null")
    out["metadata_model_config_deeply_nested"] = with_(model_config="[" * 100_000 + "]" * 100_000)
    out["metadata_model_config_unknown_field"] = with_(model_config=cfg(colour="blue"))
    out["metadata_model_config_unknown_field_with_newline"] = with_(
        model_config=cfg(**{"line one\nline two": 1}))
    out["metadata_model_config_odd_width"] = with_(model_config=cfg(d_model=15))
    out["metadata_model_config_zero_heads"] = with_(model_config=cfg(n_heads=0))
    out["metadata_model_config_width_as_string"] = with_(model_config=cfg(d_model="16"))
    out["metadata_model_config_unknown_norm"] = with_(model_config=cfg(norm="sideways"))
    out["metadata_model_config_different_width"] = with_(model_config=cfg(d_model=32))
    out["metadata_model_config_enormous_width"] = with_(
        model_config=cfg(d_model=2**20, d_ff=2**30, max_len=2**30))
    out["metadata_model_config_a_million_layers"] = with_(
        model_config=cfg(n_encoder_layers=10**6, n_decoder_layers=10**6))
    out["metadata_model_config_two_layers_file_has_one"] = with_(model_config=cfg(n_encoder_layers=2))
    out["metadata_task_unknown"] = with_(task='{"name": "juggle"}')
    out["metadata_task_not_json"] = with_(task="reverse")
    out["metadata_task_a_list"] = with_(task='["reverse"]')
    out["metadata_task_bad_lengths"] = with_(task='{"name": "reverse", "min_len": 9, "max_len": 2}')
    out["metadata_task_length_not_a_number"] = with_(task='{"name": "reverse", "min_len": "four"}')
    out["metadata_training_not_json"] = with_(training="{steps: 3")
    out["metadata_training_a_list"] = with_(training="[]")
    return out


def changed_tensors(tensors: dict[str, torch.Tensor], changes: dict) -> dict[str, torch.Tensor]:
    """A copy of `tensors` with each change applied: a name (`__` for `.`, which keyword
    arguments cannot hold) set to a tensor, or removed when its value is None."""
    out = dict(tensors)
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return out


def tensor_tweaks(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    weight = "model.output.weight"
    out: dict[str, dict[str, torch.Tensor]] = {}

    def with_(**changes) -> dict[str, torch.Tensor]:
        return changed_tensors(tensors, changes)

    w = tensors[weight].clone()  # a copy: safetensors refuses two names for one storage
    g = "model__output__weight"
    out["tensor_missing"] = with_(**{g: None})
    renamed = with_(**{g: None})
    renamed["model.output.weights"] = w
    out["tensor_renamed"] = renamed
    out["tensor_without_prefix"] = {**tensors, "output.weight": w}
    out["tensor_extra_under_model"] = {**tensors, "model.extra.weight": w}
    out["tensor_only_the_weights_of_nothing"] = {"model.nothing": w}
    out["no_tensors_at_all"] = {}
    out["shape_transposed"] = with_(**{g: w.t().contiguous()})
    out["shape_one_row_short"] = with_(**{g: w[:-1].contiguous()})
    out["shape_flattened"] = with_(**{g: w.flatten().contiguous()})
    out["shape_scalar"] = with_(**{g: torch.tensor(1.0)})
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool, torch.float64):
        name = str(dtype).replace("torch.", "")
        out[f"dtype_{name}_weights"] = with_(**{g: w.to(dtype)})
    for label, value in (("nan", float("nan")), ("inf", float("inf")), ("neg_inf", float("-inf"))):
        bad = w.clone()
        bad[3, 5] = value
        out[f"weights_hold_{label}"] = with_(**{g: bad})
    half = {k: (v.half() if k.startswith("model.") else v) for k, v in tensors.items()}
    half[weight] = torch.full_like(tensors[weight], 70000.0).half()  # overflows float16: inf
    out["float16_weights_overflowed_to_inf"] = half
    return out


def history_tweaks(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """Run histories no recorder writes: wrong dtypes and shapes, too many points, steps out of
    order or past the run, values that cannot be, snapshots that do not fit the model."""
    steps, loss = tensors["history.steps"], tensors["history.loss"]
    attention = tensors["history.probe_attention"]  # (K, L, h, T, S)
    n, k = len(steps), len(attention)
    out: dict[str, dict[str, torch.Tensor]] = {}

    def with_(**changes) -> dict[str, torch.Tensor]:
        t = dict(tensors)
        for key, value in changes.items():
            key = "history." + key
            if value is None:
                t.pop(key)
            else:
                t[key] = value
        return t

    many = torch.arange(1, 2002, dtype=torch.int64)
    out["history_unknown_tensor"] = with_(colour=loss.clone())
    out["history_steps_float"] = with_(steps=steps.float())
    out["history_steps_a_matrix"] = with_(steps=steps.reshape(1, -1).clone())
    out["history_steps_not_increasing"] = with_(steps=steps.flip(0).contiguous())
    out["history_steps_repeated"] = with_(steps=torch.ones(n, dtype=torch.int64))
    out["history_steps_start_at_zero"] = with_(steps=steps - 1)
    out["history_steps_past_the_run"] = with_(steps=steps + 100)
    out["history_steps_without_loss"] = with_(loss=None)
    out["history_loss_without_steps"] = with_(steps=None)
    out["history_too_many_points"] = with_(steps=many, **{name: torch.ones(2001) for name in (
        "loss", "lr", "grad_norm", "examples_per_s", "seconds")})
    out["history_loss_one_short"] = with_(loss=loss[:-1].clone())
    out["history_loss_float64"] = with_(loss=loss.double())
    out["history_loss_holds_nan"] = with_(loss=torch.full_like(loss, float("nan")))
    out["history_loss_holds_inf"] = with_(loss=torch.full_like(loss, float("inf")))
    out["history_loss_negative"] = with_(loss=-loss)
    out["history_seconds_go_backwards"] = with_(seconds=torch.arange(n, 0, -1).float())
    out["history_accuracy_without_steps"] = with_(accuracy=torch.ones(1))
    out["history_accuracy_above_one"] = with_(eval_steps=torch.tensor([3]), accuracy=torch.tensor([1.5]))
    out["history_eval_steps_negative"] = with_(eval_steps=torch.tensor([-1]), accuracy=torch.tensor([0.5]))
    out["history_probe_missing_its_source"] = with_(probe_source=None)
    out["history_probe_attention_wrong_shape"] = with_(probe_attention=attention[:, :, :, :-1].clone())
    out["history_probe_attention_more_heads"] = with_(probe_attention=torch.cat([attention, attention], 2))
    out["history_probe_attention_above_one"] = with_(probe_attention=attention * 3 + 1)
    out["history_probe_attention_holds_nan"] = with_(probe_attention=torch.full_like(attention, float("nan")))
    out["history_probe_source_outside_vocabulary"] = with_(
        probe_source=torch.full_like(tensors["history.probe_source"], 99))
    out["history_probe_source_empty"] = with_(probe_source=torch.zeros(0, dtype=torch.int64))
    out["history_too_many_snapshots"] = with_(
        probe_steps=torch.arange(101, dtype=torch.int64),
        probe_attention=attention[:1].expand(101, *attention.shape[1:]).contiguous())
    out["history_probe_steps_one_more_than_snapshots"] = with_(
        probe_steps=torch.arange(k + 1, dtype=torch.int64))
    return out
