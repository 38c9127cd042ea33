"""Pair files as the Hub's translation sets come: JSON lines of `{"translation": {"en": ..., "fr":
...}}` and parquet files (a `translation` column of language-keyed records, or two text columns),
their sides picked by the languages (--src-lang/--tgt-lang); and a CSV or TSV whose first row
names its columns (`en,de`) read as a header, never as a pair."""

from __future__ import annotations

import json

import pytest

from minitx.core.data.pair_files import Columns, DataError, read_text_pairs
from minitx.core.data.pair_ids import load

RECORDS = [{"en": "good morning", "fr": "bonjour"}, {"en": "thank you", "fr": "merci"}]


def pairs(path, source=None, target=None):
    return [(s, t) for _, s, t in read_text_pairs(path, columns=Columns(source, target))]


def translation_jsonl(path, records=RECORDS, key="translation"):
    lines = [json.dumps({"id": str(i), key: r} if key else r) for i, r in enumerate(records)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_translation_record_gives_the_sides_its_languages_name_either_way(tmp_path):
    path = translation_jsonl(tmp_path / "kde4.jsonl")
    assert pairs(path, "en", "fr") == [("good morning", "bonjour"), ("thank you", "merci")]
    assert pairs(path, "fr", "en") == [("bonjour", "good morning"), ("merci", "thank you")]


def test_language_keys_at_the_top_of_a_record_are_read_as_a_translation_records(tmp_path):
    path = translation_jsonl(tmp_path / "flat.jsonl", key=None)
    assert pairs(path, "fr", "en")[1] == ("merci", "thank you")


def test_a_model_code_picks_the_key_of_its_language(tmp_path):
    """mBART-50's en_XX, a region's en-GB and NLLB's eng_Latn name the record's "en"."""
    path = translation_jsonl(tmp_path / "kde4.jsonl")
    assert pairs(path, "en_XX", "fr_XX")[0] == ("good morning", "bonjour")
    assert pairs(path, "en-GB", "fr")[0] == ("good morning", "bonjour")
    assert pairs(path, "fra_Latn", "eng_Latn")[1] == ("merci", "thank you")  # NLLB's ISO 639-3 codes


def test_a_translation_record_without_languages_asks_for_them_naming_the_file_line_and_keys(tmp_path):
    path = translation_jsonl(tmp_path / "kde4.jsonl")
    with pytest.raises(DataError) as e:
        pairs(path)
    message = str(e.value)
    assert "kde4.jsonl, line 1" in message and "en, fr" in message and "--src-lang" in message
    assert "\n" not in message


def test_a_language_the_record_lacks_is_named_with_the_keys_it_has(tmp_path):
    path = translation_jsonl(tmp_path / "kde4.jsonl", [RECORDS[0], {"en": "yes", "de": "ja"}])
    with pytest.raises(DataError, match=r"kde4.jsonl, line 2, \"translation\": no 'fr' field for the target "
                                        r"\(the fields: en, de\)"):
        pairs(path, "en", "fr")


def test_a_side_that_is_no_string_is_named(tmp_path):
    path = translation_jsonl(tmp_path / "bad.jsonl", [{"en": "a", "fr": ["b"]}])
    with pytest.raises(DataError, match=r"line 1, \"translation\": \"fr\" \(the target\) is not a string"):
        pairs(path, "en", "fr")


def test_source_and_target_records_still_read_without_languages(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps({"source": "a b", "target": "b a"}) + "\n", encoding="utf-8")
    assert pairs(path) == [("a b", "b a")]


@pytest.mark.parametrize("name,sep", [("p.csv", ","), ("p.tsv", "\t")])
def test_a_header_of_language_codes_is_a_header_never_a_pair(tmp_path, name, sep):
    path = tmp_path / name
    path.write_text(sep.join(["en", "de"]) + "\n" + sep.join(["house", "Haus"]) + "\n", encoding="utf-8")
    assert pairs(path) == [("house", "Haus")]
    assert pairs(path, "de", "en") == [("Haus", "house")]  # the header names the columns


def test_a_csv_header_of_several_columns_gives_the_two_the_languages_name(tmp_path):
    path = tmp_path / "three.csv"
    path.write_text("id,fr,en\n1,maison,house\n2,chat,cat\n", encoding="utf-8")
    assert pairs(path, "en", "fr") == [("house", "maison"), ("cat", "chat")]
    with pytest.raises(DataError, match=r"three.csv, line 1: the header names 3 columns \(id, fr, en\)"):
        pairs(path)
    bad = tmp_path / "short.csv"
    bad.write_text("id,fr,en\n1,maison\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"short.csv, line 2: 2 columns; the header names 3"):
        pairs(bad, "en", "fr")


def test_a_header_without_the_language_asked_for_is_one_line(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("en,de\nhouse,Haus\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"p.csv, line 1 \(the header\): no 'fr' field for the target"):
        pairs(path, "en", "fr")


@pytest.mark.parametrize("first", [("good morning", "bonjour"), ("ab", "cde"), ("abz", "zba"), ("fr", "fr")])
def test_a_first_row_of_ordinary_text_stays_a_pair(tmp_path, first):
    """Short words that look like codes are no header: only known language codes (two different
    ones) or column names are."""
    path = tmp_path / "p.csv"
    path.write_text(",".join(first) + "\nthank you,merci\n", encoding="utf-8")
    assert pairs(path) == [first, ("thank you", "merci")]


pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_a_parquet_translation_column_reads_as_the_hub_stores_it(tmp_path):
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"id": ["0", "1"], "translation": RECORDS}), path)
    assert pairs(path, "en", "fr") == [("good morning", "bonjour"), ("thank you", "merci")]
    loaded = load(path, "word", columns=Columns("fr", "en"))
    assert len(loaded.data) == 2 and loaded.provenance.format == "parquet"
    assert loaded.data.lines.tolist() == [1, 2]  # rows, numbered as lines are


def test_parquet_text_columns_are_picked_by_name_or_language(tmp_path):
    path = tmp_path / "cols.parquet"
    pq.write_table(pa.table({"target": ["b a", "d c"], "source": ["a b", "c d"]}), path)
    assert pairs(path) == [("a b", "b a"), ("c d", "d c")]
    langs = tmp_path / "langs.parquet"
    pq.write_table(pa.table({"de": ["Haus"], "en": ["house"]}), langs)
    assert pairs(langs, "en", "de") == [("house", "Haus")]
    with pytest.raises(DataError, match=r"langs.parquet \(its columns\): no 'fr' field for the target"):
        pairs(langs, "en", "fr")


def test_a_parquet_side_that_is_no_text_names_its_row(tmp_path):
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"source": ["a", "b"], "target": ["x", None]}), path)
    with pytest.raises(DataError, match=r"nulls.parquet, row 2: \"target\" is not a string"):
        pairs(path)


def test_a_file_that_is_no_parquet_is_one_line(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match=r"broken.parquet: not a readable parquet file"):
        pairs(path)
