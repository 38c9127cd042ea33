"""A data file's task: hold-out, too-long pairs, vocabulary from training only, shuffled epochs
with length buckets, the checkpoint round trip, and resuming bit-exactly (or refusing to)."""

import json
import random

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from minitx.core.checkpoint import CheckpointError, load_checkpoint
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.pair_files import DataError
from minitx.core.data.pair_task import PairSampler, PairSet, PairsTask
from minitx.core.training.trainer import Trainer

TINY = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=12)


def pairs_file(path, n=400, seed=0, letters="abcdef", lengths=(2, 6), extra=()):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        word = "".join(rng.choice(letters) for _ in range(rng.randint(*lengths)))
        lines.append(f"{word}\t{word[::-1]}")
    path.write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return path


def test_the_automatic_hold_out_is_seeded_disjoint_and_5_percent_but_at_least_100(tmp_path):
    path = pairs_file(tmp_path / "p.tsv", n=400)
    task = PairsTask.from_files(str(path), seed=3)
    again = PairsTask.from_files(str(path), seed=3)
    other = PairsTask.from_files(str(path), seed=4)
    held, train = set(task.heldout.index.tolist()), set(task.train.index.tolist())
    assert len(held) == 100 and len(train) == 300 and not held & train  # 5% of 400 < 100
    assert held == set(again.heldout.index.tolist()) and held != set(other.heldout.index.tolist())
    big = PairsTask.from_files(str(pairs_file(tmp_path / "big.tsv", n=4000)))
    assert len(big.heldout) == 200 and big.counts == {**big.counts, "read": 4000, "train": 3800}


def test_a_file_too_small_to_hold_out_from_asks_for_valid(tmp_path):
    with pytest.raises(DataError, match="--valid"):
        PairsTask.from_files(str(pairs_file(tmp_path / "small.tsv", n=150)))


def test_a_valid_file_is_the_held_out_set_and_the_whole_data_file_trains(tmp_path):
    data, valid = pairs_file(tmp_path / "d.tsv", n=50), pairs_file(tmp_path / "v.tsv", n=30, seed=1)
    task = PairsTask.from_files(str(data), str(valid))
    assert len(task.train) == 50 and len(task.heldout) == 30
    assert task.provenance["valid"]["file"] == "v.tsv"


def test_pairs_too_long_for_the_positions_are_skipped_and_counted(tmp_path):
    path = pairs_file(tmp_path / "p.tsv", n=300, extra=["abcdefghijkl\tx", "ab\tabcdefghijklmn"])
    task = PairsTask.from_files(str(path), positions=12)  # at most 10 tokens a side
    assert task.counts["skipped_too_long"] == 2
    assert int(task.train.source_lengths().max()) <= 10 and int(task.heldout.target_lengths().max()) <= 10
    assert any("skipped 2 pairs" in note for note in task.notes())


def test_the_vocabulary_comes_from_the_training_pairs_only(tmp_path):
    data, valid = pairs_file(tmp_path / "d.tsv", n=50), tmp_path / "v.tsv"
    valid.write_text("abz\tzba\nqq\tqq\n", encoding="utf-8")  # z and q never occur in training
    task = PairsTask.from_files(str(data), str(valid))
    assert set(task.vocab.tokens[4:]) == set("abcdef")
    assert task.counts["unknown_heldout_tokens"] == 6
    assert task.heldout.batch(torch.tensor([1]), task.vocab).src[0].tolist() == [task.vocab.unk] * 2


def test_an_epoch_visits_every_training_pair_once_and_buckets_keep_lengths_together(tmp_path):
    task = PairsTask.from_files(str(pairs_file(tmp_path / "p.tsv", n=2000, lengths=(1, 10))))
    generator = torch.Generator().manual_seed(0)
    for buckets in (False, True):
        sampler = PairSampler(task.train, 32, generator, buckets, task.vocab)
        seen = torch.cat(sampler.plan)
        assert sorted(seen.tolist()) == list(range(len(task.train)))
    padded = {}
    for buckets in (False, True):
        sampler = PairSampler(task.train, 32, torch.Generator().manual_seed(0), buckets, task.vocab)
        batches = [sampler.next_batch() for _ in range(len(sampler.plan))]
        padded[buckets] = sum(int((b.src == task.vocab.pad).sum()) for b in batches)
        assert sampler.epoch == 0
    assert padded[True] < padded[False] / 4  # one length bucket per batch: little padding
    sampler.next_batch()
    assert sampler.epoch == 1 and sampler.cursor == 1  # the next epoch, freshly shuffled


