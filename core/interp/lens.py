"""The logit lens: the output layer applied to each decoder layer's residual stream (after the
final norm for pre-norm), i.e. what each layer would predict if the decoder stopped there. The
last layer's lens is the model's own prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.data.generation import Generation
from minitx.core.interp.decode import greedy_decode
from minitx.core.interp.interventions import Interventions, Recording
from minitx.core.model.transformer import Seq2Seq, eval_mode


@dataclass(frozen=True)
class Lens:
    src: list[int]
    decoder_input: list[int]  # SOS then the tokens fed: row t of every layer predicts output t
    log_probs: torch.Tensor  # (layers, T, V)
    generation: Generation  # what may be generated

    def top(self, k: int = 3) -> list[list[list[tuple[int, float]]]]:
        """[layer][step] -> the k most likely tokens that may be generated (token, probability)
        at that layer; the last layer's first is the model's own greedy choice."""
        values, indices = self.generation.emittable(self.log_probs).exp().topk(k, dim=-1)  # (L, T, k)
        return [[list(zip(i.tolist(), v.tolist())) for i, v in zip(li, lv)]
                for li, lv in zip(indices, values)]


@torch.no_grad()
def logit_lens(model: Seq2Seq, src_ids: list[int], outputs: list[int] | None = None,
               interventions: Interventions | None = None) -> Lens:
    """The lens of every decoder layer at every step of decoding `src_ids`: teacher-forced on
    `outputs` when given (e.g. the task's answer and EOS), else on the model's greedy output."""
    device = model.device
    src = torch.tensor([src_ids], device=device)  # (1, S)
    interventions = interventions or Interventions()
    with eval_mode(model), interventions.applied(model):
        if outputs is None:
            outputs = greedy_decode(model, src)[0].tolist()
    rules = model.generation
    ends = [i for i, token in enumerate(outputs) if token in rules.eos]
    if ends:
        outputs = outputs[: ends[0] + 1]
    fed = [rules.start] + outputs[:-1]
    record = Recording(heads=False)
    with eval_mode(model), interventions.recording(record).applied(model):
        model(src, torch.tensor([fed], device=device))
    streams = [record.stream("dec", i) for i in range(len(model.decoder))]
    log_probs = model.stream_logits(torch.stack(streams)).log_softmax(dim=-1)[:, 0].cpu()  # (L, T, V)
    return Lens(list(src_ids), fed, log_probs, rules)
