"""Word alignment's rules on hand-made cases: Och & Ney's AER, precision and recall worked out by
hand from the formula, talp gold files and their errors, pieces to words, which attention row
each method reads, and the symmetrization rules on textbook cases (fast_align's atools)."""

from __future__ import annotations

import pytest
import torch

from minitx.core.data.pair_files import DataError
from minitx.core.interp import word_alignment as wa

# ---------------------------------------------------------------------------------------------
# Scores


def test_aer_precision_recall_follow_och_and_ney_on_a_hand_made_pair():
    gold = wa.parse_talp("0-0 1-1 1p2")  # S = {0-0, 1-1}, P = S + {1-2}
    predicted = frozenset({(0, 0), (1, 2), (2, 2)})
    s = wa.score([predicted], [gold])
    # |A| = 3, |S| = 2, |A∩S| = 1 (0-0), |A∩P| = 2 (0-0, 1-2)
    assert (s.links, s.sure, s.sure_hits, s.possible_hits) == (3, 2, 1, 2)
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(1 / 2)
    assert s.aer == pytest.approx(1 - (1 + 2) / (3 + 2))


def test_scores_sum_counts_over_the_corpus_not_average_per_pair():
    gold = [wa.parse_talp("0-0"), wa.parse_talp("0-0")]
    predicted = [frozenset({(0, 0)}), frozenset({(0, 1), (1, 0), (2, 2)})]  # AER 0 and 1 alone
    s = wa.score(predicted, gold)
    assert s.aer == pytest.approx(1 - (1 + 1) / (4 + 2))  # 2/3, not the mean 0.5
    assert s.precision == pytest.approx(1 / 4) and s.recall == pytest.approx(1 / 2)


def test_a_perfect_alignment_of_sure_links_has_aer_zero_and_possible_links_cost_no_recall():
    gold = wa.parse_talp("0-0 1-1 2p2")
    assert wa.score([frozenset({(0, 0), (1, 1)})], [gold]).aer == 0.0
    assert wa.score([frozenset({(0, 0), (1, 1), (2, 2)})], [gold]).aer == 0.0


def test_tensor_scores_of_many_heads_equal_the_set_scores():
    generator = torch.Generator().manual_seed(0)
    grid = torch.rand(5, 3, 4, 6, generator=generator) < 0.3  # (B, heads, Ws, Wt)
    gold = [wa.Gold(frozenset({(0, 0), (1, 2), (3, 5)}), frozenset({(0, 0), (1, 2), (3, 5), (2, 2)}))] * 5
    by_tensor = wa.score_grids(grid, gold)
    for c in range(3):
        by_sets = wa.score([wa.grid_links(grid[b, c]) for b in range(5)], gold)
        assert by_tensor[c] == by_sets


# ---------------------------------------------------------------------------------------------
# Gold files


def test_talp_lines_without_p_are_all_sure_and_p_marks_possible_links():
    assert wa.parse_talp("0-0 2-1") == wa.Gold(frozenset({(0, 0), (2, 1)}), frozenset({(0, 0), (2, 1)}))
    g = wa.parse_talp("0p1 3-2")
    assert g.sure == {(3, 2)} and g.possible == {(0, 1), (3, 2)}
    assert wa.parse_talp("") == wa.Gold(frozenset(), frozenset())  # a pair with no links


@pytest.mark.parametrize("text, shapes, where", [
    ("0-0\n", [(1, 1), (2, 2)], "line 2"),  # a line short
    ("0-0\n0-0\n0-0\n", [(1, 1), (2, 2)], "line 3"),  # a line too many
    ("0-0\n1-3\n", [(1, 1), (2, 2)], "line 2"),  # target word 3 of 2
    ("0-0\n0x1\n", [(1, 1), (2, 2)], "line 2"),  # not a link
])
def test_a_gold_file_that_does_not_fit_the_pairs_names_the_file_and_line(tmp_path, text, shapes, where):
    path = tmp_path / "gold.talp"
    path.write_text(text)
    with pytest.raises(DataError) as caught:
        wa.read_gold(path, shapes)
    assert str(path) in str(caught.value) and where in str(caught.value)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------------------------
# Pieces to words


def test_sentencepiece_pieces_that_split_words_join_their_words():
    # ▁Hel lo ▁wor ld , </s>: "Hello world," is two words; a lone ▁ starts the word after it
    texts = [" Hel", "lo", " wor", "ld", ",", " ", "«", "x", None]
    assert wa.piece_words(texts) == ([0, 0, 1, 1, 1, 2, 2, 2, -1], 3)


def test_special_pieces_and_a_leading_language_code_belong_to_no_word():
    texts = [None, " Guten", " Mor", "gen", None]  # eng_Latn … </s>
    assert wa.piece_words(texts) == ([-1, 0, 1, 1, -1], 2)


def test_word_and_character_vocabularies_number_whitespace_words():
    from minitx.core.data.vocab import Vocab

    words = Vocab(("<pad>", "<s>", "</s>", "<unk>", "le", "chat", "noir"), 0, 1, 2, 3, "word")
    ids = [5, 3, 6, 2, 0]  # chat <unk> noir </s> <pad>
    assert wa.side_words(words, ids, "chat gris noir", "source") == ([0, 1, 2, -1, -1], 3)
    chars = Vocab(("<pad>", "<s>", "</s>", "<unk>", "a", "b", " "), 0, 1, 2, 3, "char")
    ids = [1, 4, 5, 6, 4, 2]  # <s> a b ␣ a </s>
    assert wa.side_words(chars, ids, "ab a", "source") == ([-1, 0, 0, 1, 1, -1], 2)
    with pytest.raises(wa.Unmappable):
        wa.side_words(words, [5, 6, 2], "chat", "target")


