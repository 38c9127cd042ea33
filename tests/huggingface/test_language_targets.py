"""Targets as the family's tokeniser writes them with `text_target`: where the language code
follows the text's </s> (mbart-large-cc25's MBartTokenizer, NllbTokenizer with
legacy_behaviour) the labels are `X </s> code`, not `X </s> code </s>`; mBART's decoder starts
from the code (its shift_tokens_right moves the last label first), NLLB's from </s>. On tiny
folders of each, and of mBART-50 and NLLB (the code first), a fine-tune's first loss and
`minitx eval --pairs`' loss are transformers' `model(input_ids, labels=tokenizer(text_target=...))`
loss."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from minitx import checkpoints
from tests.cli.conftest import assert_one_line_error, run_cli
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.conftest import reference_tokeniser
from tests.huggingface.test_eval_scores import PAIRS
from tests.huggingface.test_family_fine_tune import minitx_steps
from tests.huggingface.tiny_folders import load_reference, save_model

SUFFIX = ("mbart-cc25", "nllb-legacy")  # the code after </s>: what minitx wrote one </s> too many for
FOLDERS = [*SUFFIX, *(pytest.param(f, marks=pytest.mark.slow) for f in ("mbart50", "nllb"))]


def labels_loss(folder, pairs) -> tuple[float, int, float]:
    """transformers' loss per target token over `pairs` one at a time, the label count, and
    the loss of all of them as one padded batch (labels' padding -100)."""
    tokenizer, model = reference_tokeniser(folder), load_reference(folder)
    total, tokens = 0.0, 0
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        for source, target in pairs:
            enc = tokenizer(source, text_target=target, return_tensors="pt")
            total += float(model(input_ids=enc.input_ids, labels=enc.labels).loss) * enc.labels.shape[1]
            tokens += enc.labels.shape[1]
        batch = tokenizer([s for s, _ in pairs], text_target=[t for _, t in pairs], padding=True,
                          return_tensors="pt")
        labels = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
        batched = float(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              labels=labels).loss)
    return total / tokens, tokens, batched


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("family", FOLDERS)
def test_a_fine_tunes_loss_and_evals_loss_are_transformers_labels_loss(family, tmp_path):
    folder = save_model(tmp_path / family, family)
    pairs = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    loss, tokens, batched = labels_loss(folder, PAIRS)
    tokenizer = reference_tokeniser(folder)
    labels = tokenizer(text_target=PAIRS[0][1]).input_ids
    if family in SUFFIX:  # the code last, after one </s>
        assert labels[-2:] == [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(tokenizer.tgt_lang)]
    run = run_cli("eval", str(folder), "--pairs", str(pairs), "--json")
    assert run.exit_code == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["target_tokens"] == tokens
    assert got["loss"] == pytest.approx(loss, rel=1e-5)
    _, _, losses = minitx_steps(folder, pairs)
    assert losses[0] == pytest.approx(batched, rel=1e-5)  # the first step's, on the base's weights


@pytest.mark.filterwarnings("ignore")
def test_train_src_lang_tgt_lang_learn_the_pair_as_transformers_tokeniser_and_generate_set_it(tmp_path):
    folder = save_model(tmp_path / "nllb", "nllb")
    pairs = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    out = tmp_path / "ft.safetensors"
    run = run_cli("train", "--init", str(folder), "--data", str(pairs), "--valid", str(pairs), "--steps", "1",
                  "--src-lang", "deu_Latn", "--tgt-lang", "fra_Latn", "--no-watch", "--eval-every", "0",
                  "--out", str(out), "--threads", "1", "--log-every", "1", env={"COLUMNS": "400"})
    assert run.exit_code == 0, run.stderr
    assert f"fine-tuning {folder} (NLLB-200 deu_Latn → fra_Latn, " in run.stdout  # the family's own name
    assert "lr 5e-05" in run.stdout  # and its defaults
    tokenizer = reference_tokeniser(folder)
    tokenizer.src_lang, tokenizer.tgt_lang = "deu_Latn", "fra_Latn"
    ckpt = checkpoints.load(str(out))
    source, target = PAIRS[0]
    assert ckpt.task.src_vocab.encode_text(source) == tokenizer(source).input_ids
    assert ckpt.task.vocab.tokeniser.encode([target])[0] == tokenizer(text_target=target).input_ids
    batch = ckpt.task.pairs_batch(ckpt.task.heldout, torch.tensor([0]))
    assert batch.labels[0, : len(tokenizer(text_target=target).input_ids)].tolist() == \
        tokenizer(text_target=target).input_ids  # what the fine-tune learnt: labels fra_Latn X </s>
    assert ckpt.model.generation.forced_bos == tokenizer.convert_tokens_to_ids("fra_Latn")
    shown = run_cli("inspect", str(out), env={"COLUMNS": "400"})
    assert "fine-tuned from" in shown.stdout and "(NLLB-200; the base's weights" in shown.stdout
    assert json.loads(run_cli("inspect", str(out), "--json").stdout)["family"] == "NLLB-200"


@pytest.mark.parametrize("args, message", [
    (("--tgt-lang", "fra_Latn"), "--src-lang and --tgt-lang choose the languages of a fine-tune's base"),
    (("--init", "reverse", "--data", "PAIRS", "--tgt-lang", "fra_Latn"), "--tgt-lang: this model has no "
                                                                         "language codes"),
])
def test_train_languages_without_a_multilingual_base_are_one_line_exit_2(args, message, tmp_path):
    args = tuple(str(write_pairs(tmp_path / "p.tsv", PAIRS)) if a == "PAIRS" else a for a in args)
    run = run_cli("train", *args, "--out", str(tmp_path / "x.safetensors"))
    assert run.exit_code == 2 and message in assert_one_line_error(run)
    assert not (tmp_path / "x.safetensors").exists()
