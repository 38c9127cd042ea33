"""A decode recorded as plain data: what `decode --json`, `decode --beams --json` and `export`
write for one source (the prediction, each step's top-k and probabilities, every attention grid)."""

from __future__ import annotations

from minitx.core.interp.decode import Stepper


def blank_trace() -> dict:
    """A blank line of stdin, kept in its place: nothing decoded, an empty prediction."""
    return {"source": "", "blank": True, "prediction": ""}


def trace_of(ckpt, source_text: str, top_k: int = 5, interventions=None, every_kind: bool = False,
             progress=None) -> dict:
    """Decode one source with core's Stepper (under `interventions`, e.g. an ablation) and record
    everything as plain data: the prediction, each step's top-k, log-probability and entropy, and
    cross-attention as [layer][head][step][source]. every_kind: also decoder self-attention as
    [layer][head][step][decoder input] (zero after the step) with "decoder_inputs", and encoder
    self-attention as [layer][head][source][source]. `progress(step, cap)` after each step."""
    task, vocab = ckpt.task, ckpt.task.vocab
    ids = task.parse(source_text, max_len=task.source_limit(ckpt.model_config.max_len))
    stepper = Stepper(ckpt.model, ids, top_k=top_k, cap=task.decode_cap(len(ids), ckpt.model_config.max_len),
                      interventions=interventions, vocab=vocab)
    results = stepper.run(progress)
    prediction = task.format(stepper.tokens)
    expected_ids = task.expected_output(ids)
    expected = None if expected_ids is None else task.format(expected_ids)
    layers, heads = results[0].cross_attention.shape[:2] if results else (0, 0)
    cross = [
        [[r.cross_attention[layer, head].tolist() for r in results] for head in range(heads)]
        for layer in range(layers)
    ]
    trace = {
        "source": task.format_source(ids),
        "source_tokens": task.source_labels(ids),  # one visible label per token fed (space as ␣)
        "prediction": prediction,
        "expected": expected,
        "correct": None if expected is None else (prediction == expected and bool(results)
                                                  and results[-1].is_end),
        "finished": bool(results) and results[-1].is_end,  # False: stopped at the length cap
        "within_training_lengths": task.min_len <= task.source_length(ids) <= task.max_len,
        # tokens the vocabulary reads (a target had them) that no training source held
        "unseen_in_training_sources": [vocab.label(i) for i in task.unseen_source_tokens(ids)],
        "ablated": [str(h) for h in stepper.interventions.ablated],
        # generation settings the folder sets that minitx does not compute (generate() would apply them)
        "not_computed": list(ckpt.model.generation.not_computed),
        "steps": [
            {
                "index": r.index,
                "token": r.token,
                "text": r.text,
                "top_k": [{"token": t, "text": vocab.label(t), "p": p} for t, p in r.top_k],
                "log_p": float(r.log_probs[r.token]),
                "entropy": r.entropy,
                # each generation rule that changed the choice here, and the token chosen without it
                "ruled": [{"rule": rule, "instead": was, "instead_text": vocab.label(was)}
                          for rule, was in r.ruled],
            }
            for r in results
        ],
        "cross_attention": cross,
    }
    if every_kind:
        trace["decoder_inputs"] = [vocab.label(ckpt.model_config.sos_id)] + [r.text for r in results[:-1]]
        trace["self_attention"] = [[stepper.self_attention_grid(layer, head).tolist()
                                    for head in range(heads)] for layer in range(layers)]
        trace["encoder_attention"] = [[stepper.encoder_attention_grid(layer, head).tolist()
                                       for head in range(stepper.encoder_attention.shape[1])]
                                      for layer in range(stepper.encoder_attention.shape[0])]
    return trace
