"""Tiny Hugging Face tokenisers trained in the test, saved as real folders are.

`save_tokeniser(folder, family, vocab_size)` trains a tokeniser of the family on CORPUS (a few
hundred short English/German sentence pairs with accents, digits and punctuation), wraps it in
transformers' own class for the family and writes it with `save_pretrained`, so the folder holds
what a real one holds:

- "marian": sentencepiece's trainer makes source.spm (English) and target.spm (German); vocab.json
  is </s> 0, <unk> 1, the source pieces, the target pieces the source lacks, <pad> last, as an
  opus-mt folder's is (no tokenizer.json). When the two models' pieces outnumber the size asked,
  the last target-only pieces are left out of vocab.json: the target side then reads them as <unk>,
  as MarianTokenizer reads any piece vocab.json lacks. Written by MarianTokenizer. With
  `separate_vocabs`, vocab.json holds the source pieces and target_vocab.json the target ones
  (each </s> 0, <unk> 1, …, <pad> last, `vocab_size` ids; config.json's decoder_vocab_size).
- "t5": the tokenizers library's Unigram trainer (T5's layout: <pad> 0, </s> 1, <unk> 2, the
  pieces, then `extra_ids` sentinels <extra_id_N> last, in reverse order). Written by T5TokenizerFast.
- "bart": the tokenizers library's byte-level BPE trainer (<s> 0, <pad> 1, </s> 2, <unk> 3, the
  pieces, <mask> last with lstrip, as facebook/bart-*'s is). Written by BartTokenizerFast.

- "m2m100" (not in FAMILIES): M2M100Tokenizer's own files, as facebook/m2m100_* keep them:
  sentencepiece's BPE trainer makes sentencepiece.bpe.model; vocab.json is <s> 0, <pad> 1, </s> 2,
  <unk> 3, then the pieces; the 100 `__xx__` language codes follow vocab.json's ids and are named
  as extra special tokens (real folders list them). Written by M2M100Tokenizer.

`save_wide_marian(folder, vocab_size)` writes a Marian tokeniser as large as a real opus-mt's
(58,101 ids), its pieces past the tiny ones unused, for the benchmarks (benchmarks/hf_load.py).

`vocab_size` is the tokeniser's whole size, which a model's config.json `vocab_size` must equal;
SPECIAL_IDS says where each family's specials are. Nothing downloads anything.
"""

from __future__ import annotations

import io
import json
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

FAMILIES = ("marian", "t5", "bart")
MULTILINGUAL = ("nllb", "mbart50")  # tokenisers with language codes (not in the tokeniser tests' FAMILIES)
# ... and those whose code follows the text's </s>: MBartTokenizer (mbart-large-cc25's), and
# NllbTokenizer with legacy_behaviour
SUFFIX_CODES = ("mbart", "nllb-legacy")
MBART_CODES = 25  # MBartTokenizer adds cc25's 25 codes and <mask> after the pieces
NLLB_LANGUAGES = ("deu_Latn", "eng_Latn", "fra_Latn", "spa_Latn")  # a tiny NLLB's codes (the real has 202)
MBART50_CODES = 52  # MBart50Tokenizer adds its 52 codes and <mask> after the pieces
OTHERS = ("pegasus", "m2m100")  # nor these (tests/huggingface/test_families.py, test_m2m100_tokeniser.py)
M2M100_CODES = 100  # M2M100Tokenizer's language codes (language_codes "m2m100"), after vocab.json
PEGASUS_SPECIALS = ["<pad>", "</s>", "<mask_1>", "<mask_2>", *(f"<unk_{i}>" for i in range(2, 103)), "<unk>"]
DEFAULT_SIZES = {"marian": 300, "t5": 300, "bart": 400, "nllb": 400, "mbart50": 400, "pegasus": 400,
                 "mbart": 400, "nllb-legacy": 400, "m2m100": 400}
T5_EXTRA_IDS = 10  # real T5 folders have 100 sentinels; ten keep a tiny vocabulary mostly pieces
SIZE_RANGES = {"marian": (150, 500), "t5": (120, 700), "bart": (262, 1300), "nllb": (200, 600),
               "mbart50": (200, 600), "pegasus": (300, 600), "mbart": (200, 600),
               "nllb-legacy": (200, 600), "m2m100": (300, 500)}  # what CORPUS trains

