"""`minitx eval --beams K --max-new-tokens N` on a Hugging Face folder: BLEU and chrF of beam
search's outputs, as the Hugging Face course scores a model (generate with the beams asked, at
most N new tokens), equal sacrebleu's figures of transformers' own generate(num_beams=K,
max_new_tokens=N) outputs; a folder without max_length (T5's) no longer stops at 20 tokens."""

import json
import warnings

import pytest
import sacrebleu
import torch

from tests.cli.conftest import run_cli
from tests.huggingface.tiny_folders import load_reference, save_model

# targets a tiny T5 tokeniser writes back as they are (so the references are the file's text)
PAIRS = [("the house is small", "das haus ist klein"), ("i see the dog", "ich sehe den hund"),
         ("good morning", "guten morgen"), ("where is the station", "wo ist der bahnhof")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_model(tmp_path_factory.mktemp("t5") / "t5", "t5", eos_boost=1.0)


def transformers_outputs(folder, pairs, beams: int, new_tokens: int) -> tuple[list[str], list[list[int]]]:
    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenizer = AutoTokenizer.from_pretrained(folder)
    model = load_reference(folder)
    texts, ids = [], []
    for source, target in pairs:
        enc = tokenizer(source, text_target=target, return_tensors="pt")
        assert tokenizer.decode(enc.labels[0], skip_special_tokens=True) == target  # the premise
        with torch.no_grad():
            generated = model.generate(enc.input_ids, num_beams=beams, do_sample=False,
                                       max_new_tokens=new_tokens)
        ids.append(generated[0, 1:].tolist())  # the decoder's start left out
        texts.append(tokenizer.decode(generated[0], skip_special_tokens=True))
    return texts, ids


def test_eval_beams_scores_transformers_beam_outputs_of_up_to_max_new_tokens(folder, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    theirs, _ = transformers_outputs(folder, [("see you soon", "guten morgen")], 3, 30)
    given = [*PAIRS, ("see you soon", theirs[0])]  # one output it gets right: BLEU above 0
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in given), encoding="utf-8")
    run = run_cli("eval", str(folder), "--pairs", str(pairs), "--beams", "3", "--max-new-tokens", "30",
                  "--json", "--threads", "1")
    assert run.exit_code == 0, run.stderr
    got = json.loads(run.stdout)
    outputs, ids = transformers_outputs(folder, [(s, t) for s, t in given], 3, 30)
    assert max(len(i) for i in ids) > 20  # the premise: some output runs past the old stop at 20
    references = [t for _, t in given]
    assert got["decoding"] == {"beams": 3, "max_new_tokens": 30}
    assert got["bleu"] == pytest.approx(sacrebleu.corpus_bleu(outputs, [references]).score, abs=1e-9)
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(outputs, [references]).score, abs=1e-9)
    assert got["bleu"] > 0


def test_without_max_new_tokens_a_folder_without_max_length_stops_at_20_as_generate_does(folder, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    runs = {}
    for extra in ([], ["--max-new-tokens", "30"]):
        run = run_cli("eval", str(folder), "--pairs", str(pairs), "--failures", "10", "--json",
                      "--threads", "1", *extra)
        assert run.exit_code == 0, run.stderr
        runs[bool(extra)] = max(len(f["output"]) for f in json.loads(run.stdout)["failures"])
    _, ids = transformers_outputs(folder, PAIRS, 1, 30)
    assert runs[False] == 20 and runs[True] == max(len(i) for i in ids) > 20
