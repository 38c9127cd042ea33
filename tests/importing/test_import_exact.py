"""An imported model computes what the code that trained it computes: models of both layouts,
trained by the reference implementations (tests/reference_models, not minitx), their own
vocabularies in their own orders, imported from either file format, give the same teacher-forced
logits (within float32 noise) and the same greedy output token for token as the layout's own
greedy decoding, through the modules and through the KV cache, and again after a round trip
through a minitx checkpoint."""

from __future__ import annotations

import pytest
import torch

from minitx.core.checkpoint import load_checkpoint, save_checkpoint
from minitx.core.importing.importer import ImportSettings, import_model
from minitx.core.interp.decode import greedy_decode
from minitx.core.model.kv_cache import IncrementalDecoder
from tests.reference_models import toy

LAYOUTS = (toy.TUTORIAL, toy.ANNOTATED)
SETTINGS = ImportSettings(heads=toy.Shape().heads, tokens="word")
TOLERANCE = 1e-4  # the bound on teacher-forced logits; measured: 0.0 and ~3e-6


@pytest.fixture(scope="module")
def references(tutorial_reverse, annotated_reverse, tutorial_files, annotated_files):
    return {toy.TUTORIAL: (tutorial_reverse, tutorial_files),
            toy.ANNOTATED: (annotated_reverse, annotated_files)}


def imported(references, layout: str, kind: str = "pt"):
    trained, files = references[layout]
    weights = files.pt if kind == "pt" else files.safetensors
    return import_model(weights, files.src_vocab, files.tgt_vocab, SETTINGS, layout=layout)


def held_out_batch(trained, n: int = 64, seed: int = 321) -> toy.ToyBatch:
    return toy.make_batch(trained.layout, trained.task, trained.src_vocab, trained.tgt_vocab, n,
                          torch.Generator().manual_seed(seed), *trained.lengths)


