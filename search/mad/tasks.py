"""The six MAD synthetic tasks (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures").

Written from the task definitions of MAD's reference implementation (athms/mad-lab, ``mad/data/instances.py``
and ``configs/tasks/*.yml``); everything is generated from a seed, nothing is downloaded.

Every generator is ``generate_<task>(num_examples, seed, *, split="test", **knobs)`` and returns
``(inputs, targets)``: two ``LongTensor [num_examples, seq_len]``. ``targets[n, t]`` is the token the model must
output at input position ``t`` (next-token convention: the model sees ``inputs[n, :t + 1]``), or ``-100`` where
nothing is scored. ``vocab_size`` always counts every token id a task uses (data, special and noise tokens), as in
MAD. ``seed`` is an int or a ``numpy.random.Generator``.

MAD defaults (vocab, seq len, train / test examples) and what is scored:

* ``in-context-recall`` (16, 128, 12800 / 1280): the value of every key seen before in the sequence (MAD's
  multi-query form).
* ``fuzzy-in-context-recall`` (16, 128, 12800 / 1280, motif sizes 3 / 3): the 1-3 token value of every 1-3 token
  key seen before.
* ``noisy-in-context-recall`` (32 with 16 noise tokens, 128, 12800 / 1280): as recall, with 20% of the pairs
  replaced by noise tokens of a separate vocabulary.
* ``selective-copying`` (16, 256, 12800 / 1280): the 16 data tokens scattered among blanks, in order, after a
  copy token.
* ``compression`` (16, 32, 12800 / 1280): every token of the sequence, decoded from the compression token's
  state alone.
* ``memorization`` (256, 32, 256 / 1280): the value of each key under one fixed key->value map shared by every
  example.

Layouts (``V`` = vocab size, ``T`` = seq len, ``-`` = not scored):

* recall: ``k v k v ... k v``; keys ``[0, n/2)``, values ``[n/2, n)`` with ``n = V - noise_vocab_size``, each
  example drawing its own key->value map; the last pair queries a key presented earlier. The target at a key
  position is the following value when that key appeared earlier in the sequence. Noise (``frac_noise``)
  replaces a whole pair by two tokens from ``[n, V)``. Training targets (``train_on_all_tokens``, MAD's
  training): every next token, as a language model.
* fuzzy recall: keys and values are runs of 1..``k_motif_size`` / 1..``v_motif_size`` distinct tokens
  (keys ``[0, (V-1)//2)``, values up to ``V - 2``, ``V - 1`` left-pads the sequence). Test keys always have the
  maximum size; training keys any size. Every token of a recalled value is scored.
* selective copying: ``num_tokens_to_copy`` data tokens ``[0, V-2)`` at random positions among blanks
  (``V - 2``), then the copy token ``V - 1`` and ``num_tokens_to_copy`` blanks, at which the data tokens are
  due in order.
* compression: ``T - 1`` random tokens ``[0, V-1)`` then the compression token ``V - 1``; the target is the
  input itself. Only an encoder-decoder solves it causally: MAD's auto-encoder reads the sequence with the
  candidate layers, keeps the compression token's final state and decodes every position from it plus a
  position embedding (``search.mad.models.CompressionAutoEncoder``), so ``TASKS["compression"].model`` is
  ``"autoencoder"``.
* memorization: ``k i k i ...``: keys ``[0, (V-1)//2)``, insert token ``V - 1``, the value due at each insert
  token; one map for every example (seeded by ``kv_map_seed``, else by the dataset seed as in MAD).

Differences from mad-lab, on purpose: every row is exactly ``seq_len`` long (MAD's multi-query recall rows are
``seq_len - 1``); selective copying scatters the data tokens uniformly (MAD inserts blanks only before the last
data token, with numpy's global, unseeded generator); fuzzy recall always places its probe pair in the context
(MAD's can fall off the end of the sequence); noise positions of compression are not scored (MAD scores them).
The single-query recall variant (``multi_query=False``) is not implemented: MAD's benchmark uses multi-query.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from composer.errors import ConfigError

IGNORE_INDEX = -100
SPLITS = ("train", "test")

Seed = int | np.random.Generator


def _rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.random.default_rng(int(seed))
    raise TypeError(f"seed must be an int or a numpy Generator, got {seed!r}")


def _tensors(inputs: np.ndarray, targets: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(np.ascontiguousarray(inputs, dtype=np.int64)), torch.from_numpy(
        np.ascontiguousarray(targets, dtype=np.int64)
    )


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {SPLITS}, got {split!r}")


def _check_noise(frac_noise: float, noise_vocab_size: int, upper: float = 1.0) -> None:
    if not 0.0 <= frac_noise < upper:
        raise ConfigError(f"frac_noise must be in [0, {upper}), got {frac_noise}")
    if noise_vocab_size < 0:
        raise ConfigError(f"noise_vocab_size must be >= 0, got {noise_vocab_size}")
    if frac_noise > 0 and noise_vocab_size == 0:
        raise ConfigError("frac_noise > 0 needs noise_vocab_size > 0")


def language_model_targets(inputs: torch.Tensor) -> torch.Tensor:
    """Every next token as the target (the last position has none): MAD's training targets for recall."""
    targets = torch.full_like(inputs, IGNORE_INDEX)
    targets[:, :-1] = inputs[:, 1:]
    return targets


