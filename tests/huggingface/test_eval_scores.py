"""`minitx eval --pairs` on a Hugging Face folder: the loss is transformers' `labels` loss of the
whole file (each pair's mean times its target tokens, summed, over all target tokens), and BLEU and
chrF are sacrebleu's of transformers' own greedy outputs, decoded by transformers' tokeniser with
skip_special_tokens, against the file's targets exactly as it holds them (sacrebleu on the user's
own file): a target with characters the tokeniser cannot write scores as written, in `eval
--pairs` and in a fine-tune's evaluations. Digit tasks keep their loss and say why they have no
BLEU."""

import json
import warnings

import pytest
import sacrebleu
import torch
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from tests.cli.conftest import run_cli
from tests.huggingface.tiny_folders import load_reference, save_model

PAIRS = [("The house is small.", "Das Haus ist klein."), ("I see the dog.", "Ich sehe den Hund."),
         ("Zoë eats 3 cakes in Zürich.", "Zoë isst 3 Kuchen in Zürich."), ("Good morning", "Guten Morgen"),
         ("Where is the station?", "Wo ist der Bahnhof?")]


@pytest.fixture(scope="module", params=["marian", "t5", "bart"])
def folder(request, tmp_path_factory):
    # seed 3: a tiny BART whose greedy outputs have four 13a tokens (with_a_pair_it_gets_right)
    seed = 3 if request.param == "bart" else 0
    return save_model(tmp_path_factory.mktemp(request.param) / request.param, request.param, seed=seed)


def tokeniser(folder):
    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoTokenizer.from_pretrained(folder)


def with_a_pair_it_gets_right(folder) -> list[tuple[str, str]]:
    """PAIRS and one pair whose target is transformers' own greedy output, so that BLEU is not 0
    (a random model's outputs share no 4-gram with real targets)."""
    tokenizer, model = tokeniser(folder), load_reference(folder)
    for source in ("Thank you very much.", "See you soon.", "The train is late again."):
        generated = model.generate(tokenizer(source, return_tensors="pt").input_ids, num_beams=1,
                                   do_sample=False, max_new_tokens=12)
        output = tokenizer.decode(generated[0], skip_special_tokens=True).strip()
        if len(Tokenizer13a()(output).split()) >= 4 and "\ufffd" not in output:
            return [*PAIRS, (source, output)]
    raise AssertionError("no source gives an output of four words to score")


def reference_figures(folder, pairs) -> tuple[float, int, list[str], list[str]]:
    """transformers' loss per target token over `pairs`, the target token count, its greedy
    outputs as text, and the labels as its tokeniser decodes them (their round trip)."""
    tokenizer, model = tokeniser(folder), load_reference(folder)
    total, tokens, outputs, references = 0.0, 0, [], []
    for source, target in pairs:
        enc = tokenizer(source, text_target=target, return_tensors="pt")
        with torch.no_grad():
            loss = model(input_ids=enc.input_ids, labels=enc.labels).loss  # mean over this pair's labels
            generated = model.generate(enc.input_ids, num_beams=1, do_sample=False)
        total += float(loss) * enc.labels.shape[1]
        tokens += enc.labels.shape[1]
        outputs.append(tokenizer.decode(generated[0], skip_special_tokens=True))
        references.append(tokenizer.decode(enc.labels[0], skip_special_tokens=True))
    return total / tokens, tokens, outputs, references


def test_eval_of_a_folder_reports_transformers_labels_loss_and_sacrebleus_bleu_and_chrf(folder, tmp_path):
    given = with_a_pair_it_gets_right(folder)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in given), encoding="utf-8")
    run = run_cli("eval", str(folder), "--pairs", str(pairs), "--json")
    assert run.exit_code == 0, run.stderr
    got = json.loads(run.stdout)
    loss, tokens, outputs, _ = reference_figures(folder, given)
    assert got["target_tokens"] == tokens
    assert got["loss"] == pytest.approx(loss, rel=1e-5)
    references = [target for _, target in given]
    bleu = sacrebleu.corpus_bleu(outputs, [references])
    chrf = sacrebleu.corpus_chrf(outputs, [references])
    assert bleu.score > 0 and got["bleu"] == pytest.approx(bleu.score, abs=1e-9)
    assert got["chrf"] == pytest.approx(chrf.score, abs=1e-9)
    assert "tok:13a" in got["bleu_signature"] and "nc:6" in got["chrf_signature"]
    if folder.name == "marian":  # the text output says the same (one family shows it)
        text = run_cli("eval", str(folder), "--pairs", str(pairs))
        assert f"BLEU {bleu.score:.2f}  chrF {chrf.score:.2f}" in text.stdout
        assert f"loss {loss:.4g} per target token ({tokens:,} tokens" in text.stdout


