"""Search error or model error? (Stahlberg & Byrne 2019, "On NMT Search Errors and Model Errors:
Cat Got Your Tongue?")

A decode's output is wrong either because the search missed an output the model scores higher (a
search error), or because the model scores a wrong output above the right one (a model error: the
paper's classic case is the empty translation outscoring the reference, which beam search hides by
never finding it). Exact search decides it; this check scores the outputs a person can get cheaply
instead: the empty output (EOS first), greedy's, beam K's and a wide beam's (64), and the expected
output where the task knows it, all under the objective the beam maximises (the sum of
log-probabilities over length ** length_penalty; with a length penalty of 0, the paper's model
score). What it finds is a lower bound: an output better than all of these would only add errors.

It also flags repetition: an n-gram the output repeats, and whether cross-attention stays on one
source token while it does (the source position holding the most attention, averaged over every
decoder layer and head, is the same at every repeated step), the pattern of a model that lost its
place in the source rather than one whose source repeats.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.interp.beam import BeamSearch, Hypothesis, score_outputs
from minitx.core.interp.decode import greedy_output
from minitx.core.interp.interventions import Interventions
from minitx.core.model.transformer import AttentionMaps, Seq2Seq, eval_mode

WIDE_BEAM = 64  # the wide beam of the check (Stahlberg & Byrne compare beams up to this and exact search)
TIE = 1e-5  # scores this close are one score (two searches of one output round differently)
SEARCH, MODEL = "search error", "model error"


@dataclass(frozen=True)
class Scored:
    name: str  # "empty", "greedy", "beam 4", "beam 64", "expected"
    output: Hypothesis


@dataclass(frozen=True)
class Repetition:
    ngram: tuple[int, ...]  # the repeated tokens
    starts: tuple[int, ...]  # 0-based steps where each occurrence starts
    attended: tuple[int, ...]  # per step of the occurrences: the source position most attended
    stuck: bool  # one source position throughout


@dataclass(frozen=True)
class SearchCheck:
    beams: int
    length_penalty: float
    scored: tuple[Scored, ...]  # every output checked, in the order above
    errors: tuple[str, ...]  # SEARCH and/or MODEL
    findings: tuple[str, ...]  # one sentence each: why
    repetition: Repetition | None  # of beam K's output

    def output(self, name: str) -> Hypothesis | None:
        return next((s.output for s in self.scored if s.name == name), None)

    @property
    def case(self) -> str:
        """What this decode suffers from, in a few words."""
        if not self.errors:
            return "no error found"
        return " and ".join(self.errors)


def search_check(model: Seq2Seq, src_ids: list[int], *, beams: int, length_penalty: float | None = None,
                 early_stopping: bool | str | None = None, cap: int | None = None,
                 expected: list[int] | None = None, interventions: Interventions | None = None,
                 label=str) -> SearchCheck:
    """Score the empty output, greedy, beam `beams`, beam 64 and `expected` (generated ids ending
    in EOS; None when unknown) and say which error this is. `label(ids)` writes outputs in the
    findings (the task's format)."""
    settings = dict(length_penalty=length_penalty, early_stopping=early_stopping, cap=cap,
                    interventions=interventions)
    search = BeamSearch(model, src_ids, beams=beams, **settings).run()
    lp = search.length_penalty
    beam = search.hypotheses(1)[0]
    wide = BeamSearch(model, src_ids, beams=max(WIDE_BEAM, beams), **settings).run().hypotheses(1)[0]
    eos = model.generation.eos[0]
    with (interventions or Interventions()).applied(model):
        greedy = greedy_output(model, src_ids, search.cap)
    outputs = {"empty": [eos], "greedy": greedy}
    if expected is not None:
        outputs["expected"] = list(expected)
    scores = dict(zip(outputs, score_outputs(model, src_ids, list(outputs.values()), length_penalty=lp,
                                             cap=search.cap, interventions=interventions)))
    names = ["empty", "greedy", f"beam {beams}", f"beam {max(WIDE_BEAM, beams)}"]
    scores[names[2]], scores[names[3]] = beam, wide
    if expected is not None:
        names.append("expected")
    scored = tuple(Scored(n, _same_as_found(scores[n], (beam, wide))) for n in names)

    errors, findings = [], []
    better = [s for s in scored if s.output.score > beam.score + TIE and s.output.tokens != beam.tokens]
    if better:
        top = max(better, key=lambda s: s.output.score)
        errors.append(SEARCH)
        found = "the empty output scores" if top.name == "empty" else \
            f"{top.name} finds {_quoted(label, top.output)} scoring"
        findings.append(f"{found} {top.output.score:.4f}, above beam {beams}'s {beam.score:.4f}: "
                        f"beam {beams} missed it")
    best = max(scored, key=lambda s: s.output.score).output
    if expected is not None:
        right = scores["expected"]
        if best.tokens != tuple(expected) and best.score > right.score + TIE:
            errors.append(MODEL)
            findings.append(f"the model scores {_quoted(label, best)} ({best.score:.4f}) above the expected "
                            f"output ({right.score:.4f})")
    elif scores["empty"].score >= best.score - TIE:
        errors.append(MODEL)
        findings.append("the model scores the empty output above everything a search found")
    if scores["empty"].score > beam.score + TIE:
        findings.append(f"the empty output outscores beam {beams}'s: the search error hides a model "
                        "error, and a wider or exact search returns less")
    if not errors:
        findings.append(f"nothing checked outscores beam {beams}'s output"
                        + ("" if expected is None else ", which the model scores above the expected one"
                           if beam.tokens != tuple(expected) else ", the expected one")
                        + ("" if expected is not None else "; without an expected output a model error "
                           "cannot be told"))
    repetition = repeated(model, src_ids, list(beam.tokens), interventions)
    return SearchCheck(beams, lp, scored, tuple(errors), tuple(findings), repetition)


def _same_as_found(scored: Hypothesis, found: tuple[Hypothesis, ...]) -> Hypothesis:
    """An output a search found keeps the search's own score (one output, one number)."""
    return next((h for h in found if h.tokens == scored.tokens), scored)


def _quoted(label, output: Hypothesis) -> str:
    text = label(list(output.tokens))
    return f"'{text}'" if text else "the empty output"


def repeated(model: Seq2Seq, src_ids: list[int], tokens: list[int],
             interventions: Interventions | None = None, longest: int = 4) -> Repetition | None:
    """The longest n-gram (2 to `longest` tokens; or one token three times running) that `tokens`
    (EOS left out) holds twice without overlap, with where cross-attention looks meanwhile;
    None when nothing repeats."""
    body = [t for t in tokens if t not in model.generation.eos]
    found = next((hit for n in range(min(longest, len(body) // 2), 1, -1) if (hit := _twice(body, n))),
                 None)
    if found is None:  # one token: three times running
        found = next((((t,), (i, i + 1, i + 2)) for i, t in enumerate(body[:-2])
                      if body[i + 1] == t == body[i + 2]), None)
    if found is None:
        return None
    ngram, starts = found
    attended = _most_attended(model, src_ids, tokens, interventions)
    steps = sorted({s + k for s in starts for k in range(len(ngram))})
    looked = tuple(attended[s] for s in steps)
    return Repetition(ngram, tuple(starts), looked, len(set(looked)) == 1)


def _twice(body: list[int], n: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    first: dict[tuple[int, ...], int] = {}
    for i in range(len(body) - n + 1):
        gram = tuple(body[i : i + n])
        if gram in first and i >= first[gram] + n:
            return gram, (first[gram], i)
        first.setdefault(gram, i)
    return None


@torch.no_grad()
def _most_attended(model: Seq2Seq, src_ids: list[int], tokens: list[int],
                   interventions: Interventions | None) -> list[int]:
    """Per generated token: the source position with the most cross-attention, averaged over every
    decoder layer and head (teacher-forced on `tokens`)."""
    fed = torch.tensor([[model.generation.start, *tokens[:-1]]], device=model.device)  # (1, T)
    maps = AttentionMaps()
    with eval_mode(model), (interventions or Interventions()).applied(model):
        memory, src_mask = model.encode(torch.tensor([src_ids], device=model.device))
        if model.causal:
            model.decode(fed, memory, src_mask, maps)
            cross = torch.stack(maps.cross)[:, 0]  # (layers, h, T, S)
        else:  # a decoder that sees later positions: each step's own prefix
            rows = []
            for t in range(fed.shape[1]):
                step = AttentionMaps()
                model.decode(fed[:, : t + 1], memory, src_mask, step)
                rows.append(torch.stack(step.cross)[:, 0, :, -1])  # (layers, h, S)
            cross = torch.stack(rows, dim=2)  # (layers, h, T, S)
    return cross.mean(dim=(0, 1)).argmax(dim=-1).tolist()
