"""A toy digits task for the reference layouts, trained the way each one's own code trains, and
the files a user of that code would hand to `minitx import`.

- Tasks: "reverse" (3 1 4 -> 4 1 3) and "copy", over the digits 0-9.
- Vocabularies: each layout's specials at ids 0-3 in its own order (the tutorial: <unk> <pad>
  <bos> <eos>; the Annotated Transformer: <s> </s> <blank> <unk>), then the digits ordered as
  torchtext's build_vocab_from_iterator orders tokens (most frequent first, ties by spelling).
  Each side counts its own sample of the corpus, as each language's vocabulary is built from its
  own text, so the source and target vocabularies list the digits in different orders: an
  importer that mixes the two up fails. Nothing here uses minitx's ids.
- Wrapping: both codes' pipelines put every source and every target between start and end
  (BOS ... EOS, <s> ... </s>); the decoder reads the target without its end, the loss scores it
  without its start.
- Training: seeded, Adam with betas (0.9, 0.98) and eps 1e-9 as both codes use, dropout as in
  each model, fresh batches every step. `causal=False` trains without the causal mask (the
  decoder then sees the token it must predict: a low training loss, a model that cannot
  decode), for the doctor to name.
- Files: the state_dict as .pt (torch.save(model.state_dict())) and .safetensors, the two
  vocabularies (one token per line, line number = id), the whole model pickled
  (torch.save(model)), which an importer must refuse, and held-out pairs (TSV).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from tests.reference_models import annotated_transformer as annotated
from tests.reference_models import nn_transformer_tutorial as tutorial

TASKS = ("reverse", "copy")
DIGITS = tuple("0123456789")
TUTORIAL, ANNOTATED = "nn-transformer", "annotated"  # the names `minitx import --layout` takes


@dataclass(frozen=True)
class Layout:
    """A layout's specials, spelled as its code spells them, in id order (ids 0-3)."""

    name: str
    specials: tuple[str, ...]
    pad: str
    bos: str
    eos: str
    unk: str


LAYOUTS = {
    TUTORIAL: Layout(TUTORIAL, tutorial.SPECIAL_SYMBOLS, pad="<pad>", bos="<bos>", eos="<eos>",
                     unk="<unk>"),
    ANNOTATED: Layout(ANNOTATED, annotated.SPECIALS, pad="<blank>", bos="<s>", eos="</s>", unk="<unk>"),
}
# Ids the reference modules hard-code must be where the layouts put them.
assert LAYOUTS[TUTORIAL].specials.index("<pad>") == tutorial.PAD_IDX
assert LAYOUTS[ANNOTATED].specials.index("<blank>") == annotated.PAD_ID


def transform(task: str, digits: list[str]) -> list[str]:
    if task == "reverse":
        return digits[::-1]
    if task == "copy":
        return list(digits)
    raise ValueError(f"unknown toy task {task!r}; one of {', '.join(TASKS)}")


def random_sources(n: int, generator: torch.Generator, lo: int, hi: int) -> list[list[str]]:
    lengths = torch.randint(lo, hi + 1, (n,), generator=generator).tolist()
    return [[DIGITS[d] for d in torch.randint(0, 10, (L,), generator=generator).tolist()] for L in lengths]


def vocabulary(layout: str, task: str, side: str, corpus_size: int = 300) -> tuple[str, ...]:
    """The layout's specials, then the digits most frequent first (ties by spelling) in a seeded
    sample of this side ("src" or "tgt") of the task's corpus, each side its own sample."""
    generator = torch.Generator().manual_seed({"src": 1, "tgt": 2}[side])
    sources = random_sources(corpus_size, generator, 3, 6)
    sentences = sources if side == "src" else [transform(task, s) for s in sources]
    counts = Counter(token for sentence in sentences for token in sentence)
    ordered = sorted(counts, key=lambda token: (-counts[token], token))
    return LAYOUTS[layout].specials + tuple(ordered)


