"""The state of the app's alignment view (A in Explore): a pairs file's pairs as the model's task
feeds them, the pair and head looked at, the method, a gold file's links, and every head's AER on
them. A plain object (no Textual): the screen (tui/app/screens/alignment.py) draws it, the tests
drive it. Everything is core/interp/word_alignment.py's, as `minitx align` computes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PairView:
    """One pair seen through one head: its words, the head's weight of each target word on each
    source word, the head's links and the gold links (None without a gold file)."""

    number: int  # the pair's place in the file, from 0
    line: int  # its line in the file
    source: list[str]
    target: list[str]
    weights: list[list[float]]  # [target word][source word]: the mean over the word's rows of the
    # attention its source word's pieces take together
    links: frozenset[tuple[int, int]]  # (source word, target word)
    gold: object | None  # word_alignment.Gold


def pairs_path_of(task) -> str | None:
    """The pairs file a model's task measures on (the app's O, or the file it trained on), if it
    is there to read; None otherwise."""
    from minitx.core.data.pair_task import PairsTask

    if not isinstance(task, PairsTask):
        return None
    path = (task.provenance.get("data") or {}).get("path")
    return path if path and Path(path).is_file() else None


class AlignmentSession:
    def __init__(self, model, task, path: str) -> None:
        """The pairs of `path` read as `task` feeds them (DataError: a file that cannot be read)."""
        from minitx.core.interp.word_alignment import AlignmentPairs

        self.model, self.task, self.path = model, task, path
        self.pairs = AlignmentPairs(task, path, model.cfg.max_len)
        self.items = sorted(((indices[0], batch, words[0])
                             for indices, batch, words in self.pairs.batches(batch_size=1)),
                            key=lambda item: item[0])  # the pairs that can be aligned, in file order
        if not self.items:
            raise ValueError(f"{Path(path).name}: no pair can be aligned "
                             f"({next(iter(self.pairs.unaligned.values()), 'none read')})")
        cfg = model.cfg
        self.layers, self.heads = cfg.n_decoder_layers, cfg.n_heads
        self.at = 0  # which of `items`
        self.layer, self.head = self.layers - 1, 0  # 0-based; head None: the layer's mean
        self.method = "output"
        self.gold: list | None = None  # per pair of the file
        self.gold_path: str | None = None
        self.scores: list | None = None  # per every_head() entry, once measured
        self.scores_method: str | None = None

    # -- moving -----------------------------------------------------------------------------------
    def move_pair(self, by: int) -> None:
        self.at = (self.at + by) % len(self.items)

    def move_layer(self, by: int) -> None:
        self.layer = (self.layer + by) % self.layers

    def move_head(self, by: int) -> None:
        """Through the heads, then the layer's mean, and round again."""
        order = [*range(self.heads), None]
        self.head = order[(order.index(self.head) + by) % len(order)]

    def toggle_method(self) -> None:
        self.method = "input" if self.method == "output" else "output"

    @property
    def selected(self):
        from minitx.core.interp.word_alignment import Head

        return Head(self.layer, self.head)

    # -- gold and scores --------------------------------------------------------------------------
    def read_gold(self, path: str) -> None:
        """A talp file with a line per pair of the pairs file (DataError naming the file and line
        otherwise); the heads' scores are measured again."""
        from minitx.core.interp.word_alignment import read_gold

        self.gold = read_gold(path, [p.shape for p in self.pairs.pairs], f"{Path(self.path).name} has")
        self.gold_path, self.scores, self.scores_method = path, None, None

    def head_list(self) -> list:
        from minitx.core.interp.word_alignment import every_head

        return every_head(self.layers, self.heads)

    def measure(self) -> tuple[list, str]:
        """Every head's Score (every_head's order) and layer mean's on the gold, with the method
        they were read with: one teacher-forced pass per batch (slow for a big model: a worker's)."""
        from minitx.core.interp.word_alignment import score_heads

        method = self.method
        return score_heads(self.model, self.pairs, self.gold, self.head_list(), method), method

    # -- the pair on screen -----------------------------------------------------------------------
    def view(self) -> PairView:
        import torch

        from minitx.core.interp.alignment import cross_attention
        from minitx.core.interp.word_alignment import grid_links, head_rows, word_grids

        number, batch, words = self.items[self.at]
        pair = self.pairs.pairs[number]
        cross = torch.stack(cross_attention(self.model, batch), dim=1)  # (1, L, h, T, S)
        links = grid_links(word_grids(cross, [words], [self.selected], self.method)[0, 0].cpu())
        rows = head_rows(cross, [self.selected])[0, 0].float().cpu()  # (T, S)
        target_words = words.target
        if self.method == "input":  # the piece at label t is the decoder's input at step t + 1
            rows, target_words = rows[1:], target_words[:-1]
        n_src, n_tgt = words.source_count, words.target_count
        to_source = torch.zeros(rows.shape[1], n_src)  # (S, Ws): each source piece's word
        for s, w in enumerate(words.source[: rows.shape[1]]):
            if w >= 0:
                to_source[s, w] = 1.0
        by_word = rows @ to_source  # (T, Ws): each row's weight on each source word
        weights = []
        for j in range(n_tgt):
            mine = [t for t, w in enumerate(target_words[: rows.shape[0]]) if w == j]
            weights.append(by_word[mine].mean(dim=0).tolist() if mine else [0.0] * n_src)
        return PairView(number, pair.line, pair.source.split(), pair.target.split(), weights, links,
                        self.gold[number] if self.gold is not None else None)

    def export_numbers(self) -> dict:
        """The pair on screen and the heads' scores, as plain data (the export key's JSON)."""
        v = self.view()
        head = self.selected
        out = {"pairs": self.path, "pair": v.number, "line": v.line, "head": head.to_dict(),
               "method": self.method, "source": v.source, "target": v.target,
               "weights": v.weights, "links": sorted(v.links)}
        if v.gold is not None:
            out["gold"] = {"sure": sorted(v.gold.sure), "possible": sorted(v.gold.possible - v.gold.sure)}
        if self.scores is not None:
            out["heads"] = [{**h.to_dict(), **s.to_dict()} for h, s in zip(self.head_list(), self.scores)]
        return out
