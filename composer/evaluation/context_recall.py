"""In-context recall of a trained causal language model, measured on the model itself with no extra training.

Why: the search's recall probe (``search/recall.py``) trains separate mixers on MQAR, so it says nothing about the
model that is ranked, costed and recommended. Peers measure recall on the trained model: Zoology splits held-out
tokens by whether they complete an n-gram seen earlier in the context (the "associative recall hits" slice,
arXiv 2312.04927), and the copy literature scores the second occurrence of a repeated span (arXiv 2402.01032).
This module does both, on held-out text the model never trained on:

* **Copy gain** (:func:`copy_gain`). Sequences of the model's context hold a span of ``span`` tokens, filler, and
  the same span again ``distance`` tokens after the first starts. The gain of a sequence is the mean loss on the
  first occurrence's tokens minus that on the second's, each copy's first token left out (no model can predict
  it). A model that retrieves from its context predicts the second copy better (gain > 0); one that cannot sees
  the same tokens after the same local context twice, so its gain is 0 up to what its context differs in. Spans
  are of two kinds: ``text``, cut from held-out text, and ``random``, tokens drawn uniformly (printable ASCII for
  the byte tokenizer), which only a copy can predict. The filler is held-out text.
* **Associative-recall slice** (:func:`ar_slice`). On held-out windows of the context length, a token is an *AR
  hit* when the n-gram of the ``ngram`` tokens ending at it occurred earlier in the window. Zoology's contrast is
  the loss on the rest minus the loss on hits. Hits are also the text's frequent n-grams, which even a model
  without context predicts well, so the slice is read between models; beside it, ``repeat_gain`` compares each
  hit with its n-gram's first occurrence in the window, whose ``ngram - 1`` preceding tokens are the same: a model
  that sees no further back than that scores the two alike.

Every difference comes with a t interval over sequences (windows for the AR slice; a window without a hit has
no pair and is left out), from :func:`composer.statistics.paired_difference` keyed by sequence index. Losses are
in nats per token. Spans, fillers and windows depend only on the held-out tokens and ``seed`` (numpy's generator,
never torch's global one), so two models, or two training seeds of one model, are scored on the same sequences.
Both copies see the span spliced into filler; the second sits later in the sequence, so a model whose loss still
falls with position past ``lead`` tokens shows a small gain without retrieving anything (the AR ``repeat_gain``
shares this): read a gain beside that of an attention-free model trained alike.

Defaults per tokenizer: a span of 64 bytes (about a line of text or code; after its first few bytes a random
printable span is fixed by its earlier copy alone, a chance match of 8 printable bytes being ~1e-16) or 32
subword tokens (about 130 bytes of English), at most a quarter of the context so that the lead, two copies and
a gap fit; n-grams of 8 bytes or 3 subword tokens for the AR slice (a 2- or 3-byte n-gram recurs in any window
by the text's statistics alone, 8 bytes is about one to two words, like a subword trigram).

:func:`measure` takes an in-memory model and held-out tokens (what the search needs); :func:`measure_model_dir`
reads a model directory written by ``composer train`` and the validation split of its run
(:mod:`composer.evaluation.loading`), which ``composer eval --tasks recall`` calls.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from composer.data.repeated_spans import default_span as span_for
from composer.data.tokenizer import ByteTokenizer
from composer.errors import ConfigError
from composer.statistics import format_interval, paired_difference

TASK = "recall"  # the name composer eval knows it by
KINDS = ("text", "random")
BYTE_NGRAM, SUBWORD_NGRAM = 8, 3
PRINTABLE_BYTES = np.arange(32, 127)  # what random spans of the byte tokenizer are drawn from
DEFAULT_SEQUENCES = 64  # per kind (each scored at every distance) and AR windows
DEFAULT_BATCH_SIZE = 8


# -- defaults ------------------------------------------------------------------------------------------------
def is_bytes(tokenizer: Any) -> bool:
    return isinstance(tokenizer, ByteTokenizer) or getattr(tokenizer, "name", None) == ByteTokenizer.name


def default_span(tokenizer: Any, seq_len: int) -> int:
    """64 bytes or 32 subword tokens, at most a quarter of the context (module docstring); the span length the
    recall-bearing training stream repeats too (``composer.data.repeated_spans``)."""
    return span_for(is_bytes(tokenizer), seq_len)


def default_ngram(tokenizer: Any) -> int:
    """8 bytes or 3 subword tokens (module docstring)."""
    return BYTE_NGRAM if is_bytes(tokenizer) else SUBWORD_NGRAM


def copy_distances(seq_len: int, span: int) -> list[int]:
    """The distances (second copy's start minus the first's) that fit: the powers of two from ``span`` on
    (``distance == span`` repeats the span at once) with the lead, the gap and both copies inside the sequence."""
    lead, length = span, seq_len + 1
    distances, distance = [], 1 << math.ceil(math.log2(span))
    while lead + distance + span <= length:
        distances.append(distance)
        distance *= 2
    return distances


def random_span_ids(tokenizer: Any) -> np.ndarray:
    """The ids random spans are drawn from: printable ASCII for bytes (other bytes alone are not UTF-8, so their
    loss measures surprise at impossible text), else every id but EOS and the tokenizer's special tokens."""
    if is_bytes(tokenizer):
        return PRINTABLE_BYTES
    special = {int(tokenizer.eos_id), *getattr(getattr(tokenizer, "hf", None), "all_special_ids", ())}
    ids = np.setdiff1d(np.arange(int(tokenizer.vocab_size)), np.fromiter(special, np.int64))
    if ids.size == 0:
        raise ConfigError(f"tokenizer {getattr(tokenizer, 'name', tokenizer)!r} has no ordinary ids to draw from")
    return ids


