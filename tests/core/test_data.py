"""Reading data files: every format round-trips at both tokenisations, and every bad file is one
DataError line naming the file and, where one is to blame, the line."""

import hashlib
import json

import pytest

from minitx.core.data import pair_files as files
from minitx.core.data.pair_files import DataError, read_text_pairs, sha256_of
from minitx.core.data.pair_ids import load

PAIRS = [("hello world", "world hello"), ("a, \"quoted\" b", "b a"), ("héllo 中文", "x  y")]


def write(tmp_path, name: str, text: str | bytes):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def as_tsv(pairs, header=True) -> str:
    return ("source\ttarget\n" if header else "") + "".join(f"{s}\t{t}\n" for s, t in pairs)


def as_csv(pairs) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["source", "target"])
    writer.writerows(pairs)
    return buffer.getvalue()


def as_jsonl(pairs) -> str:
    return "".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in pairs)


FORMATS = {"pairs.tsv": as_tsv, "pairs.csv": as_csv, "pairs.jsonl": as_jsonl}


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("level", ["char", "word"])
def test_every_format_round_trips_at_both_tokenisations(tmp_path, name, level):
    path = write(tmp_path, name, FORMATS[name](PAIRS))
    loaded = load(path, level)
    data = loaded.data
    assert len(data) == len(PAIRS) and data.lines.tolist()[0] == (1 if name.endswith("jsonl") else 2)
    split = list if level == "char" else str.split
    join = "".join if level == "char" else " ".join
    for i, (source, target) in enumerate(PAIRS):
        got_source = join(loaded.tokens[t] for t in data.source.row(i))
        got_target = join(loaded.tokens[t] for t in data.target.row(i))
        assert (got_source, got_target) == (join(split(source.strip())), join(split(target.strip())))
    assert loaded.provenance.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() == sha256_of(path)
    assert loaded.provenance.pairs == 3 and loaded.provenance.size == path.stat().st_size


def test_csv_fields_may_hold_commas_quotes_and_newlines(tmp_path):
    path = write(tmp_path, "q.csv", 'source,target\n"a, b","say ""hi"""\n"two\nlines",x\n')
    assert [(s, t) for _, s, t in read_text_pairs(path)] == [("a, b", 'say "hi"'), ("two\nlines", "x")]


def test_headers_blank_lines_a_byte_order_mark_and_crlf_are_taken_in_stride(tmp_path):
    path = write(tmp_path, "p.tsv", "\ufeffsource\ttarget\r\n\r\nab\tba\r\n  \n cd \t dc\n")
    assert [(n, s, t) for n, s, t in read_text_pairs(path)] == [(3, "ab", "ba"), (5, "cd", "dc")]


def test_chunked_reading_gives_the_ids_of_reading_at_once(tmp_path, monkeypatch):
    pairs = [(f"w{i % 7} x{i % 5}", f"y{i % 3}") for i in range(50)]
    path = write(tmp_path, "many.tsv", as_tsv(pairs))
    for level in ("char", "word"):
        whole = load(path, level)
        monkeypatch.setattr(files, "BLOCK", 64)  # TSV blocks of 64 bytes: lines cut across blocks
        chunked = load(path, level)
        monkeypatch.setattr(files, "BLOCK", 4 << 20)
        for side in ("source", "target"):  # provisional ids may differ: the tokens may not
            a, b = getattr(whole.data, side), getattr(chunked.data, side)
            assert [whole.tokens[i] for i in a.ids.tolist()] == [chunked.tokens[i] for i in b.ids.tolist()]
            assert a.offsets.tolist() == b.offsets.tolist()
        assert whole.data.lines.tolist() == chunked.data.lines.tolist()


def test_ids_are_stored_compactly(tmp_path):
    path = write(tmp_path, "p.tsv", as_tsv(PAIRS))
    assert load(path, "char").data.source.ids.element_size() == 2  # int16: a small vocabulary


BAD_FILES = [
    ("empty.tsv", b"", None, "is empty"),
    ("header_only.tsv", b"source\ttarget\n\n", None, "holds no pairs"),
    ("latin1.tsv", "ab\tba\ncaf\xe9\tx\n".encode("latin-1"), 2, "not UTF-8"),
    ("no_tab.tsv", b"ab\tba\njust text\n", 2, "no tab"),
    ("three_fields.tsv", b"a\tb\tc\n", 1, "3 tab-separated fields"),
    ("empty_source.tsv", b"ab\tba\n  \tx\n", 2, "source is empty"),
    ("empty_target.tsv", b"ab\t\n", 1, "target is empty"),
    ("bad.jsonl", b'{"source": "a", "target": "b"}\n{"source": "a",\n', 2, "not valid JSON"),
    ("list.jsonl", b'["a", "b"]\n', 1, "not a JSON object"),
    ("no_target.jsonl", b'{"source": "a"}\n', 1, 'no "target" field'),
    ("number.jsonl", b'{"source": "a", "target": 7}\n', 1, '"target" is not a string'),
    ("empty.jsonl", b'{"source": "", "target": "b"}\n', 1, "source is empty"),
    ("three.csv", b"source,target\na,b,c\n", 2, "3 columns"),
    ("quote.csv", b'a,b\n"open,x\n', 2, "1 column;"),
]


@pytest.mark.parametrize("name, content, line, fragment", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_every_bad_file_is_one_line_naming_the_file_and_line(tmp_path, name, content, line, fragment):
    path = write(tmp_path, name, content)
    with pytest.raises(DataError) as info:
        load(path, "char")
    message = str(info.value)
    assert fragment in message and str(path) in message and "\n" not in message
    if line is not None:
        assert f"line {line}:" in message


def test_a_missing_file_and_a_directory_are_named(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load(tmp_path / "nope.tsv", "char")
    with pytest.raises(DataError, match="is a directory"):
        load(tmp_path, "word")
