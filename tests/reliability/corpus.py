"""A generated corpus of hostile and broken checkpoint files, reusable by every loader's tests.

    from tests.reliability.corpus import hostile_files   # from the repository root
    for name, path in hostile_files(tmp_path): ...        # every file here must be refused

Every file is derived by a rule from a freshly trained valid checkpoint (or from nothing), with a
seeded RNG: nothing is hand-picked to pass. Three lists:

- `hostile_files(folder)`: files every loader must refuse with a CheckpointError (by construction
  none of them can be a valid checkpoint).
- `damaged_files(folder)`: random bit flips anywhere in a valid file. The format has no checksum,
  so a flip that lands in a weight and leaves it finite yields a *different valid* model; a loader
  must either load a valid model or refuse with a CheckpointError.
- `unresumable_files(folder)`: valid models whose training state is broken: loading the model is
  fine, `Trainer.resume` must refuse.

`marker_path(folder)` is where the pickle payload in the corpus would create a file if anything
ever unpickled it; a test asserts it never appears.
"""

from __future__ import annotations

import json
import pickle
import random
import struct
import zipfile
from pathlib import Path

import torch
from safetensors.torch import save as safetensors_bytes

from minitx.core.checkpoint import read_raw
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training.trainer import Trainer
from tests.reliability.corpus_tweaks import (
    changed_tensors,
    header_tweaks,
    history_tweaks,
    metadata_tweaks,
    tensor_tweaks,
)
from tests.reliability.corpus_vocab import data_task_cases, unresumable_data_cases, vocab_cases

SEED = 20261129
MARKER = "PICKLE_CODE_RAN"

TINY_MODEL = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                         max_len=8, dropout=0.1)
TINY_TRAIN = TrainConfig(steps=3, batch_size=8, warmup=2, min_source_len=2, max_source_len=5, eval_every=0,
                         device="cpu", seed=3)


def valid_checkpoint(folder: Path, name: str = "valid.safetensors") -> Path:
    """A small resumable checkpoint trained for a few steps (the seed of every mutation)."""
    trainer = Trainer(TINY_MODEL, TINY_TRAIN)
    trainer.run()
    return trainer.save(Path(folder) / name)


def marker_path(folder: Path) -> Path:
    return Path(folder) / MARKER


# ---------------------------------------------------------------------------------------------
# Raw safetensors layout helpers: 8-byte little-endian header length, JSON header, data.


