"""The app runs torch on minitx's thread default (core/training/threads.py) in its UI thread too: the
test's thread has run torch before, which fixes its own count until it is set again."""

from __future__ import annotations

import pytest
import torch

import minitx.core.training.threads as threads
from minitx.tui.app.main import create_app
from tests.tui.tui_helpers import model_ready, reverse_checkpoint


@pytest.mark.asyncio
async def test_loading_the_first_model_sets_the_default_threads(monkeypatch):
    monkeypatch.setattr(threads, "default_threads", lambda: 2)  # the suite runs on 1
    try:
        app = create_app([reverse_checkpoint()])
        async with app.run_test(size=(80, 24)) as pilot:
            await model_ready(pilot)
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
