"""Beam search, exactly as transformers' `generate(num_beams=K)` computes it, kept whole as a tree.

A step (transformers 5's `_beam_search` and its helpers, read line by line):
1. the K running hypotheses are fed one token; their log-softmax goes through the model's generation
   rules (core/data/generation.py, the logits processors' order) and each row's running sum is
   added: K x V continuations;
2. the best `(1 + max(1, end tokens)) * K` of them (2K with one end token) are the step's
   candidates;
3. a candidate ends when its token is an end token or the output reached max length; the best K
   candidates that do not end run on (their cache rows follow them: `select`);
4. an ending candidate ranked among the first K is offered to the finished pool, scored
   sum / length ** length_penalty, length counting its generated tokens (EOS included, the start
   not); the pool keeps the best K ever offered. Nothing is offered once the pool is full under
   early_stopping=True, or once the stopping test below has said no improvement is possible;
5. the search stops when every candidate ended, when early_stopping=True and the pool holds K, or
   when the best running sum divided by length ** length_penalty cannot beat the pool's worst
   (length: the tokens generated so far; with early_stopping="never" and a positive length
   penalty, the most max length allows: the only bound that is exact, so "never" never stops
   early by mistake, while False may).
The result is the pool, best first: `score` is transformers' `sequences_scores`.

At the start only the first running row counts (the others carry -1e9, transformers' device for
K copies of one prefix), so a small vocabulary can fill a step with candidates of those copies:
they are `void` in the tree, kept for exactness, never shown or returned.

The tree: every candidate of every step is a node (parent, token, its log-probability, the running
sum, its length-normalised score, kept / pruned / finished). Stepping back replays recorded steps
(as core/interp/decode.py's Stepper does for greedy decoding).

Shapes: K beams, C candidates per step, V the vocabulary, L = 1 + cap positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.data.generation import check_beam_settings
from minitx.core.data.task import output_cap
from minitx.core.interp.decode import decoder_for
from minitx.core.interp.interventions import Interventions
from minitx.core.interp.replay import Replay
from minitx.core.model.transformer import Seq2Seq, eval_mode

SENTINEL = -1.0e9  # transformers' score for "not a real hypothesis" (the start's copies, ended rows)
STATES = ("kept", "pruned", "finished")  # a candidate runs on, is dropped, or enters the finished pool


@dataclass(frozen=True)
class Node:
    """One candidate of one step: a hypothesis one token longer than its parent."""

    id: int  # index in BeamSearch.nodes
    parent: int  # the parent's id; -1: the decoder's start
    step: int  # 0-based: the node holds `step + 1` generated tokens
    rank: int  # 0-based rank among its step's candidates (by running sum)
    token: int
    logp: float  # this token's log-probability after the generation rules
    total: float  # the running sum of log-probabilities along the path
    score: float  # total / (step + 1) ** length_penalty
    state: str  # one of STATES
    ended: bool  # its token ends an output, or the output reached max length

    @property
    def length(self) -> int:
        return self.step + 1

    @property
    def void(self) -> bool:
        """A candidate carried only because too few real ones existed (a copy of the start, or a
        banned token): never a result, never drawn."""
        return not self.total > SENTINEL / 2


@dataclass(frozen=True)
class BeamStep:
    """What one step did: its candidates best first, the K that run on, and the finished pool."""

    index: int
    candidates: tuple[int, ...]  # node ids, by running sum, best first
    running: tuple[int, ...]  # the K node ids that run on, best first
    pool: tuple[int, ...]  # the finished pool after the step, best first (real nodes only)
    stopped: bool  # the search ends with this step
    why: str  # why it stopped ("" while it goes on)


@dataclass(frozen=True)
class Hypothesis:
    """A finished output: what generate returns for it."""

    tokens: tuple[int, ...]  # generated ids, the start token left out, ending with EOS if one came
    logp: float  # sum of the tokens' log-probabilities
    score: float  # logp / len(tokens) ** length_penalty: transformers' sequences_scores
    node: int  # its last node in the tree (-1: not from a search)


def length_normalised(total: float, length: int, length_penalty: float) -> float:
    """transformers' finished-hypothesis score: the sum divided by length ** length_penalty."""
    return total / (length**length_penalty)