# -- scoring -------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """``model`` in eval mode without gradients, its training flag restored after (the search may call this
    between training steps)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def model_device(model: torch.nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def token_losses(
    model: torch.nn.Module, sequences: np.ndarray, batch_size: int, device: torch.device
) -> np.ndarray:
    """``[n, length - 1]`` losses: entry ``p - 1`` is the model's loss on token ``p`` of each sequence given the
    tokens before it (the model reads ``sequences[:, :-1]``, as in training and validation)."""
    out = []
    for start in range(0, len(sequences), batch_size):
        batch = torch.as_tensor(np.asarray(sequences[start:start + batch_size], np.int64), device=device)
        logits = model(batch[:, :-1]).logits.float()
        losses = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")
        out.append(losses.double().cpu().numpy())
    return np.concatenate(out)


def paired(values: Sequence[float], reference: Sequence[float]) -> dict[str, Any]:
    """Mean of ``values - reference`` with its t interval over the sequences (pairs with a NaN are left out)."""
    result = paired_difference(dict(enumerate(values)), dict(enumerate(reference)))
    return {"mean": result["mean"], "sd": result["std"], "ci": result["ci"], "n": result["n"]}


def _mean(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None


# -- copy gain -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CopyMaterial:
    """What the copy sequences are made of: one filler row of ``seq_len + 1`` tokens and one span of each kind per
    sequence. The same rows serve every distance, so distances are compared on the same spans and fillers."""

    fillers: np.ndarray  # [n, seq_len + 1]
    spans: dict[str, np.ndarray]  # kind -> [n, span]


def draw_copy_material(
    tokens: np.ndarray, tokenizer: Any, seq_len: int, span: int, n: int, seed: int
) -> CopyMaterial:
    """Fillers and spans from held-out ``tokens``, by ``seed`` alone.

    Text spans come from the first half of the tokens and fillers from the second, so a filler never holds the
    span it surrounds; a text span never crosses a document boundary (no EOS in it)."""
    tokens = np.asarray(tokens)
    length = seq_len + 1
    span_pool, filler_pool = tokens[: tokens.size // 2], tokens[tokens.size // 2:]
    if filler_pool.size < length:
        raise ConfigError(f"the held-out text has {tokens.size:,} tokens: too few for copy sequences of "
                          f"{length:,} (at least twice that); use more data or a shorter --seq-len")
    eos = np.concatenate([[0], np.cumsum(span_pool == int(tokenizer.eos_id))])
    starts = np.flatnonzero(eos[span:] - eos[:-span] == 0) if span_pool.size >= span else np.array([], np.int64)
    if starts.size == 0:
        raise ConfigError(f"the held-out text has no {span} consecutive tokens within a document to cut a text "
                          "span from; use more data or a shorter --span")
    rng = np.random.default_rng(seed)
    filler_starts = rng.integers(0, filler_pool.size - length + 1, size=n)
    text_starts = rng.choice(starts, size=n, replace=starts.size < n)
    random_spans = rng.choice(random_span_ids(tokenizer), size=(n, span))
    fillers = filler_pool[filler_starts[:, None] + np.arange(length)].astype(np.int64)
    text_spans = span_pool[text_starts[:, None] + np.arange(span)].astype(np.int64)
    return CopyMaterial(fillers, {"text": text_spans, "random": random_spans.astype(np.int64)})


def copy_sequences(fillers: np.ndarray, spans: np.ndarray, distance: int) -> np.ndarray:
    """Each filler with its span written at ``lead = span`` (so the first copy, too, follows ``span`` tokens of
    context) and again at ``lead + distance``."""
    span = spans.shape[1]
    sequences = fillers.copy()
    sequences[:, span:2 * span] = spans
    sequences[:, span + distance:2 * span + distance] = spans
    return sequences


def copy_gain(
    model: torch.nn.Module,
    material: CopyMaterial,
    distances: Sequence[int],
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: torch.device | None = None,
    per_sequence: bool = False,
) -> list[dict[str, Any]]:
    """Per kind and distance: the mean losses of the first and second copies (their first tokens left out) and
    the gain, first minus second, with its interval over sequences. The model reads each sequence up to the end
    of its second copy: a causal model's losses there do not depend on the filler after it. ``per_sequence``: each
    row also holds ``gains``, every sequence's gain in order (the same sequences for every model scored with the
    same material), for a caller that averages a sequence over several models before its interval."""
    device = model_device(model) if device is None else device
    rows = []
    for kind, spans in material.spans.items():
        span = spans.shape[1]
        for distance in distances:
            sequences = copy_sequences(material.fillers, spans, distance)[:, :2 * span + distance]
            losses = token_losses(model, sequences, batch_size, device)
            # loss of token p is losses[:, p - 1]; a copy at `start` is scored on tokens start+1 .. start+span-1
            first = losses[:, span:2 * span - 1].mean(axis=1)
            second = losses[:, span + distance:2 * span + distance - 1].mean(axis=1)
            gain = paired(first, second)
            rows.append({"kind": kind, "distance": int(distance), "first_loss": float(first.mean()),
                         "second_loss": float(second.mean()), "gain": gain["mean"], "gain_ci": gain["ci"],
                         "gain_sd": gain["sd"], "n": gain["n"]})
            if per_sequence:
                rows[-1]["gains"] = [float(value) for value in first - second]
    return rows


# -- associative-recall slice --------------------------------------------------------------------------------
def ar_hits(window: np.ndarray, ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """For each position of ``window``: whether it is an AR hit (the ``ngram`` tokens ending there occurred,
    ending earlier, in the window) and where that n-gram first ended (``-1`` before the first whole n-gram)."""
    grams = np.lib.stride_tricks.sliding_window_view(np.asarray(window), ngram)
    _, first, inverse = np.unique(grams, axis=0, return_index=True, return_inverse=True)
    ends = np.arange(ngram - 1, len(window))
    first_end = first[inverse.reshape(-1)] + ngram - 1
    hit = np.zeros(len(window), bool)
    source = np.full(len(window), -1)
    hit[ends] = first_end < ends
    source[ends] = first_end
    return hit, source


def held_out_windows(tokens: np.ndarray, seq_len: int, n: int) -> np.ndarray:
    """``[<= n, seq_len + 1]`` windows of the validation stream's chunks (those ``composer train`` validates on),
    spread evenly over all of them rather than the first ``n``, which could all be one document."""
    from composer.data.packing import gather_chunks, num_chunks

    available = num_chunks(len(tokens), seq_len)
    if available == 0:
        raise ConfigError(f"the held-out text has {len(tokens):,} tokens, fewer than one window of "
                          f"{seq_len + 1:,}; use more data or a shorter --seq-len")
    chunks = np.unique(np.linspace(0, available - 1, min(n, available)).round().astype(np.int64))
    return gather_chunks(tokens, chunks, seq_len)


def ar_slice(
    model: torch.nn.Module,
    windows: np.ndarray,
    ngram: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: torch.device | None = None,
    per_sequence: bool = False,
) -> dict[str, Any]:
    """Loss on AR hits and on the rest of each window, and on each hit's first occurrence (module docstring);
    tokens before the first whole n-gram are in neither slice. Means and intervals are over the windows that
    have both hits and other tokens (the pairs). ``per_sequence``: the report also lists every window's
    ``hit_advantages`` and ``repeat_gains`` in order (None for a window without a pair; which windows have one
    depends on the tokens alone), for a caller that averages a window over several models, as :func:`copy_gain`'s
    ``gains``."""
    device = model_device(model) if device is None else device
    losses = token_losses(model, windows, batch_size, device)
    hit_loss, rest_loss, first_loss = (np.full(len(windows), np.nan) for _ in range(3))
    hits = scored = 0
    for row, window in enumerate(windows):
        hit, source = ar_hits(window, ngram)
        hit, source, loss = hit[ngram - 1:], source[ngram - 1:], losses[row, ngram - 2:]  # tokens ngram-1 ..
        hits += int(hit.sum())
        scored += hit.size
        if hit.any() and not hit.all():
            hit_loss[row], rest_loss[row] = loss[hit].mean(), loss[~hit].mean()
            first_loss[row] = losses[row, source[hit] - 1].mean()
    advantage, repeat = paired(rest_loss, hit_loss), paired(first_loss, hit_loss)
    report = {
        "ngram": int(ngram), "windows": len(windows), "hit_share": hits / scored if scored else None,
        "hit_loss": _mean(hit_loss), "rest_loss": _mean(rest_loss), "first_occurrence_loss": _mean(first_loss),
        "hit_advantage": advantage["mean"], "hit_advantage_ci": advantage["ci"],
        "hit_advantage_sd": advantage["sd"],
        "repeat_gain": repeat["mean"], "repeat_gain_ci": repeat["ci"], "repeat_gain_sd": repeat["sd"],
        "n": advantage["n"],
    }
    if per_sequence:
        def listed(values: np.ndarray) -> list[float | None]:
            return [float(value) if np.isfinite(value) else None for value in values]

        report.update(hit_advantages=listed(rest_loss - hit_loss), repeat_gains=listed(first_loss - hit_loss))
    return report


# -- the measure ---------------------------------------------------------------------------------------------
def resolve_settings(
    tokenizer: Any,
    seq_len: int,
    span: int | None = None,
    ngram: int | None = None,
    sequences: int = DEFAULT_SEQUENCES,
    seed: int = 0,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> dict[str, Any]:
    """The settings with the tokenizer's defaults filled in and the copy distances, or a one-line error for
    settings that cannot be measured (checked before anything is loaded or scored)."""
    span = default_span(tokenizer, seq_len) if span is None else span
    ngram = default_ngram(tokenizer) if ngram is None else ngram
    for name, value, minimum in (("seq_len", seq_len, 4), ("span", span, 2), ("ngram", ngram, 2),
                                 ("sequences", sequences, 2), ("batch size", batch_size, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"recall: {name} must be an integer >= {minimum}, got {value!r}")
    distances = copy_distances(seq_len, span)
    if not distances:
        raise ConfigError(f"recall: a span of {span} tokens does not fit twice after a lead of {span} in "
                          f"{seq_len + 1} tokens; pass a --span of at most {(seq_len + 1) // 3}")
    if ngram > seq_len:
        raise ConfigError(f"recall: n-grams of {ngram} tokens do not fit a window of {seq_len}")
    return {"seq_len": seq_len, "span": span, "lead": span, "distances": distances, "ngram": ngram,
            "sequences": sequences, "seed": seed, "batch_size": batch_size}


def measure(
    model: torch.nn.Module,
    tokenizer: Any,
    tokens: np.ndarray,
    *,
    seq_len: int | None = None,
    device: str | torch.device | None = None,
    per_sequence: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """The copy gain and the AR slice of ``model`` on held-out ``tokens`` (a 1-D array of the tokenizer's ids,
    documents separated by its EOS), as a JSON-ready report.

    ``model``: called as ``model(ids).logits`` (a :class:`~composer.model.ComposerModel` or anything with its
    forward); ``seq_len``: the context (default ``model.arch.max_seq_len``; pass the one it trained at);
    ``options``: ``span``, ``ngram`` (default per tokenizer), ``sequences`` (per kind of span, each scored at
    every distance, and the number of AR windows; default 64), ``seed`` (of spans and fillers; 0) and
    ``batch_size`` (8), as :func:`resolve_settings` takes them; ``per_sequence``: each copy row also lists every
    sequence's gain (``gains``, :func:`copy_gain`), and the AR slice every window's (:func:`ar_slice`)."""
    settings = resolve_settings(tokenizer, int(model.arch.max_seq_len) if seq_len is None else seq_len, **options)
    device = model_device(model) if device is None else torch.device(device)
    started = time.perf_counter()
    material = draw_copy_material(tokens, tokenizer, settings["seq_len"], settings["span"], settings["sequences"],
                                  settings["seed"])
    windows = held_out_windows(tokens, settings["seq_len"], settings["sequences"])
    with evaluating(model):
        copy = copy_gain(model, material, settings["distances"], settings["batch_size"], device, per_sequence)
        slice_ = ar_slice(model, windows, settings["ngram"], settings["batch_size"], device, per_sequence)
    return {**settings, "held_out_tokens": int(len(tokens)), "copy": copy, "ar_slice": slice_,
            "elapsed_s": time.perf_counter() - started}


def measure_model_dir(
    model_dir: str | Path,
    *,
    tokenizer: str | None = None,
    data: str | None = None,
    data_seed: int | None = None,
    seq_len: int | None = None,
    device: str = "cpu",
    cache: Any = None,
    per_sequence: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """:func:`measure` of the model ``composer train`` wrote to ``model_dir``, at the context it trained at, on
    the validation split of its run (or of ``data``); the report ``composer eval --tasks recall`` records, with
    the model, its tokenizer and the held-out data it was scored on. Settings are checked before anything
    loads. ``cache`` (a :class:`composer.evaluation.loading.HeldOutCache`): where many models share one split and
    tokenizer (a search's runs), they are read once."""
    from composer.evaluation import loading
    from composer.interop.model_dir import read_arch
    from composer.precision import resolve_device

    model_dir = Path(model_dir)
    loading.check_model_dir(model_dir)
    device = resolve_device(device)
    arch = read_arch(model_dir / "config.json")
    trained, seq_len_source = loading.trained_seq_len(model_dir, arch.max_seq_len)
    if seq_len is not None and seq_len > arch.max_seq_len:
        raise ConfigError(f"recall: --seq-len {seq_len} is beyond the model's max_seq_len {arch.max_seq_len}")
    seq_len, seq_len_source = (trained, seq_len_source) if seq_len is None else (seq_len, "given")
    spec, tokenizer_source = (tokenizer, "given") if tokenizer else loading.find_model_tokenizer(model_dir)
    cache = cache if cache is not None else loading.HeldOutCache()
    tok = cache.tokenizer(spec)
    if tok.vocab_size > arch.vocab_size:
        raise ConfigError(f"tokenizer {tok.name!r} has {tok.vocab_size:,} ids but the model only "
                          f"{arch.vocab_size:,}: not the tokenizer it was trained with (pass --tokenizer)")
    resolve_settings(tok, seq_len, **options)  # bad settings fail here, before the data and the model load
    config, split = loading.held_out_config(model_dir, spec, data, data_seed)
    tokens = cache.tokens(config)
    model = loading.load_model(model_dir, device)
    report = measure(model, tok, tokens, seq_len=seq_len, device=device, per_sequence=per_sequence, **options)
    report.update(seq_len_source=seq_len_source, trained_seq_len=trained, device=str(device),
                  data={"source": config.source or "the Python standard library (default corpus)",
                        "split_seed": config.split_seed, "val_fraction": config.val_fraction,
                        "max_documents": config.max_documents, "split": split})
    return {"model": str(model_dir.resolve()), "pattern": arch.compact,
            "params": sum(p.numel() for p in model.parameters()),
            "tokenizer": {"name": tok.name, "source": tokenizer_source}, TASK: report}


# -- the table -----------------------------------------------------------------------------------------------
def copy_rows(report: dict[str, Any]) -> list[list[str]]:
    """Rows (kind, distance, first-copy loss, second-copy loss, gain [interval], n) of a recall report."""
    return [[row["kind"], str(row["distance"]), f"{row['first_loss']:.4f}", f"{row['second_loss']:.4f}",
             f"{row['gain']:+.4f} {format_interval(row['gain_ci'])}", str(row["n"])] for row in report["copy"]]


def ar_rows(report: dict[str, Any]) -> list[list[str]]:
    """Rows (contrast, loss, against, loss, difference [interval], windows) of the AR slice."""
    s = report["ar_slice"]

    def loss(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    def difference(value: float | None, ci: list[float] | None) -> str:
        return "n/a" if value is None else f"{value:+.4f} {format_interval(ci)}"

    return [["rest - hits", loss(s["rest_loss"]), loss(s["hit_loss"]),
             difference(s["hit_advantage"], s["hit_advantage_ci"]), str(s["n"])],
            ["first occurrence - repeat", loss(s["first_occurrence_loss"]), loss(s["hit_loss"]),
             difference(s["repeat_gain"], s["repeat_gain_ci"]), str(s["n"])]]


__all__ = ["KINDS", "TASK", "CopyMaterial", "ar_hits", "ar_rows", "ar_slice", "copy_distances", "copy_gain",
           "copy_rows", "copy_sequences", "default_ngram", "default_span", "draw_copy_material",
           "held_out_windows", "measure", "measure_model_dir", "random_span_ids", "resolve_settings",
           "token_losses"]