NAMES = ["Anna", "José", "Zoë", "Jürgen", "François", "Søren", "Chloé", "Björn", "Renée", "Ömer",
         "Máire", "Luís", "Agnès", "Håkon", "Élodie", "Grégoire", "Małgorzata", "Tomás"]
CITIES = ["München", "Zürich", "Köln", "Genève", "Malmö", "Düsseldorf", "Besançon", "Göteborg",
          "Bruxelles", "Kraków", "Tübingen", "Örebro", "Nürnberg", "Lübeck"]
ITEMS = [("apples", "Äpfel"), ("books", "Bücher"), ("chairs", "Stühle"), ("keys", "Schlüssel"),
         ("cups of coffee", "Tassen Kaffee"), ("cakes", "Kuchen"), ("birds", "Vögel"),
         ("shoes", "Schuhe"), ("tickets", "Fahrkarten"), ("bottles of water", "Flaschen Wasser"),
         ("letters", "Briefe"), ("flowers", "Blumen"), ("pencils", "Bleistifte"), ("towels", "Handtücher")]
DAYS = [("Monday", "Montag"), ("Tuesday", "Dienstag"), ("Wednesday", "Mittwoch"), ("Thursday", "Donnerstag"),
        ("Friday", "Freitag"), ("Saturday", "Samstag"), ("Sunday", "Sonntag")]
TEMPLATES = [
    ("{name} has {n} {item}.", "{name} hat {n} {item_de}."),
    ("{name} lives in {city}.", "{name} wohnt in {city}."),
    ("On {day}, {name} drives to {city}.", "Am {day_de} fährt {name} nach {city}."),
    ("The train leaves at {h}:{m}.", "Der Zug fährt um {h}:{m} ab."),
    ("Is it true that {name} is {age} years old?", "Stimmt es, dass {name} {age} Jahre alt ist?"),
    ("{name} bought {n} {item} for {price} euros!", "{name} kaufte {n} {item_de} für {price} Euro!"),
    ("We met {name} in {city} in {year}.", "Wir trafen {name} {year} in {city}."),
    ("Why doesn't {name} eat the cake?", "Warum isst {name} den Kuchen nicht?"),
    ("The café in {city} opens at {h} o'clock.", "Das Café in {city} öffnet um {h} Uhr."),
    ("{name}'s brother is {age}; he was born in {year}.",
     "{name}s Bruder ist {age}; er wurde {year} geboren."),
    ("Please give me {n} {item}, not {n2}.", "Bitte gib mir {n} {item_de}, nicht {n2}."),
    ("The weather in {city} is nice today.", "Das Wetter in {city} ist heute schön."),
    ("My phone number is {phone}.", "Meine Telefonnummer ist {phone}."),
    ("\"Good morning,\" says {name}.", "„Guten Morgen“, sagt {name}."),
    ("Room {n} is on the {floor} floor.", "Zimmer {n} ist im {floor_de} Stock."),
    ("It costs {price} € (about {n} %).", "Es kostet {price} € (etwa {n} %)."),
]
FLOORS = [("first", "ersten"), ("second", "zweiten"), ("third", "dritten"), ("fourth", "vierten")]


def corpus(count: int = 600, seed: int = 0) -> list[tuple[str, str]]:
    """(English, German) pairs, the same every time."""
    rng = random.Random(seed)
    pairs = []
    for i in range(count):
        en, de = TEMPLATES[i % len(TEMPLATES)]
        item, item_de = rng.choice(ITEMS)
        day, day_de = rng.choice(DAYS)
        floor, floor_de = rng.choice(FLOORS)
        fill = dict(name=rng.choice(NAMES), city=rng.choice(CITIES), item=item, item_de=item_de, day=day,
                    day_de=day_de, floor=floor, floor_de=floor_de, n=rng.randint(2, 99), n2=rng.randint(2, 9),
                    h=rng.randint(1, 23), m=f"{rng.randint(0, 59):02d}", age=rng.randint(3, 90),
                    year=rng.randint(1900, 2030), price=f"{rng.randint(1, 500)},{rng.randint(0, 99):02d}",
                    phone=f"0{rng.randint(30, 899)} {rng.randint(100000, 9999999)}")
        pairs.append((en.format(**fill), de.format(**fill)))
    return pairs


CORPUS = corpus()


