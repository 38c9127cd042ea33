"""A Hugging Face folder's own tokeniser in minitx (core/data/subword.py, core/importing/
hf_tokenisers.py) against transformers' tokeniser of the same folder: the same ids on both
sides, the same decoded text, readable labels, and a file of pairs read as transformers trains."""

from __future__ import annotations

import random
import unicodedata

import pytest
import torch

from minitx.core.data import pair_ids
from minitx.core.data.pair_task import PairSet
from minitx.core.data.subword import WORD_START, SubwordVocab
from minitx.core.data.vocab import MAX_INPUT_CHARS, TaskInputError, visible_char
from minitx.core.importing.hf_tokenisers import read_tokenisers
from tests.huggingface.conftest import reference_tokeniser
from tests.huggingface.tiny_tokenisers import CORPUS

SENTENCES = [
    "Zoë hat 12 Äpfel.",
    "On Friday, François drives to Genève at 7:45!",
    "  Repeated   spaces,\ta tab and\na newline  ",
    "Ça coûte 3,50 € — ist das „günstig“? (ja)",
    "Never seen: 中文, ☃, 🙂 and Łódź.",
    "naïve façade ÆØÅ ß 1984 0.5 %",
    "</s> and <unk> and <pad> typed as text",
    ">>de<< a leading language code",
    "Hello <mask> world",
    "<extra_id_3> is a T5 sentinel",
    "a",
    "x" * 120,
]


@pytest.fixture
def vocabs(tiny) -> tuple[SubwordVocab, SubwordVocab]:
    return read_tokenisers(tiny.path, tiny.config)


def test_source_ids_are_what_transformers_tokeniser_gives(tiny, vocabs):
    source, _ = vocabs
    for text in SENTENCES:
        assert source.encode_text(text) == tiny.reference(text)["input_ids"], text


def test_target_ids_are_the_labels_transformers_trains_on(tiny, vocabs):
    _, target = vocabs
    for text in SENTENCES:
        labels = tiny.reference(text_target=text)["input_ids"]
        assert target.encode_text(text) == labels, text
        assert target.row_ids([text])[0] + [target.eos] == labels  # a row is the labels less their end


def test_marian_cuts_sources_with_source_spm_and_targets_with_target_spm(tiny_folders):
    marian = tiny_folders["marian"]
    source, target = read_tokenisers(marian.path, marian.config)
    differing = [t for t in SENTENCES + [de for _, de in CORPUS[:50]]
                 if source.encode_text(t) != target.encode_text(t)]
    assert len(differing) > 10  # the two models cut differently, so the ids above prove the side
    assert source.side == "source" and target.side == "target"


def test_decoded_text_is_transformers_decode_skipping_special_tokens(tiny, vocabs):
    source, target = vocabs
    rng = random.Random(0)
    sequences = [source.encode_text(t) for t in SENTENCES] + [target.encode_text(t) for t in SENTENCES]
    sequences += [[rng.randrange(target.size) for _ in range(rng.randint(1, 30))] for _ in range(40)]
    for ids in sequences:
        expected = tiny.reference.decode(ids, skip_special_tokens=True)
        assert target.text(ids) == expected, ids
        assert target.join(target.decode(ids + [target.eos], strip_special=True)) == (
            tiny.reference.decode(ids[: ids.index(target.eos)] if target.eos in ids else ids,
                                  skip_special_tokens=True)), ids


def test_ids_beyond_the_tokeniser_decode_to_nothing_as_in_transformers(tiny):
    """T5's embedding has more rows than its tokeniser has pieces: those ids have no text."""
    config = {**tiny.config, "vocab_size": tiny.info.vocab_size + 8}
    _, target = read_tokenisers(tiny.path, config)
    assert target.size == tiny.info.vocab_size + 8
    ids = target.encode_text("Zoë hat 12 Äpfel.")
    beyond = [ids[0], tiny.info.vocab_size + 3, *ids[1:], tiny.info.vocab_size + 7]
    assert target.text(beyond) == target.text(ids) == "Zoë hat 12 Äpfel."
    assert target.label(tiny.info.vocab_size + 3) == f"?{tiny.info.vocab_size + 3}"
    assert tiny.info.vocab_size + 3 not in target.real_ids()


def test_the_special_ids_are_the_families_and_the_start_token_may_share_one(tiny, vocabs):
    source, target = vocabs
    info = tiny.info
    assert (target.pad, target.eos, target.unk) == (info.pad, info.eos, info.unk)
    assert target.sos == info.decoder_start
    assert target.pad == tiny.reference.pad_token_id and target.eos == tiny.reference.eos_token_id
    assert len(target.specials) == len(set(target.specials))  # a shared id is listed once
    assert not set(target.specials) & set(target.real_ids())
    assert source.size == target.size == len(tiny.reference)


def test_decode_skips_a_leading_start_token_even_when_it_is_the_end_token(tiny_folders):
    bart = tiny_folders["bart"]
    _, target = read_tokenisers(bart.path, bart.config)
    labels = target.encode_text("Zoë hat 12 Äpfel.")  # <s> … </s>
    fed = [target.sos, *labels, target.pad, target.pad]  # BART's decoder starts from </s>
    assert target.sos == target.eos
    assert target.join(target.decode(fed)) == "Zoë hat 12 Äpfel."
    assert target.join(target.decode(labels)) == target.text(fed) == "Zoë hat 12 Äpfel."


