"""The model families minitx opens from Hugging Face folders, and what each one is when it trains:
one table (FAMILIES) that opening, fine-tuning, watching, export and compare all read.

Per family, as transformers' modeling_<family>.py has it (read there, transformers 5):
- `model_types`: config.json's model_type values that are this family (mt5 is a t5);
- `frozen`: minitx's tensors that transformers does not train. final_logits_bias (minitx's
  output.bias) is a buffer in Marian, BART, mBART and Pegasus (nn.Buffer); M2M100 and NLLB have
  no output bias at all (lm_head has none), so minitx's, zeros, must stay zeros; Pegasus'
  sinusoid tables are nn.Embedding(_freeze=True) (minitx keeps them as learned tables, read
  from its files, so they are frozen here); Marian's and M2M100's sinusoids are no parameters in
  minitx either;
- `pad_row_trained`: the token tables have no padding_idx (T5's and UMT5's nn.Embedding), so
  PAD's row gets a gradient like any other (the decoder starts from PAD); every other family
  passes padding_idx, whose row never learns;
- `lr`: the AdamW learning rate a fine-tune starts from (docs/training.md says where each comes
  from); `name`: how the family is called in the train header, `inspect` and the app, with
  `variants` for a tokeniser that makes the same network another model (mBART-50, NLLB-200).

"minitx" (MINITX) is every model that is none of these: a model minitx trained.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OUTPUT_BIAS = "output.bias"  # minitx's name for final_logits_bias


@dataclass(frozen=True)
class Family:
    key: str  # minitx's name for it (hf_weights' family)
    name: str  # what a person reads
    model_types: tuple[str, ...]  # config.json's model_type values
    frozen: tuple[str, ...]  # minitx tensor names transformers keeps fixed
    pad_row_trained: bool  # no padding_idx in transformers: PAD's rows learn
    lr: float  # a fine-tune's AdamW learning rate
    variants: dict[str, str] = field(default_factory=dict)  # tokeniser pipeline -> name

    def display_name(self, pipeline: str | None = None) -> str:
        """The family's name, or its variant's for a tokeniser `pipeline` (core/data/tokenisers.py
        PIPELINES: "mbart50" makes an mBART mBART-50, "nllb" an M2M100 NLLB-200)."""
        return self.variants.get(pipeline or "", self.name)


FAMILIES: dict[str, Family] = {f.key: f for f in (
    Family("marian", "Marian", ("marian",), (OUTPUT_BIAS,), False, 2e-5),
    Family("t5", "T5", ("t5", "mt5"), (), True, 1e-4),
    Family("umt5", "UMT5", ("umt5",), (), True, 1e-4),
    Family("bart", "BART", ("bart",), (OUTPUT_BIAS,), False, 2e-5),
    Family("mbart", "mBART", ("mbart",), (OUTPUT_BIAS,), False, 3e-5, {"mbart50": "mBART-50"}),
    Family("m2m_100", "M2M100", ("m2m_100",), (OUTPUT_BIAS,), False, 5e-5, {"nllb": "NLLB-200"}),
    Family("pegasus", "Pegasus", ("pegasus",), (OUTPUT_BIAS, "src_positions.weight", "tgt_positions.weight"),
           False, 5e-5),
)}
MINITX = Family("minitx", "minitx", (), (), False, 1e-4)
MODEL_TYPES = {kind: f.key for f in FAMILIES.values() for kind in f.model_types}  # model_type -> key


def family(key: str | None) -> Family:
    """The family called `key` (hf_weights' family name); MINITX for anything else."""
    return FAMILIES.get(key or "", MINITX)
