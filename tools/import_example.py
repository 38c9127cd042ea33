"""Writes the files a user of another code would hand to `minitx import`, for the README's and
docs/import.md's example: a model trained by the Annotated Transformer's own code (the reference
implementation in tests/reference_models, a toy that reverses digits in about 2 s of training),
saved as its code saves one.

    .venv/bin/python tools/import_example.py [FOLDER]     # default: the current folder

writes model.pt (torch.save of its state_dict), src.vocab and tgt.vocab (one token per line, the
line number its id) and test.tsv (200 held-out pairs, digits as words). Run from the clone: the
reference implementations are part of the tests, not of the installed package.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the clone's tests/ package, wherever this is run from

from tests.reference_models import toy  # noqa: E402


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else Path.cwd()
    trained = toy.trained_once(toy.ANNOTATED)
    files = toy.write_files(trained, folder / ".import-example")
    for source, name in ((files.pt, "model.pt"), (files.src_vocab, "src.vocab"),
                         (files.tgt_vocab, "tgt.vocab"), (files.pairs, "test.tsv")):
        shutil.move(source, folder / name)
    shutil.rmtree(folder / ".import-example")
    print(f"wrote model.pt, src.vocab, tgt.vocab and test.tsv in {folder} (the Annotated "
          f"Transformer, {toy.exact_match(trained):.0%} exact match on reversing digits)")


if __name__ == "__main__":
    main(sys.argv[1:])
