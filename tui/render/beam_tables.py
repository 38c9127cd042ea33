"""Beam search as text and as plain data: the n-best beside greedy's output, the search check, and
the tree's JSON. `minitx decode --beams` prints them and the app's beam view shows and exports them,
so both say the same."""

from __future__ import annotations

from minitx.tui.render.attribution_tables import attribution_data


def first_difference(a, b) -> int | None:
    """The 0-based step where two outputs first differ (a missing token counts), or None."""
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b) or a[i] != b[i]:
            return i
    return None


def output_text(task, tokens) -> str:
    """An output as the task writes it; an empty one says why: EOS first, or only special
    tokens (a multilingual model's forced language code, then EOS)."""
    text = task.format(list(tokens))
    if text:
        return text
    ends_first = not tokens or tokens[0] == task.vocab.eos
    return "(empty: EOS first)" if ends_first else "(empty: special tokens only)"


def hypothesis_data(hypothesis, task) -> dict:
    """What --json says of one output: its ids (the decoder's start left out, EOS kept), its text,
    its score (transformers' sequences_scores) and its summed log-probability."""
    return {"tokens": list(hypothesis.tokens), "text": task.format(list(hypothesis.tokens)),
            "score": hypothesis.score, "logp": hypothesis.logp}


def tree_data(search, vocab) -> dict:
    """The whole search (core.interp.beam.BeamSearch) as plain data: every real node, and per
    step its candidates (best first), the ones that run on and the finished pool."""
    real = {n.id for n in search.nodes if not n.void}
    nodes = [{"id": n.id, "parent": n.parent, "step": n.step, "rank": n.rank, "token": n.token,
              "text": vocab.label(n.token), "logp": n.logp, "total": n.total, "score": n.score,
              "state": n.state, "ended": n.ended}
             for n in search.nodes if n.id in real]
    steps = [{"index": s.index, "candidates": [i for i in s.candidates if i in real],
              "running": [i for i in s.running if i in real], "pool": list(s.pool),
              "stopped": s.stopped, "why": s.why} for s in search.steps]
    return {"beams": search.beams, "length_penalty": search.length_penalty,
            "early_stopping": search.early_stopping, "steps": steps, "nodes": nodes}


def search_check_data(check, task) -> dict:
    rep = check.repetition
    return {
        "beams": check.beams, "length_penalty": check.length_penalty, "case": check.case,
        "errors": list(check.errors), "findings": list(check.findings),
        "scored": [{"name": s.name, **hypothesis_data(s.output, task)} for s in check.scored],
        "repetition": None if rep is None else {
            "ngram": list(rep.ngram), "text": task.format(list(rep.ngram)), "starts": list(rep.starts),
            "attended_source_positions": list(rep.attended), "attention_stuck": rep.stuck},
    }


def contrast_data(tokens, contrast, attribution, task) -> dict:
    """A hypothesis against greedy where they part (the app's BeamSession.contrast()) as plain data:
    its tokens, the step (0-based), the prefix both were fed, the two tokens, and the contrastive
    attribution of that step (attribution_tables.attribution_data; None until computed, and when
    the two never part there is no step: `parts` false)."""
    vocab = task.vocab
    data = {"tokens": list(tokens), "text": output_text(task, tokens), "parts": contrast is not None}
    if contrast is not None:
        data.update(step=contrast.step, prefix=list(contrast.prefix), token=contrast.token,
                    token_text=vocab.label(contrast.token), greedy_token=contrast.greedy,
                    greedy_text=None if contrast.greedy is None else vocab.label(contrast.greedy),
                    attribution=None if attribution is None else
                    attribution_data(attribution, task, prediction=output_text(task, tokens)))
    return data


def settings_line(beams: int, length_penalty: float, early_stopping) -> str:
    stop = {True: "true", False: "false"}.get(early_stopping, early_stopping)
    return f"beam {beams} · length penalty {length_penalty:g} · early stopping {stop}"


def _row(name: str, score: float, logp: float, text: str, note: str = "") -> str:
    line = f"  {name:<8} {score:>9.4f} {logp:>9.4f}  {text}"
    return f"{line}   {note}" if note else line


def nbest_lines(hypotheses, greedy, task) -> list[str]:
    """The n-best, best first, and greedy's output under them, marked where it parts from the
    best: what `minitx decode --beams` prints per source."""
    lines = [f"  {'#':<8} {'score':>9} {'log p':>9}  output"]
    lines += [_row(str(i), h.score, h.logp, output_text(task, h.tokens)) for i, h in enumerate(hypotheses, 1)]
    best = hypotheses[0].tokens
    parts = first_difference(greedy.tokens, best)
    if parts is None:
        note = "= 1"
    else:
        vocab = task.vocab
        theirs = vocab.label(greedy.tokens[parts]) if parts < len(greedy.tokens) else "nothing"
        ours = vocab.label(best[parts]) if parts < len(best) else "nothing"
        note = f"≠ 1 from step {parts + 1} ({theirs} rather than {ours})"
    lines.append(_row("greedy", greedy.score, greedy.logp, output_text(task, greedy.tokens), note))
    return lines


def search_check_lines(check, task, source_labels: list[str]) -> list[str]:
    """The search check as lines: every output scored, the case and why, and repetition."""
    lines = [f"search check (Stahlberg & Byrne 2019; score = log p / length^{check.length_penalty:g}):",
             f"  {'':<8} {'score':>9} {'log p':>9}  output"]
    lines += [_row(s.name, s.output.score, s.output.logp, output_text(task, s.output.tokens))
              for s in check.scored]
    lines.append(f"  case: {check.case}")
    lines += [f"  · {finding}" for finding in check.findings]
    lines.append("  repetition: " + repetition_text(check.repetition, task, source_labels))
    return lines


def repetition_text(rep, task, source_labels: list[str]) -> str:
    if rep is None:
        return "none"
    n = len(rep.ngram)
    steps = ", ".join(f"{s + 1}-{s + n}" if n > 1 else str(s + 1) for s in rep.starts)
    what = f"'{task.format(list(rep.ngram))}' at steps {steps}"
    if rep.stuck:
        position = rep.attended[0]
        token = source_labels[position] if position < len(source_labels) else "?"
        return f"{what}; cross-attention stays on source token '{token}' (position {position + 1}) " \
               "throughout: the model lost its place"
    moved = " ".join(str(p + 1) for p in rep.attended)
    return f"{what}; cross-attention moves over the source (positions {moved})"


def greedy_note(beams: int, see: str) -> str:
    """The line every greedy view shows for a model whose own settings search with a beam; `see`
    says how to see that search there."""
    return f"this is greedy: the model's own generate() uses a beam of {beams} ({see})"

