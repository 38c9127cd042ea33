"""Vocabulary files: one token per line, line number = id; their specials found by the usual
spellings or named; every problem one line naming the file and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.vocab_files import Specials, find_specials, parse_specials, read_vocab_file


def vocab_at(tmp_path: Path, content: str | bytes, name: str = "vocab.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def error_of(call, *args) -> str:
    with pytest.raises(ImportFileError) as caught:
        call(*args)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_each_layouts_vocabulary_file_reads_back_in_id_order_with_its_own_specials(tutorial_reverse,
                                                                                   tutorial_files,
                                                                                   annotated_reverse,
                                                                                   annotated_files):
    tutorial = read_vocab_file(tutorial_files.tgt_vocab)
    assert tutorial.tokens == tutorial_reverse.tgt_vocab
    assert find_specials(tutorial) == Specials(pad=1, bos=2, eos=3, unk=0)  # <unk> <pad> <bos> <eos>
    annotated = read_vocab_file(annotated_files.src_vocab)
    assert annotated.tokens == annotated_reverse.src_vocab
    assert find_specials(annotated) == Specials(pad=2, bos=0, eos=1, unk=3)  # <s> </s> <blank> <unk>


def test_windows_line_endings_a_byte_order_mark_and_no_final_newline_change_no_token(tmp_path):
    plain = read_vocab_file(vocab_at(tmp_path, "<pad>\n<s>\n</s>\na b\n", "plain.txt"))
    windows = read_vocab_file(vocab_at(tmp_path, "\ufeff<pad>\r\n<s>\r\n</s>\r\na b", "windows.txt"))
    assert plain.tokens == windows.tokens == ("<pad>", "<s>", "</s>", "a b")


def test_a_token_keeps_its_spaces_so_a_character_vocabulary_can_hold_the_space(tmp_path):
    vocab = read_vocab_file(vocab_at(tmp_path, "<pad>\n<s>\n</s>\n \nx \n"))
    assert vocab.tokens[3:] == (" ", "x ")


def test_an_empty_line_is_refused_naming_its_line_since_skipping_it_would_shift_every_id(tmp_path):
    path = vocab_at(tmp_path, "<pad>\n<s>\n\n</s>\n")
    message = error_of(read_vocab_file, path)
    assert f"{path} line 3 is empty" in message


def test_a_token_listed_twice_is_refused_naming_both_lines(tmp_path):
    path = vocab_at(tmp_path, "<pad>\na\n<s>\na\n")
    assert f"{path} line 4 repeats 'a' from line 2" in error_of(read_vocab_file, path)


def test_bytes_that_are_not_utf8_are_refused_naming_their_line(tmp_path):
    path = vocab_at(tmp_path, b"<pad>\n<s>\ncaf\xe9\n")
    assert f"{path} line 3: byte 0xe9 is not UTF-8" in error_of(read_vocab_file, path)


@pytest.mark.parametrize("content, expected", [("", "holds no tokens"), ("\n", "line 1 is empty")])
def test_a_file_without_tokens_is_refused(tmp_path, content, expected):
    assert expected in error_of(read_vocab_file, vocab_at(tmp_path, content))


def test_a_missing_file_and_a_folder_are_refused_by_name(tmp_path):
    assert f"no such file: {tmp_path / 'nope.txt'}" in error_of(read_vocab_file, tmp_path / "nope.txt")
    assert f"{tmp_path} is a folder" in error_of(read_vocab_file, tmp_path)


def test_explicit_specials_win_and_the_rest_are_found_by_their_usual_spellings(tmp_path):
    vocab = read_vocab_file(vocab_at(tmp_path, "[PAD]\n<s>\n</s>\n<unk>\nx\n"))
    assert find_specials(vocab, "pad=[PAD]") == Specials(pad=0, bos=1, eos=2, unk=3)
    assert find_specials(vocab, "pad=[PAD], eos=x") == Specials(pad=0, bos=1, eos=4, unk=3)


def test_no_end_token_among_the_specials_is_an_error_naming_the_file(tmp_path):
    path = vocab_at(tmp_path, "<pad>\n<s>\nx\n")
    message = error_of(find_specials, read_vocab_file(path))
    assert message.startswith(f"{path}: no end token among the specials")
    assert "eos=TOKEN" in message


def test_a_vocabulary_without_an_unknown_token_is_fine(tmp_path):
    vocab = read_vocab_file(vocab_at(tmp_path, "<blank>\n<bos>\n<eos>\nx\n"))
    assert find_specials(vocab) == Specials(pad=0, bos=1, eos=2, unk=None)


def test_two_usual_spellings_of_one_role_are_ambiguous_and_name_both_lines(tmp_path):
    path = vocab_at(tmp_path, "<pad>\n<blank>\n<s>\n</s>\n")
    message = error_of(find_specials, read_vocab_file(path))
    assert "'<pad>' (line 1) and '<blank>' (line 2)" in message and "pad=TOKEN" in message
    assert find_specials(read_vocab_file(path), "pad=<blank>").pad == 1  # naming it settles it


def test_a_named_special_that_the_file_lacks_is_an_error(tmp_path):
    path = vocab_at(tmp_path, "<pad>\n<s>\n</s>\n")
    assert f"{path}: eos='<end>' is not one of its tokens" in error_of(
        find_specials, read_vocab_file(path), "eos=<end>")


def test_two_roles_on_one_token_are_an_error(tmp_path):
    path = vocab_at(tmp_path, "<pad>\n<s>\n</s>\n")
    assert "bos and eos are both '<s>' (line 2)" in error_of(find_specials, read_vocab_file(path), "eos=<s>")


@pytest.mark.parametrize("text, expected", [
    ("pad<blank>", "'pad<blank>' is not ROLE=TOKEN"),
    ("end=</s>", "unknown role 'end'"),
    ("pad=", "'pad=' is not ROLE=TOKEN"),
    ("pad=a,pad=b", "pad is named twice"),
])
def test_a_malformed_list_of_specials_is_refused_saying_what_is_wrong(text, expected):
    assert expected in error_of(parse_specials, text)


def test_the_usual_roles_spelled_out_parse_to_their_tokens():
    assert parse_specials("pad=<blank>,bos=<s>,eos=</s>,unk=<unk>") == {
        "pad": "<blank>", "bos": "<s>", "eos": "</s>", "unk": "<unk>"}
    assert parse_specials("eos=a=b") == {"eos": "a=b"}  # everything after the first =
