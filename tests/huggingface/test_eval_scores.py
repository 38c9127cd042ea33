"""`minitx eval --pairs` on a Hugging Face folder: the loss is transformers' `labels` loss of the
whole file (each pair's mean times its target tokens, summed, over all target tokens), and BLEU and
chrF are sacrebleu's of transformers' own greedy outputs and labels, each decoded by transformers'
tokeniser with skip_special_tokens (the Hugging Face course's compute_metrics). Digit tasks keep
their loss and say why they have no BLEU."""

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
    """transformers' loss per target token over `pairs`, the target token count, and its greedy
    outputs and labels as text."""
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
    loss, tokens, outputs, references = reference_figures(folder, given)
    assert got["target_tokens"] == tokens
    assert got["loss"] == pytest.approx(loss, rel=1e-5)
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
