"""Vocabularies: tokenisation, unknown tokens, visible labels, and files' vocabularies checked."""

import pytest

from minitx.core.data.vocab import DIGITS, TaskInputError, UnknownTokens, Vocab, build_vocab


def chars(text: str) -> Vocab:
    return build_vocab({c: 1 for c in text}, "char")[0]


def test_a_built_vocabulary_puts_the_specials_first_and_the_tokens_in_unicode_order():
    vocab, left_out = build_vocab({"b": 3, "a": 1, " ": 2, "c": 0}, "char")
    assert vocab.tokens == ("<pad>", "<sos>", "<eos>", "<unk>", " ", "a", "b")
    assert (vocab.pad, vocab.sos, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert left_out == 1  # "c" never occurred in training: it reads as <unk>


def test_a_word_vocabulary_keeps_the_most_frequent_words_and_leaves_out_specials_and_long_words():
    counts = {"the": 9, "cat": 5, "sat": 1, "<pad>": 4, "x" * 65: 7}
    vocab, left_out = build_vocab(counts, "word", max_tokens=2)
    assert vocab.tokens[4:] == ("cat", "the") and left_out == 3


@pytest.mark.parametrize("level, text, tokens", [
    ("char", "  a b ", ["a", " ", "b"]),  # surrounding whitespace dropped, inner spaces kept
    ("word", " the  cat\tsat ", ["the", "cat", "sat"]),
    ("digits", "3 1 4", ["3", "1", "4"]),
    ("digits", "314", ["3", "1", "4"]),
])
def test_text_splits_into_tokens_by_level(level, text, tokens):
    vocab = DIGITS if level == "digits" else build_vocab({t: 1 for t in tokens}, level)[0]
    assert vocab.split(text) == tokens
    assert vocab.decode(vocab.encode(tokens)[0]) == tokens


def test_char_text_joins_back_and_words_join_with_spaces():
    assert chars("ab c").text([5, 4, 6, 2, 7]) == "a b"  # stops at EOS
    words = build_vocab({"hello": 1, "world": 1}, "word")[0]
    assert words.text(words.encode_text("hello world")) == "hello world"


def test_unknown_characters_are_named_in_one_line():
    with pytest.raises(UnknownTokens) as info:
        chars("abc").encode_text("abxyzx")
    assert info.value.tokens == ["x", "y", "z"]
    message = str(info.value)
    assert "'x', 'y', 'z'" in message and "unknown characters" in message and "\n" not in message


def test_unknown_tokens_read_as_unk_when_asked_and_are_counted():
    vocab = chars("abc")
    ids, unknown = vocab.encode(list("abzq"), unknown="unk")
    assert ids == [vocab.tokens.index("a"), vocab.tokens.index("b"), vocab.unk, vocab.unk]
    assert unknown == 2


def test_the_digits_vocabulary_has_no_unk_and_refuses_unknown_tokens_even_leniently():
    with pytest.raises(TaskInputError, match="not a token"):
        DIGITS.encode(["3", "x"], unknown="unk")
    with pytest.raises(TaskInputError, match="special token"):
        DIGITS.encode_text("3 <eos>")


@pytest.mark.parametrize("char, label", [
    (" ", "␣"), ("\t", "\\t"), ("\x07", "\\x07"), ("中", "\\u4e2d"), ("\u0301", "\\u0301"),
    ("\u200b", "\\u200b"), ("é", "é"), ("Ω", "Ω"),
])
def test_labels_show_space_and_escape_control_invisible_and_wide_characters(char, label):
    vocab = chars(char + "a")
    assert vocab.label(vocab.tokens.index(char)) == label


def test_specials_and_out_of_range_ids_have_labels_too():
    vocab = chars("a")
    assert vocab.labels([0, 1, 2, 3, 99]) == ["<pad>", "<sos>", "<eos>", "<unk>", "?99"]


def test_a_vocabulary_round_trips_through_its_dict_and_equal_means_the_same_ids():
    vocab = chars("hello world")
    again = Vocab.from_dict(vocab.to_dict())
    assert again == vocab and again.model_fields() == vocab.model_fields()
    assert Vocab.from_dict(DIGITS.to_dict()) == DIGITS
    assert chars("abd") != chars("abc")


@pytest.mark.parametrize("change, fragment", [
    ({"level": "bytes"}, "level"),
    ({"tokens": ["<pad>", "<sos>", "<eos>"]}, "4 to"),
    ({"pad": 99}, "pad id"),
    ({"sos": 0}, "same id"),
    ({"tokens": ["<pad>", "<sos>", "<eos>", "<unk>", "ab"]}, "not a valid char token"),
    ({"tokens": ["<pad>", "<sos>", "<eos>", "<unk>", "a", "a"]}, "twice"),
    ({"tokens": ["<p d>", "<sos>", "<eos>", "<unk>", "a"]}, "not a valid special"),
    ({"extra": 1}, "unknown field"),
])
def test_a_files_vocabulary_is_checked_with_one_line_errors(change, fragment):
    data = {**chars("a").to_dict(), **change}
    with pytest.raises(ValueError, match=fragment) as info:
        Vocab.from_dict(data)
    assert "\n" not in str(info.value)


def test_an_imported_vocabulary_keeps_its_special_spellings_and_may_have_no_unknown_token():
    data = {"level": "word", "tokens": ["<s>", "</s>", "<blank>", "3", "1"], "pad": 2, "sos": 0,
            "eos": 1, "unk": None}
    vocab = Vocab.from_dict(data)
    assert vocab.labels([0, 3, 1, 2]) == ["<s>", "3", "</s>", "<blank>"]
    assert vocab.encode_text("3 1 3") == [3, 4, 3]
    with pytest.raises(TaskInputError, match="unknown word"):
        vocab.encode_text("3 7")  # no <unk> to read it as: refused
    with pytest.raises(TaskInputError, match="<s> is a special token"):
        vocab.encode_text("<s> 3")
