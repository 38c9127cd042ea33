"""Head roles: how much each head's attention follows each of a few named patterns.

Measured on the attention of n fresh examples of the task (a data file: held-out pairs),
teacher-forced on their answers. A query row counts where it is real (a source token for the
encoder; a step up to and including the EOS step for the decoder); its keys are the ones it may
see (no padding; decoder self-attention: no later step). A pattern's score is the attention mass
on the keys it names, averaged over the rows where it names one; a score is in 0..1, and None
where the pattern does not apply to that kind of head.

- diagonal: the key at the query's own position (cross-attention: step i reads source position i);
- anti-diagonal: the mirrored position, n-1-i of n source tokens (encoder and cross-attention);
- previous: the position before the query's (self-attention: encoder and decoder);
- first: the first key (the first source token; SOS for decoder self-attention): a sink;
- last: the last source token (encoder and cross-attention): the other sink;
- broad: the entropy of the row over the keys it may see, divided by its largest possible value
  (1: uniform);
- expected (cross-attention): the mass on the source positions the task says the step copies
  from (core/data/task.py: reverse anti-diagonal, copy diagonal, sort the positions holding the
  digit, dates each output field's source field); None when the task does not know;
- identity: attention by token identity rather than position: the mass on keys holding the
  query's own token (encoder: its source token; decoder self-attention: the token fed there;
  cross-attention: the token the step outputs), minus the mass the head's average row at that
  query position and length puts there (what position alone predicts); clipped at 0. A sort
  model's cross-attention finds the digit wherever it is; a reverse model's finds it by position,
  which scores 0 here however well it copies.

The strongest role of a head is its highest score of at least ROLE_FLOOR; "broad" only when no
other role reaches it (broad is the absence of a pattern, not a pattern); none when nothing does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minitx.core.interp.interventions import Head, all_heads
from minitx.core.model.transformer import Seq2Seq, eval_mode

ROLES = ("diagonal", "anti-diagonal", "previous", "first", "last", "broad", "expected", "identity")
APPLIES = {  # kind -> the roles defined for it
    "enc": {"diagonal", "anti-diagonal", "previous", "first", "last", "broad", "identity"},
    "self": {"diagonal", "previous", "first", "broad", "identity"},
    "cross": {"diagonal", "anti-diagonal", "first", "last", "broad", "expected", "identity"},
}
ROLE_FLOOR = 0.5
ROLE_SEQUENCES = 500  # as `minitx heads` measures importance: the same sequences
ROLE_SEED = 1234


@dataclass(frozen=True)
class HeadRoles:
    head: str  # "cross:L2.H1"
    scores: dict[str, float | None]  # role -> 0..1, None where it does not apply

    def strongest(self) -> tuple[str, float] | None:
        """(role, score) of the highest score at least ROLE_FLOOR, broad only when no other role
        reaches it; ties go to the earlier role of ROLES (a positional name says more than
        "expected" when both fit)."""
        best = None
        for role in (*(r for r in ROLES if r != "broad"), "broad"):
            if role == "broad" and best is not None:
                break
            score = self.scores.get(role)
            if score is not None and score >= ROLE_FLOOR and (best is None or score > best[1] + 1e-3):
                best = (role, score)
        return best


@dataclass
class RoleTable:
    n: int
    seed: int
    heads: list[HeadRoles] = field(default_factory=list)

    def strongest(self) -> dict[str, str]:
        """head -> its strongest role's name, "" when none reaches ROLE_FLOOR."""
        return {h.head: (h.strongest() or ("", 0.0))[0] for h in self.heads}

    def to_dict(self) -> dict:
        return {"n": self.n, "seed": self.seed, "floor": ROLE_FLOOR,
                "heads": [{"head": h.head, "scores": h.scores,
                           "strongest": (h.strongest() or (None,))[0]} for h in self.heads]}


def _mass(weights: torch.Tensor, target: torch.Tensor, rows: torch.Tensor) -> float | None:
    """weights (B, h, Tq, Tk), target (B, Tq, Tk) bool, rows (B, Tq) bool -> per head the mean
    over rows that have a target of the mass on it: (h,) or None when no row has one."""
    has = rows & target.any(-1)  # (B, Tq)
    if not bool(has.any()):
        return None
    mass = (weights * target[:, None]).sum(-1)  # (B, h, Tq)
    return (mass * has[:, None]).sum((0, 2)) / has.sum()


def _broad(weights: torch.Tensor, allowed: torch.Tensor, rows: torch.Tensor):
    """Normalised entropy per head over rows that may see at least two keys: (h,) or None."""
    count = allowed.sum(-1)  # (B, Tq)
    has = rows & (count >= 2)
    if not bool(has.any()):
        return None
    p = weights.clamp(min=1e-12)
    entropy = -(weights * p.log()).sum(-1)  # (B, h, Tq)
    normalised = entropy / count.clamp(min=2).log()[:, None]
    return (normalised * has[:, None]).sum((0, 2)) / has.sum()


