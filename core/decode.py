"""Greedy decoding: batched (for evaluation) and one token at a time (for watching).

The Stepper records everything a person may want to look at for each generated token, so
stepping back is just moving a pointer over recorded results, never recomputation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.incremental import IncrementalDecoder
from minitx.core.model import AttentionMaps, Seq2Seq, eval_mode
from minitx.core.tasks import EOS, PAD, SOS, VOCAB


def default_cap(model: Seq2Seq, src_len: int) -> int:
    """Tokens to generate at most: the output plus EOS, and a little slack, within max_len."""
    return min(model.cfg.max_len - 1, src_len + 2)


def greedy_decode(
    model: Seq2Seq, src: torch.Tensor, max_new_tokens: int | None = None, use_cache: bool = True
) -> torch.Tensor:
    """src (B, S) -> generated ids (B, n) without SOS; PAD after each sequence's EOS.

    Encodes once; stops when every sequence has emitted EOS or after max_new_tokens.
    """
    with eval_mode(model):
        # inference_mode skips autograd's bookkeeping per op (~15% of a batch-1 step); the clone
        # outside it hands back an ordinary tensor that any later computation may use.
        with torch.inference_mode():
            cap = max_new_tokens or default_cap(model, src.shape[1])
            generated = _greedy_tokens(model, src, cap, use_cache)
        with torch.no_grad():
            return generated.clone()


def _greedy_tokens(model: Seq2Seq, src: torch.Tensor, cap: int, use_cache: bool) -> torch.Tensor:
    B = src.shape[0]
    memory, src_mask = model.encode(src)  # src_mask None when nothing is padded
    tokens = torch.full((B, 1 + cap), PAD, dtype=torch.long, device=src.device)  # (B, 1 + cap)
    tokens[:, 0] = SOS
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    incremental = IncrementalDecoder(model, memory, src_mask) if use_cache else None
    t = 0
    while t < cap:
        if incremental is not None:
            logits = incremental.step(tokens[:, t])  # (B, V)
        else:
            logits = model.decode(tokens[:, : t + 1], memory, src_mask)[:, -1]  # (B, V)
        next_token = logits.argmax(dim=-1).masked_fill(done, PAD)  # (B,)
        t += 1
        tokens[:, t] = next_token
        done |= next_token == EOS
        if bool(done.all()):
            break
    return tokens[:, 1 : t + 1]


def after_eos(tokens: torch.Tensor) -> torch.Tensor:
    """(B, n) ids -> (B, n) bool: True at every position after the first EOS of its row."""
    is_eos = (tokens == EOS).long()
    return torch.cumsum(is_eos, dim=1) - is_eos > 0


def padded_to(tokens: torch.Tensor, width: int) -> torch.Tensor:
    """(B, n) ids -> (B, width): PAD appended, and everything after the first EOS set to PAD,
    so two outputs compare equal exactly when they agree up to and including EOS."""
    B, n = tokens.shape
    out = torch.full((B, width), PAD, dtype=torch.long, device=tokens.device)
    out[:, :n] = tokens
    return out.masked_fill(after_eos(out), PAD)


def exact_match(generated: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """generated (B, n) and expected labels (B, L) with EOS then PAD -> (B,) bool.

    A sequence is right when its tokens up to and including EOS equal the expected ones.
    """
    width = max(generated.shape[1], expected.shape[1])
    return (padded_to(generated, width) == padded_to(expected.to(generated.device), width)).all(dim=1)


def accuracy_by_length(correct: torch.Tensor, lengths: torch.Tensor) -> dict[int, float]:
    """correct (B,) bool and source lengths (B,) -> {length: fraction correct}."""
    return {int(L): float(correct[lengths == L].float().mean()) for L in lengths.unique()}


@dataclass(frozen=True)
class StepResult:
    """What happened when the decoder produced one token."""

    index: int  # 0-based step number: this token is output position `index`
    token: int
    top_k: list[tuple[int, float]]  # (token id, probability), most likely first
    cross_attention: torch.Tensor  # (layers, heads, S): this step's query row over the source
    self_attention: torch.Tensor  # (layers, heads, index + 1): over the decoder input so far

    @property
    def text(self) -> str:
        return VOCAB[self.token]

    @property
    def is_end(self) -> bool:
        return self.token == EOS


class Stepper:
    """Greedy decoding of one source, one token per `step()`, with a KV cache.

    `results[:position]` is what is currently shown; `back()` moves the position, and stepping
    forward again replays a recorded result instead of running the model.
    """

    def __init__(self, model: Seq2Seq, src_ids: list[int], top_k: int = 5, cap: int | None = None):
        if not src_ids:
            raise ValueError("the source is empty")
        self.model = model
        self.src_ids = list(src_ids)
        self.top_k = top_k
        self.cap = cap or default_cap(model, len(src_ids))
        with eval_mode(model), torch.no_grad():  # stepping is inference: no dropout
            src = torch.tensor([self.src_ids], device=model.device)  # (1, S)
            self._decoder = IncrementalDecoder(model, *model.encode(src))
        self._last_token = torch.tensor([SOS], device=model.device)  # (1,)
        self.results: list[StepResult] = []
        self.position = 0

    @property
    def finished(self) -> bool:
        """True when the shown tokens end in EOS or reached the cap."""
        if self.position == 0:
            return False
        return self.results[self.position - 1].is_end or self.position >= self.cap

    @property
    def tokens(self) -> list[int]:
        """Generated ids shown so far (without SOS)."""
        return [r.token for r in self.results[: self.position]]

    @property
    def current(self) -> StepResult | None:
        return self.results[self.position - 1] if self.position else None

    def step(self) -> StepResult | None:
        """Advance one token; returns its result, or None when already finished."""
        if self.finished:
            return None
        if self.position < len(self.results):  # replay what was already computed
            self.position += 1
            return self.results[self.position - 1]
        result = self._compute_next()
        self.results.append(result)
        self.position += 1
        return result

    def back(self) -> bool:
        """Step back one token; False at the start."""
        if self.position == 0:
            return False
        self.position -= 1
        return True

    def reset(self) -> None:
        self.position = 0

    def run(self) -> list[StepResult]:
        while self.step() is not None:
            pass
        return self.results[: self.position]

    def cross_attention_grid(self, layer: int, head: int) -> torch.Tensor:
        """(steps shown, S): row i is the query that produced output token i."""
        rows = [r.cross_attention[layer, head] for r in self.results[: self.position]]
        if not rows:
            return torch.zeros(0, len(self.src_ids))
        return torch.stack(rows)

    def self_attention_grid(self, layer: int, head: int) -> torch.Tensor:
        """(steps shown, steps shown): row i over decoder inputs 0..i (SOS, out_0..), zero above."""
        n = self.position
        grid = torch.zeros(n, n)
        for i, r in enumerate(self.results[:n]):
            grid[i, : i + 1] = r.self_attention[layer, head]
        return grid

    @torch.no_grad()
    def _compute_next(self) -> StepResult:
        index = len(self.results)
        maps = AttentionMaps()
        with eval_mode(self.model):  # the incremental step reads no dropout, but the model is shared
            logits = self._decoder.step(self._last_token, maps)  # (1, V)
        probs = logits.softmax(dim=-1)[0]  # (V,)
        top = probs.topk(min(self.top_k, probs.numel()))
        token = int(top.indices[0])
        self._last_token = torch.tensor([token], device=logits.device)
        return StepResult(
            index=index,
            token=token,
            top_k=[(int(i), float(p)) for p, i in zip(top.values, top.indices)],
            cross_attention=torch.stack([w[0, :, -1] for w in maps.cross]).cpu(),  # (L, h, S)
            self_attention=torch.stack([w[0, :, -1] for w in maps.decoder_self]).cpu(),
        )
