"""Every bundled checkpoint computes what it computed before the model options of imported
models (separate source vocabularies, final norms on post-norm, the std norm, norm_eps,
log-softmax output, and the Hugging Face families' components) existed: the options default to
the old behaviour.

Within float rounding, not bit for bit: the golden logits were computed on another CPU, and
another processor's kernels round differently (up to ~5e-6 here, on logits of size ~10). A
changed computation moves them by far more than TOLERANCE.

tests/core/data/bundled_logits.safetensors holds, for each bundled file, the teacher-forced
logits of its task's example batch (the modules) and the logits of stepping the same decoder
inputs through the KV cache, computed by minitx before those options were added. Regenerate it
(only after a deliberate change of what a bundled model computes) with
`.venv/bin/python tests/core/test_bundled_compat.py`.
"""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from minitx import checkpoints
from minitx.core.model.kv_cache import IncrementalDecoder

GOLDEN = Path(__file__).parent / "data" / "bundled_logits.safetensors"
TOLERANCE = 1e-4


def logits_of(name: str) -> dict[str, torch.Tensor]:
    ckpt = checkpoints.load(name)
    batch = ckpt.task.example_batch()
    model = ckpt.model.eval()
    with torch.no_grad():
        full = model(batch.src, batch.decoder_input)  # (1, T, V)
        decoder = IncrementalDecoder(model, *model.encode(batch.src))
        steps = torch.stack([decoder.step(batch.decoder_input[:, t])
                             for t in range(batch.decoder_input.shape[1])], dim=1)  # (1, T, V)
    return {f"{name}.full": full.contiguous(), f"{name}.cached": steps.contiguous()}


@pytest.mark.parametrize("name", checkpoints.bundled_names())
def test_a_bundled_checkpoint_computes_what_it_computed_before_the_model_options(name):
    golden = load_file(str(GOLDEN))
    now = logits_of(name)
    for key, value in now.items():
        assert (value - golden[key]).abs().max() <= TOLERANCE, key


if __name__ == "__main__":
    torch.set_num_threads(1)
    tensors = {}
    for bundled in checkpoints.bundled_names():
        tensors.update(logits_of(bundled))
    save_file(tensors, str(GOLDEN))
    print(f"wrote {GOLDEN} ({len(tensors)} tensors)")
