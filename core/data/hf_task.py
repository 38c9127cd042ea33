"""The task of a Hugging Face model (docs/huggingface.md): a folder's model with its own subword
tokenisers, one per side (core/data/subword.py).

It is an imported model's task (core/data/imported_task.py) in every way a command cares about:
two vocabularies, example pairs only when a file of them is given (`--pairs`), typed text read by
the model's own tokeniser. What differs:
- a source is fed exactly as the tokeniser makes it: its own special tokens (T5's and Marian's
  closing </s>, BART's <s> ... </s>) come from the tokeniser, so nothing is wrapped on top;
- outputs are text again through the tokeniser's decoder (pieces joined, specials dropped);
- how long an output may grow is the folder's generation settings' (model.generation), not a
  guess from the source's length;
- `origin` says which folder and model it was: the family, the model id when the folder sits in
  a Hugging Face cache, and each file read with its sha256.
"""

from __future__ import annotations

from minitx.core.data.imported_task import ImportedTask
from minitx.core.data.origin import Origin
from minitx.core.data.pair_task import PairSet
from minitx.core.data.vocab import Vocab

HF_TASK = "huggingface"
EXAMPLE = "The weather is nice today."  # a source to show first when no pairs were given


class HuggingFaceTask(ImportedTask):
    name = HF_TASK
    kind = "Hugging Face model"

    def __init__(self, vocab: Vocab, src_vocab: Vocab, origin: Origin, heldout: PairSet | None = None,
                 provenance: dict | None = None, counts: dict | None = None, min_len: int = 1,
                 max_len: int = 1, max_target_len: int = 1) -> None:
        super().__init__(vocab, src_vocab, False, origin, heldout, provenance, counts, min_len, max_len,
                         max_target_len)
        model = origin.model_id or origin.folder or "a folder"
        family = self.family_name() if origin.family else "Hugging Face"
        self.description = f"{model}, a {family} model from Hugging Face"

    def model_fields(self) -> dict[str, int]:
        """A source table of its own only where the two sides' ids differ (one tokeniser read for
        both sides is one id space; Marian's separate vocabularies are two of the same size)."""
        fields = super().model_fields()
        if self.src_vocab.tokens == self.vocab.tokens and self.src_vocab.pad == self.vocab.pad:
            fields.update(src_vocab_size=0, src_pad_id=-1)
        return fields

    def example(self) -> str:
        if self.heldout is not None:
            return super().example()
        return EXAMPLE

    def wrapping(self) -> str:
        return "as its tokeniser makes them"

    def notes(self) -> list[str]:
        return []  # its tokeniser reads the sources as transformers' does: nothing to warn of on every run

    def with_pairs(self, heldout: PairSet, provenance: dict, counts: dict, min_len: int, max_len: int,
                   max_target_len: int) -> HuggingFaceTask:
        return HuggingFaceTask(self.vocab, self.src_vocab, self.origin, heldout, provenance, counts, min_len,
                               max_len, max_target_len)

    def with_vocabularies(self, vocab: Vocab, src_vocab: Vocab) -> HuggingFaceTask:
        """The same task read by other vocabularies of its tokeniser (another language:
        core/data/languages.py). Pairs it keeps stay as they were read (commands choose the
        languages before they read --pairs)."""
        return HuggingFaceTask(vocab, src_vocab, self.origin, self.heldout, self.provenance or None,
                               self.counts or None, self.min_len, self.max_len, self.max_target_len)

    @classmethod
    def from_dict(cls, data: dict, vocab: Vocab, src_vocab: Vocab) -> HuggingFaceTask:
        """From a checkpoint, checked as an imported model's task is."""
        if data.get("wraps_source") is not False:
            raise ValueError("a Hugging Face model's task never wraps its sources")
        task = ImportedTask.from_dict(data, vocab, src_vocab, tokeniser_specials=True)
        return cls(vocab, src_vocab, task.origin, task.heldout, task.provenance or None,
                   task.counts or None, task.min_len, task.max_len, task.max_target_len)
