"""minitx opens each Hugging Face family exactly as transformers computes it: on tiny random
folders made by transformers itself (tests/huggingface/tiny_folders.py), the logits of padded
batches equal transformers' forward within 1e-4, and greedy decoding gives generate(num_beams=1,
do_sample=False)'s tokens under the folder's own generation settings and under others."""

import dataclasses

import pytest
import torch

from minitx.core.importing.huggingface import read_model
from minitx.core.interp.decode import greedy_decode
from tests.huggingface.tiny_folders import FAMILIES, load_reference, save_model, special_ids


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request, tmp_path_factory):
    """(family, transformers' model, minitx's model) of one tiny folder."""
    folder = save_model(tmp_path_factory.mktemp(request.param) / request.param, request.param)
    return request.param, load_reference(folder), read_model(folder).model


def sources(family: str, rows: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask): sources of different lengths ending in EOS, PAD after."""
    ids = special_ids(family)
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 9, (rows,), generator=generator)
    src = torch.randint(4, 250, (rows, int(lengths.max())), generator=generator)
    positions = torch.arange(src.shape[1])[None]
    src[positions == lengths[:, None] - 1] = ids["eos"]
    mask = positions < lengths[:, None]
    return src.masked_fill(~mask, ids["pad"]), mask.long()


def test_teacher_forced_logits_equal_transformers_forward(pair):
    family, reference, model = pair
    src, mask = sources(family)
    tgt = torch.randint(4, 250, (src.shape[0], 7), generator=torch.Generator().manual_seed(1))
    tgt[:, 0] = special_ids(family)["start"]
    with torch.no_grad():
        theirs = reference(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        ours = model(src, tgt)
    assert (ours - theirs).abs().max() < 1e-4


def generated(model, src) -> list[list[int]]:
    """minitx's greedy output per row, cut after its end token."""
    rows = []
    for row in greedy_decode(model, src).tolist():
        ends = [i for i, t in enumerate(row) if t in model.generation.eos]
        rows.append(row[: ends[0] + 1] if ends else row)
    return rows


def generate(reference, src, mask, **settings) -> list[list[int]]:
    """transformers' greedy output per row, without the decoder's start, cut after its end."""
    out = reference.generate(input_ids=src, attention_mask=mask, num_beams=1, do_sample=False, **settings)
    rows = []
    eos = reference.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    for row in out[:, 1:].tolist():
        ends = [i for i, t in enumerate(row) if t in eos]
        rows.append(row[: ends[0] + 1] if ends else row)
    return rows


def assert_same_but_ties(model, src, ours: list[list[int]], theirs: list[list[int]]) -> None:
    """ours == theirs, but where a row parts at a step whose two choices tie within float32
    rounding (1e-5 of the logits' scale) in minitx's own logits: random weights make near-ties,
    and which side of one a sum lands on depends on the order a kernel adds in."""
    assert len(ours) == len(theirs)
    for i, (mine, their) in enumerate(zip(ours, theirs)):
        if mine == their:
            continue
        k = next((j for j, (a, b) in enumerate(zip(mine, their)) if a != b), min(len(mine), len(their)))
        assert k < min(len(mine), len(theirs[i])), f"row {i}: {mine} against {their}"
        with torch.no_grad():
            logits = model(src[i: i + 1], torch.tensor([[model.cfg.sos_id, *mine[:k]]]))[0, -1]  # (V,)
        gap = float((logits[mine[k]] - logits[their[k]]).abs())
        assert gap <= 1e-5 * float(logits.abs().max()), f"row {i} parts at step {k} by {gap}: {mine} {their}"


def test_greedy_decoding_gives_generates_tokens_under_the_folders_settings(pair):
    family, reference, model = pair
    src, mask = sources(family, seed=2)
    assert_same_but_ties(model, src, generated(model, src), generate(reference, src, mask))


def test_greedy_decoding_follows_min_length_and_no_repeat_ngram_as_generate_does(pair):
    """Random weights repeat one token forever; banning repeated pairs makes long, varied
    outputs that end at different steps, which a wrong rule or a wrong cache would change."""
    family, reference, model = pair
    src, mask = sources(family, seed=3)
    own = model.generation
    model.generation = dataclasses.replace(own, no_repeat_ngram_size=2, min_length=4, max_length=16)
    try:
        ours = generated(model, src)
        theirs = generate(reference, src, mask, no_repeat_ngram_size=2, min_length=4, max_length=16)
    finally:
        model.generation = own
    assert_same_but_ties(model, src, ours, theirs)
    # not vacuous: some output ends before the cap, or runs through varied tokens
    assert any(len(row) < 15 for row in ours) or any(len(set(row)) > 4 for row in ours)