class BeamSearch(Replay):
    """Beam search of one source, one step per `step()`, with the KV cache reordered per beam.

    beams, length_penalty and early_stopping default to the model's generation settings
    (model.generation: a Hugging Face folder's generation_config), as `generate` takes them;
    `cap` is the task's length cap, which the settings' max length may lower (as greedy's).
    interventions (core/interp/interventions.py) apply to every step, as in greedy decoding."""

    def __init__(self, model: Seq2Seq, src_ids: list[int], *, beams: int | None = None,
                 length_penalty: float | None = None, early_stopping: bool | str | None = None,
                 cap: int | None = None, interventions: Interventions | None = None) -> None:
        rules = model.generation
        self.model, self.rules, self.src_ids = model, rules, list(src_ids)
        self.beams = rules.num_beams if beams is None else beams
        self.length_penalty = float(rules.length_penalty if length_penalty is None else length_penalty)
        self.early_stopping = rules.early_stopping if early_stopping is None else early_stopping
        check_settings(self.beams, self.length_penalty, self.early_stopping)
        if not self.src_ids:
            raise ValueError("the source is empty")
        self.cap = rules.cap(cap or output_cap(len(src_ids), model.cfg.max_len), model.cfg.max_len)
        self.max_length = self.cap + 1  # positions, the start included (transformers' max_length)
        self.interventions = interventions or Interventions()
        self.width = max(2, 1 + len(rules.eos)) * self.beams  # candidates kept per step
        self.nodes: list[Node] = []
        self.steps: list[BeamStep] = []
        self.position = 0  # steps shown; stepping back and forth replays self.steps
        self._start()

    # -- the state transformers keeps ------------------------------------------------------------
    def _start(self) -> None:
        K, device = self.beams, self.model.device
        with eval_mode(self.model), torch.no_grad(), self.interventions.applied(self.model):
            src = torch.tensor([self.src_ids], device=device)  # (1, S)
            self._src = src  # the source's rules (encoder_repetition_penalty...) read its ids
            memory, src_mask = self.model.encode(src)  # (1, S, d)
            # every beam reads the same source: its memory expanded, as generate expands it
            memory = memory.expand(K, *memory.shape[1:])
            src_mask = None if src_mask is None else src_mask.expand(K, *src_mask.shape[1:])
            self._decoder = decoder_for(self.model, memory, src_mask)
        self._sequences = torch.full((K, self.max_length), self.rules.pad, dtype=torch.long,
                                     device=device)  # (K, L): the running hypotheses
        self._sequences[:, 0] = self.rules.start
        self._running = torch.full((K,), SENTINEL, device=device)  # (K,) running sums
        self._running[0] = 0.0
        self._running_ids = [-1] * K  # each running row's node (-1: the start)
        self._pool_scores = torch.full((K,), SENTINEL, device=device)  # (K,) finished, best first
        self._pool_finished = torch.zeros(K, dtype=torch.bool, device=device)
        self._pool_ids = [-1] * K
        self._improvable = True  # transformers' is_early_stop_heuristic_unsatisfied
        self._length = 1  # positions fed so far (transformers' cur_len)
        self._stopped = False

    # -- stepping --------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """The search has stopped and every step is shown."""
        return self.position == len(self.steps) and self._stopped

    def _records(self) -> list[BeamStep]:
        return self.steps

    def run(self, progress=None) -> BeamSearch:
        """Every step to the end (Replay.step_all: `progress` as it goes)."""
        self.step_all(progress)
        return self

    @torch.no_grad()
    def _compute_next(self) -> BeamStep:
        with eval_mode(self.model):
            return self._step()

    def _step(self) -> BeamStep:
        K, C, lp, t = self.beams, self.width, self.length_penalty, self._length
        logits = self._decoder.step(self._sequences[:, t - 1])  # (K, V)
        V = logits.shape[-1]
        log_probs = logits.float().log_softmax(dim=-1)
        log_probs = self.rules.process(log_probs, self._sequences[:, :t], max_length=self.max_length,
                                       src=self._src)
        totals = (log_probs + self._running[:, None]).reshape(1, K * V)  # (1, K V)
        top, flat = torch.topk(totals, k=C)  # (1, C) each: the step's candidates
        top, flat = top[0], flat[0]
        parent_rows, tokens = flat // V, flat % V  # (C,)
        candidates = self._sequences[parent_rows]  # (C, L)
        candidates[:, t] = tokens
        ends = self.rules.ends(tokens) | (t + 1 >= self.max_length)  # (C,)

        # the K best that do not end run on
        running = top + ends.to(torch.float32) * SENTINEL
        keep = torch.topk(running, k=K).indices  # (K,)
        # ending candidates among the first K enter the pool, if they beat what it holds
        offered = ends & (torch.arange(C, device=ends.device) < K)
        normalised = top / (t**lp)  # (C,) each candidate's length-normalised score
        full = bool(self._pool_finished.all()) and self.early_stopping is True
        scores = normalised + float(full) * SENTINEL
        scores = scores + float(not self._improvable) * SENTINEL
        scores = scores + (~offered).to(torch.float32) * SENTINEL
        merged = torch.cat((self._pool_scores, scores))  # (K + C,)
        chosen = torch.topk(merged, k=K).indices  # (K,)
        merged_finished = torch.cat((self._pool_finished, offered))
        entered = {i - K for i in chosen.tolist() if i >= K and bool(offered[i - K])}

        # the tree: every candidate a node
        first = len(self.nodes)
        kept = set(keep.tolist())
        logps = log_probs[parent_rows, tokens].tolist()
        for rank, (row, token, total, score, logp, end) in enumerate(zip(
                parent_rows.tolist(), tokens.tolist(), top.tolist(), normalised.tolist(), logps,
                ends.tolist())):
            state = "finished" if rank in entered else "kept" if rank in kept and not end else "pruned"
            self.nodes.append(Node(first + rank, self._running_ids[row], t - 1, rank, token, logp,
                                   total, score, state, end))
        candidate_ids = list(range(first, first + C))
        pool_ids = self._pool_ids + candidate_ids
        self._pool_ids = [pool_ids[i] for i in chosen.tolist()]
        self._pool_scores, self._pool_finished = merged[chosen], merged_finished[chosen]
        self._running_ids = [candidate_ids[i] for i in keep.tolist()]
        self._sequences, self._running = candidates[keep], running[keep]
        self._decoder.select(parent_rows[keep])  # each kept row continues its parent's cache

        # the stopping test, on the state after the step (transformers' heuristic, in float32)
        self._length = t = t + 1
        best_length = (self.max_length - 1) if self.early_stopping == "never" and lp > 0 else t - 1
        best_possible = self._running[:1] / (best_length**lp)  # (1,)
        worst = torch.where(self._pool_finished, self._pool_scores.min(), SENTINEL)  # (K,)
        self._improvable = self._improvable and bool((best_possible > worst).any())
        why = ""
        if bool(ends.all()):
            why = "max length" if t >= self.max_length else "every candidate ended"
        elif bool(self._pool_finished.all()) and self.early_stopping is True:
            why = f"early stopping: {K} finished"
        elif not self._improvable:
            why = "no running hypothesis can beat the finished ones"
        self._stopped = bool(why)
        pool = tuple(i for i, done, score in zip(self._pool_ids, self._pool_finished.tolist(),
                                                 self._pool_scores.tolist())
                     if done and score > SENTINEL / 2 and not self.nodes[i].void)
        return BeamStep(len(self.steps), tuple(candidate_ids), tuple(self._running_ids), pool,
                        self._stopped, why)

    # -- reading the tree ------------------------------------------------------------------------
    def path(self, node: int) -> list[Node]:
        """The nodes from the first generated token to `node`."""
        out = []
        while node >= 0:
            out.append(self.nodes[node])
            node = self.nodes[node].parent
        return out[::-1]

    def tokens(self, node: int) -> list[int]:
        return [n.token for n in self.path(node)]

    def shown_nodes(self) -> list[Node]:
        """The real nodes of the steps shown."""
        steps = self.steps[: self.position]
        return [self.nodes[i] for s in steps for i in s.candidates if not self.nodes[i].void]

    def leaves(self) -> list[Node]:
        """The real nodes of the steps shown that have no child shown (pruned, finished, or the
        ones running now), in depth-first order, children by rank: each is a row of the tree,
        and a row shares its prefix with the one above up to where they branch."""
        nodes = self.shown_nodes()
        children: dict[int, list[Node]] = {}
        for n in nodes:
            children.setdefault(n.parent, []).append(n)
        out: list[Node] = []
        stack = sorted(children.get(-1, []), key=lambda n: -n.rank)
        while stack:
            node = stack.pop()
            below = children.get(node.id)
            if below:
                stack += sorted(below, key=lambda n: -n.rank)
            else:
                out.append(node)
        return out

    @property
    def pool(self) -> tuple[int, ...]:
        """The finished pool after the steps shown, best first."""
        return self.steps[self.position - 1].pool if self.position else ()

    def hypotheses(self, n: int | None = None) -> list[Hypothesis]:
        """The pool after the steps shown, best first (n of them at most): generate's
        `sequences` and `sequences_scores` with num_return_sequences=n."""
        return [self._hypothesis(i) for i in self.pool[: n or self.beams]]

    def _hypothesis(self, node: int) -> Hypothesis:
        n = self.nodes[node]
        return Hypothesis(tuple(self.tokens(node)), n.total, n.score, node)

    def finished_nodes(self) -> list[Node]:
        """Every node that entered the finished pool in the steps shown (some may have left it)."""
        return [n for n in self.shown_nodes() if n.state == "finished"]

    def rerank(self, length_penalty: float) -> list[Hypothesis]:
        """The finished hypotheses seen so far re-scored under another length penalty, best
        first: which would win had the pool been ranked that way (the search itself, run with
        that penalty, may have kept and stopped differently)."""
        scored = [Hypothesis(tuple(self.tokens(n.id)), n.total,
                             length_normalised(n.total, n.length, length_penalty), n.id)
                  for n in self.finished_nodes()]
        return sorted(scored, key=lambda h: -h.score)

    def running_at(self, position: int | None = None) -> tuple[int, ...]:
        """The node ids running after `position` steps (the steps shown when None)."""
        position = self.position if position is None else position
        return self.steps[position - 1].running if position else ()