def test_a_checkpoint_keeps_vocabulary_provenance_and_held_out_pairs(tmp_path):
    path = pairs_file(tmp_path / "p.tsv", n=300)
    trainer = Trainer(TINY, TrainConfig(data=str(path), task="data", steps=2, batch_size=8, eval_every=0))
    trainer.run()
    saved = trainer.save(tmp_path / "run.safetensors")
    path.unlink()  # the checkpoint alone decodes, evaluates and describes its data
    ckpt = load_checkpoint(saved)
    task = ckpt.task
    assert task.vocab == trainer.task.vocab and ckpt.model_config.vocab_size == task.vocab.size
    assert task.provenance["data"]["sha256"] == trainer.task.provenance["data"]["sha256"]
    assert task.counts == trainer.task.counts and len(task.heldout) == 100
    kept = task.heldout.batch(torch.arange(100), task.vocab)
    original = trainer.task.heldout.batch(torch.arange(100), trainer.task.vocab)
    assert torch.equal(kept.src, original.src) and torch.equal(kept.tgt, original.tgt)
    assert task.parse("abc") == trainer.task.parse("abc")


def test_a_held_out_source_has_its_pairs_target_as_the_answer_and_other_text_none(tmp_path):
    path = pairs_file(tmp_path / "p.tsv", n=300)
    valid = tmp_path / "v.tsv"
    valid.write_text("abc\tcba\nab\tcc\nab\tdd\n", encoding="utf-8")  # ab: held out with two answers
    trainer = Trainer(TINY, TrainConfig(data=str(path), valid=str(valid), task="data", steps=1, batch_size=8,
                                        eval_every=0))
    kept = load_checkpoint(trainer.save(tmp_path / "run.safetensors")).task  # the checkpoint's own pairs
    for task in (trainer.task, kept):
        assert task.expected_output(task.parse("abc")) == task.parse("cba")
        assert task.expected_output(task.parse("ab")) is None  # which of its two targets? neither
        assert task.expected_output(task.parse("fed")) is None  # typed, not held out: unknown


def test_expected_alignments_follow_each_pairs_own_lengths(tmp_path):
    task = PairsTask.from_files(str(pairs_file(tmp_path / "p.tsv", n=300)), expect="anti-diagonal")
    batch = task.heldout.batch(torch.arange(4), task.vocab)
    expected = task.expected_alignment(batch)  # (B, T + 1, S)
    for b in range(4):
        n = int(batch.lengths[b])
        assert expected[b].nonzero().tolist() == [[i, n - 1 - i] for i in range(n)]
    task.expect = ""
    assert task.expected_alignment(batch) is None


def train_run(tmp_path, data, steps, resume_from=None, **changes):
    cfg = TrainConfig(task="data", data=str(data), steps=steps, batch_size=16, warmup=2, eval_every=0,
                      seed=1, bucket_lengths=True, **changes)
    if resume_from is not None:
        return Trainer.resume(resume_from, cfg)
    return Trainer(TINY.replace(dropout=0.1), cfg)


