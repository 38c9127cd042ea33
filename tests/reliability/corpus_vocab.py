"""Hostile vocabularies and data tasks for the corpus of corpus.py: every case is a rule applied
to a valid checkpoint (a digit task's, or a data file's trained for a few steps), and each must
be refused with a one-line CheckpointError.

    vocab_cases(metadata)            -> {name: metadata}  (on the digit checkpoint)
    data_task_cases(folder)          -> {name: (tensors, metadata)}
    unresumable_data_cases(folder)   -> {name: (tensors, metadata)}  (load fine, resume refused)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from minitx.core.checkpoint import read_raw
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.vocab import MAX_TOKEN_CHARS, MAX_TOKENS
from minitx.core.training.trainer import Trainer

TINY_MODEL = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                         max_len=12)


def pairs_file(folder: Path, name: str = "pairs.tsv", seed: int = 5, n: int = 240) -> Path:
    """A small TSV of letter pairs (reversal), enough for an automatic hold-out."""
    rng = random.Random(seed)
    lines = ["source\ttarget"]
    for _ in range(n):
        word = "".join(rng.choice("abcdef") for _ in range(rng.randint(2, 6)))
        lines.append(f"{word}\t{word[::-1]}")
    path = Path(folder) / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def valid_data_checkpoint(folder: Path) -> Path:
    data = pairs_file(folder)
    trainer = Trainer(TINY_MODEL, TrainConfig(task="data", data=str(data), steps=3, batch_size=8,
                                              warmup=1, eval_every=0, device="cpu", seed=3))
    trainer.run()
    return trainer.save(Path(folder) / "data_base.safetensors")


def _with(metadata: dict[str, str], **changes) -> dict[str, str]:
    meta = dict(metadata)
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value if isinstance(value, str) else json.dumps(value)
    return meta


def vocab_cases(metadata: dict[str, str]) -> dict[str, dict[str, str]]:
    vocab = json.loads(metadata["vocab"])
    out: dict[str, dict[str, str]] = {}

    def v(**changes) -> str:
        return json.dumps({**vocab, **changes})

    tokens = vocab["tokens"]
    out["vocab_not_json"] = _with(metadata, vocab="{tokens: [")
    out["vocab_a_list"] = _with(metadata, vocab=json.dumps(tokens))
    out["vocab_null"] = _with(metadata, vocab="null")
    out["vocab_deeply_nested"] = _with(metadata, vocab="[" * 100_000 + "]" * 100_000)
    out["vocab_unknown_field"] = _with(metadata, vocab=v(colour="blue"))
    out["vocab_level_unknown"] = _with(metadata, vocab=v(level="bytes"))
    out["vocab_tokens_not_a_list"] = _with(metadata, vocab=v(tokens="0123456789"))
    out["vocab_too_few_tokens"] = _with(metadata, vocab=v(tokens=tokens[:3]))
    out["vocab_too_many_tokens"] = _with(metadata, vocab=v(tokens=[f"t{i}" for i in range(MAX_TOKENS + 1)]))
    out["vocab_token_not_a_string"] = _with(metadata, vocab=v(tokens=[7, *tokens[1:]]))
    out["vocab_token_empty"] = _with(metadata, vocab=v(tokens=["", *tokens[1:]]))
    out["vocab_token_too_long"] = _with(metadata, vocab=v(tokens=["x" * (MAX_TOKEN_CHARS + 1), *tokens[1:]]))
    out["vocab_token_with_a_newline"] = _with(metadata, vocab=v(tokens=["a\nb", *tokens[1:]]))
    out["vocab_token_twice"] = _with(metadata, vocab=v(tokens=[tokens[1], *tokens[1:]]))
    out["vocab_special_misspelt"] = _with(metadata, vocab=v(tokens=[*tokens[:10], "<PAD>", *tokens[11:]]))
    out["vocab_pad_out_of_range"] = _with(metadata, vocab=v(pad=len(tokens)))
    out["vocab_pad_negative"] = _with(metadata, vocab=v(pad=-1))
    out["vocab_pad_a_bool"] = _with(metadata, vocab=v(pad=True))
    out["vocab_eos_missing"] = _with(metadata, vocab={k: x for k, x in vocab.items() if k != "eos"})
    out["vocab_sos_equals_eos"] = _with(metadata, vocab=v(sos=vocab["eos"]))
    out["vocab_digits_but_not_the_13"] = _with(metadata, vocab=v(tokens=[*"abcdefghij", *tokens[10:]]))
    char_vocab = {"level": "char", "tokens": ["<pad>", "<sos>", "<eos>", "<unk>", *"abcdefghi"],
                  "pad": 0, "sos": 1, "eos": 2, "unk": 3}
    out["vocab_char_for_a_digit_task"] = _with(metadata, vocab=char_vocab)  # 13 tokens: same size
    out["vocab_char_without_unk"] = _with(metadata, vocab={**char_vocab, "unk": None})
    out["vocab_char_token_of_two_characters"] = _with(
        metadata, vocab={**char_vocab, "tokens": [*char_vocab["tokens"][:-1], "ij"]})
    return out


def data_task_cases(folder: Path) -> dict[str, tuple[dict, dict[str, str]]]:
    """Tweaks of a valid data checkpoint: its vocabulary, provenance, counts and stored pairs."""
    tensors, metadata = read_raw(valid_data_checkpoint(folder))
    task, vocab = json.loads(metadata["task"]), json.loads(metadata["vocab"])
    cfg = json.loads(metadata["model_config"])
    out: dict[str, dict[str, str]] = {}

    def t(**changes) -> dict:
        return {**task, **changes}

    def held(**changes) -> dict:
        return t(heldout={**task["heldout"], **changes})

    def prov(**changes) -> dict:
        return t(provenance={**task["provenance"], "data": {**task["provenance"]["data"], **changes}})

    rows = task["heldout"]["source"]
    out["data_task_without_vocab"] = _with(metadata, vocab=None)
    out["data_task_vocab_one_token_short"] = _with(metadata, vocab={**vocab, "tokens": vocab["tokens"][:-1]})
    out["data_task_vocab_disagrees_with_config_pad"] = _with(metadata, model_config={**cfg, "pad_id": 3})
    out["data_task_word_token_with_a_space"] = _with(
        metadata, vocab={**vocab, "level": "word", "tokens": [*vocab["tokens"][:-1], "a b"]})
    out["data_task_unknown_field"] = _with(metadata, task=t(colour=1))
    out["data_task_min_len_zero"] = _with(metadata, task=t(min_len=0))
    out["data_task_max_len_a_string"] = _with(metadata, task=t(max_len="9"))
    out["data_task_expect_unknown"] = _with(metadata, task=t(expect="sideways"))
    out["data_task_counts_negative"] = _with(metadata, task=t(counts={**task["counts"], "read": -1}))
    out["data_task_counts_a_list"] = _with(metadata, task=t(counts=[1, 2]))
    out["data_task_provenance_missing"] = _with(metadata, task={k: x for k, x in task.items()
                                                                if k != "provenance"})
    out["data_task_sha256_not_hex"] = _with(metadata, task=prov(sha256="z" * 64))
    out["data_task_size_negative"] = _with(metadata, task=prov(size=-5))
    out["data_task_file_name_enormous"] = _with(metadata, task=prov(file="f" * 10_000))
    out["data_task_tokenisation_unknown"] = _with(
        metadata, task=t(provenance={**task["provenance"], "tokens": "bytes"}))
    out["data_task_heldout_missing"] = _with(metadata, task={k: x for k, x in task.items() if k != "heldout"})
    out["data_task_heldout_not_an_object"] = _with(metadata, task=t(heldout=[[1, 2], [3]]))
    out["data_task_heldout_empty"] = _with(metadata, task=held(source=[], target=[], lines=[]))
    out["data_task_heldout_counts_differ"] = _with(metadata, task=held(target=task["heldout"]["target"][:-1]))
    out["data_task_heldout_id_out_of_range"] = _with(metadata,
                                                     task=held(source=[[len(vocab["tokens"])], *rows[1:]]))
    out["data_task_heldout_negative_id"] = _with(metadata, task=held(source=[[-1], *rows[1:]]))
    out["data_task_heldout_holds_pad"] = _with(metadata, task=held(source=[[vocab["pad"]], *rows[1:]]))
    out["data_task_heldout_empty_row"] = _with(metadata, task=held(source=[[], *rows[1:]]))
    out["data_task_heldout_row_too_long"] = _with(metadata, task=held(source=[rows[0] * 20, *rows[1:]]))
    out["data_task_heldout_id_a_float"] = _with(metadata, task=held(source=[[4.0], *rows[1:]]))
    out["data_task_heldout_too_many"] = _with(
        metadata, task=held(source=rows * 600, target=task["heldout"]["target"] * 600,
                            lines=task["heldout"]["lines"] * 600))
    out["data_task_heldout_line_zero"] = _with(metadata, task=held(lines=[0] * len(rows)))
    out["data_task_named_reverse_with_a_char_vocab"] = _with(metadata, task={"name": "reverse"})
    return {name: (tensors, meta) for name, meta in out.items()}


def unresumable_data_cases(folder: Path) -> dict[str, tuple[dict, dict[str, str]]]:
    """A data run whose position in its data is broken, or whose data file changed."""
    base = valid_data_checkpoint(folder)
    tensors, metadata = read_raw(base)
    trainer_info = json.loads(metadata["trainer"])
    out: dict[str, tuple[dict, dict[str, str]]] = {}
    for name, position in (("missing", None), ("cursor_past_the_epoch", {"epoch": 0, "cursor": 10**6}),
                           ("epoch_negative", {"epoch": -1, "cursor": 0}),
                           ("cursor_a_string", {"epoch": 0, "cursor": "1"})):
        info = {k: v for k, v in trainer_info.items() if k != "data"}
        if position is not None:
            info["data"] = position
        out[f"data_position_{name}"] = (tensors, _with(metadata, trainer=info))
    out["data_epoch_rng_missing"] = ({k: v for k, v in tensors.items() if k != "train.data.epoch_rng"},
                                     metadata)
    train_cfg = json.loads(metadata["train_config"])
    other = pairs_file(folder, "other.tsv", seed=6)
    out["data_file_replaced_by_other_pairs"] = (tensors, _with(metadata, train_config={**train_cfg,
                                                                                        "data": str(other)}))
    out["data_file_gone"] = (tensors, _with(metadata, train_config={**train_cfg,
                                                                    "data": str(Path(folder) / "gone.tsv")}))
    return out