# ---------------------------------------------------------------------------------------------
# Which rows each method reads


def test_output_reads_the_predicting_step_and_input_the_step_fed_the_piece():
    # target pieces a b (labels a b </s>), source pieces x y </s>
    cross = torch.tensor([[0.1, 0.8, 0.1],   # step 0 predicts a (input: start): looks at y
                          [0.7, 0.2, 0.1],   # step 1 predicts b (input: a): looks at x
                          [0.1, 0.3, 0.6]])  # step 2 predicts </s> (input: b): </s>, then y
    cross = cross[None, None, None]  # (B, L, h, T, S)
    words = [wa.PairWords([0, 1, -1], [0, 1, -1], 2, 2)]
    head = [wa.Head(0, 0)]
    assert wa.grid_links(wa.word_grids(cross, words, head, "output")[0, 0]) == {(1, 0), (0, 1)}
    # input: a is read at step 1 (x), b at step 2 (y: </s> is never a link's end)
    assert wa.grid_links(wa.word_grids(cross, words, head, "input")[0, 0]) == {(0, 0), (1, 1)}


def test_a_layers_mean_is_the_mean_over_its_heads():
    one = torch.tensor([[0.6, 0.4, 0.0]])  # a single step
    two = torch.tensor([[0.0, 0.5, 0.5]])
    cross = torch.stack([one, two])[None, None]  # (1, 1, 2 heads, 1, 3)
    words = [wa.PairWords([0, 1, 2], [0, -1], 3, 1)]
    links = wa.word_grids(cross, words, [wa.Head(0, 0), wa.Head(0, 1), wa.Head(0)], "output")[0]
    assert [wa.grid_links(g) for g in links] == [{(0, 0)}, {(1, 0)}, {(1, 0)}]  # mean: .3 .45 .25


def test_word_links_go_back_onto_every_piece_of_both_words():
    # source pieces: ▁Hand tuch </s>  (word 0 twice, a special); labels: ▁to wel ▁x </s>
    words = [wa.PairWords([0, 0, -1], [0, 0, 1, -1], 1, 2)]
    grid = wa.piece_grid(words, [frozenset({(0, 0)})], T=5, S=4)  # wider than the pair: padding
    expected = torch.zeros(1, 5, 4, dtype=torch.bool)
    expected[0, :2, :2] = True  # both target pieces of word 0, both source pieces of word 0
    assert torch.equal(grid, expected)


def test_heads_named_from_one_are_checked_against_the_model():
    assert wa.head_of(6, 8) == wa.Head(5, None)
    assert wa.head_of(6, 8, 2, 3) == wa.Head(1, 2) and wa.Head(1, 2).name == "L2.H3"
    for layer, head in ((7, None), (2, 9), (None, 1)):
        with pytest.raises(ValueError):
            wa.head_of(6, 8, layer, head)


# ---------------------------------------------------------------------------------------------
# Symmetrization (fast_align's atools: -c intersect, union, grow-diag-final-and)


def test_intersection_and_union():
    forward, backward = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 2)}
    assert wa.symmetrize(forward, backward, "intersect") == {(0, 0)}
    assert wa.symmetrize(forward, backward, "union") == {(0, 0), (1, 1), (2, 1), (1, 2)}


def test_gdfa_grows_union_points_next_to_the_intersection_whose_words_are_not_both_aligned():
    # intersection 0-0 1-1; 1-2 (target 2 unaligned) and 2-1 (source 2 unaligned) neighbour 1-1
    forward, backward = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (1, 2)}
    assert wa.symmetrize(forward, backward, "gdfa") == {(0, 0), (1, 1), (2, 1), (1, 2)}


def test_gdfa_grows_along_diagonals_and_chains_within_a_pass():
    forward, backward = {(0, 0), (1, 1), (2, 2)}, {(0, 0)}
    assert wa.symmetrize(forward, backward, "gdfa") == {(0, 0), (1, 1), (2, 2)}


def test_gdfa_final_and_adds_a_lone_point_only_when_both_words_are_unaligned():
    # 2-2 neighbours nothing aligned, but neither word is aligned: final-and adds it
    assert wa.symmetrize({(0, 0), (2, 2)}, {(0, 0)}, "gdfa") == {(0, 0), (2, 2)}
    # 0-2 neighbours nothing aligned and source word 0 is aligned: final-and refuses it
    # (grow-diag-final, with its "or", would add it)
    assert wa.symmetrize({(0, 0), (0, 2)}, {(0, 0)}, "gdfa") == {(0, 0)}


def test_gdfa_considers_union_points_in_source_then_target_order():
    # intersection 1-1. In (i, j) order 0-0 comes first: both its words unaligned, neighbour 1-1
    # (diagonal): added. Then 0-1: source 0 and target 1 are both aligned now: refused.
    # (Taken the other way round, 0-1 would be added first and 0-0 after it.)
    assert wa.symmetrize({(1, 1), (0, 0)}, {(1, 1), (0, 1)}, "gdfa") == {(0, 0), (1, 1)}


def test_a_reverse_models_links_are_flipped_into_the_forward_orientation():
    assert wa.flipped({(0, 2), (1, 0)}) == {(2, 0), (0, 1)}
