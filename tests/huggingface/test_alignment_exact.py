"""The attention `minitx align` reads is the cross-attention transformers returns
(output_attentions=True, attn_implementation="eager") for the same folder and text, and its word
links are the ones a reference rule written here gets from transformers' attention and
transformers' own tokeniser: pieces from convert_ids_to_tokens, words from their "▁" / "Ġ" word
starts (sentencepiece and byte-level pieces that split words), special tokens left out."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from minitx import checkpoints
from minitx.core.interp import word_alignment as wa
from minitx.core.interp.alignment import cross_attention
from tests.huggingface.tiny_folders import save_model
from tests.huggingface.tiny_tokenisers import CORPUS

# sentencepiece pieces (Marian, T5), byte-level BPE (BART), a language code on each side (NLLB)
FAMILIES = ("marian", "t5", "bart", "nllb")
PAIRS = CORPUS[:8]


@pytest.fixture(scope="module", params=FAMILIES)
def folder(request, tmp_path_factory):
    """(folder, minitx's checkpoint of it, transformers' eager model, transformers' tokeniser)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    path = save_model(tmp_path_factory.mktemp(request.param) / request.param, request.param)
    reference = AutoModelForSeq2SeqLM.from_pretrained(path, attn_implementation="eager").eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MarianTokenizer recommends sacremoses, which it does not use
        tokeniser = AutoTokenizer.from_pretrained(str(path))
    return path, checkpoints.load(str(path)), reference, tokeniser


def pairs_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in PAIRS),
                    encoding="utf-8")
    return path


def reference_words(tokeniser, ids: list[int]) -> list[int]:
    """The word of each id (-1 for a special token): a piece spelled with a leading word-start
    mark ("▁" sentencepiece, "Ġ" byte-level) starts a word, as does the first piece. <unk> stands
    for a piece of text it could not spell: it is in the word it is in, like any piece."""
    words, count = [], 0
    for token, i in zip(tokeniser.convert_ids_to_tokens(ids), ids):
        if i in tokeniser.all_special_ids and i != tokeniser.unk_token_id:
            words.append(-1)
            continue
        if count == 0 or token.startswith(("▁", "Ġ")):
            count += 1
        words.append(count - 1)
    return words


def reference_links(reference, tokeniser, source: str, target: str) -> dict[tuple, set]:
    """(layer, head or None, method) -> the links transformers' attention gives one pair."""
    src = tokeniser(source)["input_ids"]
    labels = tokeniser(text_target=target)["input_ids"]
    start = reference.config.decoder_start_token_id
    with torch.no_grad():
        out = reference(input_ids=torch.tensor([src]),
                        decoder_input_ids=torch.tensor([[start, *labels[:-1]]]), output_attentions=True)
    src_words, tgt_words = reference_words(tokeniser, src), reference_words(tokeniser, labels)
    assert max(src_words) + 1 == len(source.split()) and max(tgt_words) + 1 == len(target.split())
    hidden = torch.tensor([w < 0 for w in src_words])  # (S,) special tokens: never a link's end
    links = {}
    for layer, weights in enumerate(out.cross_attentions):  # (1, h, T, S)
        grids = {head: weights[0, head] for head in range(weights.shape[1])}
        grids[None] = weights[0].mean(dim=0)
        for head, grid in grids.items():
            for method, shift in (("output", 0), ("input", 1)):
                found = set()
                for k, word in enumerate(tgt_words):
                    if word < 0 or k + shift >= grid.shape[0]:
                        continue
                    best = int(grid[k + shift].masked_fill(hidden, -1.0).argmax())  # weights are >= 0
                    found.add((src_words[best], word))
                links[(layer, head, method)] = found
    return links


def test_cross_attention_read_equals_transformers_eager_output_attentions(folder, tmp_path):
    path, checkpoint, reference, _ = folder
    read = wa.AlignmentPairs(checkpoint.task, pairs_file(tmp_path), checkpoint.model_config.max_len)
    pad = checkpoint.model_config.pad_id
    compared = 0
    for _, batch, _ in read.batches(batch_size=5):  # padded batches of different lengths
        ours = cross_attention(checkpoint.model, batch)
        with torch.no_grad():
            theirs = reference(input_ids=batch.src, attention_mask=(batch.src != pad).long(),
                               decoder_input_ids=batch.decoder_input, output_attentions=True).cross_attentions
        # the rows alignment reads: every step fed a real token (past a target's end the decoder
        # is fed padding, whose position NLLB's sinusoids number differently; nothing reads it)
        read_rows = batch.decoder_input != pad  # (B, T)
        read_rows[:, 0] = True  # the start token, even where it is PAD itself (Marian, T5)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape
            assert (a - b).abs()[read_rows[:, None, :, None].expand_as(a)].max() < 1e-5
        compared += len(batch)
    assert compared == len(PAIRS)


def test_links_equal_a_reference_rule_on_transformers_attention_and_tokeniser(folder, tmp_path):
    path, checkpoint, reference, tokeniser = folder
    read = wa.AlignmentPairs(checkpoint.task, pairs_file(tmp_path), checkpoint.model_config.max_len)
    assert not read.unaligned
    layers, heads = len(checkpoint.model.decoder), checkpoint.model_config.n_heads
    every = wa.every_head(layers, heads)
    expected = [reference_links(reference, tokeniser, s, t) for s, t in PAIRS]
    for method in wa.METHODS:
        links = wa.align(checkpoint.model, read, every, method, batch_size=4)
        for c, head in enumerate(every):
            for n in range(len(PAIRS)):
                assert links[c][n] == expected[n][(head.layer, head.head, method)], (head.name, method, n)
    cut = [len(tokeniser(t)["input_ids"]) - 1 > len(t.split()) for pair in PAIRS for t in pair]
    assert sum(cut) > len(cut) // 2  # the case the rule is for: words cut into several pieces


def test_align_and_decode_align_run_on_a_folder_from_the_command_line(folder, tmp_path):
    from tests.cli.conftest import run_cli

    path, checkpoint, reference, tokeniser = folder
    pairs = pairs_file(tmp_path)
    run = run_cli("align", str(path), str(pairs), "--layer", "2", "--head", "3", "--method", "input")
    assert run.exit_code == 0, run.stderr
    expected = [reference_links(reference, tokeniser, s, t)[(1, 2, "input")] for s, t in PAIRS]
    assert [{tuple(map(int, link.split("-"))) for link in line.split()} for line in run.stdout.splitlines()] \
        == expected
    run = run_cli("decode", str(path), PAIRS[0][0], "--align", "--json")
    assert run.exit_code == 0, run.stderr
    alignment = json.loads(run.stdout)["results"][0]["alignment"]
    assert alignment["source_words"] == PAIRS[0][0].split()
    for link in alignment["links"].split():
        i, j = map(int, link.split("-"))
        assert i < len(alignment["source_words"]) and j < len(alignment["output_words"])