# -- in-context recall (plain and noisy) -----------------------------------------------------------------------


def recall_vocab(vocab_size: int, noise_vocab_size: int = 0) -> tuple[range, range, range]:
    """(keys, values, noise) token ranges of (noisy) in-context recall."""
    n = vocab_size - noise_vocab_size
    return range(n // 2), range(n // 2, n), range(n, vocab_size)


def generate_in_context_recall(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 16,
    seq_len: int = 128,
    noise_vocab_size: int = 0,
    frac_noise: float = 0.0,
    train_on_all_tokens: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-query associative recall: ``k v k v ...``; predict a key's value when the key was seen before."""
    _check_split(split)
    _check_noise(frac_noise, noise_vocab_size)
    keys_r, values_r, noise_r = recall_vocab(vocab_size, noise_vocab_size)
    if len(keys_r) < 1 or len(values_r) < 1:
        raise ConfigError(
            f"vocab_size {vocab_size} leaves no key/value tokens (noise_vocab_size {noise_vocab_size})"
        )
    if seq_len < 4 or seq_len % 2:
        raise ConfigError(f"recall needs an even seq_len >= 4, got {seq_len}")
    rng = _rng(seed)
    n, pairs, n_keys = num_examples, seq_len // 2, len(keys_r)

    kv_map = rng.integers(values_r.start, values_r.stop, size=(n, n_keys))  # each example its own map
    keys = rng.integers(0, n_keys, size=(n, pairs))
    noise = np.zeros((n, pairs), dtype=bool)
    if frac_noise > 0:
        noise = rng.random((n, pairs)) < frac_noise
        noise[np.arange(n), rng.integers(0, pairs - 1, size=n)] = (
            False  # at least one real pair before the probe
        )
        noise[:, -1] = False
    # The last pair queries a key presented (as a real pair) earlier, uniformly among the distinct ones.
    presented = np.zeros((n, n_keys), dtype=bool)
    rows = np.repeat(np.arange(n), pairs - 1)
    real = ~noise[:, :-1]
    presented[rows[real.reshape(-1)], keys[:, :-1][real]] = True
    score = np.where(presented, rng.random((n, n_keys)), -1.0)
    keys[:, -1] = score.argmax(axis=1)
    values = np.take_along_axis(kv_map, keys, axis=1)

    tokens = np.stack([keys, values], axis=2)  # [n, pairs, 2]
    if frac_noise > 0:
        noise_tokens = rng.integers(noise_r.start, noise_r.stop, size=(n, pairs, 2))
        tokens = np.where(noise[:, :, None], noise_tokens, tokens)
    inputs = tokens.reshape(n, seq_len)

    # A value is scored when its key appeared in an earlier real pair of the same sequence.
    onehot = np.zeros((n, pairs, n_keys), dtype=np.int32)
    onehot[np.arange(n)[:, None], np.arange(pairs)[None, :], keys] = ~noise
    seen_before = np.cumsum(onehot, axis=1) - onehot
    scored = (np.take_along_axis(seen_before, keys[:, :, None], axis=2)[:, :, 0] > 0) & ~noise
    targets = np.full((n, pairs, 2), IGNORE_INDEX, dtype=np.int64)
    targets[:, :, 0] = np.where(scored, values, IGNORE_INDEX)  # at the key position, the value is next
    inputs_t, targets_t = _tensors(inputs, targets.reshape(n, seq_len))
    if split == "train" and train_on_all_tokens:
        targets_t = language_model_targets(inputs_t)
    return inputs_t, targets_t


def generate_noisy_in_context_recall(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 32,
    seq_len: int = 128,
    noise_vocab_size: int = 16,
    frac_noise: float = 0.2,
    train_on_all_tokens: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """In-context recall with pairs replaced by noise tokens from a separate vocabulary (MAD's defaults)."""
    return generate_in_context_recall(
        num_examples,
        seed,
        split=split,
        vocab_size=vocab_size,
        seq_len=seq_len,
        noise_vocab_size=noise_vocab_size,
        frac_noise=frac_noise,
        train_on_all_tokens=train_on_all_tokens,
    )


# -- fuzzy in-context recall -----------------------------------------------------------------------------------


def fuzzy_recall_vocab(vocab_size: int, noise_vocab_size: int = 0) -> tuple[range, range, range, int]:
    """(keys, values, noise) token ranges and the pad token of fuzzy recall."""
    pad = vocab_size - 1
    n = vocab_size - 1 - noise_vocab_size
    return range(n // 2), range(n // 2, n), range(n, pad), pad


@lru_cache(maxsize=64)
def _motifs(start: int, stop: int, size: int) -> np.ndarray:
    """All ordered tuples of ``size`` distinct tokens from ``[start, stop)``: ``[count, size]``."""
    return np.array(list(itertools.permutations(range(start, stop), size)), dtype=np.int64).reshape(-1, size)


def generate_fuzzy_in_context_recall(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 16,
    seq_len: int = 128,
    k_motif_size: int = 3,
    v_motif_size: int = 3,
    noise_vocab_size: int = 0,
    frac_noise: float = 0.0,
    train_on_all_tokens: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Recall where keys and values are runs of several tokens (variable length; test keys are the longest)."""
    _check_split(split)
    _check_noise(frac_noise, noise_vocab_size)
    keys_r, values_r, noise_r, pad = fuzzy_recall_vocab(vocab_size, noise_vocab_size)
    if k_motif_size < 1 or v_motif_size < 1:
        raise ConfigError("k_motif_size and v_motif_size must be >= 1")
    if len(keys_r) < k_motif_size or len(values_r) < v_motif_size:
        raise ConfigError(
            f"vocab_size {vocab_size} has {len(keys_r)} key and {len(values_r)} value tokens: too few for motifs "
            f"of {k_motif_size} / {v_motif_size} distinct tokens"
        )
    longest = k_motif_size + v_motif_size
    if seq_len < 3 * longest:
        raise ConfigError(f"fuzzy recall needs seq_len >= 3 * (k_motif_size + v_motif_size) = {3 * longest}")
    rng = _rng(seed)
    key_sizes = list(range(1, k_motif_size + 1)) if split == "train" else [k_motif_size]
    value_sizes = list(range(1, v_motif_size + 1))
    key_tables = {s: _motifs(keys_r.start, keys_r.stop, s) for s in key_sizes}
    value_tables = {s: _motifs(values_r.start, values_r.stop, s) for s in value_sizes}
    length = seq_len + 1  # tokens before the next-token shift

    def pick(table: np.ndarray, u: float) -> tuple[int, ...]:
        return tuple(table[int(u * len(table))].tolist())

    max_pairs = length // 2 + 1  # every pair (or noise run) takes at least two tokens
    inputs = np.full((num_examples, seq_len), pad, dtype=np.int64)
    targets = np.full((num_examples, seq_len), IGNORE_INDEX, dtype=np.int64)
    for row in range(num_examples):
        # Draw this example's randomness in bulk (a few generator calls per example instead of several per pair).
        k_sizes = np.asarray(key_sizes)[rng.integers(0, len(key_sizes), size=max_pairs + 1)].tolist()
        v_sizes = np.asarray(value_sizes)[rng.integers(0, len(value_sizes), size=max_pairs + 1)].tolist()
        u_key, u_value = rng.random(max_pairs + 1).tolist(), rng.random(max_pairs + 1).tolist()
        coins = rng.random(max_pairs).tolist()
        k_probe = pick(key_tables[k_sizes[-1]], u_key[-1])
        v_probe = pick(value_tables[v_sizes[-1]], u_value[-1])
        probe_len = len(k_probe) + len(v_probe)
        stop = length - probe_len - longest  # the context ends once it reaches this length
        probe_at = int(rng.integers(0, stop - longest))  # early enough that the probe pair always fits
        kv_map: dict[tuple[int, ...], tuple[int, ...]] = {k_probe: v_probe}
        tokens: list[int] = []
        labels: list[int] = []  # target of each token (the shift comes later)
        presented: set[tuple[int, ...]] = set()
        probe_added = False
        i = 0
        while len(tokens) < stop:
            k_size, v_size = k_sizes[i], v_sizes[i]
            if not probe_added and len(tokens) >= probe_at:
                key, probe_added = k_probe, True
            elif frac_noise > 0 and coins[i] < frac_noise:
                tokens.extend(rng.integers(noise_r.start, noise_r.stop, size=k_size + v_size).tolist())
                labels.extend([IGNORE_INDEX] * (k_size + v_size))
                i += 1
                continue
            else:
                key = pick(key_tables[k_size], u_key[i])
                probe_added = probe_added or key == k_probe
            if key not in kv_map:
                kv_map[key] = pick(value_tables[v_size], u_value[i])
            value = kv_map[key]
            tokens.extend(key)
            tokens.extend(value)
            labels.extend([IGNORE_INDEX] * len(key))
            labels.extend(value if key in presented else [IGNORE_INDEX] * len(value))
            presented.add(key)
            i += 1
        tokens.extend(k_probe + v_probe)  # the final query
        labels.extend([IGNORE_INDEX] * len(k_probe) + list(v_probe))
        pad_len = length - len(tokens)
        tokens = [pad] * pad_len + tokens
        labels = [IGNORE_INDEX] * pad_len + labels
        inputs[row] = tokens[:-1]
        targets[row] = labels[1:]
    inputs_t, targets_t = _tensors(inputs, targets)
    if split == "train" and train_on_all_tokens:
        targets_t = language_model_targets(inputs_t)
    return inputs_t, targets_t


# -- selective copying -----------------------------------------------------------------------------------------


def generate_selective_copying(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 16,
    seq_len: int = 256,
    num_tokens_to_copy: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Data tokens scattered among blanks; after the copy token, reproduce them in order."""
    _check_split(split)
    copy_token, blank = vocab_size - 1, vocab_size - 2
    if vocab_size < 3:
        raise ConfigError(f"selective copying needs vocab_size >= 3, got {vocab_size}")
    if num_tokens_to_copy < 1 or seq_len <= 2 * num_tokens_to_copy + 1:
        raise ConfigError(
            f"selective copying needs 1 <= num_tokens_to_copy and seq_len > 2 * num_tokens_to_copy + 1, "
            f"got seq_len {seq_len}, num_tokens_to_copy {num_tokens_to_copy}"
        )
    rng = _rng(seed)
    n, k = num_examples, num_tokens_to_copy
    region = seq_len - k - 1  # where the data tokens hide among blanks
    to_copy = rng.integers(0, vocab_size - 2, size=(n, k))
    positions = np.sort(np.argsort(rng.random((n, region)), axis=1)[:, :k], axis=1)
    inputs = np.full((n, seq_len), blank, dtype=np.int64)
    np.put_along_axis(inputs, positions, to_copy, axis=1)
    inputs[:, region] = copy_token
    targets = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    targets[:, region + 1 :] = to_copy
    return _tensors(inputs, targets)


# -- compression -----------------------------------------------------------------------------------------------


def generate_compression(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 16,
    seq_len: int = 32,
    noise_vocab_size: int = 0,
    frac_noise: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random sequence ending in the compression token; the target is the sequence itself (auto-encoding)."""
    _check_split(split)
    _check_noise(frac_noise, noise_vocab_size)
    data_vocab = vocab_size - 1 - noise_vocab_size
    if data_vocab < 1 or seq_len < 2:
        raise ConfigError(
            f"compression needs data tokens and seq_len >= 2 (vocab {vocab_size}, seq len {seq_len})"
        )
    rng = _rng(seed)
    inputs = np.empty((num_examples, seq_len), dtype=np.int64)
    inputs[:, :-1] = rng.integers(0, data_vocab, size=(num_examples, seq_len - 1))
    inputs[:, -1] = vocab_size - 1
    targets = inputs.copy()
    if frac_noise > 0:
        noise = np.zeros_like(inputs, dtype=bool)
        noise[:, :-1] = rng.random((num_examples, seq_len - 1)) < frac_noise
        noise_tokens = rng.integers(data_vocab, data_vocab + noise_vocab_size, size=inputs.shape)
        inputs = np.where(noise, noise_tokens, inputs)
        targets[noise] = IGNORE_INDEX
    return _tensors(inputs, targets)


# -- memorization ----------------------------------------------------------------------------------------------


def memorization_map(vocab_size: int, noise_vocab_size: int = 0, seed: Seed = 12345) -> dict[int, int]:
    """The fixed key -> value map: keys ``[0, n//2)``, values ``[n//2, n)``, ``n = V - 1 - noise``; a bijection."""
    n = vocab_size - 1 - noise_vocab_size
    if n < 2:
        raise ConfigError(f"memorization needs vocab_size - 1 - noise_vocab_size >= 2, got {n}")
    rng = _rng(seed)
    keys = rng.permutation(n // 2)
    values = rng.permutation(np.arange(n // 2, n))
    return {int(k): int(v) for k, v in zip(keys, values)}  # zip drops the spare value when n is odd


def generate_memorization(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 256,
    seq_len: int = 32,
    noise_vocab_size: int = 0,
    frac_noise: float = 0.0,
    kv_map_seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``key insert key insert ...``; the value of each key (one map for all examples) is due at the insert token.

    ``kv_map_seed`` fixes the map; ``None`` derives it from ``seed`` (an int; MAD seeds it with the run seed).
    """
    _check_split(split)
    _check_noise(frac_noise, noise_vocab_size, upper=1.0)
    if seq_len < 2 or seq_len % 2:
        raise ConfigError(f"memorization needs an even seq_len >= 2, got {seq_len}")
    if kv_map_seed is None:
        if not isinstance(seed, (int, np.integer)):
            raise ConfigError("memorization needs kv_map_seed when seed is a Generator")
        kv_map_seed = int(seed)
    mapping = memorization_map(vocab_size, noise_vocab_size, kv_map_seed)
    value_of = np.array([mapping[k] for k in range(len(mapping))], dtype=np.int64)
    rng = _rng(seed)
    n, pairs = num_examples, seq_len // 2
    insert = vocab_size - 1
    noise_start = vocab_size - 1 - noise_vocab_size
    keys = rng.integers(0, len(value_of), size=(n, pairs))
    noise = np.zeros((n, pairs), dtype=bool)
    if frac_noise > 0:
        noise = rng.random((n, pairs)) < frac_noise
        noise[np.arange(n), rng.integers(0, pairs, size=n)] = False  # at least one real pair
    inputs = np.stack([keys, np.full_like(keys, insert)], axis=2)
    targets = np.stack([np.full_like(keys, IGNORE_INDEX), value_of[keys]], axis=2)
    if frac_noise > 0:
        noise_tokens = rng.integers(noise_start, insert, size=(n, pairs, 2))
        inputs = np.where(noise[:, :, None], noise_tokens, inputs)
        targets = np.where(noise[:, :, None], IGNORE_INDEX, targets)
    return _tensors(inputs.reshape(n, seq_len), targets.reshape(n, seq_len))


# -- multi-query associative recall at length (Zoology) ---------------------------------------------------------


def generate_mqar(
    num_examples: int,
    seed: Seed,
    *,
    split: str = "test",
    vocab_size: int = 8192,
    seq_len: int = 256,
    num_kv_pairs: int = 16,
    power_a: float = 0.01,
    random_non_queries: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Zoology's MQAR (Arora et al. 2023, arXiv 2312.04927): ``num_kv_pairs`` distinct key-value pairs first, then
    every key queried once later in the sequence; the target at a query is its value.

    Keys come from ``[1, V/2)`` and values from ``[V/2, V)``, each example drawing distinct keys and values. The
    queries sit at even offsets after the pairs, their distances drawn without replacement from Zoology's power
    law ``p(g) ~ power_a * g ** (power_a - 1)`` (``power_a`` 0.01: most queries come soon after the context, a
    few far), and every other position holds a random token (``random_non_queries``, Zoology's default) or 0.
    Only the queries are scored, in training as in testing (Zoology trains on them alone). Unlike MAD's recall,
    the number of pairs is a knob of its own, so a caller can scale it with the length and make a fixed-size
    state the limit (``search.recall``).
    """
    _check_split(split)
    n_keys = vocab_size // 2 - 1
    context = 2 * num_kv_pairs
    space = (seq_len - context) // 2
    if seq_len % 2 or num_kv_pairs < 1 or space < num_kv_pairs:
        raise ConfigError(f"MQAR needs an even seq_len with room for {num_kv_pairs} pairs and as many queries "
                          f"(seq_len >= 4 * num_kv_pairs), got seq_len {seq_len}")
    if n_keys < num_kv_pairs:
        raise ConfigError(f"MQAR's vocab_size {vocab_size} has {n_keys} keys, fewer than num_kv_pairs {num_kv_pairs}")
    if not power_a > 0:
        raise ConfigError(f"power_a must be positive, got {power_a}")
    rng = _rng(seed)
    n = num_examples
    keys = 1 + np.argsort(rng.random((n, n_keys)), axis=1)[:, :num_kv_pairs]  # distinct per example
    values = vocab_size // 2 + np.argsort(rng.random((n, vocab_size - vocab_size // 2)), axis=1)[:, :num_kv_pairs]
    # gaps without replacement from the power law: the top num_kv_pairs of u ** (1 / p) (Efraimidis-Spirakis)
    weights = power_a * np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
    draws = np.log(rng.random((n, space))) / (weights / weights.sum())
    gaps = np.argsort(-draws, axis=1)[:, :num_kv_pairs]
    inputs = (rng.integers(0, vocab_size, size=(n, seq_len)) if random_non_queries
              else np.zeros((n, seq_len), dtype=np.int64))
    inputs[:, 0:context:2], inputs[:, 1:context:2] = keys, values
    rows = np.arange(n)[:, None]
    inputs[rows, context + 2 * gaps] = keys
    targets = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    targets[rows, context + 2 * gaps] = values
    return _tensors(inputs, targets)


# -- registry --------------------------------------------------------------------------------------------------

_COMMON = ("vocab_size", "seq_len", "num_train_examples", "num_test_examples")


@dataclass(frozen=True)
class TaskSpec:
    """A registered task: its generator, MAD's baseline knobs and MAD's difficulty sweeps."""

    name: str
    shorthand: str
    generate: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    defaults: Mapping[str, Any]
    description: str
    model: str = "lm"  # "lm": the candidate as a causal LM; "autoencoder": MAD's compression auto-encoder
    sweeps: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)  # MAD's configs/tasks/*.yml "changes"
    suite: str = "mad"  # "mad": one of MAD's six; "zoology": Zoology's MQAR (search.recall), not in MAD's sweep


def _spec(name, shorthand, generate, description, model="lm", sweeps=None, suite="mad", **defaults) -> TaskSpec:
    return TaskSpec(name, shorthand, generate, dict(defaults), description, model, dict(sweeps or {}), suite)


_EXAMPLES = {"num_train_examples": 12_800, "num_test_examples": 1_280}
_SIZE_SWEEP = {"num_train_examples": (6400, 3200, 1600, 800)}

TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        _spec(
            "in-context-recall",
            "CR",
            generate_in_context_recall,
            "key-value pairs in context; predict the value of every key seen before",
            sweeps={"vocab_size": (32, 64, 128), "seq_len": (256, 512, 1024), **_SIZE_SWEEP},
            vocab_size=16,
            seq_len=128,
            **_EXAMPLES,
            noise_vocab_size=0,
            frac_noise=0.0,
            train_on_all_tokens=True,
        ),
        _spec(
            "fuzzy-in-context-recall",
            "FR",
            generate_fuzzy_in_context_recall,
            "recall with keys and values of 1-3 tokens each",
            sweeps={"vocab_size": (32, 64, 128), "seq_len": (256, 512, 1024), **_SIZE_SWEEP},
            vocab_size=16,
            seq_len=128,
            **_EXAMPLES,
            k_motif_size=3,
            v_motif_size=3,
            noise_vocab_size=0,
            frac_noise=0.0,
            train_on_all_tokens=True,
        ),
        _spec(
            "noisy-in-context-recall",
            "NR",
            generate_noisy_in_context_recall,
            "recall with pairs replaced by tokens of a separate noise vocabulary",
            sweeps={
                "vocab_size": (48, 80, 144),
                "seq_len": (256, 512, 1024),
                **_SIZE_SWEEP,
                "frac_noise": (0.4, 0.6, 0.8),
            },
            vocab_size=32,
            seq_len=128,
            **_EXAMPLES,
            noise_vocab_size=16,
            frac_noise=0.2,
            train_on_all_tokens=True,
        ),
        _spec(
            "selective-copying",
            "SC",
            generate_selective_copying,
            "copy the data tokens scattered among blanks, in order, after a copy token",
            sweeps={
                "vocab_size": (32, 64, 128),
                "seq_len": (512, 1024),
                **_SIZE_SWEEP,
                "num_tokens_to_copy": (32, 64, 96),
            },
            vocab_size=16,
            seq_len=256,
            **_EXAMPLES,
            num_tokens_to_copy=16,
        ),
        _spec(
            "compression",
            "C",
            generate_compression,
            "encode the sequence into the compression token's state; decode every token from it",
            model="autoencoder",
            sweeps={"vocab_size": (32, 64, 128), "seq_len": (64, 128, 256), **_SIZE_SWEEP},
            vocab_size=16,
            seq_len=32,
            **_EXAMPLES,
            noise_vocab_size=0,
            frac_noise=0.0,
        ),
        _spec(
            "multi-query-associative-recall",
            "MQAR",
            generate_mqar,
            "Zoology's MQAR: distinct key-value pairs, then every key queried once at a power-law distance",
            suite="zoology",
            vocab_size=8192,
            seq_len=256,
            num_train_examples=20_000,
            num_test_examples=1_000,
            num_kv_pairs=16,
            power_a=0.01,
            random_non_queries=True,
        ),
        _spec(
            "memorization",
            "M",
            generate_memorization,
            "one fixed key->value map for every example, learnt into the weights",
            sweeps={"vocab_size": (512, 1024, 2048, 4096, 8192)},
            vocab_size=256,
            seq_len=32,
            num_train_examples=256,
            num_test_examples=1_280,
            noise_vocab_size=0,
            frac_noise=0.0,
            kv_map_seed=None,
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    try:
        return TASKS[name]
    except KeyError:
        raise ConfigError(f"unknown MAD task {name!r}; choose one of: {', '.join(TASKS)}") from None


@dataclass(frozen=True, init=False)
class TaskConfig:
    """A task and all its knobs (MAD's defaults, overridden by keyword).

    ``TaskConfig("in-context-recall", seq_len=64, num_train_examples=2000)``. ``knobs`` holds every knob, the
    defaults included, so a config describes its dataset completely; ``overrides`` only the changed ones.
    """

    name: str
    knobs: Mapping[str, Any]

    def __init__(self, name: str, knobs: Mapping[str, Any] | None = None, /, **overrides: Any) -> None:
        spec = get_task(name)
        changes = {**(knobs or {}), **overrides}
        unknown = set(changes) - set(spec.defaults)
        if unknown:
            raise ConfigError(
                f"unknown knob(s) {sorted(unknown)} for MAD task {name!r}; valid: {', '.join(spec.defaults)}"
            )
        resolved = {**spec.defaults, **changes}
        for key in _COMMON:
            value = resolved[key]
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{key} of {name} must be a positive integer, got {value!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "knobs", dict(resolved))

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted((k, repr(v)) for k, v in self.knobs.items()))))

    def __getattr__(self, key: str) -> Any:  # cfg.seq_len, cfg.vocab_size, ...
        knobs = self.__dict__.get("knobs", {})
        if key in knobs:
            return knobs[key]
        raise AttributeError(key)

    def __repr__(self) -> str:
        changed = ", ".join(f"{k}={v!r}" for k, v in self.overrides.items())
        return f"TaskConfig({self.name!r}{', ' if changed else ''}{changed})"

    @property
    def spec(self) -> TaskSpec:
        return TASKS[self.name]

    @property
    def overrides(self) -> dict[str, Any]:
        defaults = self.spec.defaults
        return {k: v for k, v in self.knobs.items() if defaults[k] != v}

    @property
    def label(self) -> str:
        """Short unique name: the task name plus its changed knobs, e.g. ``in-context-recall[seq_len=64]``."""
        changed = ",".join(f"{k}={v}" for k, v in self.overrides.items())
        return f"{self.name}[{changed}]" if changed else self.name

    def generator_knobs(self) -> dict[str, Any]:
        return {k: v for k, v in self.knobs.items() if k not in ("num_train_examples", "num_test_examples")}

    def replace(self, **changes: Any) -> TaskConfig:
        return TaskConfig(self.name, {**self.knobs, **changes})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.overrides}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskConfig:
        data = dict(data)
        return cls(data.pop("name"), data)


@dataclass(frozen=True)
class MadDataset:
    """Train and test splits of one task. Tensors are ``LongTensor [N, seq_len]``; targets use ``-100``."""

    task: TaskConfig
    seed: int
    train_inputs: torch.Tensor
    train_targets: torch.Tensor
    test_inputs: torch.Tensor
    test_targets: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return self.task.vocab_size

    @property
    def seq_len(self) -> int:
        return self.task.seq_len


def _split_seed(task: TaskConfig, seed: int, split: str) -> np.random.Generator:
    salt = zlib.crc32(task.name.encode())
    return np.random.default_rng([int(seed), salt, SPLITS.index(split)])


def make_dataset(task: TaskConfig | str, seed: int = 0) -> MadDataset:
    """The task's train and test split, a pure function of ``(task, seed)`` (cached: candidates share data).

    Train and test come from independent streams of the seed; the memorization map is shared by both (it is
    seeded by ``kv_map_seed``, or by ``seed``).
    """
    if isinstance(task, str):
        task = TaskConfig(task)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise ConfigError(f"seed must be an int, got {seed!r}")
    return _make_dataset(task, int(seed))


@lru_cache(maxsize=32)
def _make_dataset(task: TaskConfig, seed: int) -> MadDataset:
    knobs = task.generator_knobs()
    if task.name == "memorization" and knobs.get("kv_map_seed") is None:
        knobs["kv_map_seed"] = seed
    splits = {}
    for split, count in (("train", task.num_train_examples), ("test", task.num_test_examples)):
        inputs, targets = task.spec.generate(count, _split_seed(task, seed, split), split=split, **knobs)
        splits[split] = (inputs, targets)
    return MadDataset(task, seed, *splits["train"], *splits["test"])


def mad_benchmark_tasks() -> list[TaskConfig]:
    """MAD's full benchmark: each task's baseline plus every one-knob change of ``configs/tasks/*.yml`` (66)."""
    configs = []
    for spec in (spec for spec in TASKS.values() if spec.suite == "mad"):
        configs.append(TaskConfig(spec.name))
        for knob, values in spec.sweeps.items():
            configs.extend(TaskConfig(spec.name, {knob: value}) for value in values)
    return configs


def chance_accuracy(task: TaskConfig) -> float:
    """Accuracy of guessing uniformly among the tokens that can be due at a scored position."""
    k = task.knobs
    if task.name in ("in-context-recall", "noisy-in-context-recall"):
        return 1.0 / len(recall_vocab(k["vocab_size"], k["noise_vocab_size"])[1])
    if task.name == "fuzzy-in-context-recall":
        return 1.0 / len(fuzzy_recall_vocab(k["vocab_size"], k["noise_vocab_size"])[1])
    if task.name == "selective-copying":
        return 1.0 / (k["vocab_size"] - 2)
    if task.name == "compression":
        return 1.0 / (k["vocab_size"] - 1 - k["noise_vocab_size"])
    if task.name == "memorization":
        n = k["vocab_size"] - 1 - k["noise_vocab_size"]
        return 1.0 / (n - n // 2)
    if task.name == "multi-query-associative-recall":
        return 1.0 / (k["vocab_size"] - k["vocab_size"] // 2)
    raise ConfigError(f"no chance level for {task.name!r}")
