"""Writes names.tsv, the data file of the README's and docs/data.md's worked example: 5,000
invented names, "First Last" -> "Last, First", a header line first. Seeded: every run writes the
same file.

    python3 tools/make_names.py [FILE]        # default: names.tsv in the current folder
"""

import random
import sys

rng = random.Random(0)
syllables = ["ka", "lo", "mi", "ra", "to", "ne", "su", "vi", "da", "pe", "zo", "ly"]


def name():
    return "".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))).capitalize()


with open(sys.argv[1] if len(sys.argv) > 1 else "names.tsv", "w") as f:
    f.write("source\ttarget\n")
    for _ in range(5000):
        first, last = name(), name()
        f.write(f"{first} {last}\t{last}, {first}\n")
