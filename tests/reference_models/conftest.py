"""The reference models' fixtures (fixtures.py), for the tests in this folder."""

from tests.reference_models.fixtures import (  # noqa: F401
    annotated_files,
    annotated_no_causal_mask,
    annotated_no_causal_mask_files,
    annotated_reverse,
    tutorial_files,
    tutorial_reverse,
)