@dataclass(frozen=True)
class TokeniserInfo:
    """What a model's config.json must say for the tokeniser `save_tokeniser` wrote."""

    family: str
    vocab_size: int
    pad: int
    eos: int
    unk: int
    decoder_start: int  # config.json's decoder_start_token_id
    bos: int | None = None  # BART's <s> (its forced_bos_token_id); None for the others
    files: tuple[str, ...] = ()


SPECIAL_IDS = {  # family -> where the specials are, for a tokeniser of `size` ids
    "marian": lambda size: dict(pad=size - 1, eos=0, unk=1, decoder_start=size - 1, bos=None),
    "t5": lambda size: dict(pad=0, eos=1, unk=2, decoder_start=0, bos=None),
    "bart": lambda size: dict(pad=1, eos=2, unk=3, decoder_start=2, bos=0),
    "nllb": lambda size: dict(pad=1, eos=2, unk=3, decoder_start=2, bos=0),
    "mbart50": lambda size: dict(pad=1, eos=2, unk=3, decoder_start=2, bos=0),
    "mbart": lambda size: dict(pad=1, eos=2, unk=3, decoder_start=2, bos=0),
    "nllb-legacy": lambda size: dict(pad=1, eos=2, unk=3, decoder_start=2, bos=0),
    "m2m100": lambda size: dict(pad=1, eos=2, unk=3, decoder_start=2, bos=0),
    "pegasus": lambda size: dict(pad=0, eos=1, unk=len(PEGASUS_SPECIALS) - 1, decoder_start=0, bos=None),
}


def save_tokeniser(folder, family: str, vocab_size: int | None = None,
                   separate_vocabs: bool = False) -> TokeniserInfo:
    """Train a `family` tokeniser of exactly `vocab_size` ids (default DEFAULT_SIZES) and save it
    into `folder` (created if missing) with transformers' own class. ValueError for a size the
    corpus cannot train. `separate_vocabs`: a Marian tokeniser with a vocabulary per side."""
    known = FAMILIES + MULTILINGUAL + SUFFIX_CODES + OTHERS
    if family not in known:
        raise ValueError(f"family must be one of {', '.join(known)}, not {family!r}")
    if separate_vocabs and family != "marian":
        raise ValueError("only a Marian tokeniser keeps separate vocabularies")
    size = DEFAULT_SIZES[family] if vocab_size is None else vocab_size
    low, high = SIZE_RANGES[family]
    if not low <= size <= high:
        raise ValueError(f"a tiny {family} tokeniser has {low} to {high} ids, not {size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if separate_vocabs:
        tokenizer = _marian_separate(size)
    else:
        make = {"marian": _marian, "t5": _t5, "bart": _bart, "nllb": _nllb, "mbart50": _mbart50,
                "pegasus": _pegasus, "mbart": _mbart, "nllb-legacy": _nllb_legacy, "m2m100": _m2m100}[family]
        tokenizer = make(size)
        assert len(tokenizer) == size, (family, len(tokenizer), size)
    files = tokenizer.save_pretrained(str(folder))
    return TokeniserInfo(family, size, files=tuple(sorted(Path(f).name for f in files)),
                         **SPECIAL_IDS[family](size))


def save_wide_marian(folder, vocab_size: int) -> TokeniserInfo:
    """A Marian tokeniser of `vocab_size` ids, however many (a real opus-mt's 58,101): the tiny
    one's source.spm and target.spm, and a vocab.json whose ids past their pieces hold pieces
    neither .spm makes ("▁unused1", …), <pad> last, as opus-mt numbers it. Typed text reaches only
    the first few hundred ids; a model of that vocabulary reads and writes all of them (what the
    benchmarks time). Written by MarianTokenizer."""
    source, target = (_spm(texts, DEFAULT_SIZES["marian"]) for texts in
                      ([en for en, _ in CORPUS], [de for _, de in CORPUS]))
    pieces = list(dict.fromkeys(_ordinary(source) + _ordinary(target)))
    wanted = vocab_size - 3  # </s>, <unk>, <pad>
    if wanted < len(pieces):
        raise ValueError(f"a wide Marian tokeniser has at least {len(pieces) + 3} ids, not {vocab_size}")
    pieces += [f"▁unused{i}" for i in range(1, wanted - len(pieces) + 1)]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _marian_files(source, target, _marian_vocab(pieces))
    assert len(tokenizer) == vocab_size, (len(tokenizer), vocab_size)
    files = tokenizer.save_pretrained(str(folder))
    return TokeniserInfo("marian", vocab_size, files=tuple(sorted(Path(f).name for f in files)),
                         **SPECIAL_IDS["marian"](vocab_size))


def _texts() -> list[str]:
    return [text for pair in CORPUS for text in pair]


def _t5(size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import T5TokenizerFast

    trained = Tokenizer(models.Unigram())
    trained.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    trainer = trainers.UnigramTrainer(vocab_size=size - T5_EXTRA_IDS, unk_token="<unk>", show_progress=False,
                                      special_tokens=["<pad>", "</s>", "<unk>"])
    trained.train_from_iterator(_texts(), trainer)
    pieces = [tuple(p) for p in json.loads(trained.to_str())["model"]["vocab"]]
    if len(pieces) != size - T5_EXTRA_IDS:
        raise ValueError(f"the corpus trains {len(pieces)} T5 pieces, not {size - T5_EXTRA_IDS}")
    sentinels = [(f"<extra_id_{i}>", 0.0) for i in reversed(range(T5_EXTRA_IDS))]
    return T5TokenizerFast(vocab=pieces + sentinels, extra_ids=T5_EXTRA_IDS)


def _bart(size: int):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
    from transformers import BartTokenizerFast

    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=size - 1, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    trained.train_from_iterator(_texts(), trainer)
    model = json.loads(trained.to_str())["model"]
    if len(model["vocab"]) != size - 1:
        raise ValueError(f"the corpus trains {len(model['vocab'])} BPE pieces, not {size - 1}")
    return BartTokenizerFast(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]],
                             mask_token=AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False,
                                                   special=True))