def test_resuming_on_the_same_file_is_bit_exact_across_an_epoch_boundary(tmp_path):
    data = pairs_file(tmp_path / "p.tsv", n=260)  # 160 training pairs: 10 batches an epoch
    straight = train_run(tmp_path, data, 25)
    straight.run()
    first = train_run(tmp_path, data, 25)
    for _ in range(7):
        first.train_step()
    first.save(tmp_path / "half.safetensors")
    resumed = train_run(tmp_path, data, 25, resume_from=tmp_path / "half.safetensors")
    assert resumed.step_count == 7
    resumed.run()
    assert resumed._sampler.epoch == straight._sampler.epoch == 2
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_resuming_on_another_file_is_refused_but_a_moved_file_is_fine(tmp_path):
    data = pairs_file(tmp_path / "p.tsv", n=260)
    run = train_run(tmp_path, data, 10)
    run.train_step()
    run.save(tmp_path / "run.safetensors")
    other = pairs_file(tmp_path / "other.tsv", n=260, seed=9)
    with pytest.raises(CheckpointError, match="trained on p.tsv .* other.tsv holds other data") as info:
        train_run(tmp_path, other, 10, resume_from=tmp_path / "run.safetensors")
    assert "\n" not in str(info.value) and "sha256" in str(info.value)
    moved = tmp_path / "moved.tsv"
    data.rename(moved)
    assert train_run(tmp_path, moved, 10, resume_from=tmp_path / "run.safetensors").step_count == 1
    with pytest.raises(CheckpointError, match="give --data"):  # the recorded path is gone
        Trainer.resume(tmp_path / "run.safetensors")


def test_a_pair_set_batch_holds_sos_target_eos_then_padding(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("ab\tcde\nabc\tc\n", encoding="utf-8")
    task = PairsTask.from_files(str(path), str(path))
    batch = PairSet.whole(task.heldout.data).batch(torch.tensor([0, 1]), task.vocab)
    v = task.vocab
    ids = {t: i for i, t in enumerate(v.tokens)}
    assert batch.src.tolist() == [[ids["a"], ids["b"], v.pad], [ids["a"], ids["b"], ids["c"]]]
    assert batch.tgt.tolist() == [[v.sos, ids["c"], ids["d"], ids["e"], v.eos],
                                  [v.sos, ids["c"], v.eos, v.pad, v.pad]]
    assert batch.lengths.tolist() == [2, 3]


def test_a_source_token_met_only_in_targets_is_named_and_old_checkpoints_name_none(tmp_path):
    path = tmp_path / "p.tsv"  # lower case -> upper case: A-F occur only in targets
    words = ("abc", "bad", "fed", "cafe") * 60
    path.write_text("".join(f"{w}\t{w.upper()}\n" for w in words), encoding="utf-8")
    trainer = Trainer(TINY, TrainConfig(data=str(path), task="data", steps=1, batch_size=8, eval_every=0))
    saved = trainer.save(tmp_path / "run.safetensors")
    kept = load_checkpoint(saved).task
    for task in (trainer.task, kept):
        ids = task.parse("aBcA")
        assert [task.vocab.label(i) for i in task.unseen_source_tokens(ids)] == ["B", "A"]
        assert task.unseen_source_tokens(task.parse("face")) == []
    with safe_open(str(saved), framework="pt") as f:  # a file from before sources were kept
        metadata, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    stored = json.loads(metadata["task"])
    del stored["source_tokens"]
    metadata["task"] = json.dumps(stored)
    save_file(tensors, str(tmp_path / "old.safetensors"), metadata=metadata)
    old = load_checkpoint(tmp_path / "old.safetensors").task
    assert old.unseen_source_tokens(old.parse("ABC")) == []  # nothing known: nothing claimed


def test_stored_source_tokens_outside_the_vocabulary_are_refused_naming_the_field(tmp_path):
    path = pairs_file(tmp_path / "p.tsv", n=300)
    saved = Trainer(TINY, TrainConfig(data=str(path), task="data", steps=1, batch_size=8,
                                      eval_every=0)).save(tmp_path / "run.safetensors")
    with safe_open(str(saved), framework="pt") as f:
        metadata, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    stored = json.loads(metadata["task"])
    stored["source_tokens"] = [10_000]
    metadata["task"] = json.dumps(stored)
    save_file(tensors, str(tmp_path / "bad.safetensors"), metadata=metadata)
    with pytest.raises(CheckpointError, match="source_tokens"):
        load_checkpoint(tmp_path / "bad.safetensors")