def split(blob: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


def join(header: dict | bytes, data: bytes) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


class _Payload:
    """Unpickling this runs code that creates the marker file (proof that code ran)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"import pathlib; pathlib.Path({self.marker!r}).touch()",))


def pickle_payload(folder: Path) -> bytes:
    """Built with the pickle module; never loaded by anything in this project."""
    return pickle.dumps(_Payload(marker_path(folder)), protocol=2)


def _torch_save_zip(payload: bytes) -> bytes:
    """The layout torch.save writes: a zip archive holding archive/data.pkl."""
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", "3\n")
        z.writestr("archive/byteorder", "little")
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# The corpus


def hostile_files(folder: Path) -> list[tuple[str, Path]]:
    """(case name, path) of files that must all be refused with a CheckpointError."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    good_path = valid_checkpoint(folder, "base.safetensors")
    good = good_path.read_bytes()
    header, data = split(good)
    header_end = len(good) - len(data)
    tensors, metadata = read_raw(good_path)
    cases: dict[str, bytes | None] = {}

    # Not safetensors at all.
    cases["empty"] = b""
    for size in (1, 7, 8, 9, 64, 4096):
        cases[f"random_bytes_{size}"] = rng.randbytes(size)
    junk = rng.randbytes(200)
    cases["random_header_with_plausible_length"] = struct.pack("<Q", len(junk)) + junk
    cases["text_file"] = b"this is not a checkpoint\n" * 20
    payload = pickle_payload(folder)
    cases["pickle_renamed"] = payload
    cases["torch_save_zip_renamed"] = _torch_save_zip(payload)

    # Truncated at many offsets (both inside the header and inside the data).
    offsets = {1, 7, 8, 9, 100, header_end - 1, header_end, header_end + 1, len(good) - 1}
    offsets |= {rng.randrange(1, len(good)) for _ in range(12)}
    for offset in sorted(offsets):
        cases[f"truncated_at_{offset}"] = good[:offset]
    cases["extra_bytes_appended"] = good + b"\0" * 16

    # The header's length prefix: bit flips, enormous claims.
    for bit in (0, 1, 3, 7, 12, 20, 31, 40, 63):
        n = struct.unpack("<Q", good[:8])[0] ^ (1 << bit)
        cases[f"header_length_bit_{bit}_flipped"] = struct.pack("<Q", n) + good[8:]
    for claim in (2**64 - 1, 2**40, 16 * 1024 * 1024 + 1, len(good) - 7):
        cases[f"header_claims_{claim}_bytes"] = struct.pack("<Q", claim) + good[8:]
    cases["header_json_garbled"] = join(b"{" + rng.randbytes(64), data)
    cases["header_json_is_a_list"] = join(b"[1, 2, 3]", data)
    cases["header_json_deeply_nested"] = join(b"[" * 5000 + b"]" * 5000, data)
    for name, tweak in header_tweaks(rng, header, len(data)).items():
        cases[name] = join(tweak, data)

    # Valid safetensors, wrong or missing minitx metadata.
    for name, meta in metadata_tweaks(metadata).items():
        cases[name] = safetensors_bytes(tensors, metadata=meta)
    cases["no_metadata_at_all"] = safetensors_bytes(tensors)
    for name, meta in vocab_cases(metadata).items():  # hostile vocabularies (corpus_vocab.py)
        cases[name] = safetensors_bytes(tensors, metadata=meta)
    for name, (t, meta) in data_task_cases(folder).items():  # a data file's task, tweaked
        cases[name] = safetensors_bytes(t, metadata=meta)

    # Valid safetensors and metadata, wrong tensors.
    for name, changed in tensor_tweaks(tensors).items():
        cases[name] = safetensors_bytes(changed, metadata=metadata)
    for name, changed in history_tweaks(tensors).items():
        cases[name] = safetensors_bytes(changed, metadata=metadata)

    paths = []
    for name, blob in cases.items():
        path = folder / f"{name}.safetensors"
        path.write_bytes(blob)
        paths.append((name, path))
    huge = folder / "sparse_file_with_header_claiming_60MiB.safetensors"
    with open(huge, "wb") as f:  # sparse: 64 MiB on paper, almost nothing on disk
        f.write(struct.pack("<Q", 60 * 1024 * 1024) + b"{")
        f.truncate(64 * 1024 * 1024)
    paths.append(("sparse_file_with_header_claiming_60MiB", huge))
    directory = folder / "a_directory.safetensors"
    directory.mkdir(exist_ok=True)
    paths.append(("a_directory", directory))
    paths.append(("missing_file", folder / "does_not_exist.safetensors"))
    return paths


def damaged_files(folder: Path, count: int = 40) -> list[tuple[str, Path]]:
    """Random single-bit flips anywhere in a valid file (seeded). May load or be refused."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED + 1)
    good = valid_checkpoint(folder, "base_for_flips.safetensors").read_bytes()
    header_end = len(good) - len(split(good)[1])
    paths = []
    for i in range(count):
        region = (0, header_end) if i % 2 == 0 else (header_end, len(good))
        at = rng.randrange(*region)
        bit = rng.randrange(8)
        blob = bytearray(good)
        blob[at] ^= 1 << bit
        where = "header" if i % 2 == 0 else "data"
        name = f"bit_{bit}_of_byte_{at}_flipped_in_{where}"
        path = folder / f"{name}.safetensors"
        path.write_bytes(bytes(blob))
        paths.append((name, path))
    return paths


def unresumable_files(folder: Path) -> list[tuple[str, Path]]:
    """Valid models with broken training state: Trainer.resume must refuse each."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    good_path = valid_checkpoint(folder, "base_for_resume.safetensors")
    tensors, metadata = read_raw(good_path)
    train_cfg = json.loads(metadata["train_config"])
    moment = "train.optim.output.weight.exp_avg"
    cases: dict[str, tuple[dict, dict]] = {
        "no_training_state": ({k: v for k, v in tensors.items() if k.startswith("model.")},
                              {k: v for k, v in metadata.items()
                               if k not in ("train_config", "trainer")}),
    }

    def meta(**changes) -> None:
        name = next(iter(changes))
        cases[f"trainer_metadata_{name}"] = (tensors, {**metadata, **changes[name]})

    meta(train_config_not_json={"train_config": "{lr: 1"})
    meta(train_config_a_list={"train_config": "[]"})
    meta(train_config_unknown_field={"train_config": json.dumps({**train_cfg, "colour": 1})})
    meta(train_config_negative_steps={"train_config": json.dumps({**train_cfg, "steps": -5})})
    meta(train_config_lengths_too_long_for_model={
        "train_config": json.dumps({**train_cfg, "max_len": 50})})
    meta(trainer_not_json={"trainer": "{step: 3"})
    meta(trainer_a_list={"trainer": "[3]"})
    meta(trainer_step_not_a_number={"trainer": json.dumps({"step": "three"})})
    meta(trainer_step_negative={"trainer": json.dumps({"step": -3})})
    meta(trainer_seconds_a_list={"trainer": json.dumps({"step": 3, "seconds": [1]})})
    meta(trainer_lr_restart_not_a_pair={"trainer": json.dumps({"step": 3, "lr_restart": 0.1})})
    meta(trainer_lr_restart_above_the_peak={"trainer": json.dumps({"step": 3, "lr_restart": [2, 5.0]})})
    meta(trainer_lr_restart_after_the_run={"trainer": json.dumps({"step": 3, "lr_restart": [9, 1e-4]})})

    def state(name: str, **changes) -> None:
        cases[f"train_state_{name}"] = (changed_tensors(tensors, changes), metadata)

    m = tensors[moment].clone()
    state("rng_missing", train__rng__torch_cpu=None)
    state("data_rng_missing", train__rng__data=None)
    state("rng_wrong_dtype", train__rng__torch_cpu=tensors["train.rng.torch_cpu"].float())
    state("rng_wrong_length", train__rng__torch_cpu=tensors["train.rng.torch_cpu"][:100].clone())
    state("data_rng_empty", train__rng__data=torch.zeros(0, dtype=torch.uint8))
    key = moment.replace(".", "__")
    state("moment_wrong_shape", **{key: m.t().contiguous()})
    state("moment_wrong_dtype", **{key: m.to(torch.int64)})
    state("moment_holds_nan", **{key: torch.full_like(m, float("nan"))})
    state("moment_missing", **{key: None})
    state("moment_for_unknown_parameter", **{"train__optim__nothing__exp_avg": m})
    state("optim_key_without_field", **{"train__optim__output": m})
    step_key = "train__optim__output__weight__step"
    state("adam_step_a_vector", **{step_key: torch.ones(3)})
    # A valid history that does not belong to this training state.
    state("history_ends_before_the_training_state", **{
        f"history__{name}": tensors[f"history.{name}"][:-1].clone()
        for name in ("steps", "loss", "lr", "grad_norm", "examples_per_s", "seconds")})
    state("history_snapshots_of_another_probe_source",
          history__probe_source=(tensors["history.probe_source"] + 1) % 10)

    cases.update(unresumable_data_cases(folder))
    paths = []
    for name, (t, meta_) in cases.items():
        path = folder / f"{name}.safetensors"
        path.write_bytes(safetensors_bytes(t, metadata=meta_))
        paths.append((name, path))
    return paths
