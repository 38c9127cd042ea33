"""Source attribution: which source tokens each output token of a greedy decode depends on.

Not attribution *patching* (core/interp/attribution.py, which estimates activation patching):
here the inputs are the source's token vectors, the (B, S, d) rows the source embedding table
looks up before they are scaled and positions are added (core/model/hooks.py's embedding hook),
and the output is, for each step t of the greedy decode, the log-probability of the token output
there, teacher-forced on the decode's own tokens (`target`: log p(token) - log p(target), "why
this rather than that"). Positions stay as they are: every method changes token vectors only.
`attribute_step` attributes one step of any prefix instead (a beam hypothesis where it parts
from greedy, against greedy's token), computing that step alone.

- `ixg`, input x gradient: E . dF/dE, summed over the embedding dimension.
- `ig`, integrated gradients (Sundararajan et al. 2017) from the all-<pad> baseline E0 (the pad
  token's vector at every position): (E - E0) . the integral over a of dF/dE at E0 + a (E - E0),
  by Gauss-Legendre quadrature with `ig_steps` points (captum's default method). Its completeness
  gap (`delta`): the attributions' sum minus F(E) - F(E0) (`change`).
- `occlusion`: F(E) - F(E with position j's vector replaced by <pad>'s, or <unk>'s): the exact
  drop of the log-probability. The replaced position is still attended to, as in the ig baseline
  (a <pad> *id* would be masked out instead).

Every method's rows (a step at one point of the path, a source with a token occluded) go through
the model in batches of at most BATCH_FLOATS floats of activations, each step decoded only up to
itself and only the positions read made logits: memory stays bounded whatever the model and the
decode's length (a 511-step decode of a 74M model too), while the bundled models take every row
in one batch. `progress(done, total)` follows the batches, and its True stops the work (Cancelled).
- `attention`: the decode's own cross-attention rows, so both kinds read on one scale: one head,
  a layer's mean over heads, or `rollout` through the decoder's layers (Abnar & Zuidema 2020's
  residual-weighted rollout, with cross-attention as a sublayer: see `rollout`).

A model whose decoder self-attention sees later positions (the no-causal-mask variant) computed
each greedy step on its own prefix; each step's rows here do the same (the prefix, then <pad>s
that the padding mask hides), so the attributions are of what the decode computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from minitx.core.data.task import Task
from minitx.core.data.vocab import Vocab
from minitx.core.interp.decode import Stepper
from minitx.core.interp.interventions import Interventions
from minitx.core.model.hooks import hooks_active
from minitx.core.model.transformer import Seq2Seq, eval_mode

METHODS = ("ig", "ixg", "occlusion", "attention")
GRADIENT_METHODS = ("ig", "ixg")
OBJECTIVE_METHODS = ("ig", "ixg", "occlusion")  # those that attribute a log-probability (or a contrast)
FILLERS = ("pad", "unk")  # what occlusion (and ig's baseline is always <pad>) puts in a position
DEFAULT_IG_STEPS = 32
MAX_IG_STEPS = 1024
ROLLOUT = "rollout"
# Floats of activations one batch of rows may keep (about 256 MB in float32): every method's
# rows (a step at an interpolation point, an occluded source) go through the model in batches
# that fit, so memory stays bounded whatever the model and the decode's length. The bundled
# models take every row in one batch.
BATCH_FLOATS = 1 << 26
# What a method's progress counts: ig and ixg finish steps, occlusion the sources it occludes
# (each with every step at once).
PROGRESS_UNITS = {"ig": "steps", "ixg": "steps", "occlusion": "sources"}  # the intact, each occluded

# (done, total) in PROGRESS_UNITS; done may be a fraction (part of a step as ig's points go); True: stop
Progress = Callable[[float, int], "bool | None"]


class Cancelled(Exception):
    """The progress callback asked to stop: the work ends at its next batch, nothing returned."""


def _report(progress: Progress | None, done: float, total: int) -> None:
    if progress is not None and progress(done, total):
        raise Cancelled("attribution cancelled")


# -- the decode attributed ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Decode:
    """What attribution needs of a greedy decode: the source and output ids, and the attention
    each step paid (from the Stepper that produced them)."""

    src: list[int]  # (S,) as fed
    tokens: list[int]  # (T,) output at each step, EOS included when it was reached
    # (T, layers, heads, S): each step's cross-attention row; None for a model whose cross-attention
    # reads the decoder instead of the source (the swap-cross variant): it has no row over the source
    cross: torch.Tensor | None
    self_attention: torch.Tensor  # (T, layers, heads, T): each step's row over decoder inputs (0 after)

    @classmethod
    def of_stepper(cls, stepper: Stepper, steps: int | None = None) -> Decode:
        """The first `steps` steps a Stepper recorded (default: those it shows, up to its position)."""
        results = stepper.results[: stepper.position if steps is None else steps]
        S, T = len(stepper.src_ids), len(results)
        model = stepper.model
        layers, heads = len(model.decoder), model.cfg.n_heads
        over_source = not reads_decoder(model)
        cross = (torch.stack([r.cross_attention for r in results]) if results
                 else torch.zeros(0, layers, heads, S)) if over_source else None
        own = torch.zeros(T, layers, heads, T)
        for i, r in enumerate(results):
            own[i, :, :, : i + 1] = r.self_attention
        return cls(list(stepper.src_ids), [r.token for r in results], cross, own)


def reads_decoder(model: Seq2Seq) -> bool:
    """Its cross-attention reads the decoder, not the source (the swap-cross variant)."""
    return any(layer.cross_reads_decoder for layer in model.decoder)


NO_SOURCE_ATTENTION = ("this model's cross-attention reads the decoder, not the source (the swap-cross "
                       "variant): it has no attention over the source to show or compare")


def greedy(model: Seq2Seq, task: Task, src: list[int], interventions: Interventions | None = None,
           progress: Progress | None = None) -> Decode:
    """Decode `src` greedily to its end (the task's cap), recording the attention; progress(steps
    done, the cap) after each step."""
    stepper = Stepper(model, src, top_k=1, cap=task.decode_cap(len(src), model.cfg.max_len),
                      interventions=interventions, vocab=task.vocab)
    while stepper.step() is not None:
        _report(progress, stepper.position, stepper.cap)
    return Decode.of_stepper(stepper)


# -- batches of rows -----------------------------------------------------------------------------
def row_floats(model: Seq2Seq, source: int, positions: int, read: int) -> int:
    """About how many floats one row's forward keeps for its backward, with `source` source
    positions, decoding `positions` positions and reading the log-probabilities of `read` of them:
    per layer and position a few stream-sized (d) and feed-forward-sized vectors and each head's
    attention row, and the logits (with their log-softmax) of the positions read."""
    cfg = model.cfg
    h, d, ff = cfg.n_heads, cfg.d_model, cfg.d_ff
    encoder = len(model.encoder) * source * (8 * d + 2 * ff + 2 * h * source)
    decoder = len(model.decoder) * positions * (12 * d + 2 * ff + 2 * h * (positions + source))
    return encoder + decoder + 2 * read * cfg.vocab_size


def batches(model: Seq2Seq, source: int, last: list[int], read: int) -> Iterator[tuple[int, int]]:
    """(start, stop) runs of rows, in order, that fit BATCH_FLOATS together (one row at least):
    row r decodes up to step last[r] and reads `read` positions."""
    start = 0
    while start < len(last):
        stop, deepest = start + 1, last[start]
        while stop < len(last):
            deeper = max(deepest, last[stop])
            if (stop + 1 - start) * row_floats(model, source, deeper + 1, read) > BATCH_FLOATS:
                break
            stop, deepest = stop + 1, deeper
        yield start, stop
        start = stop


def _gradient_rows(attributed: list[int], points: int) -> list[int]:
    """The last step of each row of a gradient at `points` points: row r is step r // points at
    point r % points, reading that step alone."""
    return [t for t in attributed for _ in range(points)]


def _value_rows(model: Seq2Seq, attributed: list[int], count: int) -> tuple[list[int], int]:
    """The last step of each row, and the positions a row reads, when `count` rows of vectors give
    every attributed step's objective: a causal model's one teacher-forced row gives every step;
    a model whose decoder sees later positions needs a row per step (its own prefix)."""
    if model.causal:
        return [max(attributed)] * count, len(attributed)
    return attributed * count, 1


def batch_count(model: Seq2Seq, source: int, steps: int, method: str,
                ig_steps: int = DEFAULT_IG_STEPS) -> int:
    """How many batches `attribute` runs the model in for a `source`-token source and a decode of
    `steps` steps: one for the bundled models, thousands for a big model's long decode; 0 for
    attention (the decode's own rows)."""
    every = list(range(steps))
    if method == "ig":
        plan = _gradient_rows(every, ig_steps), 1
    elif method == "ixg":
        plan = _gradient_rows(every, 1), 1
    elif method == "occlusion":
        plan = _value_rows(model, every, source + 1)
    else:
        return 0
    return sum(1 for _ in batches(model, source, *plan))


# -- what is attributed --------------------------------------------------------------------------
class SourceFunction:
    """F(E): each attributed step's objective as a function of the source's token vectors E
    (B, S, d), teacher-forced on `tokens`: log p(tokens[t]) at step t, minus log p(target) when a
    target is given. This is the function every gradient method differentiates, and the tests hand
    it to captum as it is. `only`: the steps attributed (default every one); the others are fed,
    never computed for their own sake (one step of a long decode costs one step's work)."""

    def __init__(self, model: Seq2Seq, src: list[int], tokens: list[int], target: int | None = None,
                 only: list[int] | None = None) -> None:
        if not tokens:
            raise ValueError("nothing was decoded: no step to attribute")
        self.model, self.target = model, target
        device = model.device
        self.src = torch.tensor(src, device=device)  # (S,)
        self.tokens = torch.tensor(tokens, device=device)  # (T,)
        cfg = model.cfg
        self.inputs = torch.cat([torch.tensor([cfg.sos_id], device=device), self.tokens[:-1]])  # (T,)
        if only is not None and not all(0 <= t < len(tokens) for t in only):
            raise ValueError(f"steps {only} are not all among the {len(tokens)} teacher-forced ones")
        self.attributed = torch.arange(len(tokens)) if only is None else torch.tensor(only)  # (k,)

    @property
    def steps(self) -> int:
        """T: the tokens teacher-forced (the attributed steps are `attributed`)."""
        return len(self.tokens)

    def token_vectors(self) -> torch.Tensor:
        """(S, d) the source's own token vectors (what the table looks up)."""
        with torch.no_grad():
            return self.model.src_embed(self.src).detach()

    def filled(self, token: int) -> torch.Tensor:
        """(S, d) `token`'s vector at every position: ig's baseline, occlusion's filler."""
        with torch.no_grad():
            vector = self.model.src_embed(torch.tensor([token], device=self.src.device))  # (1, d)
        return vector.expand(len(self.src), -1).detach()

    def batches(self, last: list[int], read: int) -> Iterator[tuple[int, int]]:
        """batches() of this source's rows."""
        return batches(self.model, len(self.src), last, read)

    def __call__(self, vectors: torch.Tensor) -> torch.Tensor:
        """(B, S, d) -> (B, k): each attributed step's objective for each row."""
        return self.values(len(vectors), lambda rows: vectors[rows])

    def values(self, count: int, vectors_of: Callable[[torch.Tensor], torch.Tensor],
               progress: Progress | None = None) -> torch.Tensor:
        """(count, k): each attributed step's objective for `count` rows of token vectors, made a
        batch at a time (vectors_of: (R,) row indices -> (R, S, d)), so no more than a batch's
        rows are ever held; progress(rows done, count) after each batch."""
        k, device = len(self.attributed), self.src.device
        last, read = _value_rows(self.model, self.attributed.tolist(), count)
        if self.model.causal:  # one teacher-forced row gives every step
            out = []
            for start, stop in self.batches(last, read):
                R = stop - start
                out.append(self._objective(vectors_of(torch.arange(start, stop, device=device)),
                                           self.inputs.expand(R, self.steps), self.attributed.expand(R, k)))
                _report(progress, stop, count)
            return torch.cat(out)
        out = []  # row r * k + i: vector row r, fed its own prefix for step i
        for start, stop in self.batches(last, read):
            index = torch.arange(start, stop, device=device)  # (R,)
            out.append(self.at_steps(vectors_of(index // k), self.attributed.to(device)[index % k]))
            _report(progress, stop / k, count)
        return torch.cat(out).view(count, k)

    def at_steps(self, vectors: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        """(R, S, d) and (R,) step indices -> (R,): row r's objective at its own step (the rows a
        gradient is taken of: each row's gradient is that step's alone)."""
        R, T = vectors.shape[0], self.steps
        inputs = self.inputs.expand(R, T)
        if not self.model.causal:  # the step's prefix, then <pad>s the padding mask hides
            later = torch.arange(T, device=inputs.device)[None] > steps.to(inputs.device)[:, None]  # (R, T)
            inputs = inputs.masked_fill(later, self.model.cfg.pad_id)
        return self._objective(vectors, inputs, steps[:, None])[:, 0]

    def _objective(self, vectors: torch.Tensor, inputs: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """Rows of token vectors (R, S, d), decoder inputs (R, T), positions read (R, k) -> (R, k).
        The decoder runs up to the last position read (a later one changes no earlier one: the
        causal mask, or the padding mask of a prefix), and only the positions read are made
        logits."""
        R, model = vectors.shape[0], self.model
        where = where.to(inputs.device)
        inputs = inputs[:, : int(where.max()) + 1]  # (R, T')
        src = self.src.expand(R, -1)  # (R, S): the ids only decide the padding mask (none here)
        with hooks_active({model.src_embed: lambda looked_up, offset: vectors}):
            memory, src_mask = model.encode(src)
            stream = model.decoder_stream(inputs, memory, src_mask)  # (R, T', d)
        rows = torch.arange(R, device=stream.device)[:, None]
        log_probs = model.stream_logits(stream[rows, where]).log_softmax(dim=-1)  # (R, k, V)
        chosen = log_probs.gather(-1, self.tokens[where][..., None])[..., 0]  # (R, k)
        if self.target is None:
            return chosen
        return chosen - log_probs[..., self.target]


# -- the methods ------------------------------------------------------------------------------------
@dataclass
class SourceAttribution:
    """One decode's attribution: `scores[t][j]` is source position j's share in step t's objective
    (for `attention`, the weight itself). Of one step alone (attribute_step), `step` says which,
    and scores, change and delta hold its one row."""

    method: str
    src: list[int]
    tokens: list[int]
    scores: torch.Tensor  # (T, S), or (1, S) for one step
    target: int | None = None
    step: int | None = None  # attribute_step: the 0-based step attributed (tokens[step] its token)
    view: str = ""  # attention: which rows ("cross:L2.H1", "cross:L2", "rollout")
    change: torch.Tensor | None = None  # ig: (T,) F(E) - F(baseline)
    value: torch.Tensor | None = None  # attribute_step: (1,) F(E), the objective itself
    delta: torch.Tensor | None = None  # ig: (T,) sum of the attributions - change
    ig_steps: int | None = None
    filler: str = ""  # occlusion: "pad" or "unk"
    extra: dict = field(default_factory=dict)

    def describe(self, vocab: Vocab) -> str:
        """The method in words, with what it attributes: 'integrated gradients (32 steps from
        <pad>) of log p(token) - log p(7)'."""
        what = "log p(token)" if self.target is None else f"log p(token) - log p({vocab.label(self.target)})"
        if self.method == "ig":
            return f"integrated gradients ({self.ig_steps} steps from <pad>) of {what}"
        if self.method == "ixg":
            return f"input x gradient of {what}"
        if self.method == "occlusion":
            return f"occlusion: the drop of {what} with a token's vector replaced by <{self.filler}>'s"
        if self.view == ROLLOUT:
            return "attention rollout through the decoder's layers"
        return f"attention: {self.view}" + ("" if ".H" in self.view else ", the mean of its heads")

    def attributed_steps(self) -> list[int]:
        """The step of each row of `scores`."""
        return list(range(len(self.tokens))) if self.step is None else [self.step]

    def shares(self) -> torch.Tensor:
        """(T, S) each row as |score| / sum |score|: attention's scale (rows summing to one), the
        sign kept; a row of zeros stays zeros."""
        total = self.scores.abs().sum(dim=-1, keepdim=True)  # (T, 1)
        return torch.where(total > 0, self.scores / total.clamp(min=1e-30), torch.zeros_like(self.scores))


def gauss_legendre(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n,) points in (0, 1) and (n,) weights summing to 1: Gauss-Legendre quadrature on [0, 1]
    (Golub-Welsch: the eigenvalues of the Jacobi matrix are the nodes on [-1, 1])."""
    k = torch.arange(1, n, dtype=torch.float64)
    off = k / torch.sqrt(4 * k * k - 1)  # (n-1,)
    jacobi = torch.diag(off, 1) + torch.diag(off, -1)
    nodes, vectors = torch.linalg.eigh(jacobi)  # ascending
    weights = 2 * vectors[0] ** 2  # (n,), sum 2
    return 0.5 * (1 + nodes), 0.5 * weights


def _contracted_gradients(f: SourceFunction, points: torch.Tensor, weights: torch.Tensor,
                          direction: torch.Tensor, progress: Progress | None = None) -> torch.Tensor:
    """(n, S, d) points, (n,) weights, (S, d) direction -> (k, S) over the attributed steps:
    sum_i weights[i] * (direction . dF_t/dE at points[i]), summed over the embedding dimension.
    A row is one step at one point (its gradient is that step's alone); rows go a batch at a
    time and each batch's gradients are contracted before the next, so no more than a batch's
    activations and gradients are ever held. progress(steps done, k) after each batch: a fraction
    while a step's points are part done (one step's ig moves as its points do)."""
    n, S = points.shape[:2]
    k = len(f.attributed)
    scores = torch.zeros(k, S, dtype=points.dtype, device=points.device)
    _report(progress, 0, k)
    for start, stop in f.batches(_gradient_rows(f.attributed.tolist(), n), 1):
        index = torch.arange(start, stop, device=points.device)
        step, point = index // n, index % n  # (R,) each
        rows = points[point].detach().requires_grad_(True)  # (R, S, d)
        values = f.at_steps(rows, f.attributed.to(points.device)[step])  # (R,)
        # None: the output does not depend on the source at all (a cross-attention that reads
        # the decoder): every gradient, and so every attribution, is 0
        (grad,) = torch.autograd.grad(values.sum(), rows, allow_unused=True)
        if grad is not None:
            scores.index_add_(0, step, weights[point, None] * (direction * grad).sum(dim=-1))
        _report(progress, stop / n, k)
    return scores


def input_x_gradient(f: SourceFunction, progress: Progress | None = None) -> torch.Tensor:
    """(k, S) over the attributed steps: E . dF_t/dE, summed over the embedding dimension."""
    E = f.token_vectors()  # (S, d)
    return _contracted_gradients(f, E[None], torch.ones(1, dtype=E.dtype, device=E.device), E, progress)


def integrated_gradients(f: SourceFunction, steps: int, baseline: int,
                         progress: Progress | None = None) -> tuple[torch.Tensor, ...]:
    """(k, S) attributions over the attributed steps, (k,) change F(E) - F(E0), (k,) completeness
    gap: the sum of a step's attributions minus its change (0 for the exact integral)."""
    if not 1 <= steps <= MAX_IG_STEPS:
        raise ValueError(f"ig steps must be 1-{MAX_IG_STEPS}, not {steps}")
    E, E0 = f.token_vectors(), f.filled(baseline)  # (S, d) each
    alphas, weights = gauss_legendre(steps)
    alphas = alphas.to(E.dtype).to(E.device)
    weights = weights.to(E.dtype).to(E.device)
    points = E0 + alphas[:, None, None] * (E - E0)  # (n, S, d)
    # (E - E0) . sum_i w_i grad_i: the weighted mean gradient along the path, times the path
    scores = _contracted_gradients(f, points, weights, E - E0, progress)  # (k, S)
    with torch.no_grad():
        ends = f(torch.stack([E, E0]))  # (2, k)
    change = ends[0] - ends[1]
    return scores, change, scores.sum(dim=-1) - change


@torch.no_grad()
def occlusion(f: SourceFunction, filler: int, progress: Progress | None = None) -> torch.Tensor:
    """(k, S) over the attributed steps: F(E) - F(E with position j's vector replaced by the filler
    token's), for every j and the intact source (rows made a batch at a time)."""
    E, fill = f.token_vectors(), f.filled(filler)  # (S, d)
    S = E.shape[0]

    def variants(rows: torch.Tensor) -> torch.Tensor:
        """(R,) -> (R, S, d): row 0 intact, row j + 1 without position j."""
        out = E.repeat(len(rows), 1, 1)
        occluded = (rows > 0).nonzero()[:, 0]  # (R',) the batch's rows that occlude a position
        positions = rows[occluded] - 1
        out[occluded, positions] = fill[positions]
        return out

    values = f.values(S + 1, variants, progress)  # (S+1, k)
    return (values[0][None] - values[1:]).T  # (k, S)


# -- attention ---------------------------------------------------------------------------------
def attention_views(model: Seq2Seq) -> list[str]:
    """Every attention row minitx compares: each cross-attention head, each layer's mean, the
    rollout."""
    layers, heads = len(model.decoder), model.cfg.n_heads
    names = [f"cross:L{la + 1}.H{he + 1}" for la in range(layers) for he in range(heads)]
    return names + [f"cross:L{la + 1}" for la in range(layers)] + [ROLLOUT]


def parse_view(text: str, model: Seq2Seq) -> str:
    """'L2.H1', 'cross:L2.H1', 'L2' (the layer's mean) or 'rollout' -> the view's name; ValueError
    (one sentence) otherwise."""
    name = text.strip().lower().replace(" ", "")
    if name == ROLLOUT:
        return ROLLOUT
    name = name if name.startswith("cross:") else f"cross:{name}"
    name = name.replace("cross:l", "cross:L").replace(".h", ".H")
    if name in attention_views(model):
        return name
    layers, heads = len(model.decoder), model.cfg.n_heads
    raise ValueError(f"{text!r} is not an attention row of this model: write Ll.Hh (a head), Ll (a "
                     f"layer's mean) or rollout; layers 1-{layers}, heads 1-{heads}")


def rollout(cross: torch.Tensor, self_attention: torch.Tensor) -> torch.Tensor:
    """(T, L, H, S) cross rows and (T, L, H, T) decoder self rows -> (T, S): how much of each
    step's final decoder state comes from each source (memory) position.

    Each layer's heads are averaged and each sublayer keeps half of what passes it through the
    residual (Abnar & Zuidema's 0.5 A + 0.5 I): the self-attention mixes decoder positions
    (D <- A' D, X <- A' X), then cross-attention adds the source (X <- 0.5 X + 0.5 C, D <- 0.5 D).
    D starts as the identity (each position is its own input), X at zero; the rows of [D X] sum
    to one, X's row is the source's share. The memory positions are the encoder's outputs: the
    encoder's own mixing is not rolled out (rows through the decoder's layers only)."""
    T, L = cross.shape[0], cross.shape[1]
    S = cross.shape[-1]
    eye = torch.eye(T, dtype=cross.dtype)
    D, X = eye.clone(), torch.zeros(T, S, dtype=cross.dtype)
    for layer in range(L):
        A = 0.5 * eye + 0.5 * self_attention[:, layer].mean(dim=1)  # (T, T)
        D, X = A @ D, A @ X
        X = 0.5 * X + 0.5 * cross[:, layer].mean(dim=1)  # (T, S)
        D = 0.5 * D
    return X


def attention_rows(decode: Decode, view: str) -> torch.Tensor:
    """(T, S) the rows of one attention view (a name from attention_views) of a decode."""
    if decode.cross is None:
        raise ValueError(NO_SOURCE_ATTENTION)
    if view == ROLLOUT:
        return rollout(decode.cross, decode.self_attention)
    layer_head = view.removeprefix("cross:L").split(".H")
    layer = int(layer_head[0]) - 1
    if len(layer_head) == 1:
        return decode.cross[:, layer].mean(dim=1)
    return decode.cross[:, layer, int(layer_head[1]) - 1]


# -- one call -----------------------------------------------------------------------------------
def filler_id(src_vocab: Vocab, name: str) -> int:
    """The source id occlusion puts in a position: <pad>, or <unk> where the vocabulary has one."""
    if name == "pad":
        return src_vocab.pad
    if name == "unk":
        if src_vocab.unk is None:
            raise ValueError("this model's source vocabulary has no <unk>: occlude with <pad>")
        return src_vocab.unk
    raise ValueError(f"the filler must be {' or '.join(FILLERS)}, not {name!r}")


def target_id(vocab: Vocab, text: str) -> int:
    """A contrast token as typed ('7', '<eos>', a word or piece) -> its output id; ValueError (one
    sentence) for one the output vocabulary lacks (<pad> and <sos> are never output)."""
    ids = [i for i in range(vocab.size) if i not in (vocab.pad, vocab.sos)]
    for spelling in (lambda i: vocab.tokens[i], vocab.label):
        found = [i for i in ids if spelling(i) == text]
        if found:
            return found[0]
    raise ValueError(f"{text!r} is not a token this model outputs (`minitx inspect` lists its vocabulary)")


def attribute(model: Seq2Seq, decode: Decode, method: str, *, target: int | None = None,
              ig_steps: int = DEFAULT_IG_STEPS, filler: int | None = None, view: str = ROLLOUT,
              interventions: Interventions | None = None,
              progress: Progress | None = None) -> SourceAttribution:
    """Attribute every step of `decode` (teacher-forced on its tokens) to its source positions.

    filler: occlusion's token id (default the source <pad>); view: the attention rows of
    `attention`; interventions (an ablation): applied to every forward, as to the decode;
    progress(done, total) after each batch, in PROGRESS_UNITS[method] (True: stop, Cancelled)."""
    _check_request(model, method, target=target)
    result = SourceAttribution(method, list(decode.src), list(decode.tokens), torch.zeros(0), target)
    if method == "attention":
        result.scores, result.view = attention_rows(decode, view).float(), view
        return result
    return _measured(model, SourceFunction(model, decode.src, decode.tokens, target), result,
                     ig_steps=ig_steps, filler=filler, interventions=interventions, progress=progress)


def attribute_step(model: Seq2Seq, src: list[int], prefix: list[int], token: int, method: str, *,
                   target: int | None = None, ig_steps: int = DEFAULT_IG_STEPS, filler: int | None = None,
                   interventions: Interventions | None = None,
                   progress: Progress | None = None) -> SourceAttribution:
    """Attribute one step: `token` output after `prefix` (teacher-forced), log p(token), or with a
    `target` log p(token) - log p(target), "why this token rather than that one here" (a beam
    hypothesis against greedy's token where the two part). Only that step is computed. The
    methods are those of an objective (ig, ixg, occlusion): attention rows are weights of one
    token's step, not a difference of two tokens' log-probabilities."""
    _check_request(model, method, token=token, target=target)
    if method == "attention":
        raise ValueError("attention rows are where heads look, not an attribution of a log-probability "
                         f"or of a difference of two: one of {', '.join(OBJECTIVE_METHODS)}")
    tokens = [*prefix, token]
    result = SourceAttribution(method, list(src), tokens, torch.zeros(0), target, step=len(prefix))
    return _measured(model, SourceFunction(model, src, tokens, target, only=[len(prefix)]), result,
                     ig_steps=ig_steps, filler=filler, interventions=interventions, with_value=True,
                     progress=progress)


def _check_request(model: Seq2Seq, method: str, **tokens: int | None) -> None:
    """ValueError (one sentence) for an unknown method or a token the output vocabulary lacks."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: one of {', '.join(METHODS)}")
    for name, value in tokens.items():
        if value is not None and not 0 <= value < model.cfg.vocab_size:
            raise ValueError(f"{name} {value} is not in the output vocabulary")


def _measured(model: Seq2Seq, f: SourceFunction, result: SourceAttribution, *, ig_steps: int,
              filler: int | None, interventions: Interventions | None,
              with_value: bool = False, progress: Progress | None = None) -> SourceAttribution:
    """`result` with its method's scores of F (and ig's change and gap; with_value F itself), as
    plain CPU floats."""
    method, pad = result.method, model.cfg.source_pad_id
    with eval_mode(model), (interventions or Interventions()).applied(model):
        if method == "ixg":
            result.scores = input_x_gradient(f, progress)
        elif method == "ig":
            result.scores, result.change, result.delta = integrated_gradients(f, ig_steps, pad, progress)
            result.ig_steps = ig_steps
        else:
            fill = pad if filler is None else filler
            result.scores = occlusion(f, fill, progress)
            result.filler = "pad" if fill == pad else "unk"
        if with_value:
            with torch.no_grad():
                result.value = f(f.token_vectors()[None])[0]  # (k,)
    result.scores = result.scores.detach().float().cpu()
    for name in ("change", "delta", "value"):
        value = getattr(result, name)
        if value is not None:
            setattr(result, name, value.detach().float().cpu())
    return result


# -- agreement ----------------------------------------------------------------------------------
def ranks(x: torch.Tensor) -> torch.Tensor:
    """(..., S) -> (..., S) ranks from 1, ties given their average rank (Spearman's convention)."""
    less = (x[..., None, :] < x[..., :, None]).sum(dim=-1).to(torch.float64)  # (..., S)
    equal = (x[..., None, :] == x[..., :, None]).sum(dim=-1).to(torch.float64)
    return less + (equal + 1) / 2


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(..., S) pairs of rows -> (...,) Spearman's rank correlation; NaN where a row is constant."""
    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(dim=-1, keepdim=True), rb - rb.mean(dim=-1, keepdim=True)
    norm = torch.sqrt((ra * ra).sum(dim=-1) * (rb * rb).sum(dim=-1))
    rho = (ra * rb).sum(dim=-1) / norm.clamp(min=1e-30)
    return torch.where(norm > 0, rho, torch.full_like(norm, math.nan))


@dataclass
class AgreementRow:
    name: str  # "cross:L2.H1", "cross:L2", "rollout", or "occlusion (reference)"
    argmax: float  # share of steps where the two rows' largest entries are at the same position
    rank: float | None  # mean Spearman correlation over the steps where it is defined
    steps: int

    def to_dict(self) -> dict:
        return {"name": self.name, "argmax": self.argmax, "rank": self.rank, "steps": self.steps}


@dataclass
class AgreementTable:
    method: str
    sources: int
    steps: int
    rows: list[AgreementRow]  # each attention view against the method
    reference: AgreementRow  # the method against occlusion
    # where the task says each output comes from: how often the argmax of the method's row, of
    # occlusion's and of the attention rollout's is there (empty when the task cannot tell)
    expected: dict[str, AgreementRow] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"method": self.method, "sources": self.sources, "steps": self.steps,
                "rows": [r.to_dict() for r in self.rows], "reference": self.reference.to_dict(),
                "expected": {name: row.to_dict() for name, row in self.expected.items()}}


class _Tally:
    def __init__(self) -> None:
        self.hits, self.count, self.rank_sum, self.rank_count = 0, 0, 0.0, 0

    def add(self, a: torch.Tensor, b: torch.Tensor) -> None:
        """(T, S) rows of two kinds for the same steps."""
        self.hits += int((a.argmax(dim=-1) == b.argmax(dim=-1)).sum())
        self.count += a.shape[0]
        rho = spearman(a.double(), b.double())
        defined = ~torch.isnan(rho)
        self.rank_sum += float(rho[defined].sum())
        self.rank_count += int(defined.sum())

    def add_expected(self, expected: torch.Tensor, b: torch.Tensor) -> None:
        """(T', S) bool, where the task says each output comes from, and (T, S) rows: a hit when
        a row's argmax is one of its expected positions; steps the task expects nothing of (EOS,
        steps past the answer) are not counted."""
        steps = min(expected.shape[0], b.shape[0])
        expected, peaks = expected[:steps], b[:steps].argmax(dim=-1)  # (steps, S), (steps,)
        counted = expected.any(dim=-1)
        self.hits += int(expected[torch.arange(steps), peaks][counted].sum())
        self.count += int(counted.sum())

    def row(self, name: str, ranked: bool = True) -> AgreementRow:
        rank = self.rank_sum / self.rank_count if ranked and self.rank_count else None
        return AgreementRow(name, self.hits / max(1, self.count), rank, self.count)


@dataclass(frozen=True)
class Example:
    """A source as fed, and where the task says each output position comes from (None: the task
    cannot tell)."""

    src: list[int]
    expected: torch.Tensor | None = None  # (T_out, S) bool


def task_examples(task: Task, n: int, seed: int) -> list[Example]:
    """n sources as fed, with their expected alignment: held-out pairs for a data file or an
    imported model's kept pairs, fresh ones for a generated task, in the order evaluation draws
    them."""
    pad = task.src_vocab.pad
    out: list[Example] = []
    for batch in task.evaluation_batches(task.evaluation_count(n), seed):
        expected = task.expected_alignment(task.relabel(batch))  # (B, T_out, S) or None
        for b, row in enumerate(batch.src):
            src = row[row != pad].tolist()
            out.append(Example(src, None if expected is None else expected[b, :, : len(src)]))
    return out[:n]


def agreement(model: Seq2Seq, task: Task, examples: list[Example], method: str, *,
              ig_steps: int = DEFAULT_IG_STEPS, filler: int | None = None,
              progress=None) -> AgreementTable:
    """For each attention view (every cross head, each layer's mean, the rollout): on how many
    steps of the examples' greedy decodes its argmax is the attribution's, and the mean rank
    correlation of the two rows; the reference row is the method against occlusion. Where the
    examples say where each output comes from, how often the argmax of the method's rows, of
    occlusion's and of the rollout's is there. The argmax of an attribution is its most positive
    entry (what most supports the token)."""
    if method == "attention":
        raise ValueError("agreement compares attention with an attribution method: ig, ixg or occlusion")
    if reads_decoder(model):
        raise ValueError(NO_SOURCE_ATTENTION)
    views = attention_views(model)
    tallies = {view: _Tally() for view in views}
    reference = _Tally()
    expected = {name: _Tally() for name in dict.fromkeys((method, "occlusion", ROLLOUT))}
    steps = 0
    for done, example in enumerate(examples, 1):
        decode = greedy(model, task, example.src)
        if decode.tokens:
            scores = attribute(model, decode, method, ig_steps=ig_steps, filler=filler).scores
            occluded = scores if method == "occlusion" else \
                attribute(model, decode, "occlusion", filler=filler).scores
            for view in views:
                tallies[view].add(attention_rows(decode, view), scores)
            reference.add(occluded, scores)
            if example.expected is not None:
                rows = {method: scores, "occlusion": occluded, ROLLOUT: attention_rows(decode, ROLLOUT)}
                for name, tally in expected.items():
                    tally.add_expected(example.expected, rows[name])
            steps += len(decode.tokens)
        if progress is not None:
            progress(done, len(examples))
    return AgreementTable(method, len(examples), steps, [tallies[v].row(v) for v in views],
                          reference.row("occlusion"),
                          {name: t.row(name, ranked=False) for name, t in expected.items() if t.count})
