"""Writes the worked example of docs/alignment.md: reversed digit sequences as pairs (the bundled
reverse model's task) and their gold word alignment in talp format, which is known without asking
any model: output digit j is source digit n-1-j (the anti-diagonal), every link sure. Seeded:
every run writes the same files.

    python3 tools/make_digit_alignment.py [PAIRS GOLD [COUNT]]
        # default: digits.tsv and digits.talp in the current folder, 1,000 pairs
"""

import random
import sys

pairs_path, gold_path = sys.argv[1:3] if len(sys.argv) > 2 else ("digits.tsv", "digits.talp")
count = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
rng = random.Random(0)
with open(pairs_path, "w") as pairs, open(gold_path, "w") as gold:
    for _ in range(count):
        digits = [str(rng.randrange(10)) for _ in range(rng.randint(4, 10))]
        n = len(digits)
        pairs.write(f"{' '.join(digits)}\t{' '.join(reversed(digits))}\n")
        gold.write(" ".join(f"{i}-{n - 1 - i}" for i in range(n)) + "\n")