@pytest.mark.parametrize("kind", ["pt", "safetensors"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_teacher_forced_logits_equal_the_original_models(references, layout, kind):
    trained, _ = references[layout]
    model = imported(references, layout, kind).model
    batch = held_out_batch(trained)  # padded sources and targets, the layout's own ids
    tgt_in, labels = batch.tgt[:, :-1], batch.tgt[:, 1:]
    with torch.no_grad():
        theirs = toy.teacher_forced(layout, trained.model, batch.src, tgt_in)  # logits / log-probs
        mine = model(batch.src, tgt_in)
        explicit, _ = model(batch.src, tgt_in, return_attention=True)  # the path that shows weights
    real = labels != trained.tgt_vocab.index(toy.LAYOUTS[layout].pad)
    assert float((mine - theirs)[real].abs().max()) <= TOLERANCE
    assert float((explicit - theirs)[real].abs().max()) <= TOLERANCE


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_kv_cache_steps_give_the_original_models_logits(references, layout):
    trained, _ = references[layout]
    model = imported(references, layout).model
    batch = held_out_batch(trained, n=16)
    tgt_in = batch.tgt[:, :-1]
    with torch.no_grad():
        theirs = toy.teacher_forced(layout, trained.model, batch.src, tgt_in)
        decoder = IncrementalDecoder(model, *model.encode(batch.src))
        stepped = torch.stack([decoder.step(tgt_in[:, t]) for t in range(tgt_in.shape[1])], dim=1)
    real = batch.tgt[:, 1:] != trained.tgt_vocab.index(toy.LAYOUTS[layout].pad)
    assert float((stepped - theirs)[real].abs().max()) <= TOLERANCE


def minitx_greedy(result, sources: list[list[str]], budget: int, use_cache: bool) -> list[list[str]]:
    """Each source typed as text, parsed (and wrapped) by the imported task, decoded greedily in
    one padded batch; the outputs cut at EOS and within the reference's budget, as target tokens."""
    task, model = result.task, result.model
    rows = [task.parse(" ".join(s)) for s in sources]
    width = max(len(r) for r in rows)
    src = torch.tensor([r + [task.src_vocab.pad] * (width - len(r)) for r in rows])
    generated = greedy_decode(model, src, task.decode_cap(width, model.cfg.max_len), use_cache=use_cache)
    out = []
    for row in generated.tolist():
        row = row[: row.index(task.vocab.eos)] if task.vocab.eos in row else row
        out.append([task.vocab.tokens[i] for i in row[:budget]])
    return out


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_greedy_decoding_is_token_identical_to_the_layouts_own(references, layout, use_cache):
    trained, _ = references[layout]
    result = imported(references, layout, "safetensors")
    sources = toy.random_sources(100, torch.Generator().manual_seed(99), *trained.lengths)
    theirs = toy.decode_digits(trained, sources)
    budget = max(len(s) for s in sources) + 2 + 1  # the smaller of the two codes' budgets (annotated)
    mine = minitx_greedy(result, sources, budget, use_cache)
    assert mine == theirs
    right = sum(m == toy.transform("reverse", s) for m, s in zip(mine, sources))
    assert right >= 90  # a trained model: identical outputs that are also mostly correct


@pytest.mark.parametrize("layout", LAYOUTS)
def test_both_file_formats_import_to_the_same_model(references, layout):
    a, b = imported(references, layout, "pt").model, imported(references, layout, "safetensors").model
    assert a.cfg == b.cfg
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name


@pytest.mark.parametrize("layout", LAYOUTS)
def test_typed_sources_are_wrapped_in_the_layouts_start_and_end_tokens(references, layout):
    trained, _ = references[layout]
    task = imported(references, layout).task
    assert task.parse("3 1 4") == toy.encode(list("314"), trained.src_vocab, layout)
    assert task.format_source(task.parse("3 1 4")) == "3 1 4"
    spec = toy.LAYOUTS[layout]
    assert task.source_labels(task.parse("3 1 4")) == [spec.bos, "3", "1", "4", spec.eos]
    assert task.src_vocab.tokens == trained.src_vocab and task.vocab.tokens == trained.tgt_vocab


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_options_of_each_layout_are_in_the_imported_config(references, layout):
    cfg = imported(references, layout).model.cfg
    if layout == toy.TUTORIAL:  # post-norm with nn.Transformer's final LayerNorms, plain logits
        assert (cfg.norm, cfg.norm_kind, cfg.final_norms, cfg.log_softmax) == (
            "post", "layer", True, False)
    else:  # pre-norm with its own std-based LayerNorm (eps 1e-6), log-softmax generator
        assert (cfg.norm, cfg.norm_kind, cfg.norm_epsilon, cfg.log_softmax) == ("pre", "std", 1e-6, True)
    shape = (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.n_encoder_layers, cfg.n_decoder_layers)
    assert shape == (32, 2, 64, 1, 1)
    assert cfg.max_len == 512  # the file's 5000-row table, kept to minitx's default at most
    assert cfg.separate_vocabularies or cfg.source_vocab_size == cfg.vocab_size
    assert cfg.source_pad_id == toy.LAYOUTS[layout].specials.index(toy.LAYOUTS[layout].pad)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_checkpoint_of_an_imported_model_reloads_with_its_vocabularies_and_logits(references, layout,
                                                                                    tmp_path):
    trained, _ = references[layout]
    result = imported(references, layout)
    path = save_checkpoint(tmp_path / "imported.safetensors", result.model, result.task, result.summary)
    ckpt = load_checkpoint(path)
    assert ckpt.model_config == result.model.cfg
    assert ckpt.task.name == "imported" and ckpt.task.wraps_source
    assert ckpt.task.src_vocab == result.task.src_vocab and ckpt.task.vocab == result.task.vocab
    assert ckpt.task.origin.layout == layout
    batch = held_out_batch(trained, n=8)
    with torch.no_grad():
        tgt_in = batch.tgt[:, :-1]
        assert torch.equal(ckpt.model(batch.src, tgt_in), result.model(batch.src, tgt_in))
