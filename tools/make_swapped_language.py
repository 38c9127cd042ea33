"""Writes the guided-training example of docs/alignment.md: a made-up word-level language whose
word alignment is known without asking any model. Target word j translates source word perm(j)
through a fixed lexicon (s_i -> t_(3i+7 mod 10)), perm swapping neighbours (0<->1, 2<->3, ...;
an odd last word stays); the gold (talp, every link sure) is perm. Seeded: every run writes the
same files. tests/core/test_guided_training.py trains on it too.

    python3 tools/make_swapped_language.py [PAIRS GOLD [COUNT]]
        # default: swapped.tsv and swapped.talp in the current folder, 1,000 pairs
"""

import random
import sys


def write(pairs_path, gold_path, count: int = 1000, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(pairs_path, "w", encoding="utf-8") as pairs, open(gold_path, "w", encoding="utf-8") as gold:
        for _ in range(count):
            n = rng.randint(4, 7)
            source = [rng.randrange(10) for _ in range(n)]
            perm = [j ^ 1 if j ^ 1 < n else j for j in range(n)]
            target = [(3 * source[perm[j]] + 7) % 10 for j in range(n)]
            pairs.write(" ".join(f"s{w}" for w in source) + "\t" + " ".join(f"t{w}" for w in target) + "\n")
            gold.write(" ".join(f"{perm[j]}-{j}" for j in range(n)) + "\n")


if __name__ == "__main__":
    paths = sys.argv[1:3] if len(sys.argv) > 2 else ("swapped.tsv", "swapped.talp")
    write(*paths, int(sys.argv[3]) if len(sys.argv) > 3 else 1000)
