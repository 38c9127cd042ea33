import pytest
import torch

from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS, TaskInputError

PAD, SOS, EOS = DIGITS.pad, DIGITS.sos, DIGITS.eos


def test_reverse_target_is_sos_reversed_source_eos():
    task = get_task("reverse")
    batch = task.batch_from_sources(torch.tensor([[3, 1, 4, 1, 5]]), torch.tensor([5]))
    assert batch.tgt[0].tolist() == [SOS, 5, 1, 4, 1, 3, EOS]


def test_batches_are_right_padded_and_lengths_in_range():
    task = get_task("reverse", 4, 10)
    batch = task.batch(256, torch.Generator().manual_seed(0))
    assert batch.src.shape == (256, 10) and batch.tgt.shape == (256, 12)
    assert batch.lengths.min() >= 4 and batch.lengths.max() <= 10
    assert set(batch.lengths.tolist()) == set(range(4, 11))  # uniform over the range
    for row, n in zip(batch.src, batch.lengths):
        assert (row[:n] < 10).all() and (row[n:] == PAD).all()
    for src, tgt, n in zip(batch.src, batch.tgt, batch.lengths):
        assert tgt[1 : n + 1].tolist() == src[:n].flip(0).tolist()
        assert tgt[n + 1] == EOS and (tgt[n + 2 :] == PAD).all()


def test_batches_are_reproducible_from_a_seed():
    task = get_task("sort")
    a = task.batch(32, torch.Generator().manual_seed(7))
    b = task.batch(32, torch.Generator().manual_seed(7))
    assert torch.equal(a.tgt, b.tgt)


@pytest.mark.parametrize("name, expected", [("copy", [3, 1, 4, 1, 5]), ("sort", [1, 1, 3, 4, 5]),
                                            ("reverse", [5, 1, 4, 1, 3])])
def test_each_task_transforms_the_source(name, expected):
    assert get_task(name).expected_output([3, 1, 4, 1, 5]) == expected


def test_reverse_alignment_is_the_anti_diagonal():
    task = get_task("reverse")
    align = task.alignment(torch.tensor([[3, 1, 4, PAD]]), torch.tensor([3]))[0]
    assert align.nonzero().tolist() == [[0, 2], [1, 1], [2, 0]]


def test_sort_alignment_accepts_any_equal_digit():
    task = get_task("sort")
    align = task.alignment(torch.tensor([[3, 1, 1]]), torch.tensor([3]))[0]
    assert align[0].tolist() == [False, True, True]  # output 0 is a 1: either source 1 will do
    assert align[2].tolist() == [True, False, False]


def test_the_digit_tasks_keep_the_reference_models_13_token_ids():
    for name in ("reverse", "copy", "sort"):
        vocab = get_task(name).vocab
        assert vocab.tokens[:10] == tuple("0123456789") and vocab.size == 13
        assert (vocab.pad, vocab.sos, vocab.eos, vocab.unk) == (10, 11, 12, None)


def test_parse_and_format_round_trip():
    task = get_task("reverse")
    assert task.parse("3 1 4 1 5") == [3, 1, 4, 1, 5]
    assert task.parse("  31415 ") == [3, 1, 4, 1, 5]
    assert task.format([3, 1, 4, 1, 5, EOS, PAD]) == "3 1 4 1 5"
    assert task.format(task.parse("9 0 0 7")) == "9 0 0 7"


@pytest.mark.parametrize(
    "text, message",
    [("", "empty"), ("   ", "empty"), ("3 x 4", "not a token"), ("3 <eos>", "special token"),
     ("1 2 3 4 5 6 7 8 9 0 1", "at most 10"), ("٣ ١", "not a token"), ("7" * 10_000, "too long")],
)
def test_parse_rejects_bad_sources_with_one_line(text, message):
    with pytest.raises(TaskInputError, match=message) as info:
        get_task("reverse").parse(text)
    assert "\n" not in str(info.value)


def test_length_power_zero_draws_the_uniform_stream_earlier_runs_drew():
    """Runs saved before length_power existed resume on exactly the batches they would have seen."""
    from minitx.core.data.batch import draw_lengths

    drawn = draw_lengths(500, 4, 10, torch.Generator().manual_seed(3))
    assert torch.equal(drawn, torch.randint(4, 11, (500,), generator=torch.Generator().manual_seed(3)))


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_length_power_draws_each_length_in_proportion_to_its_power(power):
    from minitx.core.data.batch import draw_lengths

    drawn = draw_lengths(70_000, 4, 10, torch.Generator().manual_seed(0), power)
    lengths = torch.arange(4, 11, dtype=torch.float64)
    expected = lengths**power / (lengths**power).sum()
    share = torch.bincount(drawn, minlength=11)[4:].double() / len(drawn)
    assert drawn.min() >= 4 and drawn.max() <= 10
    assert torch.allclose(share, expected, atol=0.006)
    assert share[-1] > share[0] * 2  # the longest sources come much more often than the shortest


def test_mixed_length_batches_follow_the_length_power():
    task = get_task("reverse", 4, 10)
    batch = task.batch(20_000, torch.Generator().manual_seed(1), length_power=2.0)
    assert (batch.lengths == 10).float().mean() > 3 * (batch.lengths == 4).float().mean()
    for i in range(50):  # and each example is still its source and the source reversed
        n = int(batch.lengths[i])
        assert torch.equal(batch.tgt[i, 1 : n + 1], batch.src[i, :n].flip(0))
