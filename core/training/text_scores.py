"""Corpus BLEU and chrF of translations, as sacrebleu computes them: the field's standard
figures, each with the signature that says how it was computed (tokeniser, smoothing, version),
so a score can be compared with a paper's or a Hugging Face model card's. No torch."""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class TextScores:
    bleu: float  # corpus BLEU, 0-100 (sacrebleu's defaults: 13a tokens, exp smoothing)
    chrf: float  # corpus chrF2, 0-100
    bleu_signature: str
    chrf_signature: str

    def to_dict(self) -> dict:
        return {"bleu": self.bleu, "chrf": self.chrf, "bleu_signature": self.bleu_signature,
                "chrf_signature": self.chrf_signature}


def corpus_scores(hypotheses: list[str], references: list[str]) -> TextScores:
    """Corpus BLEU and chrF of `hypotheses` against one reference each, in order. sacrebleu
    itself scores a shorter reference list without a word, so unequal or empty lists raise."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} outputs but {len(references)} references: "
                         "BLEU and chrF need one reference per output")
    if not hypotheses:
        raise ValueError("no outputs to score: BLEU and chrF need at least one pair")
    bleu, chrf = BLEU(), CHRF()
    refs = [list(references)]  # sacrebleu's layout: one list per reference set
    return TextScores(bleu=float(bleu.corpus_score(list(hypotheses), refs).score),
                      chrf=float(chrf.corpus_score(list(hypotheses), refs).score),
                      bleu_signature=str(bleu.get_signature()),
                      chrf_signature=str(chrf.get_signature()))