def encode(tokens: list[str], vocab: tuple[str, ...], layout: str) -> list[int]:
    """Token strings -> ids wrapped as start ... end, as both codes' pipelines wrap them."""
    spec = LAYOUTS[layout]
    return [vocab.index(spec.bos), *(vocab.index(t) for t in tokens), vocab.index(spec.eos)]


def padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    """Rows of ids -> (B, longest) right-padded."""
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


@dataclass
class ToyBatch:
    src: torch.Tensor  # (B, S) wrapped sources, padded; batch-first (the tutorial transposes)
    tgt: torch.Tensor  # (B, T) wrapped targets, padded
    sources: list[list[str]]  # the digits, unwrapped
    targets: list[list[str]]


def make_batch(layout: str, task: str, src_vocab, tgt_vocab, n: int, generator: torch.Generator,
               lo: int, hi: int) -> ToyBatch:
    pad = LAYOUTS[layout].pad
    sources = random_sources(n, generator, lo, hi)
    targets = [transform(task, s) for s in sources]
    src = padded([encode(s, src_vocab, layout) for s in sources], src_vocab.index(pad))
    tgt = padded([encode(t, tgt_vocab, layout) for t in targets], tgt_vocab.index(pad))
    return ToyBatch(src, tgt, sources, targets)


@dataclass(frozen=True)
class Shape:
    """The hyperparameters of a toy model (both layouts take the same)."""

    d_model: int = 32
    heads: int = 2
    d_ff: int = 64
    encoder_layers: int = 1
    decoder_layers: int = 1  # the Annotated Transformer has one N for both stacks
    dropout: float = 0.05


def build(layout: str, shape: Shape, src_size: int, tgt_size: int) -> nn.Module:
    """A freshly initialised model of the layout, initialised as its code initialises it."""
    if layout == TUTORIAL:
        model = tutorial.Seq2SeqTransformer(shape.encoder_layers, shape.decoder_layers, shape.d_model,
                                            shape.heads, src_size, tgt_size, shape.d_ff, shape.dropout)
        tutorial.init_parameters(model)
        return model
    if shape.encoder_layers != shape.decoder_layers:
        raise ValueError("the Annotated Transformer's make_model has one N for both stacks")
    return annotated.make_model(src_size, tgt_size, N=shape.encoder_layers, d_model=shape.d_model,
                                d_ff=shape.d_ff, h=shape.heads, dropout=shape.dropout)


def teacher_forced(layout: str, model: nn.Module, src: torch.Tensor, tgt_in: torch.Tensor,
                   causal: bool = True) -> torch.Tensor:
    """(B, S) sources and (B, T) decoder inputs, batch-first -> the layout's own output
    (B, T, V): the tutorial's logits, or the Annotated Transformer's log-probabilities. The
    masks are the ones each code trains with; causal=False leaves the causal mask out."""
    if layout == TUTORIAL:
        src_t, tgt_t = src.T, tgt_in.T  # (S, B), (T, B): the tutorial is sequence-first
        src_mask, tgt_mask, src_pad, tgt_pad = tutorial.create_mask(src_t, tgt_t)
        if not causal:
            tgt_mask = torch.zeros_like(tgt_mask)
        return model(src_t, tgt_t, src_mask, tgt_mask, src_pad, tgt_pad, src_pad).transpose(0, 1)
    pad = annotated.PAD_ID
    src_mask = (src != pad).unsqueeze(-2)  # (B, 1, S)
    if causal:
        tgt_mask = annotated.make_std_mask(tgt_in, pad)  # (B, T, T)
    else:
        tgt_mask = (tgt_in != pad).unsqueeze(-2)  # (B, 1, T): padding only
    return model.generator(model(src, tgt_in, src_mask, tgt_mask))


