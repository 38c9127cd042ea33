"""Why a beam hypothesis took its token rather than greedy's (y in the beam view): the contrastive
attribution of log p(its token) - log p(greedy's) at the step where the two part, teacher-forced on
the prefix both were fed, computed in a worker one at a time, drawn at 80x24 with the method named
and switchable, exported by E; on the bundled sort model's "0 8 0" (docs/beam.md: greedy goes
on with the 8 after "0 0", the beam's best with a third 0) and on a Hugging Face folder, against
transformers' own log-probabilities."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from minitx.tui.app.beam_session import BeamSession, ContrastJob
from minitx.tui.app.main import create_app
from tests.tui.test_beam_view import Record, searched
from tests.tui.test_exports import export, in_folder  # noqa: F401 - the export folder fixture
from tests.tui.tui_helpers import notifications, screen_lines, wait_for


def log_probs_by_hand(model, src: list[int], prefix: list[int]) -> torch.Tensor:
    """(V,) one plain forward, teacher-forced on the prefix: the next token's log-probabilities."""
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([[model.cfg.sos_id, *prefix]]))
    return logits.log_softmax(dim=-1)[0, -1]


def test_the_why_of_the_beams_best_is_its_third_0_against_greedys_8_as_the_log_probabilities_by_hand():
    session = BeamSession(Record("sort"), [0, 8, 0], beams=4)
    session.run()
    session.selected = session.best()
    job = session.contrast_wanted()
    method, contrast = job.key
    assert method == "ig" and contrast.step == 2 and contrast.prefix == (0, 0)
    assert (contrast.token, contrast.greedy) == (0, 8)  # a third 0 rather than greedy's 8
    session.choose(1)
    assert session.contrast_wanted() is None  # one worker at a time: the next is asked when it is done
    session.choose(-1)
    session.contrast_done(job, job.run())
    result = session.contrast_attribution()
    lp = log_probs_by_hand(session.record.model, [0, 8, 0], [0, 0])
    assert result.step == 2 and abs(float(result.value[0]) - float(lp[0] - lp[8])) < 1e-5
    assert float(result.value[0]) < 0  # greedy took the likelier token: the beam kept 0 for what followed
    zero, eight, other_zero = result.scores[0].tolist()  # the source's 0s push towards a 0, its 8 to 8
    assert zero > 0 and other_zero > 0 and eight < 0
    assert session.contrast_wanted() is None  # computed once
    greedy_row = next(n.id for n in session.rows() if session.search.tokens(n.id) == session.greedy)
    assert session.contrast(greedy_row) is None and session.contrast_key(greedy_row) is None


@pytest.mark.asyncio
async def test_y_shows_why_at_80x24_in_a_worker_switches_the_method_and_e_exports_it(in_folder, monkeypatch):  # noqa: F811
    release = threading.Event()
    run = ContrastJob.run
    monkeypatch.setattr(ContrastJob, "run", lambda job: release.wait(10) and run(job))
    app = create_app(["sort"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await searched(pilot)
        s = screen.session
        await pilot.press("y")  # the worker waits: the key has returned and the view says so
        shown = "\n".join(screen_lines(app))
        assert "why '0' rather than greedy's '8' at step 3" in shown and "ig: measuring…" in shown
        await pilot.press("down", "up")  # keys work meanwhile
        release.set()
        await wait_for(pilot, lambda: s.contrast_attribution() is not None, "the attribution")
        await pilot.pause()
        lines = screen_lines(app)
        assert len(lines) <= 24 and max(len(line) for line in lines) <= 80
        shown = "\n".join(lines)
        assert "after '0 0', log p('0') - log p('8') = -0.140" in shown
        assert "integrated gradients (32 steps from <pad>) of log p(token) - log p(8)" in shown
        assert "most for '0': '0' at 3" in shown and "most for '8': '8' at 2" in shown
        grid = screen.query_one("#beam-why-grid")
        assert grid.row_labels == ["0 vs 8"] and grid.columns == ["0", "8", "0"]
        assert torch.allclose(torch.tensor(grid.rows[0]), s.contrast_attribution().shares()[0])
        assert "y ixg" in shown  # what y does next
        await pilot.press("right")
        assert "the why is of one step" in notifications(app)[-1]
        files = await export(pilot)
        contrast = json.loads(files[".json"])["contrast"]
        assert (contrast["step"], contrast["token_text"], contrast["greedy_text"]) == (2, "0", "8")
        step = contrast["attribution"]["steps"][0]
        assert contrast["attribution"]["method"] == "ig" and step["index"] == 2
        assert step["attribution"] == pytest.approx(s.contrast_attribution().scores[0].tolist())
        for method in ("ixg", "occlusion"):
            await pilot.press("y")
            await wait_for(pilot, lambda: s.contrast_attribution() is not None, method)
            await pilot.pause()
            assert s.contrast_attribution().method == method
            named = "input x gradient" if method == "ixg" else "occlusion: the drop"
            assert named in "\n".join(screen_lines(app))
        await pilot.press(*["up"] * 4)  # past greedy's three pruned and finished branches to its own output
        assert s.search.tokens(s.selected) == s.greedy
        assert "'0 0 8' never parts from greedy" in "\n".join(screen_lines(app))
        await pilot.press("y")  # after the last method: the tree
        assert s.view == "tree" and screen.query_one("#beam-tree").display
        await pilot.press("y", "escape")  # esc on the why: back one level, to the tree
        assert app.screen is screen and s.view == "tree" and screen.query_one("#beam-tree").display
        await pilot.press("question_mark")
        await pilot.pause()
        assert "y why the chosen hypothesis's token, not greedy's" in "\n".join(screen_lines(app))


def test_on_a_hugging_face_folder_the_why_is_of_transformers_own_log_probabilities(tmp_path):
    """A tiny random Marian folder: a hypothesis that parts from greedy after a shared prefix, its
    contrast's objective against transformers' forward teacher-forced on that prefix."""
    from minitx import checkpoints
    from tests.huggingface.tiny_folders import load_reference, save_model, special_ids

    folder = save_model(tmp_path / "marian", "marian")
    record = Record.__new__(Record)
    ckpt = checkpoints.load(str(folder))
    record.name, record.model, record.task = "marian", ckpt.model, ckpt.task
    src = [116, 28, 119, 27, 217, 114, special_ids("marian")["eos"]]
    session = BeamSession(record, src, beams=4)
    session.run()
    parting_late = [n.id for n in session.search.nodes if not n.void and (c := session.contrast(n.id))
                    and c.step >= 2 and c.greedy is not None]
    session.selected = parting_late[0]  # after a prefix of two tokens or more
    job = session.contrast_wanted()
    contrast = job.key[1]
    result = job.run()
    reference = load_reference(folder)
    fed = torch.tensor([[special_ids("marian")["start"], *contrast.prefix]])
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor([src]), decoder_input_ids=fed).logits
    lp = logits.log_softmax(dim=-1)[0, -1]
    assert lp[contrast.greedy] >= lp[contrast.token]  # greedy's token is the likelier there
    assert abs(float(result.value[0]) - float(lp[contrast.token] - lp[contrast.greedy])) < 1e-4
    assert abs(float(result.scores.sum() - result.change[0] - result.delta[0])) < 1e-4
    assert result.scores.abs().max() > 1e-3