def _nllb_legacy(size: int):
    """NLLB-200's, with legacy_behaviour: the language code after the text's </s>."""
    return _nllb(size, legacy=True)


def _nllb(size: int, legacy: bool = False):
    """NLLB-200's layout: a sentencepiece-style BPE (<s> 0, <pad> 1, </s> 2, <unk> 3, the pieces),
    then the language codes and <mask>. Written by NllbTokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import NllbTokenizer

    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=size - len(NLLB_LANGUAGES) - 1, show_progress=False,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    trained.train_from_iterator(_texts(), trainer)
    model = json.loads(trained.to_str())["model"]
    return NllbTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]],
                         extra_special_tokens=list(NLLB_LANGUAGES), legacy_behaviour=legacy)


def _mbart50(size: int):
    """mBART-50's layout: <s> 0, <pad> 1, </s> 2, <unk> 3, the Unigram pieces (trained as
    sentencepiece orders them, <unk> <s> </s> first, which the class replaces), then its 52
    language codes and <mask>. Written by MBart50Tokenizer."""
    from transformers import MBart50Tokenizer

    # its 3 specials give way to 4, and <mask> comes last
    return MBart50Tokenizer(vocab=_unigram_pieces(size - MBART50_CODES - 2))


def _mbart(size: int):
    """mbart-large-cc25's layout: as mBART-50's, with cc25's 25 language codes, each written
    after the text's </s>. Written by MBartTokenizer."""
    from transformers import MBartTokenizer
    from transformers.models.mbart.tokenization_mbart import FAIRSEQ_LANGUAGE_CODES

    pieces = _unigram_pieces(size - MBART_CODES - 2)[3:]  # the class takes its vocabulary as it is:
    specials = [(t, 0.0) for t in ("<s>", "<pad>", "</s>", "<unk>")]  # fairseq's order, codes last
    codes = [(c, 0.0) for c in FAIRSEQ_LANGUAGE_CODES]
    return MBartTokenizer(vocab=specials + pieces + codes + [("<mask>", 0.0)])


