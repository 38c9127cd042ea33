"""Greedy decoding: batched (for evaluation) and one token at a time (for watching).

The Stepper records everything a person may want to look at for each generated token, so
stepping back is just moving a pointer over recorded results, never recomputation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig
from minitx.core.data.task import output_cap
from minitx.core.data.vocab import Vocab
from minitx.core.interp.interventions import Interventions, Recording
from minitx.core.interp.replay import Replay
from minitx.core.model.hooks import current_hooks, hooks_restored
from minitx.core.model.kv_cache import IncrementalDecoder
from minitx.core.model.transformer import AttentionMaps, Seq2Seq, eval_mode

DECODE_BYTES = 256 * 2**20  # what one batch of greedy decoding's steps may hold at once


def greedy_decode(
    model: Seq2Seq, src: torch.Tensor, max_new_tokens: int | None = None, use_cache: bool = True,
    progress: Callable[[int, int], bool | None] | None = None,
) -> torch.Tensor:
    """src (B, S) -> generated ids (B, n) without the start token; the generation's PAD after
    each sequence's end. `progress(step, cap)` after each step (a big model's long output is a
    wait); a True answer stops there, with the steps so far.

    Encodes once; stops when every sequence has ended or after max_new_tokens (the model's
    generation settings may cap it further, as a Hugging Face folder's max_length does). Each
    step takes the argmax of the scores under those settings (model.generation): exactly
    transformers' generate(num_beams=1, do_sample=False) for a folder's model. Many sources of
    a big vocabulary go rows_at_once at a time, so that the memory a decode takes is bounded.
    """
    with eval_mode(model):
        # inference_mode skips autograd's bookkeeping per op (~15% of a batch-1 step); the clone
        # outside it hands back an ordinary tensor that any later computation may use.
        with torch.inference_mode():
            cap = model.generation.cap(max_new_tokens or output_cap(src.shape[1], model.cfg.max_len),
                                       model.cfg.max_len)
            rows = rows_at_once(model.cfg, src.shape[1], cap)
            parts = [_greedy_tokens(model, src[i : i + rows], cap, use_cache, progress)
                     for i in range(0, max(src.shape[0], 1), rows)]  # each (rows, n_i)
            width = max(part.shape[1] for part in parts)
            generated = torch.cat([F.pad(part, (0, width - part.shape[1]), value=model.generation.pad)
                                   for part in parts])  # (B, n)
        with torch.no_grad():
            return generated.clone()


def rows_at_once(cfg: ModelConfig, src_len: int, cap: int) -> int:
    """How many sources greedy decoding steps together: as many as keep a step's tensors under
    DECODE_BYTES. Per row: the step's scores over the vocabulary (logits, processed scores, a
    third for what processing makes; float32) and its share of the cache (keys and values of
    every decoder layer, over the cap's positions and the source's). A small model decodes any
    evaluation batch at once; NLLB's 256,206 pieces make it 30-odd rows."""
    width = 2 * cfg.n_decoder_layers * cfg.kv_heads * cfg.d_k  # K and V of every layer, one position
    per_row = 4 * (3 * cfg.vocab_size + width * (cap + src_len))
    return max(1, DECODE_BYTES // per_row)


class FullForwardDecoder:
    """IncrementalDecoder's interface for a model whose decoder self-attention sees later
    positions (the no-causal-mask variant): each step runs the decoder over the whole prefix again,
    since feeding a token changes what every earlier position computes and no cache can hold it.
    With `maps`, each layer's attention rows of the newest position go in, as a cached step's."""

    def __init__(self, model: Seq2Seq, memory: torch.Tensor, src_mask: torch.Tensor | None) -> None:
        self.model, self.memory, self.src_mask = model, memory, src_mask
        self.fed: list[torch.Tensor] = []  # each (B,)
        self.position = 0
        self._hooks = current_hooks()  # interventions active now apply to every step, as with the cache

    def step(self, tokens: torch.Tensor, maps: AttentionMaps | None = None) -> torch.Tensor:
        """tokens (B,) at the next position -> logits (B, V)."""
        self.fed.append(tokens)
        self.position += 1
        prefix = torch.stack(self.fed, dim=1)  # (B, t)
        full = AttentionMaps() if maps is not None else None
        with hooks_restored(self._hooks):
            logits = self.model.decode(prefix, self.memory, self.src_mask, full)[:, -1]  # (B, V)
        if maps is not None:
            maps.decoder_self += [w[:, :, -1:] for w in full.decoder_self]  # (B, h, 1, t)
            maps.cross += [w[:, :, -1:] for w in full.cross]  # (B, h, 1, S)
        return logits

    def select(self, rows: torch.Tensor) -> None:
        """Keep the rows `rows` (N,) of what was fed, in that order (IncrementalDecoder.select)."""
        self.fed = [tokens.index_select(0, rows) for tokens in self.fed]


def decoder_for(model: Seq2Seq, memory: torch.Tensor, src_mask: torch.Tensor | None):
    """The stepping decoder for this model: the KV cache (core/model/kv_cache.py), or the full
    forward for a decoder that sees later positions, where a cache would keep stale states."""
    if model.causal:
        return IncrementalDecoder(model, memory, src_mask)
    return FullForwardDecoder(model, memory, src_mask)


def _greedy_tokens(model: Seq2Seq, src: torch.Tensor, cap: int, use_cache: bool,
                   progress: Callable[[int, int], bool | None] | None = None) -> torch.Tensor:
    B = src.shape[0]
    rules = model.generation
    memory, src_mask = model.encode(src)  # src_mask None when nothing is padded
    tokens = torch.full((B, 1 + cap), rules.pad, dtype=torch.long, device=src.device)  # (B, 1 + cap)
    tokens[:, 0] = rules.start
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    incremental = decoder_for(model, memory, src_mask) if use_cache else None
    t = 0
    while t < cap:
        if incremental is not None:
            logits = incremental.step(tokens[:, t])  # (B, V)
        else:
            logits = model.decode(tokens[:, : t + 1], memory, src_mask)[:, -1]  # (B, V)
        # float32, as generate processes them whatever the model computes in
        scores = rules.process(logits.float(), tokens[:, : t + 1], max_length=cap + 1, src=src)  # (B, V)
        next_token = scores.argmax(dim=-1).masked_fill(done, rules.pad)  # (B,)
        t += 1
        tokens[:, t] = next_token
        done |= rules.ends(next_token)
        stop = progress is not None and progress(t, cap)
        if stop or bool(done.all()):
            break
    return tokens[:, 1 : t + 1]


def cut_after_end(tokens: list[int], eos: tuple[int, ...]) -> list[int]:
    """Generated ids up to and including the first end token (what follows it dropped)."""
    ends = [i for i, t in enumerate(tokens) if t in eos]
    return tokens[: ends[0] + 1] if ends else tokens


def greedy_output(model: Seq2Seq, src_ids: list[int], cap: int | None = None,
                  progress: Callable[[int, int], bool | None] | None = None) -> list[int]:
    """One source's greedy output (greedy_decode, at most `cap` new tokens, `progress` as its),
    up to and including its end token: what a search is compared with, and what the model says
    for a typed source."""
    generated = greedy_decode(model, torch.tensor([src_ids], device=model.device), max_new_tokens=cap,
                              progress=progress)
    return cut_after_end(generated[0].tolist(), model.generation.eos)


def after_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """(B, n) ids -> (B, n) bool: True at every position after the first EOS of its row."""
    is_eos = (tokens == eos).long()
    return torch.cumsum(is_eos, dim=1) - is_eos > 0


def padded_to(tokens: torch.Tensor, width: int, *, eos: int, pad: int) -> torch.Tensor:
    """(B, n) ids -> (B, width): PAD appended, and everything after the first EOS set to PAD,
    so two outputs compare equal exactly when they agree up to and including EOS."""
    B, n = tokens.shape
    out = torch.full((B, width), pad, dtype=torch.long, device=tokens.device)
    out[:, :n] = tokens
    return out.masked_fill(after_eos(out, eos), pad)


def exact_match(generated: torch.Tensor, expected: torch.Tensor, *, eos: int, pad: int) -> torch.Tensor:
    """generated (B, n) and expected labels (B, L) with EOS then PAD -> (B,) bool.

    A sequence is right when its tokens up to and including EOS equal the expected ones.
    """
    width = max(generated.shape[1], expected.shape[1])
    expected = expected.to(generated.device)
    return (padded_to(generated, width, eos=eos, pad=pad)
            == padded_to(expected, width, eos=eos, pad=pad)).all(dim=1)


def accuracy_by_length(correct: torch.Tensor, lengths: torch.Tensor) -> dict[int, float]:
    """correct (B,) bool and source lengths (B,) -> {length: fraction correct}."""
    return {int(L): float(correct[lengths == L].float().mean()) for L in lengths.unique()}


@dataclass(frozen=True)
class StepResult:
    """What happened when the decoder produced one token."""

    index: int  # 0-based step number: this token is output position `index`
    token: int  # the token output here (and fed next): the prediction, unless it was forced
    text: str  # the token as a label (core.vocab.Vocab.label)
    top_k: list[tuple[int, float]]  # (token id, probability), most likely first
    cross_attention: torch.Tensor  # (layers, heads, S): this step's query row over the source
    self_attention: torch.Tensor  # (layers, heads, index + 1): over the decoder input so far
    is_end: bool  # the token is EOS
    log_probs: torch.Tensor | None = None  # (V,) the model's next-token log-probabilities
    lens: torch.Tensor | None = None  # (layers, V) log-probabilities of each decoder layer's lens
    predicted: int | None = None  # the model's own choice (argmax); None: the same as token
    # each generation rule that changed the choice here: (its setting, the token chosen before it)
    ruled: tuple[tuple[str, int], ...] = ()
    settings_forced: str = ""  # where the generation settings forced this token ("last step"), or ""

    @property
    def forced(self) -> bool:
        """True when the token output here is not the one the model chose."""
        return self.predicted is not None and self.predicted != self.token

    @property
    def entropy(self) -> float:
        """Of the model's next-token distribution, in nats (0: certain; ln V: uniform); never
        below 0, where rounding of a certain distribution would print -0.000."""
        lp = self.log_probs
        return max(0.0, float(-(lp.exp() * lp).sum())) if lp is not None else float("nan")


class Stepper(Replay):
    """Greedy decoding of one source, one token per `step()`, with a KV cache.

    `results[:position]` is what is currently shown; `back()` moves the position, and stepping
    forward again replays a recorded result instead of running the model.

    interventions (core/interp/interventions.py) change every step; `forced` maps a step index to the
    token output there instead of the model's choice (decoding continues greedily from it), and
    `teacher` feeds the decoder the given target at every step (teacher forcing; it sets the cap).
    """

    def __init__(self, model: Seq2Seq, src_ids: list[int], top_k: int = 5, cap: int | None = None,
                 interventions=None, forced: dict[int, int] | None = None,
                 teacher: list[int] | None = None, *, vocab: Vocab):
        if not src_ids:
            raise ValueError("the source is empty")
        if vocab.size != model.cfg.vocab_size:
            raise ValueError(f"a vocabulary of {vocab.size} tokens for a model of {model.cfg.vocab_size}")
        self.model = model
        self.vocab = vocab
        self.src_ids = list(src_ids)
        self.top_k = top_k
        self.teacher = list(teacher) if teacher is not None else None
        self.cap = len(self.teacher) if self.teacher else \
            model.generation.cap(cap or output_cap(len(src_ids), model.cfg.max_len), model.cfg.max_len)
        self.forced = dict(forced or {})
        self._lens_record = Recording(heads=False)  # each step's residual streams: the logit lens
        self.interventions = interventions or Interventions()
        self._hooks = self.interventions.recording(self._lens_record)
        self.encoder_attention = self._start()  # (layers, heads, S, S)
        self.results: list[StepResult] = []
        self.position = 0

    def _start(self) -> torch.Tensor:
        """A fresh decoder (the interventions apply to the encoding and to every cached step)."""
        maps = AttentionMaps()
        with eval_mode(self.model), torch.no_grad(), self._hooks.applied(self.model):
            src = torch.tensor([self.src_ids], device=self.model.device)  # (1, S)
            self._decoder = decoder_for(self.model, *self.model.encode(src, maps))
        self._last_token = torch.tensor([self.model.generation.start], device=self.model.device)  # (1,)
        return torch.stack([w[0] for w in maps.encoder_self]).cpu()

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

    def _records(self) -> list[StepResult]:
        return self.results

    def run(self, progress=None) -> list[StepResult]:
        """Every step to the end (Replay.step_all: `progress` as it goes); the steps shown."""
        self.step_all(progress)
        return self.results[: self.position]

    def force(self, token: int) -> StepResult:
        """Output `token` at the current step instead of what the model chose; what follows is
        decoded again, greedily from it (stepping forward computes it)."""
        index = self.position - 1
        if index < 0:
            raise ValueError("step once before forcing a token: there is no current step yet")
        if not 0 <= token < self.model.cfg.vocab_size:
            raise ValueError(f"token {token} is not in the vocabulary")
        self.forced[index] = token
        kept = self.results[:index] + [replace(self.results[index], token=token, text=self.vocab.label(token),
                                               is_end=token in self.model.generation.eos)]
        self._start()
        with torch.no_grad():
            for fed in self.decoder_input(kept[:-1]):  # the cache up to this step
                self._decoder.step(torch.tensor([fed], device=self.model.device))
        self._lens_record.clear()
        self.results, self._last_token = kept, torch.tensor([token], device=self.model.device)
        return kept[-1]

    def decoder_input(self, results: list[StepResult]) -> list[int]:
        """The start token, then the tokens of `results`: what the decoder has been fed."""
        return [self.model.generation.start] + [r.token for r in results]

    def cross_attention_grid(self, layer: int, head: int) -> torch.Tensor:
        """(steps shown, S): row i is the query that produced output token i. (A model whose
        cross-attention reads the decoder, the swap-cross bug, has rows that grow a position a
        step: they are zero-padded to the widest.)"""
        rows = [r.cross_attention[layer, head] for r in self.results[: self.position]]
        width = max([len(self.src_ids)] + [len(row) for row in rows])
        grid = torch.zeros(len(rows), width)
        for i, row in enumerate(rows):
            grid[i, : len(row)] = row
        return grid

    def self_attention_grid(self, layer: int, head: int) -> torch.Tensor:
        """(steps shown, steps shown): row i over decoder inputs 0..i (SOS, out_0..), zero above."""
        n = self.position
        grid = torch.zeros(n, n)
        for i, r in enumerate(self.results[:n]):
            grid[i, : i + 1] = r.self_attention[layer, head]
        return grid

    def encoder_attention_grid(self, layer: int, head: int) -> torch.Tensor:
        """(S, S): source position i (row) over source positions (columns)."""
        return self.encoder_attention[layer, head]

    @torch.no_grad()
    def _compute_next(self) -> StepResult:
        index = len(self.results)
        maps = AttentionMaps()
        self._lens_record.clear()
        with eval_mode(self.model):  # the incremental step reads no dropout, but the model is shared
            logits = self._decoder.step(self._last_token, maps)  # (1, V)
            streams = [self._lens_record.stream("dec", i) for i in range(len(self.model.decoder))]
            lens = self.model.stream_logits(torch.stack(streams)).log_softmax(dim=-1)  # (L, 1, 1, V)
            lens = lens[:, 0, -1].cpu()  # (L, V)
        log_probs = logits.log_softmax(dim=-1)[0]  # (V,): the model's whole distribution
        rules = self.model.generation
        prefix = torch.tensor([self.decoder_input(self.results[:index])], device=logits.device)  # (1, t)
        src = torch.tensor([self.src_ids], device=logits.device)  # (1, S)
        # What may be chosen here (minitx: never PAD or SOS; a folder's settings may force a token,
        # or change scores): greedy decoding's own scores, the raw logits processed, as generate's
        changes: list[tuple[str, int]] = []
        scores = rules.process(logits.float(), prefix, max_length=self.cap + 1, src=src, changes=changes)[0]
        # shown: the model's probability of each token greedy may choose, best scored first (1 for a
        # forced one; a rule that changes scores, a penalty or a bias, changes the order, not these)
        # a banned token scores -inf (remove_invalid_values: the lowest finite score)
        possible = scores > torch.finfo(scores.dtype).min  # (V,)
        if rules.changes_scores:
            probs = log_probs.exp().masked_fill(~possible, 0.0)  # (V,)
        else:
            probs = rules.process(log_probs[None], prefix, max_length=self.cap + 1, src=src)[0].exp()
        order = scores.topk(max(1, min(self.top_k, int(possible.sum())))).indices
        predicted = int(order[0])
        settings = rules.forced_token(prefix.shape[1], self.cap + 1)
        token = self.forced.get(index, predicted)  # forced over teacher over the model's choice
        if index not in self.forced and self.teacher is not None and index < len(self.teacher):
            token = self.teacher[index]
        self._last_token = torch.tensor([token], device=logits.device)
        return StepResult(
            index=index,
            token=token,
            text=self.vocab.label(token),
            top_k=[(int(i), float(probs[i])) for i in order],
            cross_attention=torch.stack([w[0, :, -1] for w in maps.cross]).cpu(),  # (L, h, S)
            self_attention=torch.stack([w[0, :, -1] for w in maps.decoder_self]).cpu(),
            is_end=token in rules.eos,
            log_probs=log_probs.cpu(),
            lens=lens,
            predicted=predicted,
            ruled=tuple(changes),
            settings_forced=settings[1] if settings else "",
        )


def first_wrong_step(generated: list[int], expected: list[int], eos: int) -> int | None:
    """The 0-based step where `generated` first differs from `expected` (both ending in EOS or
    cut there), or None when they agree; a missing token counts as a difference."""
    for i in range(max(len(generated), len(expected))):
        got = generated[i] if i < len(generated) else None
        want = expected[i] if i < len(expected) else None
        if got != want:
            return i
        if got == eos:
            return None
    return None
