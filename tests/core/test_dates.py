"""The `dates` task: human-written dates -> ISO, each example knowing where its fields are."""

import datetime

import pytest
import torch

from minitx.core.data import dates
from minitx.core.data.tasks import get_task

DAY = datetime.date(2026, 12, 1)  # a Tuesday


@pytest.mark.parametrize("fmt, case, source", [
    ("{WD}, {d} {MONTH} {yyyy}", "as written", "Tuesday, 1 December 2026"),
    ("{d} {mon} {yy}", "lower", "1 dec 26"),
    ("{mm}/{dd}/{yyyy}", "as written", "12/01/2026"),
    ("{MONTH} {dth}, {yyyy}", "upper", "DECEMBER 1ST, 2026"),
    ("the {dth} of {MONTH}, {yyyy}", "as written", "the 1st of December, 2026"),
    ("{d}.{m}.{yy}", "as written", "1.12.26"),
])
def test_formats_render_the_date_and_its_iso_target(fmt, case, source):
    example = dates.render(DAY, fmt, case)
    assert example.source == source and example.target == "2026-12-01"


def test_every_field_span_holds_that_field_in_every_format():
    day = datetime.date(1987, 3, 23)
    for fmt in dates.FORMATS:
        example = dates.render(day, fmt)
        text = {f: example.source[a:b] for f, (a, b) in example.spans.items()}
        assert text["year"] in ("1987", "87"), fmt
        assert text["month"] in ("March", "Mar", "3", "03"), fmt
        assert text["day"] in ("23", "23rd"), fmt


def test_two_digit_years_and_the_date_range_are_unambiguous():
    assert dates.render(datetime.date(1950, 1, 2), "{d} {mon} {yy}").source == "2 Jan 50"
    assert dates.render(datetime.date(2049, 12, 31), "{d} {mon} {yy}").source == "31 Dec 49"
    g = torch.Generator().manual_seed(0)
    years = {int(e.target[:4]) for e in dates.sample(2000, g)}
    assert min(years) >= 1950 and max(years) <= 2049


def test_samples_are_reproducible_and_cover_the_formats_and_cases():
    a = dates.sample(500, torch.Generator().manual_seed(4))
    b = dates.sample(500, torch.Generator().manual_seed(4))
    assert a == b
    assert any(e.source.isupper() for e in a) and any(e.source.islower() for e in a)
    assert len({len(e.source) for e in a}) > 10


def test_the_vocabulary_reads_every_generated_character_and_nothing_is_unknown():
    task = get_task("dates")
    batch = task.batch(2000, torch.Generator().manual_seed(1))
    assert not (batch.src == task.vocab.unk).any() and task.vocab.level == "char"
    assert task.min_len == 6 and task.max_len == 29  # "1.2.26" and "Wednesday, 30 September 2026"


def test_each_output_characters_expected_alignment_is_its_fields_source_span():
    task = get_task("dates")
    example = dates.render(DAY, "{WD}, {d} {MONTH} {yyyy}")
    batch = dates.batch_of([example], task.vocab)
    expected = task.expected_alignment(batch)[0]  # (11, S)
    rows = ["".join(example.source[j] for j in row.nonzero().flatten().tolist()) for row in expected]
    assert rows == ["2026"] * 4 + [""] + ["December"] * 2 + [""] + ["1"] * 2 + [""]  # '-', EOS: none
    assert batch.labels[0].tolist()[:10] == task.vocab.encode("2026-12-01")[0]


def test_typed_text_has_no_known_date_and_decoding_is_capped_at_the_iso_length():
    task = get_task("dates")
    assert task.expected_output(task.parse("1 dec 26")) is None
    assert task.decode_cap(25, 64) == 12