def _unigram_pieces(wanted: int) -> list[tuple[str, float]]:
    """`wanted` Unigram pieces of the corpus, <unk> <s> </s> first, as sentencepiece orders them."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    trained = Tokenizer(models.Unigram())
    trained.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=wanted, unk_token="<unk>", show_progress=False,
                                      special_tokens=["<unk>", "<s>", "</s>"])
    trained.train_from_iterator(_texts(), trainer)
    pieces = [tuple(p) for p in json.loads(trained.to_str())["model"]["vocab"]]
    if len(pieces) != wanted:
        raise ValueError(f"the corpus trains {len(pieces)} mBART pieces, not {wanted}")
    return pieces


def _pegasus(size: int):
    """google/pegasus-*'s layout: <pad> 0, </s> 1, <mask_1> 2, <mask_2> 3, <unk_2> … <unk_102>,
    <unk> 105, then the Unigram pieces. Written by PegasusTokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PegasusTokenizer

    trained = Tokenizer(models.Unigram())
    trained.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=size, unk_token="<unk>", show_progress=False,
                                      special_tokens=PEGASUS_SPECIALS)
    trained.train_from_iterator(_texts(), trainer)
    pieces = [tuple(p) for p in json.loads(trained.to_str())["model"]["vocab"]]
    if len(pieces) != size:
        raise ValueError(f"the corpus trains {len(pieces)} Pegasus pieces, not {size}")
    return PegasusTokenizer(vocab=pieces)


def _m2m100(size: int):
    """M2M100's layout (see the module's docstring). Written by M2M100Tokenizer."""
    import sentencepiece
    from transformers import M2M100Tokenizer
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    wanted = size - M2M100_CODES - 4  # the pieces, beside <s> <pad> </s> <unk> and the codes
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_texts()), model_writer=model, vocab_size=wanted + 3, model_type="bpe",
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, num_threads=1)
    pieces = _ordinary(model.getvalue())
    if len(pieces) != wanted:
        raise ValueError(f"the corpus trains {len(pieces)} M2M100 pieces, not {wanted}")
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, **{p: i + 4 for i, p in enumerate(pieces)}}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "sentencepiece.bpe.model").write_bytes(model.getvalue())
        (scratch / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        codes = [f"__{c}__" for c in FAIRSEQ_LANGUAGE_CODES["m2m100"]]
        tokenizer = M2M100Tokenizer(vocab_file=str(scratch / "vocab.json"),
                                    spm_file=str(scratch / "sentencepiece.bpe.model"),
                                    additional_special_tokens=codes)
        return tokenizer


def _spm(texts: list[str], size: int) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=size, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, num_threads=1)
    return model.getvalue()


def _ordinary(model: bytes) -> list[str]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_proto=model)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i))]


def _marian(size: int):
    wanted = size - 3  # </s>, <unk>, <pad>
    per_side = max(100, wanted * 2 // 3)
    for _ in range(8):  # the two models share pieces: grow them until they cover `wanted`
        source = _spm([en for en, _ in CORPUS], per_side)
        target = _spm([de for _, de in CORPUS], per_side)
        pieces = list(dict.fromkeys(_ordinary(source) + _ordinary(target)))
        if len(pieces) >= wanted:
            break
        per_side += wanted - len(pieces)
    else:
        raise ValueError(f"the corpus trains {len(pieces)} Marian pieces, not {wanted}")
    return _marian_files(source, target, _marian_vocab(pieces[:wanted]))


def _marian_vocab(pieces: list[str]) -> dict[str, int]:
    return {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}, "<pad>": len(pieces) + 2}


def _marian_files(source: bytes, target: bytes, vocab: dict, target_vocab: dict | None = None):
    from transformers import MarianTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "source.spm").write_bytes(source)
        (scratch / "target.spm").write_bytes(target)
        for name, pieces in (("vocab.json", vocab), ("target_vocab.json", target_vocab)):
            if pieces is not None:
                (scratch / name).write_text(json.dumps(pieces, ensure_ascii=False), encoding="utf-8")
        separate = {} if target_vocab is None else {"target_vocab_file": str(scratch / "target_vocab.json"),
                                                    "separate_vocabs": True}
        return MarianTokenizer(source_spm=str(scratch / "source.spm"), target_spm=str(scratch / "target.spm"),
                               vocab=str(scratch / "vocab.json"), source_lang="en", target_lang="de",
                               **separate)


def _marian_separate(size: int):
    """Each side's pieces in a vocabulary of its own, both `size` ids long."""
    source = _spm([en for en, _ in CORPUS], size)  # its <unk>, <s>, </s> make room for </s>, <unk>, <pad>
    target = _spm([de for _, de in CORPUS], size)
    vocabs = [_marian_vocab(_ordinary(model)) for model in (source, target)]
    if any(len(v) != size for v in vocabs):
        raise ValueError(f"the corpus trains {[len(v) for v in vocabs]} Marian pieces a side, not {size}")
    return _marian_files(source, target, *vocabs)