def test_eval_of_a_digit_task_gives_its_loss_and_says_why_it_has_no_bleu():
    run = run_cli("eval", "reverse", "--n", "20", "--json")
    got = json.loads(run.stdout)
    assert got["loss"] is not None and 0 <= got["loss"] < 1
    assert got["bleu"] is None and got["chrf"] is None
    assert "not text pairs" in got["bleu_omitted"]
    text = run_cli("eval", "reverse", "--n", "20")
    assert "no BLEU or chrF: it is measured on fresh sequences, not text pairs" in text.stdout


UNWRITABLE = " Straße ñ 😀"  # characters the tiny Marian tokeniser's pieces lack: its round trip drops them


def with_unwritable_targets(folder) -> list[tuple[str, str]]:
    """PAIRS and a pair the model gets right, every target with characters the tokeniser cannot
    write; their round trip through the tokeniser is not the file's text (checked)."""
    given = [(s, t + UNWRITABLE) for s, t in with_a_pair_it_gets_right(folder)]
    tokenizer = tokeniser(folder)
    for _, target in given:
        labels = tokenizer(text_target=target).input_ids
        assert tokenizer.decode(labels, skip_special_tokens=True) != target
    return given


@pytest.mark.parametrize("folder", ["marian"], indirect=True)
def test_bleu_and_chrf_of_eval_pairs_score_the_files_own_targets_not_their_tokeniser_round_trip(
        folder, tmp_path):
    given = with_unwritable_targets(folder)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in given), encoding="utf-8")
    got = json.loads(run_cli("eval", str(folder), "--pairs", str(pairs), "--json").stdout)
    _, _, outputs, round_trip = reference_figures(folder, given)
    raw = [target for _, target in given]
    assert got["bleu"] == pytest.approx(sacrebleu.corpus_bleu(outputs, [raw]).score, abs=1e-9)
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(outputs, [raw]).score, abs=1e-9)
    assert got["chrf"] != pytest.approx(sacrebleu.corpus_chrf(outputs, [round_trip]).score, abs=1e-6)


@pytest.mark.parametrize("folder", ["marian"], indirect=True)
def test_a_fine_tunes_bleu_and_chrf_score_its_held_out_files_own_targets(folder, tmp_path):
    """The base's scores a fine-tune reports (its first evaluation, on --valid) are sacrebleu's of
    transformers' greedy outputs of the base against the --valid file's targets as written; the
    fine-tuned file keeps them, so `eval` of its held-out pairs scores as its last evaluation."""
    given = with_unwritable_targets(folder)
    valid = tmp_path / "valid.tsv"
    valid.write_text("".join(f"{s}\t{t}\n" for s, t in given), encoding="utf-8")
    out = tmp_path / "tuned.safetensors"
    run = run_cli("train", "--init", str(folder), "--data", str(valid), "--valid", str(valid), "--steps", "1",
                  "--batch-size", "2", "--out", str(out), "--threads", "1", "--quiet")
    assert run.exit_code == 0, run.stderr
    from minitx import checkpoints

    base = checkpoints.load(str(out)).summary["base_scores"]
    _, _, outputs, round_trip = reference_figures(folder, given)
    raw = [target for _, target in given]
    assert base["bleu"] == pytest.approx(sacrebleu.corpus_bleu(outputs, [raw]).score, abs=1e-9)
    assert base["chrf"] == pytest.approx(sacrebleu.corpus_chrf(outputs, [raw]).score, abs=1e-9)
    assert base["chrf"] != pytest.approx(sacrebleu.corpus_chrf(outputs, [round_trip]).score, abs=1e-6)
    # the file keeps the held-out targets as written: `eval` of it scores what the fine-tune scored
    tuned = checkpoints.load(str(out)).summary["scores"]
    got = json.loads(run_cli("eval", str(out), "--json").stdout)
    assert (got["bleu"], got["chrf"]) == (pytest.approx(tuned["bleu"], abs=1e-9),
                                          pytest.approx(tuned["chrf"], abs=1e-9))
