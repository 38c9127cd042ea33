"""A typed or pasted source either parses to digit ids within the model's length or gives a
one-line TaskInputError: never another exception, never a multi-line message."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS, TaskInputError

MAX_LEN = 6


@pytest.fixture(params=["reverse", "copy", "sort"])
def task(request):
    return get_task(request.param, 2, MAX_LEN)


def refusal(task, text: str, max_len: int | None = MAX_LEN) -> str:
    with pytest.raises(TaskInputError) as info:
        task.parse(text, max_len=max_len)
    message = str(info.value)
    assert message and "\n" not in message and "\r" not in message
    assert len(message) < 200, "the message repeats too much of the input"
    return message


@pytest.mark.parametrize("text", ["3 1 x", "abc", "3,1,4", "1.5", "-3", "3 1 4 1 5 !", "0x1F",
                                  "3\x001", "१२३", "٣ ١", "３ １", "½", "\u200b", "3\u200b1"])
def test_non_digits_are_refused(task, text):
    assert "digits 0-9" in refusal(task, text)


@pytest.mark.parametrize("token", [t for t in DIGITS.tokens if not t.isdigit()])
def test_special_token_names_are_refused_as_special_tokens(task, token):
    assert "special token" in refusal(task, f"3 {token} 1")
    refusal(task, token)  # alone: still refused
    refusal(task, f"3{token}1")


@pytest.mark.parametrize("text", ["", " ", "\t\n", "\u3000\u2003", "\r\n\r\n"])
def test_whitespace_only_is_refused_as_empty(task, text):
    assert "empty" in refusal(task, text)


@pytest.mark.parametrize("text", ["😀", "3 😀 1", "ü", "\ud800", "\U0010ffff", "𝟑 𝟏"])
def test_unicode_is_refused(task, text):
    refusal(task, text)


def test_ten_thousand_pasted_characters_are_refused_quickly(task):
    import time

    for text in ("7" * 10_000, "3 " * 5_000, "x" * 10_000, "\n".join(["1"] * 5_000)):
        start = time.perf_counter()
        message = refusal(task, text)
        assert time.perf_counter() - start < 0.1
        assert "too long" in message


@pytest.mark.parametrize("n", [MAX_LEN + 1, MAX_LEN + 5, 100])
def test_lengths_beyond_max_len_are_refused_with_the_limit(task, n):
    message = refusal(task, " ".join("5" * n))
    assert str(MAX_LEN) in message and str(n) in message


def test_the_task_length_is_the_limit_when_none_is_given(task):
    refusal(task, "1" * (MAX_LEN + 1), max_len=None)


@pytest.mark.parametrize("text,ids", [("3 1 4 1 5", [3, 1, 4, 1, 5]), ("31415", [3, 1, 4, 1, 5]),
                                      ("  0 9\t", [0, 9]), ("7", [7]), ("1 2 3 4 5 6", [1, 2, 3, 4, 5, 6])])
def test_valid_sources_parse(task, text, ids):
    """The control: the same function accepts good input."""
    assert task.parse(text, max_len=MAX_LEN) == ids


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40) | st.text(alphabet="0123456789 <>eospad\t", max_size=20))
def test_any_text_parses_to_digit_ids_or_is_refused_in_one_line(text):
    task = get_task("reverse", 2, MAX_LEN)
    try:
        ids = task.parse(text, max_len=MAX_LEN)
    except TaskInputError as e:
        assert str(e) and "\n" not in str(e) and "\r" not in str(e)
    else:
        assert 1 <= len(ids) <= MAX_LEN
        assert all(isinstance(i, int) and 0 <= i <= 9 for i in ids)
        assert "".join(map(str, ids)) == "".join(text.split())