def loss_of(layout: str, output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over real target tokens: the tutorial's CrossEntropyLoss(ignore_index=
    PAD) on logits; the Annotated Transformer's loss on log-probabilities (its LabelSmoothing with
    smoothing 0 divided by the token count is this)."""
    flat, gold = output.flatten(0, 1), labels.flatten()
    if layout == TUTORIAL:
        return F.cross_entropy(flat, gold, ignore_index=tutorial.PAD_IDX)
    return F.nll_loss(flat, gold, ignore_index=annotated.PAD_ID)


@dataclass
class Trained:
    """A trained toy model (in eval mode; share it, never train it further) and how it was made."""

    layout: str
    task: str
    model: nn.Module
    shape: Shape
    src_vocab: tuple[str, ...]
    tgt_vocab: tuple[str, ...]
    causal: bool
    lengths: tuple[int, int]
    losses: list[float] = field(default_factory=list)  # every step's training loss

    @property
    def final_loss(self) -> float:
        """Mean of the last 20 steps' losses (one step's is noisy)."""
        tail = self.losses[-20:]
        return sum(tail) / len(tail)


def train(layout: str, task: str = "reverse", *, causal: bool = True, shape: Shape = Shape(),
          steps: int = 300, batch_size: int = 64, lr: float = 5e-3, warmup: int = 40, seed: int = 0,
          lengths: tuple[int, int] = (3, 5)) -> Trained:
    """Seeded training on fresh batches; linear warmup to lr, then flat. The defaults train a
    model of either layout to 97-99% exact match on reverse in about 2 s on one thread."""
    torch.manual_seed(seed)  # initialisation and dropout
    src_vocab, tgt_vocab = vocabulary(layout, task, "src"), vocabulary(layout, task, "tgt")
    model = build(layout, shape, len(src_vocab), len(tgt_vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    data = torch.Generator().manual_seed(seed + 1000)
    trained = Trained(layout, task, model, shape, src_vocab, tgt_vocab, causal, lengths)
    model.train()
    for step in range(1, steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, step / warmup)
        batch = make_batch(layout, task, src_vocab, tgt_vocab, batch_size, data, *lengths)
        output = teacher_forced(layout, model, batch.src, batch.tgt[:, :-1], causal)
        loss = loss_of(layout, output, batch.tgt[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        trained.losses.append(loss.item())
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return trained


# Where trained_once keeps the models it trained, between processes and runs (pytest's cache
# folder, set by tests/reference_models/fixtures.py; None: train in every process).
CACHE_DIR: Path | None = None


@functools.cache
def trained_once(layout: str, task: str = "reverse", causal: bool = True) -> Trained:
    """train() with the defaults, once: every test of a process shares these models, and with
    CACHE_DIR the processes and runs that follow load the same weights (seeded training gives
    them again; the key holds this code and torch's version, so a change trains anew)."""
    if CACHE_DIR is None:
        return train(layout, task, causal=causal)
    path = CACHE_DIR / f"{layout}-{task}-{'causal' if causal else 'no-mask'}-{_code_key()}.pt"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker trains it; the others wait, then load its file
        if not path.exists():
            trained = train(layout, task, causal=causal)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save({"state": trained.model.state_dict(), "src": list(trained.src_vocab),
                        "tgt": list(trained.tgt_vocab), "losses": torch.tensor(trained.losses)}, partial)
            os.replace(partial, path)  # whole, or not there
            return trained
    saved = torch.load(path, weights_only=True)
    model = build(layout, Shape(), len(saved["src"]), len(saved["tgt"]))
    trained = Trained(layout, task, model, Shape(), tuple(saved["src"]), tuple(saved["tgt"]), causal,
                      (3, 5), saved["losses"].tolist())
    trained.model.load_state_dict(saved["state"])
    trained.model.eval()
    for p in trained.model.parameters():
        p.requires_grad_(False)
    return trained


def _code_key() -> str:
    """The sha256 (16 hex digits) of the code that trains a toy model, and torch's version."""
    digest = hashlib.sha256(torch.__version__.encode())
    for module in (tutorial, annotated):
        digest.update(Path(module.__file__).read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def decode_digits(trained: Trained, sources: list[list[str]]) -> list[list[str]]:
    """Each source decoded by the layout's own greedy decoding, as digits (a special token
    other than the end reads as its spelling, so it counts as wrong)."""
    layout, model = trained.layout, trained.model
    wrapped = [encode(s, trained.src_vocab, layout) for s in sources]
    if layout == TUTORIAL:
        src = padded(wrapped, tutorial.PAD_IDX).T  # (S, B)
        # the tutorial's budget: max_len = wrapped length + 5, so up to that minus one new tokens
        out = tutorial.greedy_decode_batch(model, src, max_new_tokens=src.shape[0] + 4).T.tolist()
        rows = [r[: r.index(tutorial.EOS_IDX)] if tutorial.EOS_IDX in r else r for r in out]
    else:
        src = padded(wrapped, annotated.PAD_ID)  # (B, S)
        ys = annotated.greedy_decode(model, src, (src != annotated.PAD_ID).unsqueeze(-2),
                                     max_len=src.shape[1] + 2, start_symbol=annotated.BOS_ID)
        rows = [annotated.cut_at_end(r) for r in ys.tolist()]
    return [[trained.tgt_vocab[i] for i in row] for row in rows]


def exact_match(trained: Trained, n: int = 200, seed: int = 123) -> float:
    """Share of n fresh sources (of the training lengths) decoded exactly right."""
    sources = random_sources(n, torch.Generator().manual_seed(seed), *trained.lengths)
    decoded = decode_digits(trained, sources)
    right = sum(d == transform(trained.task, s) for d, s in zip(decoded, sources))
    return right / n


# ---------------------------------------------------------------------------------------------
# Files, as a user of each code would save them


def save_state_dict_pt(model: nn.Module, path: Path) -> Path:
    torch.save(model.state_dict(), path)
    return path


def save_state_dict_safetensors(model: nn.Module, path: Path) -> Path:
    save_file(model.state_dict(), str(path))
    return path


def save_pickled_model(model: nn.Module, path: Path) -> Path:
    """The whole module pickled, classes and all: what an importer must refuse to unpickle."""
    torch.save(model, path)
    return path


def write_vocab(tokens: tuple[str, ...], path: Path) -> Path:
    """One token per line, line number (from 0) = id, a newline after the last."""
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return path


def write_pairs(task: str, path: Path, n: int = 200, seed: int = 77,
                lengths: tuple[int, int] = (3, 5)) -> Path:
    """n held-out pairs of the toy task as a TSV file (source<TAB>target, digits spaced): the
    examples a user gives `minitx import --pairs` or `minitx eval --data`."""
    sources = random_sources(n, torch.Generator().manual_seed(seed), *lengths)
    path.write_text("".join(f"{' '.join(s)}\t{' '.join(transform(task, s))}\n" for s in sources),
                    encoding="utf-8")
    return path


@dataclass(frozen=True)
class ReferenceFiles:
    pt: Path
    safetensors: Path
    src_vocab: Path
    tgt_vocab: Path
    pickled: Path
    pairs: Path


def write_files(trained: Trained, folder: Path) -> ReferenceFiles:
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{trained.layout}-{trained.task}" + ("" if trained.causal else "-no-causal-mask")
    return ReferenceFiles(
        pt=save_state_dict_pt(trained.model, folder / f"{stem}.pt"),
        safetensors=save_state_dict_safetensors(trained.model, folder / f"{stem}.safetensors"),
        src_vocab=write_vocab(trained.src_vocab, folder / f"{stem}.src.vocab"),
        tgt_vocab=write_vocab(trained.tgt_vocab, folder / f"{stem}.tgt.vocab"),
        pickled=save_pickled_model(trained.model, folder / f"{stem}.model.pt"),
        pairs=write_pairs(trained.task, folder / f"{stem}.pairs.tsv"),
    )
