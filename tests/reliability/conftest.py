"""Reliability tests train and load tiny models: one CPU thread is much faster for them on a
shared 2-core machine (and makes CPU results independent of the thread count)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
