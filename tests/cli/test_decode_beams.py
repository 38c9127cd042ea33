"""`minitx decode --beams K`: the n-best with scores and greedy's output beside them, --json's
nbest and tree, the model's own beam settings (--beams default, and the note in greedy views), and
bad beam input as one line, exit 2."""

import dataclasses
import json

import pytest

from minitx import checkpoints
from minitx.core.checkpoint import save_checkpoint
from minitx.core.interp import interventions
from tests.cli.conftest import assert_one_line_error, run_cli


def test_beam_json_lists_the_nbest_best_first_with_ids_text_scores_and_the_tree_they_end_in():
    run = run_cli("decode", "reverse", "3 1 4 1 5", "--beams", "4", "--nbest", "3", "--json",
                  "--length-penalty", "0.5")
    assert run.exit_code == 0, run.stderr
    result = json.loads(run.stdout)["results"][0]
    nbest, tree, eos = result["nbest"], result["tree"], 12
    assert len(nbest) == 3 and nbest[0]["text"] == "5 1 4 1 3" == result["prediction"]
    assert nbest[0]["tokens"] == [5, 1, 4, 1, 3, eos]  # no start token, the EOS kept
    assert [h["score"] for h in nbest] == sorted((h["score"] for h in nbest), reverse=True)
    for h in nbest:  # sequences_scores: the summed log-probability over length ** 0.5
        assert h["score"] == pytest.approx(h["logp"] / len(h["tokens"]) ** 0.5, rel=1e-5)
    nodes = {n["id"]: n for n in tree["nodes"]}
    last = tree["steps"][-1]
    assert [nodes[i]["state"] for i in last["pool"][:3]] == ["finished"] * 3
    for hypothesis, end in zip(nbest, last["pool"]):  # each output is a path of the tree
        path, node = [], end
        while node >= 0:
            path.append(nodes[node]["token"])
            node = nodes[node]["parent"]
        assert path[::-1] == hypothesis["tokens"]
    assert result["greedy"]["tokens"] == nbest[0]["tokens"] and result["greedy"]["differs_at"] is None


def test_greedy_is_printed_beside_the_beam_and_marked_where_it_parts():
    run = run_cli("decode", "sort", "0 8 0", "--beams", "4", "--search-check")
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "0 8 0 · beam 4 · length penalty 1 · early stopping false"
    best = lines[2].split()
    greedy = next(line for line in lines if line.lstrip().startswith("greedy")).split()
    assert best[0] == "1" and float(best[1]) > float(greedy[1])  # the beam's best outscores greedy's
    assert "≠ 1 from step 3" in " ".join(greedy)
    assert any(line.startswith("  case: ") for line in lines)


@pytest.mark.parametrize("args, fragment", [
    (["--beams", "0"], "--beams"),
    (["--beams", "2", "--nbest", "3"], "--nbest is at most --beams"),
    (["--beams", "2", "--length-penalty", "abc"], "'abc' is not a valid float"),
    (["--nbest", "2"], "--nbest needs --beams"),
    (["--beams", "2", "--attention"], "--attention"),
])
def test_bad_beam_input_is_one_line_and_exit_2(args, fragment):
    run = run_cli("decode", "reverse", "3 1 4 1 5", *args)
    assert run.exit_code == 2 and fragment in assert_one_line_error(run)


def test_an_intervention_the_cached_search_cannot_carry_is_one_line_and_exit_2(monkeypatch):
    from minitx.tui.cli.commands import decode

    def patched(ckpt, specs, kind, flag="--ablate", pairs=None):  # a head-input patch: full forwards only
        site = interventions.HeadInput(interventions.Head("cross", 0, 0), "q")
        values = ckpt.model.tgt_embed.weight[None, :1]  # (1, 1, d)
        return interventions.Interventions(patches=(interventions.Patch(site, values),))

    monkeypatch.setattr(decode, "interventions_for", patched)
    run = run_cli("decode", "reverse", "3 1 4 1 5", "--beams", "2")
    assert run.exit_code == 2 and "cannot search with a beam" in assert_one_line_error(run)


def test_a_model_whose_settings_search_with_a_beam_says_so_when_greedy_and_beams_default_uses_them(tmp_path):
    ckpt = checkpoints.load("reverse")
    model = ckpt.model
    model.generation = dataclasses.replace(model.generation, num_beams=3, length_penalty=0.5,
                                           early_stopping="never")
    path = save_checkpoint(tmp_path / "searching.safetensors", model, ckpt.task)
    greedy = run_cli("decode", str(path), "3 1 4 1 5")
    assert greedy.stdout.strip() == "5 1 4 1 3"
    assert "uses a beam of 3" in greedy.stderr and "--beams default" in greedy.stderr
    searched = run_cli("decode", str(path), "3 1 4 1 5", "--beams", "default")
    assert searched.stdout.splitlines()[0].endswith("beam 3 · length penalty 0.5 · early stopping never")
