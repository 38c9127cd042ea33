"""How a model's outputs are generated: the decoder's first input, when an output ends, the tokens
it may never produce and the ones forced on it, and how long it may grow.

minitx's own models start from SOS, end at EOS and never produce PAD or SOS; their length comes
from the task (core/data/task.py's decode_cap). A Hugging Face folder says all of this in its
generation_config.json (or, without one, config.json), and greedy decoding and beam search follow it
exactly as transformers' `generate` does (docs/huggingface.md): `process` applies every
deterministic logits processor generate builds (_get_logits_processor) to one step's scores, in
its order, since a penalty, a forced token and a ban can meet on the same id. Greedy decoding
processes the raw logits, beam search their log-softmax, as generate does.

Positions count as transformers counts them: the decoder's start token is position 0, so
`max_length` 20 allows 19 generated tokens and `min_length` 5 bans EOS until 4 are generated.

Shapes: N hypotheses (a batch, or a batch's beams), V the vocabulary, t positions fed so far.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
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
    # Scores changed rather than banned (transformers' names; each neutral by default).
    repetition_penalty: float = 1.0  # a fed token's score divided by it (multiplied when negative)
    encoder_repetition_penalty: float = 1.0  # a source token's score multiplied by it (divided when negative)
    # (tokens, bias): the bias added to the last token's score where the prefix ends with the rest
    sequence_bias: tuple[tuple[tuple[int, ...], float], ...] = ()
    encoder_no_repeat_ngram_size: int = 0  # no n-gram of the source appears in an output (0: off)
    # (start, factor): the end tokens' scores raised by a factor per step after start
    exponential_decay_length_penalty: tuple[int, float] | None = None
    remove_invalid_values: bool = False  # nan -> 0, +-inf -> the largest finite scores
    renormalize_logits: bool = False  # the processed scores log-softmaxed again
    # What a person is told, not what is computed (so two settings that compute the same compare
    # equal): settings minitx does not compute ("do_sample true"), and (setting, value, the file
    # it came from) for each setting read from a folder.
    not_computed: tuple[str, ...] = field(default=(), compare=False)
    sources: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for name in ("max_length", "max_new_tokens", "min_length", "no_repeat_ngram_size",
                     "encoder_no_repeat_ngram_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"generation: {name} must be a non-negative integer, got {value!r}")
        for name in ("repetition_penalty", "encoder_repetition_penalty"):
            value = getattr(self, name)
            if not isinstance(value, float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"generation: {name} must be a positive float, got {value!r}")
        decay = self.exponential_decay_length_penalty
        if decay is not None and (len(decay) != 2 or not _is_count(decay[0])
                                  or not isinstance(decay[1], float) or not math.isfinite(decay[1])):
            raise ValueError("generation: exponential_decay_length_penalty must be [start, factor], "
                             f"got {decay!r}")
        if any(not words or not isinstance(bias, float) or not math.isfinite(bias)
               for words, bias in self.sequence_bias):
            raise ValueError("generation: sequence_bias must hold [token ids, float bias] pairs")
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
                and all(len(w) == 1 for w in self.bad_words) and not self.changes_scores)

    @property
    def changes_scores(self) -> bool:
        """True when a rule changes scores rather than only banning or forcing tokens: then the
        model's own probabilities no longer rank the tokens greedy decoding chooses from."""
        return (self.repetition_penalty != 1.0 or self.encoder_repetition_penalty != 1.0
                or bool(self.sequence_bias) or bool(self.encoder_no_repeat_ngram_size)
                or self.exponential_decay_length_penalty is not None or self.remove_invalid_values)

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

    def process(self, scores: torch.Tensor, prefix: torch.Tensor, max_length: int,
                src: torch.Tensor | None = None,
                changes: list[tuple[str, int]] | None = None) -> torch.Tensor:
        """scores (N, V) of the next token after prefix (N, t) (the start token first), for
        sources src (B, S) (N a multiple of B: a source's hypotheses side by side, as generate
        repeats them) -> the scores greedy decoding takes the argmax of (beam search: the same of
        their log-softmax), under a decode of at most `max_length` positions. The rules act in
        transformers' order (_rules). With `changes`, each rule that moved row 0's argmax appends
        (its setting's name, the token that was the argmax before it)."""
        for name, rule in self._rules(prefix, max_length, src):
            before = int(scores[0].argmax()) if changes is not None else 0
            scores = rule(scores)
            if changes is not None and int(scores[0].argmax()) != before:
                changes.append((name, before))
        return scores

    def _rules(self, prefix: torch.Tensor, max_length: int, src: torch.Tensor | None):
        """(setting, scores -> scores) for each rule that acts at this step, in transformers'
        order: generate's _get_logits_processor."""
        t, device = prefix.shape[1], prefix.device

        def eos() -> torch.Tensor:  # made only where a rule that reads it acts, not every step
            return torch.tensor(self.eos, device=device)

        if self.sequence_bias:
            yield "sequence_bias", lambda s: _biased(s, prefix, self.sequence_bias)
        if self.encoder_repetition_penalty != 1.0:
            inverse = 1 / self.encoder_repetition_penalty  # transformers' own reciprocal, then its rule
            yield "encoder_repetition_penalty", \
                lambda s: _penalised(s, _per_row(_needs(src), len(s)), inverse)
        if self.repetition_penalty != 1.0:
            yield "repetition_penalty", lambda s: _penalised(s, prefix, self.repetition_penalty)
        if self.no_repeat_ngram_size and t >= self.no_repeat_ngram_size:
            yield "no_repeat_ngram_size", lambda s: _no_repeat(s, prefix, self.no_repeat_ngram_size)
        n = self.encoder_no_repeat_ngram_size
        if n and t >= n - 1:
            yield "encoder_no_repeat_ngram_size", lambda s: _no_source_ngram(s, prefix, _needs(src), n)
        words = self._bad_words()
        if words:
            def ban_words(s: torch.Tensor) -> torch.Tensor:
                for word in words:
                    s = _ban_after(s, prefix, word)
                return s
            yield "bad_words_ids", ban_words
        if self.min_length and t < self.min_length:
            yield "min_length", lambda s: s.index_fill(-1, eos(), float("-inf"))
        if self._forces_bos(t):
            yield "forced_bos_token_id", lambda s: _only(s, self.forced_bos)
        if self._forces_eos(t, max_length):
            yield "forced_eos_token_id", lambda s: _only(s, self.forced_eos)
        if self.remove_invalid_values:
            yield "remove_invalid_values", _finite
        decay = self.exponential_decay_length_penalty
        if decay is not None and t > decay[0] + 1:  # counted from the start token, as generate counts
            growth = decay[1] ** (t - decay[0] - 1) - 1
            yield "exponential_decay_length_penalty", lambda s: _decayed(s, eos(), growth)
        if self.suppressed:
            yield "suppress_tokens", lambda s: s.index_fill(-1, torch.tensor(self.suppressed, device=device),
                                                            float("-inf"))
        first = 2 if self.forced_bos is not None else 1  # transformers' begin index skips a forced BOS
        if self.begin_suppressed and t == first:
            yield "begin_suppress_tokens", lambda s: s.index_fill(
                -1, torch.tensor(self.begin_suppressed, device=device), float("-inf"))
        if self.renormalize_logits:
            yield "renormalize_logits", lambda s: s.log_softmax(dim=-1)

    @property
    def not_computed_line(self) -> str:
        """One line naming what minitx does not compute, or "" when it computes everything set."""
        if not self.not_computed:
            return ""
        return (f"not computed: {', '.join(self.not_computed)} (generate() applies "
                f"{'it' if len(self.not_computed) == 1 else 'them'}; minitx decodes without)")

    def forced_token(self, t: int, max_length: int) -> tuple[int, str] | None:
        """The token these settings force after a prefix of t positions (the start token first)
        in a decode of at most `max_length` positions, and where: (id, "first step" or "last
        step"); None where the model chooses. Forced EOS acts after forced BOS, so it wins."""
        if self._forces_eos(t, max_length):
            return self.forced_eos, "last step"
        if self._forces_bos(t):
            return self.forced_bos, "first step"
        return None

    def _forces_bos(self, t: int) -> bool:
        """forced_bos_token_id acts on the first generated token (after the start token)."""
        return self.forced_bos is not None and t == 1

    def _forces_eos(self, t: int, max_length: int) -> bool:
        """forced_eos_token_id acts at the last position max_length allows."""
        return self.forced_eos is not None and t == max_length - 1

    def _bad_words(self) -> tuple[tuple[int, ...], ...]:
        """bad_words less the single end tokens (transformers never bans an EOS this way)."""
        return tuple(w for w in self.bad_words if not (len(w) == 1 and w[0] in self.eos))

    # -- files ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["eos"] = list(self.eos)
        data["suppressed"], data["begin_suppressed"] = list(self.suppressed), list(self.begin_suppressed)
        data["bad_words"] = [list(w) for w in self.bad_words]
        data["sequence_bias"] = [[list(w), b] for w, b in self.sequence_bias]
        decay = self.exponential_decay_length_penalty
        data["exponential_decay_length_penalty"] = list(decay) if decay is not None else None
        data["not_computed"], data["sources"] = list(self.not_computed), [list(s) for s in self.sources]
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
        biases = data.get("sequence_bias", [])
        if not isinstance(biases, list) or len(biases) > MAX_RULE_TOKENS or \
                not all(isinstance(b, list) and len(b) == 2 for b in biases):
            raise ValueError("the generation settings' sequence_bias is not a list of [ids, bias] pairs")
        values["sequence_bias"] = tuple((tokens("sequence_bias", w), b) for w, b in biases)
        decay = data.get("exponential_decay_length_penalty")
        if decay is not None:
            if not isinstance(decay, list) or len(decay) != 2:
                raise ValueError("the generation settings' exponential_decay_length_penalty "
                                 "is not [start, factor]")
            values["exponential_decay_length_penalty"] = tuple(decay)
        for name in ("not_computed", "sources"):
            listed = data.get(name, [])
            if not isinstance(listed, list) or len(listed) > 1000 or not all(
                    isinstance(x, str) if name == "not_computed" else isinstance(x, list)
                    and len(x) == 3 and all(isinstance(y, str) for y in x) for x in listed):
                raise ValueError(f"the generation settings' {name} is not a list of text")
            values[name] = tuple(x if isinstance(x, str) else tuple(x) for x in listed)
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


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _needs(src: torch.Tensor | None) -> torch.Tensor:
    if src is None:
        raise ValueError("a rule on the source's tokens needs the source ids")
    return src


