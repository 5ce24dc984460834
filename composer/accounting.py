"""Analytic parameter, FLOP and inference-cache accounting of an architecture, without building it.

Conventions (the same as torchtitan / PaLM, so MFU figures are comparable):

* ``params`` counts every weight once (a tied LM head shares the embedding's).
* ``non_embedding_params`` is all but the token embedding and an untied LM head; the final norm is included.
* ``active_params`` is what one token uses: all of ``params`` but the experts an MoE layer does not route it to.
  This is the size measure the extrapolator matches across patterns.
* ``flops_per_token``: training FLOPs (forward + backward) per token at ``seq_len``: each primitive's own count
  plus ``6 * d_model * vocab`` for the LM head (a real matmul even when tied); the embedding lookup is free.
* Inference cache: per layer a :class:`~primitives.base.CacheSpec`; ``kv_cache_bytes_per_token`` sums the
  unbounded per-token parts (full attention), ``cache_bytes_per_sequence`` adds windows and fixed states at
  ``seq_len``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from composer.config import ArchConfig
from composer.errors import ConfigError
from primitives.registry import REGISTRY

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
TRAINING_SEQ_LEN = 8192  # the paper's large-scale training context; the default length for FLOP accounting


@dataclass(frozen=True)
class ArchStats:
    pattern: str
    compact: str
    n_layers: int
    counts: dict[str, int]
    params: int
    embedding_params: int
    non_embedding_params: int
    flops_per_token: int
    active_params: int  # parameters one token uses: differs from params only with sparse layers (E)
    seq_len: int
    cache_dtype_bytes: int
    kv_cache_bytes_per_token: int
    cache_bytes_per_sequence: int
    state_bytes_per_sequence: int
    # symbol -> one layer of it: params (with its pre-norm), training FLOPs/token, and its inference cache
    # (``kv_bytes_per_token`` growing with the context, ``window`` bounding it, ``state_bytes`` fixed)
    per_primitive: dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``: a cache or state size as a person reads it (B, KiB, MiB, GiB, TiB)."""
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or suffix == "TiB":
            return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
        n /= 1024
    raise AssertionError("unreachable")


def format_count(n: float) -> str:
    """``1235814400`` -> ``"1.24B"``, ``4426944`` -> ``"4.43M"``: a count in three significant figures."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{suffix}"
    return f"{n:g}"


def total_params(arch: ArchConfig) -> int:
    """Every parameter of ``arch``: its non-embedding ones, the token embedding and an untied LM head (``params``
    of :func:`analyze`, without the rest of its accounting)."""
    return non_embedding_params(arch) + embedding_params(arch)


def layer_params(arch: ArchConfig) -> dict[str, int]:
    """Parameters of one residual layer (pre-norm weight + primitive body) per symbol used."""
    return {
        symbol: REGISTRY.get(symbol).param_count(config) + arch.d_model
        for symbol, config in arch.primitive_configs().items()
    }


def embedding_params(arch: ArchConfig) -> int:
    """Token embedding plus, when untied, the LM head."""
    return arch.vocab_size * arch.d_model * (1 if arch.tie_embeddings else 2)


def non_embedding_params(arch: ArchConfig) -> int:
    per_layer = layer_params(arch)
    return sum(per_layer[token] * n for token, n in arch.counts.items()) + arch.d_model  # + final norm


def default_seq_len(arch: ArchConfig) -> int:
    """8192 tokens (the paper's training context), or the architecture's maximum when shorter."""
    return min(arch.max_seq_len, TRAINING_SEQ_LEN)


def analyze(arch: ArchConfig, seq_len: int | None = None, cache_dtype_bytes: int = 2) -> ArchStats:
    """Accounting of ``arch`` at ``seq_len`` (default: :func:`default_seq_len`)."""
    seq_len = default_seq_len(arch) if seq_len is None else seq_len
    if seq_len <= 0:
        raise ConfigError(f"seq_len must be positive, got {seq_len}")
    configs = arch.primitive_configs()
    per_layer = layer_params(arch)
    per_primitive = {}  # one entry per symbol; every layer of a symbol costs the same
    for symbol, n in arch.counts.items():
        cls, config = REGISTRY.get(symbol), configs[symbol]
        cache = cls.inference_cache(config, cache_dtype_bytes)
        per_primitive[symbol] = {
            "name": cls.name,
            "layers": n,
            "params_per_layer": per_layer[symbol],
            "active_params_per_layer": cls.active_param_count(config) + arch.d_model,
            "flops_per_token_per_layer": cls.flops_per_token(config, seq_len),
            "kv_bytes_per_token": cache.bytes_per_token,
            "window": cache.window,
            "state_bytes": cache.fixed_bytes,
            "cache_bytes_per_layer": cache.bytes_at(seq_len),
        }

    def total(key: str, only=lambda p: True) -> int:
        return sum(p["layers"] * p[key] for p in per_primitive.values() if only(p))

    non_embedding = non_embedding_params(arch)
    embedding = embedding_params(arch)
    return ArchStats(
        pattern=arch.pattern,
        compact=arch.compact,
        n_layers=arch.n_layers,
        counts=arch.counts,
        params=non_embedding + embedding,
        embedding_params=embedding,
        non_embedding_params=non_embedding,
        flops_per_token=6 * arch.d_model * arch.vocab_size + total("flops_per_token_per_layer"),
        active_params=non_embedding + embedding - total("params_per_layer") + total("active_params_per_layer"),
        seq_len=seq_len,
        cache_dtype_bytes=cache_dtype_bytes,
        kv_cache_bytes_per_token=total("kv_bytes_per_token", only=lambda p: p["window"] is None),
        cache_bytes_per_sequence=total("cache_bytes_per_layer"),
        state_bytes_per_sequence=total("state_bytes"),
        per_primitive=per_primitive,
    )