def check_settings(beams, length_penalty, early_stopping) -> None:
    """ValueError (one line) for settings transformers would refuse."""
    check_beam_settings(beams, length_penalty, early_stopping)


def beam_search(model: Seq2Seq, src_ids: list[int], *, nbest: int = 1, **settings) -> list[Hypothesis]:
    """The n best outputs of a whole search (BeamSearch's settings), best first: generate's
    `sequences` and `sequences_scores` with num_beams and num_return_sequences=nbest."""
    search = BeamSearch(model, src_ids, **settings)
    if not 1 <= nbest <= search.beams:
        raise ValueError(f"nbest must be between 1 and the beams ({search.beams}), got {nbest}")
    return search.run().hypotheses(nbest)


def beam_outputs(model: Seq2Seq, src: torch.Tensor, src_pad: int, beams: int, cap: int) -> torch.Tensor:
    """src (B, S) -> each source's best output of a beam of `beams` (generate's sequences with
    num_beams, the start left out), (B, n) with the generation's PAD after each end: greedy_decode's
    layout, so a scoring loop takes either. One search per source (a search is one source's tree)."""
    outputs = []
    for row in src.tolist():  # each source without its padding
        outputs.append(beam_search(model, [i for i in row if i != src_pad], beams=beams, cap=cap)[0].tokens)
    out = torch.full((len(outputs), max(1, *(len(o) for o in outputs))), model.generation.pad,
                     dtype=torch.long)
    for i, tokens in enumerate(outputs):
        out[i, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    return out


@torch.no_grad()
def score_outputs(model: Seq2Seq, src_ids: list[int], outputs: list[list[int]], *,
                  length_penalty: float = 1.0, cap: int | None = None,
                  interventions: Interventions | None = None) -> list[Hypothesis]:
    """Each output (generated ids, the start left out) scored as beam search scores it: the sum of
    its tokens' log-probabilities under the generation rules of a decode capped as BeamSearch's
    (`cap`), and that over length ** length_penalty. A token the rules forbid there scores -inf.
    Stepped as the search steps (the same decoder), every output side by side."""
    if not outputs or any(not o for o in outputs):
        raise ValueError("every output needs at least one token")
    rules, device = model.generation, model.device
    max_length = rules.cap(cap or output_cap(len(src_ids), model.cfg.max_len), model.cfg.max_len) + 1
    N, longest = len(outputs), max(len(o) for o in outputs)
    fed = torch.full((N, longest + 1), rules.pad, dtype=torch.long, device=device)  # (N, 1 + n)
    fed[:, 0] = rules.start
    for row, output in enumerate(outputs):
        fed[row, 1: len(output) + 1] = torch.tensor(output, device=device)
    lengths = torch.tensor([len(o) for o in outputs], device=device)  # (N,)
    totals = torch.zeros(N, device=device)
    interventions = interventions or Interventions()
    with eval_mode(model), interventions.applied(model):
        src = torch.tensor([src_ids], device=device)  # (1, S)
        memory, src_mask = model.encode(src)  # (1, S, d)
        memory = memory.expand(N, *memory.shape[1:])
        src_mask = None if src_mask is None else src_mask.expand(N, *src_mask.shape[1:])
        decoder = decoder_for(model, memory, src_mask)
        for t in range(longest):
            log_probs = decoder.step(fed[:, t]).float().log_softmax(dim=-1)  # (N, V)
            log_probs = rules.process(log_probs, fed[:, : t + 1], max_length=max_length, src=src)
            picked = log_probs.gather(1, fed[:, t + 1 : t + 2])[:, 0]  # (N,)
            totals += torch.where(t < lengths, picked, torch.zeros_like(picked))
    return [Hypothesis(tuple(o), total, length_normalised(total, len(o), length_penalty), -1)
            for o, total in zip(outputs, totals.tolist())]
