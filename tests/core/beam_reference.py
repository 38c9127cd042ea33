"""A reference for beam search written here: an exhaustive search over every output of a tiny
model (two ordinary tokens, a short length cap), scored with full forward passes, no cache. A beam
that holds every hypothesis must find exactly what it finds (tests/core/test_beam.py), and the
search check's verdicts are judged against it (tests/core/test_search_check.py)."""

import itertools

import torch

from minitx.core.config import ModelConfig
from minitx.core.model.transformer import Seq2Seq

WORDS, PAD, SOS, EOS = (0, 1), 2, 3, 4
CAP = 4  # generated tokens at most: 2^3 live prefixes at the last step, 24 candidates
COVERING = 24  # beams enough to keep every candidate of every step
SOURCE = [0, 1, 1, 0]


def tiny_model(seed: int, **options) -> Seq2Seq:
    torch.manual_seed(seed)
    model = Seq2Seq(ModelConfig(vocab_size=5, pad_id=PAD, sos_id=SOS, eos_id=EOS, d_model=16,
                                n_heads=2, d_ff=32, max_len=12, **options)).eval()
    with torch.no_grad():  # sharper than xavier's near-uniform start: scores far apart
        model.output.weight.mul_(4)
    return model


def exhaustive(model: Seq2Seq, source: list[int], length_penalty: float) -> list[tuple[float, tuple]]:
    """Every output the rules allow (ending at its first EOS, or cut at CAP), scored as
    transformers scores a finished hypothesis, best first."""
    rules = model.generation
    outputs = [seq[: seq.index(EOS) + 1] if EOS in seq else seq
               for seq in itertools.product((*WORDS, EOS), repeat=CAP)]
    outputs = sorted(set(outputs))
    fed = torch.tensor([[SOS, *o] + [PAD] * (CAP - len(o)) for o in outputs])  # (N, 1 + CAP)
    src = torch.tensor([source] * len(outputs))
    totals = torch.zeros(len(outputs))
    with torch.no_grad():
        for t in range(CAP):  # each prefix alone: a decoder without a causal mask sees all it is fed
            scores = rules.process(model(src, fed[:, : t + 1])[:, -1].log_softmax(-1), fed[:, : t + 1],
                                   max_length=CAP + 1)  # (N, V)
            real = torch.tensor([t < len(o) for o in outputs])
            totals += torch.where(real, scores.gather(1, fed[:, t + 1 : t + 2])[:, 0], 0.0)
    scored = [(float(total) / len(o) ** length_penalty, o) for total, o in zip(totals, outputs)]
    return sorted((s for s in scored if s[0] > float("-inf")), reverse=True)