def test_labels_are_one_line_of_one_cell_characters_with_a_quiet_word_start(tiny, vocabs):
    _, target = vocabs
    pieces = target.tokens
    for i in range(target.size):
        label = target.label(i)
        assert label, i
        for c in label:
            category = unicodedata.category(c)
            assert category[0] not in "CZ" and category not in ("Mn", "Me"), (i, label)
            assert unicodedata.east_asian_width(c) not in "WF", (i, label)
        assert "▁" not in label and ("Ġ" not in label or "Ġ" in tiny.reference.decode([i])), (i, label)
    word_starts = [i for i in target.real_ids() if pieces[i][0] in "▁Ġ"]
    assert len(word_starts) > 20
    assert all(target.label(i).startswith(WORD_START) for i in word_starts)
    for i in (target.pad, target.eos, target.unk):
        assert target.label(i) == pieces[i]  # specials as they are spelled


def test_byte_level_pieces_show_their_text_and_split_characters_their_bytes(tiny_folders):
    bart = tiny_folders["bart"]
    reference = bart.reference
    _, target = read_tokenisers(bart.path, bart.config)
    whole = split = 0
    for i in target.real_ids():
        text = reference.convert_tokens_to_string([target.tokens[i]])
        label = target.label(i)
        if "\ufffd" in text:  # the piece holds part of a UTF-8 character
            assert "\\x" in label and "Ã" not in label, (i, label)
            split += 1
        elif text.isprintable():
            assert label == text.replace(" ", WORD_START), (i, label, text)
            whole += 1
    assert whole > 100 and split > 20
    # Side by side (a grid's columns, a beam's header) a character shows whole on the piece where
    # it starts, and the pieces holding the rest of it say +it: never "ZoÃ«", never \xNN
    text = "Zoë fährt nach Genève, Łódź und 中文 😀."
    labels = target.labels(target.row_ids([text])[0][1:])
    assert not any("Ã" in label or "\\x" in label for label in labels), labels
    continued = [label for label in labels if label.startswith("+")]
    assert "+\\U0001f600" in continued and len(continued) >= 5  # the emoji alone is four bytes
    whole = "".join(label for label in labels if not label.startswith("+"))
    assert whole == "".join(WORD_START if c == " " else visible_char(c) for c in text)  # nothing lost


def test_typed_text_is_refused_in_one_sentence_when_empty_too_long_or_over_the_limit(vocabs):
    source, target = vocabs
    for vocab, side in ((source, "source"), (target, "target")):
        too_long = "is 2,001 characters long; that is far too long"
        for text, message in (("", "is empty"), ("   ", "is empty"), ("a" * (MAX_INPUT_CHARS + 1), too_long)):
            with pytest.raises(TaskInputError, match=f"the {side} {message}"):
                vocab.encode_text(text)
        with pytest.raises(TaskInputError, match="this model takes at most 3") as e:
            vocab.encode_text("Zoë hat 12 Äpfel.", max_len=3)
        assert "\n" not in str(e.value)


def test_a_file_of_pairs_reads_sources_as_typed_and_targets_as_labels_with_unknown_pieces_counted(
        tiny, vocabs, tmp_path):
    source, target = vocabs
    pairs = CORPUS[:30] + [("Never seen: 中文 ☃", "Nie gesehen: 中文 ☃ 🙂"), ("Łódź", "Ça va")]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    loaded = pair_ids.load(path, "subword", target, source)
    data, reference = loaded.data, tiny.reference
    unknown = 0
    for n, (s, t) in enumerate(pairs):
        ids, labels = reference(s)["input_ids"], reference(text_target=t)["input_ids"]
        assert data.source.row(n) == ids and data.target.row(n) == labels[:-1]
        unknown += ids.count(target.unk) + labels.count(target.unk)
    assert loaded.unknown == unknown and (unknown > 0) == (tiny.family != "bart")  # byte-level has none
    batch = PairSet.whole(data).batch(torch.arange(len(pairs)), target, source)
    for n, (_, t) in enumerate(pairs):  # the decoder is fed the labels shifted right, as transformers does
        labels = reference(text_target=t)["input_ids"]
        assert batch.labels[n, : len(labels)].tolist() == labels
        assert batch.decoder_input[n, : len(labels)].tolist() == [tiny.info.decoder_start] + labels[:-1]


def test_a_folder_written_by_transformers_reads_the_same_after_its_tokeniser_is_loaded_again(tiny, tmp_path):
    """save_pretrained of the loaded reference (transformers 5 writing its own files) reads alike."""
    tiny.reference.save_pretrained(str(tmp_path))
    again = reference_tokeniser(tmp_path)
    source, target = read_tokenisers(tmp_path, tiny.config)
    for text in SENTENCES:
        assert source.encode_text(text) == again(text)["input_ids"]
        assert target.encode_text(text) == again(text_target=text)["input_ids"]
