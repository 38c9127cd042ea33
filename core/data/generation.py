"""How a model's outputs are generated: the decoder's first input, when an output ends, the tokens
it may never produce and the ones forced on it, and how long it may grow.

minitx's own models start from SOS, end at EOS and never produce PAD or SOS; their length comes
from the task (core/data/task.py's decode_cap). A Hugging Face folder says all of this in its
generation_config.json (or config.json), and greedy decoding and beam search follow it exactly as
transformers' `generate` does (docs/huggingface.md): `process` applies the rules to one step's
scores in the order transformers applies its logits processors, since a forced token and a ban
can meet on the same id.

Positions count as transformers counts them: the decoder's start token is position 0, so
`max_length` 20 allows 19 generated tokens and `min_length` 5 bans EOS until 4 are generated.

Shapes: N hypotheses (a batch, or a batch's beams), V the vocabulary, t positions fed so far.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

EARLY_STOPPING = (True, False, "never")  # beam search's stopping rule, as transformers names it
EARLY_STOPPING_NAMES = {"true": True, "false": False, "never": "never"}  # as a person types them
MAX_RULE_TOKENS = 100_000  # ids listed in one rule (bad words and the like); a file claiming more is refused


@dataclass(frozen=True)
class Generation:
    start: int  # the decoder's first input (SOS; a folder's decoder_start_token_id)
    eos: tuple[int, ...]  # an output ends at the first of these
    pad: int  # what follows the end of a finished output in a batch
    suppressed: tuple[int, ...] = ()  # never produced (minitx: PAD and SOS; a folder's suppress_tokens)
    bad_words: tuple[tuple[int, ...], ...] = ()  # never produced as a sequence (one token: never)
    forced_bos: int | None = None  # the first generated token, whatever the model prefers
    forced_eos: int | None = None  # the token at the last position max_length allows
    max_length: int = 0  # positions at most, the start included; 0: the task decides
    max_new_tokens: int = 0  # generated tokens at most (wins over max_length); 0: not set
    min_length: int = 0  # EOS is banned while fewer positions than this are fed
    no_repeat_ngram_size: int = 0  # no n-gram of this size appears twice in an output (0: off)
    begin_suppressed: tuple[int, ...] = ()  # never the first generated token
    # Beam search (core/interp): how many hypotheses, how length is rewarded, when to stop.
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False

    def __post_init__(self) -> None:
        for name in ("max_length", "max_new_tokens", "min_length", "no_repeat_ngram_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"generation: {name} must be a non-negative integer, got {value!r}")
        check_beam_settings(self.num_beams, self.length_penalty, self.early_stopping)
        if not self.eos:
            raise ValueError("generation: an output needs an end token (eos)")

    @classmethod
    def minitx(cls, sos: int, eos: int, pad: int) -> Generation:
        """minitx's own rule: start at SOS, end at EOS, never produce PAD or SOS."""
        return cls(start=sos, eos=(eos,), pad=pad, suppressed=(pad, sos))

    # -- lengths -----------------------------------------------------------------------------
    def cap(self, default: int, positions: int) -> int:
        """Tokens to generate at most: max_new_tokens, else max_length less the start token,
        else `default` (the task's); never more than the model's positions hold after the start."""
        if self.max_new_tokens:
            wanted = self.max_new_tokens
        elif self.max_length:
            wanted = self.max_length - 1
        else:
            wanted = default
        return max(1, min(wanted, positions - 1))

    @property
    def context_free(self) -> bool:
        """True when what may be produced never depends on the step or the tokens before it:
        then one teacher-forced pass gives greedy decoding's choices."""
        return (self.forced_bos is None and self.forced_eos is None and not self.min_length
                and not self.no_repeat_ngram_size and not self.begin_suppressed
                and all(len(w) == 1 for w in self.bad_words))

    # -- one step ------------------------------------------------------------------------------
    def ends(self, tokens: torch.Tensor) -> torch.Tensor:
        """(...) ids -> (...) bool: True where the token ends an output."""
        return torch.isin(tokens, torch.tensor(self.eos, device=tokens.device))

    def emittable(self, scores: torch.Tensor) -> torch.Tensor:
        """(..., V) scores with -inf on the tokens never produced, whatever came before: the
        suppressed ones and single-token bad words (what a lens or a top-k list may show)."""
        never = list(self.suppressed) + [w[0] for w in self._bad_words() if len(w) == 1]
        if not never:
            return scores
        return scores.index_fill(-1, torch.tensor(never, device=scores.device), float("-inf"))

    def process(self, scores: torch.Tensor, prefix: torch.Tensor, max_length: int) -> torch.Tensor:
        """scores (N, V) of the next token after prefix (N, t) (the start token first) -> the
        scores greedy decoding takes the argmax of (beam search: of their log-softmax), under a
        decode of at most `max_length` positions. The rules act in transformers' order: repeated
        n-grams, bad words, min_length, forced BOS, forced EOS, suppressed tokens, begin-suppressed."""
        t = prefix.shape[1]
        if self.no_repeat_ngram_size and t >= self.no_repeat_ngram_size:
            scores = _no_repeat(scores, prefix, self.no_repeat_ngram_size)
        for word in self._bad_words():
            scores = _ban_after(scores, prefix, word)
        if self.min_length and t < self.min_length:
            scores = scores.index_fill(-1, torch.tensor(self.eos, device=scores.device), float("-inf"))
        forced = self.forced_token(t, max_length)
        if forced is not None:
            scores = _only(scores, forced[0])
        if self.suppressed:
            scores = scores.index_fill(-1, torch.tensor(self.suppressed, device=scores.device), float("-inf"))
        first = 2 if self.forced_bos is not None else 1  # transformers' begin index skips a forced BOS
        if self.begin_suppressed and t == first:
            scores = scores.index_fill(-1, torch.tensor(self.begin_suppressed, device=scores.device),
                                       float("-inf"))
        return scores

    def forced_token(self, t: int, max_length: int) -> tuple[int, str] | None:
        """The token these settings force after a prefix of t positions (the start token first)
        in a decode of at most `max_length` positions, and where: (id, "first step" or "last
        step"); None where the model chooses. Forced EOS acts after forced BOS, so it wins."""
        if self.forced_eos is not None and t == max_length - 1:
            return self.forced_eos, "last step"
        if self.forced_bos is not None and t == 1:
            return self.forced_bos, "first step"
        return None

    def _bad_words(self) -> tuple[tuple[int, ...], ...]:
        """bad_words less the single end tokens (transformers never bans an EOS this way)."""
        return tuple(w for w in self.bad_words if not (len(w) == 1 and w[0] in self.eos))

    # -- files ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["eos"] = list(self.eos)
        data["suppressed"], data["begin_suppressed"] = list(self.suppressed), list(self.begin_suppressed)
        data["bad_words"] = [list(w) for w in self.bad_words]
        return data

    @classmethod
    def from_dict(cls, data: Any, vocab_size: int) -> Generation:
        """From a checkpoint's metadata: every field checked against the vocabulary; ValueError
        (one line) otherwise."""
        if not isinstance(data, dict):
            raise ValueError("the generation settings are not an object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"the generation settings have an unknown field {unknown[0][:40]!r}")
        values = dict(data)

        def token(name: str, value: Any) -> int:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab_size:
                raise ValueError(f"the generation settings' {name} is not a token id below {vocab_size}")
            return value

        def tokens(name: str, value: Any) -> tuple[int, ...]:
            if not isinstance(value, list) or len(value) > MAX_RULE_TOKENS:
                raise ValueError(f"the generation settings' {name} is not a list of token ids")
            return tuple(token(name, v) for v in value)

        for name in ("start", "pad"):
            values[name] = token(name, data.get(name))
        for name in ("forced_bos", "forced_eos"):
            if data.get(name) is not None:
                values[name] = token(name, data[name])
        for name in ("eos", "suppressed", "begin_suppressed"):
            values[name] = tokens(name, data.get(name, []))
        words = data.get("bad_words", [])
        if not isinstance(words, list) or \
                sum(len(w) if isinstance(w, list) else 1 for w in words) > MAX_RULE_TOKENS:
            raise ValueError("the generation settings' bad_words is not a list of token id lists")
        values["bad_words"] = tuple(tokens("bad_words", w) for w in words)
        if any(not w for w in values["bad_words"]):
            raise ValueError("the generation settings' bad_words holds an empty word")
        return cls(**values)


def check_beam_settings(num_beams: object, length_penalty: object, early_stopping: object) -> None:
    """ValueError (one line) unless beam search can run under these settings."""
    if not isinstance(num_beams, int) or isinstance(num_beams, bool) or num_beams < 1:
        raise ValueError(f"num_beams must be a positive integer, got {num_beams!r}")
    if not isinstance(length_penalty, (int, float)) or isinstance(length_penalty, bool) \
            or not math.isfinite(length_penalty):
        raise ValueError(f"the length penalty must be a finite number, got {length_penalty!r}")
    if early_stopping not in EARLY_STOPPING or (isinstance(early_stopping, int)
                                                and not isinstance(early_stopping, bool)):
        raise ValueError(f'early stopping must be true, false or "never", got {early_stopping!r}')


def _only(scores: torch.Tensor, token: int) -> torch.Tensor:
    """Every score -inf but `token`'s, which becomes 0 (transformers' forced tokens)."""
    forced = torch.full_like(scores, float("-inf"))
    forced[..., token] = 0
    return forced


def _ban_after(scores: torch.Tensor, prefix: torch.Tensor, word: tuple[int, ...]) -> torch.Tensor:
    """-inf on word's last token in the rows whose prefix ends with the rest of the word."""
    *head, last = word
    if len(head) > prefix.shape[1]:
        return scores
    rows = (prefix[:, prefix.shape[1] - len(head):] == torch.tensor(head, device=prefix.device)).all(dim=1) \
        if head else torch.ones(prefix.shape[0], dtype=torch.bool, device=prefix.device)  # (N,)
    banned = scores[:, last].masked_fill(rows, float("-inf"))
    scores = scores.clone()
    scores[:, last] = banned
    return scores


def _no_repeat(scores: torch.Tensor, prefix: torch.Tensor, n: int) -> torch.Tensor:
    """-inf on every token that would complete an n-gram already in its row's prefix: the rows'
    last n - 1 tokens matched against every earlier window of n (transformers'
    NoRepeatNGramLogitsProcessor)."""
    t = prefix.shape[1]
    windows = prefix.unfold(1, n, 1)  # (N, t - n + 1, n)
    tail = prefix[:, t + 1 - n:]  # (N, n - 1): what the next token would complete
    matches = (windows[:, :, : n - 1] == tail[:, None, :]).all(dim=-1)  # (N, windows)
    rows, which = matches.nonzero(as_tuple=True)
    if not len(rows):
        return scores
    scores = scores.clone()
    scores[rows, windows[rows, which, n - 1]] = float("-inf")
    return scores
