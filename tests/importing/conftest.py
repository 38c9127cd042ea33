"""The reference models' fixtures (tests/reference_models/fixtures.py), shared with this folder."""

from reference_models.fixtures import (  # noqa: F401
    annotated_files,
    annotated_reverse,
    tutorial_files,
    tutorial_reverse,
)
