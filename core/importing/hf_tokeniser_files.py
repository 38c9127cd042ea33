"""The tokeniser files of an exported Hugging Face folder (core/importing/hf_export.py), what
AutoTokenizer opens beside the model:

- a model that came from a folder (opened, imported or fine-tuned) keeps its tokeniser's files
  (tokenizer.json; Marian's source.spm, target.spm and vocab.json, and target_vocab.json with a
  vocabulary per side; M2M100's sentencepiece.bpe.model and vocab.json): they are written as kept,
  with the settings transformers reads beside them (tokenizer_config.json, special_tokens_map.json)
  copied from the base folder when it still holds the same files, else written from the settings
  the model keeps (which hf_tokenisers.py read from it);
- a model of minitx's own vocabulary (digits, characters, words) gets a tokenizer.json written
  with the tokenizers library: a word-level model of its tokens, text split as its level splits
  it (core/data/vocab.py), its special tokens special, sources wrapped as the task wraps them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from minitx.core.data.m2m100_tokeniser import M2M100_CODES, M2M100Tokeniser
from minitx.core.data.subword import SubwordVocab
from minitx.core.data.task import Task
from minitx.core.data.tokenisers import TOKENIZER_JSON
from minitx.core.data.vocab import Vocab
from minitx.core.importing.hf_tokenisers import (
    ADDED_TOKENS,
    CLASSES,
    TARGET_VOCAB,
    TOKENIZER_CONFIG,
    TOKENS_MAP_FILE,
)

TOKENISER_CLASSES = {v: k for k, v in reversed(CLASSES.items())}  # minitx's pipeline -> the class
PLAIN_CLASS = "PreTrainedTokenizerFast"  # tokenizer.json as it is, no class's own pipeline


def json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def tokeniser_files(task: Task) -> dict[str, bytes]:
    """File name -> bytes of the tokeniser an exported folder holds."""
    if not isinstance(task.vocab, SubwordVocab):
        return minitx_tokeniser(task)
    files = {**task.src_vocab.files(), **task.vocab.files()}
    folder = Path(task.origin.folder if task.origin is not None else "")
    if folder.is_dir() and all((folder / n).is_file() and (folder / n).read_bytes() == data
                               for n, data in files.items()):
        for name in (TOKENIZER_CONFIG, TOKENS_MAP_FILE, ADDED_TOKENS):
            if (folder / name).is_file():
                files[name] = (folder / name).read_bytes()
        if TOKENIZER_CONFIG in files:
            kept = json.loads(files[TOKENIZER_CONFIG])
            languages = languages_of(task)
            if any(kept.get(k) != v for k, v in languages.items()):  # the model's pair, not the base's
                files[TOKENIZER_CONFIG] = json_bytes({**kept, **languages})
            return files
    files[TOKENIZER_CONFIG] = json_bytes(_tokenizer_config(task))
    return files


def languages_of(task: Task) -> dict[str, str]:
    """src_lang and tgt_lang of a multilingual tokeniser (NLLB, mBART), as the task reads its
    sides (hf_tokenisers reads them back from these keys); empty for any other."""
    source, target = task.src_vocab.tokeniser.settings, task.vocab.tokeniser.settings
    if "language" not in source or "language" not in target:
        return {}
    return {"src_lang": source["language"], "tgt_lang": target["language"]}


def _tokenizer_config(task: Task) -> dict[str, Any]:
    """tokenizer_config.json from the settings a model keeps of its tokeniser."""
    vocab = task.vocab
    settings = vocab.tokeniser.settings
    kind = settings["pipeline"] if "pipeline" in settings else vocab.tokeniser.kind  # marian, m2m100
    config: dict[str, Any] = {"tokenizer_class": TOKENISER_CLASSES.get(kind, PLAIN_CLASS),
                              "clean_up_tokenization_spaces": bool(settings.get("cleanup", False)),
                              "pad_token": vocab.tokens[vocab.pad]}
    if vocab.unk is not None:
        config["unk_token"] = vocab.tokens[vocab.unk]
    if kind in ("marian", "t5", M2M100Tokeniser.kind):
        config["eos_token"] = settings["eos"]
    if kind == M2M100Tokeniser.kind:  # its codes: the class's list that the settings hold
        config["language_codes"] = next(k for k, codes in M2M100_CODES.items()
                                        if list(codes) == settings["languages"])
    if kind == "roberta":
        config.update(bos_token=settings["cls"], cls_token=settings["cls"], eos_token=settings["sep"],
                      sep_token=settings["sep"], add_prefix_space=bool(settings.get("add_prefix_space")),
                      trim_offsets=bool(settings.get("trim_offsets", True)))
        if "<mask>" in settings.get("specials", []):
            config["mask_token"] = "<mask>"
    if kind == "marian":
        config["separate_vocabs"] = settings.get("vocab") == TARGET_VOCAB
    if kind in ("marian", M2M100Tokeniser.kind):  # Python tokenisers: their added tokens, by id
        config["added_tokens_decoder"] = {
            str(i): {"content": text, "lstrip": bool(lstrip), "rstrip": bool(rstrip),
                     "single_word": bool(single), "normalized": False,
                     "special": text in settings.get("specials", [])}
            for text, i, lstrip, rstrip, single in settings.get("added", [])}
    config.update(languages_of(task))
    if settings.get("language_at") == "suffix" and kind == "nllb":  # the code after </s>
        config["legacy_behaviour"] = True
    named = {v for k, v in config.items() if k.endswith("_token")}
    extra = [t for t in settings.get("specials", []) if t not in named]
    if extra:
        config["extra_special_tokens"] = extra
    return config


def minitx_tokeniser(task: Task) -> dict[str, bytes]:
    """tokenizer.json and tokenizer_config.json for a vocabulary of minitx's own: ids and text as
    the task reads a source (Vocab.encode_text, wrapped in SOS ... EOS where the task wraps) and
    shows an output (Task.format)."""
    vocab: Vocab = task.vocab
    specials = {i: vocab.tokens[i] for i in vocab.specials}
    words = {t: i for i, t in enumerate(vocab.tokens) if i not in specials}
    words.update({t: i for i, t in specials.items()})
    unk = specials.get(vocab.unk) if vocab.unk is not None else None
    tokenizer = Tokenizer(models.WordLevel(words, unk_token=unk))
    tokenizer.normalizer = normalizers.Strip()  # surrounding whitespace is dropped at every level
    one_char = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    if vocab.level == "word":
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    elif vocab.level == "digits":  # "3 1 4" and "314" alike
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), one_char])
    else:
        tokenizer.pre_tokenizer = one_char
        tokenizer.decoder = decoders.Fuse()  # characters joined; words and digits with spaces
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials.values()])
    sos, eos = specials[vocab.sos], specials[vocab.eos]
    if task.wraps_source:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{sos} $A {eos}", special_tokens=[(sos, vocab.sos), (eos, vocab.eos)])
    config = {"tokenizer_class": PLAIN_CLASS, "clean_up_tokenization_spaces": False,
              "pad_token": specials[vocab.pad], "bos_token": sos, "eos_token": eos,
              **({"unk_token": unk} if unk else {})}
    return {TOKENIZER_JSON: tokenizer.to_str().encode("utf-8"), TOKENIZER_CONFIG: json_bytes(config)}
