"""Session fixtures: the trained toy models of each layout and their files.

Training happens once per process (toy.trained_once caches it), so every conftest that imports
these fixtures (this folder's, tests/importing's) shares the same models. The models are in
eval mode with gradients off; tests read them and never train them further.
"""

from __future__ import annotations

import pytest

from tests.reference_models import toy


@pytest.fixture(scope="session", autouse=True)
def _toy_models_kept_between_runs(request):
    """Each toy model is trained once for all the suite's processes and runs: kept in pytest's
    cache folder (when the cache is on), keyed by the code that trains it."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        toy.CACHE_DIR = cache.mkdir("minitx-toy-models")


@pytest.fixture(scope="session")
def tutorial_reverse() -> toy.Trained:
    """The nn.Transformer tutorial's model trained on reverse (about 2 s)."""
    return toy.trained_once(toy.TUTORIAL)


@pytest.fixture(scope="session")
def annotated_reverse() -> toy.Trained:
    """The Annotated Transformer trained on reverse (about 2 s)."""
    return toy.trained_once(toy.ANNOTATED)


@pytest.fixture(scope="session")
def annotated_no_causal_mask() -> toy.Trained:
    """The Annotated Transformer trained on reverse without the causal mask (about 2 s)."""
    return toy.trained_once(toy.ANNOTATED, causal=False)


@pytest.fixture(scope="session")
def tutorial_files(tutorial_reverse, tmp_path_factory) -> toy.ReferenceFiles:
    return toy.write_files(tutorial_reverse, tmp_path_factory.mktemp("tutorial"))


@pytest.fixture(scope="session")
def annotated_files(annotated_reverse, tmp_path_factory) -> toy.ReferenceFiles:
    return toy.write_files(annotated_reverse, tmp_path_factory.mktemp("annotated"))


@pytest.fixture(scope="session")
def annotated_no_causal_mask_files(annotated_no_causal_mask, tmp_path_factory) -> toy.ReferenceFiles:
    return toy.write_files(annotated_no_causal_mask, tmp_path_factory.mktemp("annotated-no-mask"))


@pytest.fixture(scope="session")
def annotated_copy_files(tmp_path_factory) -> toy.ReferenceFiles:
    """The Annotated Transformer trained to copy (about 2 s), and reverse pairs beside its
    own: a model whose data generation forgot to reverse, for the doctor to name blind."""
    trained = toy.trained_once(toy.ANNOTATED, "copy")
    files = toy.write_files(trained, tmp_path_factory.mktemp("annotated-copy"))
    toy.write_pairs("reverse", files.pairs.with_name("reverse.pairs.tsv"))
    return files