def _per_row(src: torch.Tensor, rows: int) -> torch.Tensor:
    """src (B, S) -> (rows, S): each source repeated for its hypotheses (rows a multiple of B)."""
    return src.repeat_interleave(rows // src.shape[0], dim=0) if rows > src.shape[0] else src


def _penalised(scores: torch.Tensor, ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """The scores of the tokens in ids (N, n) divided by penalty where positive, multiplied where
    negative (transformers' RepetitionPenaltyLogitsProcessor; with 1 / penalty, its encoder one)."""
    picked = scores.gather(1, ids)  # (N, n)
    picked = torch.where(picked < 0, picked * penalty, picked / penalty)
    return scores.scatter(1, ids, picked)


def _biased(scores: torch.Tensor, prefix: torch.Tensor,
            biases: tuple[tuple[tuple[int, ...], float], ...]) -> torch.Tensor:
    """scores plus each sequence's bias on its last token, in rows whose prefix ends with the rest
    (transformers' SequenceBiasLogitsProcessor: one bias table, then one addition)."""
    bias = torch.zeros_like(scores)  # (N, V)
    single = [(w[0], b) for w, b in biases if len(w) == 1]
    row = torch.zeros(scores.shape[-1], dtype=torch.float, device=scores.device)  # (V,)
    if single:
        row[[w for w, _ in single]] = torch.tensor([b for _, b in single], device=scores.device)
    bias += row
    groups: dict[int, list[tuple[tuple[int, ...], float]]] = {}
    for words, b in biases:
        if len(words) > 1:
            groups.setdefault(len(words) - 1, []).append((words, b))
    for n, group in groups.items():
        if n > prefix.shape[1]:
            continue
        heads = torch.tensor([w[:-1] for w, _ in group], device=prefix.device)  # (G, n)
        lasts = torch.tensor([w[-1] for w, _ in group], device=prefix.device)  # (G,)
        values = torch.tensor([b for _, b in group], dtype=torch.float, device=scores.device)  # (G,)
        matching = (prefix[:, None, -n:] == heads).all(dim=-1)  # (N, G)
        bias.index_add_(1, lasts, torch.where(matching, values, 0.0).to(bias.dtype))
    return scores + bias


def _no_source_ngram(scores: torch.Tensor, prefix: torch.Tensor, src: torch.Tensor, n: int) -> torch.Tensor:
    """-inf on every token that would complete an n-gram of the row's source (transformers'
    EncoderNoRepeatNGramLogitsProcessor; n = 1 bans every source token)."""
    src = _per_row(src, scores.shape[0])  # (N, S)
    if src.shape[1] < n:
        return scores
    return _ban_completing(scores, src.unfold(1, n, 1), prefix[:, prefix.shape[1] + 1 - n:])


def _finite(scores: torch.Tensor) -> torch.Tensor:
    """nan -> 0, +-inf -> the dtype's largest finite values (transformers' InfNanRemoveLogitsProcessor)."""
    info = torch.finfo(scores.dtype)
    cleaned = torch.where(scores != scores, 0.0, scores)
    cleaned = torch.where(scores == float("inf"), info.max, cleaned)
    return torch.where(scores == float("-inf"), info.min, cleaned)


def _decayed(scores: torch.Tensor, eos: torch.Tensor, growth: float) -> torch.Tensor:
    """The end tokens' scores raised by |score| * growth (transformers' ExponentialDecayLengthPenalty)."""
    penalty = scores[:, eos].abs() * growth  # (N, E)
    penalty = penalty.masked_fill(~torch.isfinite(scores[:, eos]), 0.0)
    penalties = torch.zeros_like(scores)
    penalties[:, eos] = penalty
    return scores + penalties


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
    return _ban_completing(scores, prefix.unfold(1, n, 1), prefix[:, prefix.shape[1] + 1 - n:])


def _ban_completing(scores: torch.Tensor, windows: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
    """windows (N, W, n) of each row's n-grams and tail (N, n - 1), the row's last n - 1 tokens ->
    -inf on the last token of every window that starts with the tail (what the next token would
    complete)."""
    n = windows.shape[-1]
    matches = (windows[:, :, : n - 1] == tail[:, None, :]).all(dim=-1)  # (N, W)
    rows, which = matches.nonzero(as_tuple=True)
    if not len(rows):
        return scores
    scores = scores.clone()
    scores[rows, windows[rows, which, n - 1]] = float("-inf")
    return scores