def _identity(weights, same, allowed, rows, groups):
    """Mass on same-token keys beyond what the head's average row (per query position and
    group, e.g. source length) puts there: (h,) or None."""
    has = rows & same.any(-1)
    if not bool(has.any()):
        return None
    average = torch.zeros_like(weights)
    for g in groups.unique():
        members = groups == g  # (B,)
        average[members] = weights[members].mean(0, keepdim=True)
    actual = (weights * same[:, None]).sum(-1)  # (B, h, Tq)
    positional = (average * same[:, None]).sum(-1)
    gain = ((actual - positional) * has[:, None]).sum((0, 2)) / has.sum()
    return gain.clamp(min=0)


@torch.no_grad()
def head_roles(model: Seq2Seq, task, n: int = ROLE_SEQUENCES, seed: int = ROLE_SEED) -> RoleTable:
    """Every head's score for every role (the module docstring) on n examples of the task."""
    cfg = model.cfg
    batch = task.batch(n, torch.Generator().manual_seed(seed))
    src, dec_in, labels = batch.src, batch.decoder_input, batch.labels  # (B, S), (B, T), (B, T)
    with eval_mode(model):
        _, maps = model(src.to(model.device), dec_in.to(model.device), return_attention=True)
    B, S = src.shape
    T = dec_in.shape[1]
    src_real = src != cfg.source_pad_id  # (B, S)
    dec_real = labels != cfg.pad_id  # (B, T): up to the EOS step
    # A source fed wrapped in start and end tokens (an imported model) counts positions from its
    # own first token: the patterns name the same tokens as for an unwrapped source.
    wrap = 1 if task.wraps_source else 0
    n_src = src_real.sum(1) - 2 * wrap  # (B,) the source's own tokens
    n_dec = dec_real.sum(1)
    i_s, j_s = torch.arange(S)[:, None] - wrap, torch.arange(S)[None, :] - wrap
    i_t, j_t = torch.arange(T)[:, None], torch.arange(T)[None, :]
    expected = task.expected_alignment(batch)  # (B, T_out, S) or None

    def targets(kind: str) -> dict:
        if kind == "enc":
            allowed = src_real[:, None, :] & src_real[:, :, None]  # (B, S, S)
            own = (i_s[:, 0] >= 0)[None] & (i_s[:, 0][None] < n_src[:, None])  # (B, S): not the wrapping
            i, j, count, rows = i_s, j_s, n_src[:, None, None], src_real & own
            same = (src[:, :, None] == src[:, None, :]) & allowed
            groups = n_src
        elif kind == "self":
            allowed = (j_t <= i_t)[None] & dec_real[:, None, :] & dec_real[:, :, None]  # (B, T, T)
            i, j, count, rows = i_t, j_t, None, dec_real
            same = (dec_in[:, :, None] == dec_in[:, None, :]) & allowed
            groups = n_dec
        else:
            allowed = src_real[:, None, :].expand(B, T, S) & dec_real[:, :, None]  # (B, T, S)
            i, j, count, rows = torch.arange(T)[:, None], j_s, n_src[:, None, None], dec_real
            same = (labels[:, :, None] == src[:, None, :]) & allowed
            if task.src_vocab != task.vocab:  # ids of two vocabularies: no token is "the same"
                same = torch.zeros_like(same)
            groups = n_src
        out = {"allowed": allowed, "rows": rows, "same": same, "groups": groups,
               "diagonal": (j == i)[None] & allowed, "first": (j == 0)[None] & allowed,
               "previous": (j == i - 1)[None] & allowed}
        if count is not None:
            out["anti-diagonal"] = (j[None] == count - 1 - i[None]) & allowed
            out["last"] = (j[None] == count - 1) & allowed
        if kind == "cross" and expected is not None:
            rows_known = min(T, expected.shape[1])
            fit = torch.zeros(B, T, S, dtype=torch.bool)
            fit[:, :rows_known] = expected[:, :rows_known, :S]
            out["expected"] = fit & allowed
        return out

    table = RoleTable(n, seed)
    per_kind = {"enc": maps.encoder_self, "self": maps.decoder_self, "cross": maps.cross}
    found: dict[str, dict[str, float | None]] = {}
    for kind, layers in per_kind.items():
        t = targets(kind)
        for layer, weights in enumerate(layers):
            w = weights.float().cpu()  # (B, h, Tq, Tk)
            scores: dict[str, torch.Tensor | None] = {}
            for role in ROLES:
                if role not in APPLIES[kind]:
                    scores[role] = None
                elif role == "broad":
                    scores[role] = _broad(w, t["allowed"], t["rows"])
                elif role == "identity":
                    scores[role] = _identity(w, t["same"], t["allowed"], t["rows"], t["groups"])
                else:
                    scores[role] = _mass(w, t[role], t["rows"]) if role in t else None
            for h in range(cfg.n_heads):
                found[str(Head(kind, layer, h))] = {r: None if s is None else float(s[h])
                                                   for r, s in scores.items()}
    table.heads = [HeadRoles(str(h), found[str(h)]) for h in all_heads(model)]
    return table


def strongest_roles(model: Seq2Seq, task) -> dict[str, str]:
    """head name -> its strongest role ("" for none): what the app's all-heads view names."""
    return head_roles(model, task).strongest()
