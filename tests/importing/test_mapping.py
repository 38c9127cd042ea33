"""Mappings from a layout's state_dict keys to minitx's names: the built-in ones take every key
of the reference layouts and put each tensor where minitx computes the same thing with it;
user-edited mappings are checked, with one line naming the key at fault."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.mapping import (
    BUILTIN_LAYOUTS,
    apply_mapping,
    builtin_mapping,
    parse_mapping,
    read_mapping,
)
from minitx.core.model.transformer import Seq2Seq
from tests.reference_models import toy

SHAPE = toy.Shape(d_model=16, heads=2, d_ff=24, encoder_layers=2, decoder_layers=3)
LAYERS = {toy.TUTORIAL: (2, 3), toy.ANNOTATED: (2, 2)}  # the Annotated Transformer has one N
MAX_LEN = 12


def untrained(layout: str) -> torch.nn.Module:
    encoder, decoder = LAYERS[layout]
    torch.manual_seed(1)
    shape = toy.Shape(SHAPE.d_model, SHAPE.heads, SHAPE.d_ff, encoder, decoder)
    return toy.build(layout, shape, src_size=11, tgt_size=13).eval()  # vocabularies of two sizes


def mapped(layout: str, state=None):
    state = untrained(layout).state_dict() if state is None else state
    return apply_mapping(builtin_mapping(layout), state, sizes={"max_len": MAX_LEN})


@pytest.mark.parametrize("layout", list(BUILTIN_LAYOUTS))
def test_a_built_in_mapping_takes_every_key_of_its_layout_and_gives_minitxs_names(layout):
    result = mapped(layout)
    assert result.missing == [] and result.unexpected == []
    encoder, decoder = LAYERS[layout]
    assert result.layers == {"encoder": encoder, "decoder": decoder}  # counted from the file's keys
    # A pre-norm minitx model has exactly these tensors (its final norms included); the two
    # vocabulary sizes are what the separate source vocabulary of the design will allow.
    cfg = ModelConfig(vocab_size=13, d_model=SHAPE.d_model, n_heads=SHAPE.heads, d_ff=SHAPE.d_ff,
                      n_encoder_layers=encoder, n_decoder_layers=decoder, max_len=MAX_LEN, norm="pre",
                      activation="relu")
    with torch.device("meta"):
        expected = {k: tuple(t.shape) for k, t in Seq2Seq(cfg).state_dict().items()}
    expected["src_embed.weight"] = (11, SHAPE.d_model)
    assert {k: tuple(t.shape) for k, t in result.tensors.items()} == expected


def attend(tensors: dict, block: str, query: torch.Tensor, memory: torch.Tensor, heads: int) -> torch.Tensor:
    """Multi-head attention by hand from minitx-named tensors: query (B, Tq, d), memory (B, Tk, d)."""
    def project(name, x):  # (B, T, d) -> (B, h, T, k)
        y = F.linear(x, tensors[f"{block}.{name}.weight"], tensors[f"{block}.{name}.bias"])
        return y.unflatten(-1, (heads, -1)).transpose(1, 2)

    q, k, v = project("q_proj", query), project("k_proj", memory), project("v_proj", memory)
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)  # (B, h, Tq, Tk)
    merged = (weights @ v).transpose(1, 2).flatten(2)  # (B, Tq, d)
    return F.linear(merged, tensors[f"{block}.out_proj.weight"], tensors[f"{block}.out_proj.bias"])


@torch.no_grad()
def test_the_thirds_of_nn_multihead_attentions_in_proj_become_queries_keys_and_values():
    model = untrained(toy.TUTORIAL)
    tensors = mapped(toy.TUTORIAL, model.state_dict()).tensors
    query, memory = torch.randn(2, 3, SHAPE.d_model), torch.randn(2, 5, SHAPE.d_model)
    block = model.transformer.decoder.layers[1].multihead_attn  # cross-attention of layer 1
    theirs = block(query.transpose(0, 1), memory.transpose(0, 1), memory.transpose(0, 1),
                   need_weights=False)[0].transpose(0, 1)  # the module is sequence-first
    mine = attend(tensors, "decoder.1.cross_attn", query, memory, SHAPE.heads)
    assert torch.allclose(mine, theirs, atol=1e-6)


@torch.no_grad()
def test_the_annotated_transformers_four_linears_become_queries_keys_values_and_output():
    model = untrained(toy.ANNOTATED)
    tensors = mapped(toy.ANNOTATED, model.state_dict()).tensors
    query, memory = torch.randn(2, 3, SHAPE.d_model), torch.randn(2, 5, SHAPE.d_model)
    theirs = model.decoder.layers[1].src_attn(query, memory, memory)
    assert torch.allclose(attend(tensors, "decoder.1.cross_attn", query, memory, SHAPE.heads), theirs,
                          atol=1e-6)


@pytest.mark.parametrize("layout, key", [(toy.TUTORIAL, "positional_encoding.pos_embedding"),
                                         (toy.ANNOTATED, "src_embed.1.pe")])
def test_the_positional_buffer_becomes_a_table_of_max_len_rows(layout, key):
    state = untrained(layout).state_dict()
    table = mapped(layout, state).tensors["positional"]
    assert table.shape == (MAX_LEN, SHAPE.d_model)
    assert torch.equal(table, state[key].reshape(5000, SHAPE.d_model)[:MAX_LEN])


def test_a_key_nothing_takes_is_unexpected_and_a_key_the_mapping_needs_is_missing():
    state = untrained(toy.TUTORIAL).state_dict()
    state["extra.scale"] = torch.ones(1)
    del state["generator.bias"]
    result = mapped(toy.TUTORIAL, state)
    assert result.unexpected == ["extra.scale"]
    assert result.missing == [("output.bias", "generator.bias")]
    with pytest.raises(ImportFileError, match=r"^model\.pt has no tensor 'generator\.bias', which minitx's "
                                              r"'output\.bias' is read from$"):
        result.require_complete("model.pt")
    del state["generator.weight"]
    state["generator.bias"] = torch.zeros(13)
    result = mapped(toy.TUTORIAL, state)
    with pytest.raises(ImportFileError, match=r"has no tensor 'generator\.weight'"):
        result.require_complete("model.pt")
    result.missing.clear()
    with pytest.raises(ImportFileError, match=r"has tensor 'extra\.scale', which the mapping does not take"):
        result.require_complete("model.pt")


def test_a_prefix_and_ignore_patterns_account_for_what_dataparallel_and_buffers_add():
    state = {f"module.{k}": t for k, t in untrained(toy.ANNOTATED).state_dict().items()}
    state["module.encoder.layers.0.bn.num_batches_tracked"] = torch.tensor(3)
    data = builtin_mapping(toy.ANNOTATED).to_dict()
    data["prefix"] = "module."
    data["ignore"] = ["*.num_batches_tracked"]
    result = apply_mapping(parse_mapping(data), state, sizes={"max_len": MAX_LEN})
    assert result.missing == [] and result.unexpected == []
    assert torch.equal(result.tensors["output.weight"], state["module.generator.proj.weight"])


def test_a_same_as_copy_that_differs_from_its_original_is_refused_naming_both():
    state = untrained(toy.ANNOTATED).state_dict()
    state["tgt_embed.1.pe"] = state["tgt_embed.1.pe"] + 1.0
    with pytest.raises(ImportFileError, match=r"'tgt_embed\.1\.pe' differs from 'src_embed\.1\.pe'"):
        mapped(toy.ANNOTATED, state)


def test_an_op_that_does_not_fit_its_tensor_names_the_key_and_the_shape():
    state = untrained(toy.TUTORIAL).state_dict()
    state["transformer.encoder.layers.1.self_attn.in_proj_bias"] = torch.zeros(47)
    with pytest.raises(ImportFileError) as caught:
        apply_mapping(builtin_mapping(toy.TUTORIAL), state, sizes={"max_len": MAX_LEN}, source="m.pt")
    assert str(caught.value) == ("m.pt: 'transformer.encoder.layers.1.self_attn.in_proj_bias' (for "
                                 "'encoder.1.self_attn.q_proj.bias'): chunk [0, 3] needs a first axis "
                                 "divisible by 3; the shape is (47,)")


def test_rows_beyond_the_buffer_or_without_a_max_len_are_refused():
    state = untrained(toy.TUTORIAL).state_dict()
    with pytest.raises(ImportFileError, match=r"rows 'max_len' needs at least 6000 rows; the shape is "
                                              r"\(5000, 16\)"):
        apply_mapping(builtin_mapping(toy.TUTORIAL), state, sizes={"max_len": 6000})
    with pytest.raises(ImportFileError, match="needs a value for 'max_len'"):
        apply_mapping(builtin_mapping(toy.TUTORIAL), state)


def test_transpose_and_reshape_turn_a_weight_stored_in_by_out_into_torchs_layout():
    stored = torch.arange(12.0).reshape(3, 4)  # (in, out), as Conv1D-style layers keep it
    mapping = parse_mapping({"format": "minitx-import-mapping", "version": 1, "tensors": {
        "output.weight": {"from": "head.w", "ops": [{"transpose": [0, 1]}]},
        "output.bias": {"from": "head.b", "ops": [{"reshape": [-1]}]}}})
    result = apply_mapping(mapping, {"head.w": stored, "head.b": torch.zeros(1, 4)})
    assert torch.equal(result.tensors["output.weight"], stored.T)
    assert result.tensors["output.weight"].is_contiguous()
    assert result.tensors["output.bias"].shape == (4,)


def test_two_entries_that_give_one_name_are_refused():
    mapping = parse_mapping({"format": "minitx-import-mapping", "version": 1, "tensors": {
        "encoder.{i}.ff.0.bias": "enc.{i}.b", "encoder.0.ff.0.bias": "other.b"}})
    with pytest.raises(ImportFileError, match="gives 'encoder.0.ff.0.bias' twice"):
        apply_mapping(mapping, {"enc.0.b": torch.zeros(2), "other.b": torch.zeros(2)})


def test_the_printed_mapping_reads_back_and_an_edited_copy_maps_a_renamed_model(tmp_path):
    printed = builtin_mapping(toy.TUTORIAL).to_json()
    path = tmp_path / "mapping.json"
    path.write_text(printed.replace('"generator.', '"head.'), encoding="utf-8")  # the user's own name
    assert read_mapping(path) != builtin_mapping(toy.TUTORIAL)
    state = {k.replace("generator.", "head."): t for k, t in untrained(toy.TUTORIAL).state_dict().items()}
    result = apply_mapping(read_mapping(path), state, sizes={"max_len": MAX_LEN})
    assert result.missing == [] and result.unexpected == []
    assert torch.equal(result.tensors["output.weight"], state["head.weight"])
    untouched = tmp_path / "as-printed.json"
    untouched.write_text(printed, encoding="utf-8")
    assert read_mapping(untouched) == builtin_mapping(toy.TUTORIAL)


def base() -> dict:
    return {"format": "minitx-import-mapping", "version": 1,
            "tensors": {"output.weight": "generator.weight",
                        "encoder.{i}.ff.0.weight": {"from": "enc.{i}.w", "ops": [{"chunk": [0, 2]}]}}}


def changed(**fields) -> dict:
    data = copy.deepcopy(base())
    for name, value in fields.items():
        if name == "entry":
            data["tensors"]["encoder.{i}.ff.0.weight"] = value
        elif name == "new_entry":
            data["tensors"].update(value)
        elif value is None:
            del data[name]
        else:
            data[name] = value
    return data


# case -> (mapping data, what the message says)
BAD_MAPPINGS = {
    "not an object": ([1, 2], "a mapping is a JSON object, not a list"),
    "unknown field": (changed(tensor={}), "unknown field 'tensor'"),
    "no format": (changed(format=None), "'format' must be 'minitx-import-mapping'"),
    "other version": (changed(version=2), "reads mapping version 1, not 2"),
    "no tensors": (changed(tensors={}), "'tensors' must be an object"),
    "entry a number": (changed(entry=3), "tensors['encoder.{i}.ff.0.weight'] must be a file key"),
    "entry field": (changed(entry={"form": "enc.{i}.w"}), "tensors['encoder.{i}.ff.0.weight']: unknown "
                                                           "field 'form'"),
    "layer on one side": (changed(entry="enc.0.w"),
                          "tensors['encoder.{i}.ff.0.weight']: {i} must stand once"),
    "layer outside a stack": (changed(new_entry={"output.{i}.weight": "g.{i}.w"}),
                              "tensors['output.{i}.weight']: a per-layer name starts with encoder.{i}."),
    "unknown op": (changed(entry={"from": "enc.{i}.w", "ops": [{"slice": [0, 2]}]}),
                   "tensors['encoder.{i}.ff.0.weight'] op 1: unknown op 'slice'"),
    "chunk index": (changed(entry={"from": "enc.{i}.w", "ops": [{"chunk": [3, 3]}]}),
                    "op 1: chunk takes [index, count] with 0 <= index < count, got [3, 3]"),
    "squeeze text": (changed(entry={"from": "enc.{i}.w", "ops": [{"squeeze": "1"}]}),
                     "op 1: squeeze takes an axis number, got \"1\""),
    "rows name": (changed(entry={"from": "enc.{i}.w", "ops": [{"rows": "max_length"}]}),
                  "op 1: rows takes a number of rows or one of 'max_len'"),
    "reshape two -1": (changed(entry={"from": "enc.{i}.w", "ops": [{"reshape": [2, -1, -1]}]}),
                       "op 1: reshape takes a list of sizes"),
    "two ops in one": (changed(entry={"from": "enc.{i}.w", "ops": [{"squeeze": 0, "rows": 3}]}),
                       "op 1 is not an op such as"),
    "same_as itself": (changed(same_as={"a.pe": "a.pe"}), "same_as['a.pe'] must name another file key"),
    "ignore text": (changed(ignore="*.bias"), "'ignore' must be a list"),
}


@pytest.mark.parametrize("case", list(BAD_MAPPINGS))
def test_each_invalid_mapping_gets_one_line_naming_the_file_and_the_key(case, tmp_path):
    data, expected = BAD_MAPPINGS[case]
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ImportFileError) as caught:
        read_mapping(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_bad_json_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "mapping.json"
    path.write_text('{\n  "format": "minitx-import-mapping",\n  "version": 1,,\n}\n', encoding="utf-8")
    with pytest.raises(ImportFileError, match=r"mapping\.json line 3 column 16: .*\(not valid JSON\)$"):
        read_mapping(path)


def test_a_missing_mapping_file_a_folder_and_an_unknown_layout_are_refused(tmp_path):
    with pytest.raises(ImportFileError, match="no such file"):
        read_mapping(tmp_path / "nope.json")
    with pytest.raises(ImportFileError, match="is a folder"):
        read_mapping(tmp_path)
    with pytest.raises(ImportFileError, match="unknown layout 'fairseq'; minitx knows nn-transformer, annot"):
        builtin_mapping("fairseq")
