"""Incremental decoding of every primitive: ``init_cache`` + ``forward_cached`` (prefill, then a few tokens at a
time, then one token at a time) computes what ``forward`` computes on the whole sequence, the static-shape
``decode_step`` (the position a tensor) what ``forward_cached`` computes token by token, and the cache it
allocates is the analytic ``inference_cache`` of primitives/base.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from composer.config import ArchConfig
from primitives.base import CacheSpec, Primitive
from primitives.registry import REGISTRY

WINDOW = 8  # W's window, below the longer prompts
CHUNK = 16  # S's and D's chunk size, below the longer prompts
BATCH = 2


def tiny_arch(symbol: str, **options) -> ArchConfig:
    defaults = {"W": {"window": WINDOW}, "S": {"chunk_size": CHUNK}, "D": {"chunk_size": CHUNK}}
    merged = {branch: {**defaults.get(branch, {}), **options} for branch in symbol.strip("[]")}
    return ArchConfig(pattern=symbol, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=128,
                      vocab_size=96, max_seq_len=256, options={b: o for b, o in merged.items() if o})


def make(symbol: str, **options) -> Primitive:
    cls = REGISTRY.get(symbol)
    return cls(cls.config_from_arch(tiny_arch(symbol, **options).widths)).eval()


# (symbol, options): every primitive, plus the variants with their own code paths
VARIANTS = [(symbol, {}) for symbol in REGISTRY.symbols] + [
    ("W", {"window": 1}),  # the ring holds the token itself only
    ("S", {"d_conv": 1, "n_groups": 2}),  # no convolution state; B/C shared by fewer heads
    ("D", {"use_short_conv": False, "allow_neg_eigval": True}),
    # parallel layers: each branch decodes with its own cache inside the layer's
    ("[AS]", {}), ("[WS]", {}), ("[AD]", {}), ("[SD]", {}),
]
IDS = [symbol + "".join(f"-{k}={v}" for k, v in options.items()) for symbol, options in VARIANTS]


def run_incremental(primitive: Primitive, x: torch.Tensor, schedule: list[int], max_len: int | None = None):
    """``forward_cached`` over consecutive slices of ``x`` of the lengths in ``schedule``."""
    cache = primitive.init_cache(x.shape[0], max_len or x.shape[1])
    outputs, pos = [], 0
    for n in schedule:
        outputs.append(primitive.forward_cached(x[:, pos : pos + n], cache, pos))
        pos += n
    assert pos == x.shape[1]
    return torch.cat(outputs, dim=1), cache


def schedules(seq: int) -> list[list[int]]:
    """Prefill then single tokens; prefill, a few multi-token steps, single tokens; one token from the start."""
    prefill = seq // 2
    rest = seq - prefill
    mixed = [prefill] + [3] * ((rest - 2) // 3) + [1] * (rest - 3 * ((rest - 2) // 3))
    return [[prefill] + [1] * rest, mixed, [1] * seq]


@pytest.mark.parametrize("seq", [5, 40], ids=["shorter-than-window-and-chunk", "longer"])
@pytest.mark.parametrize(("symbol", "options"), VARIANTS, ids=IDS)
def test_prefill_and_decode_equal_the_full_forward(symbol, options, seq):
    primitive = make(symbol, **options)
    x = torch.randn(BATCH, seq, primitive.config.d_model)
    with torch.no_grad():
        full = primitive(x)
        for schedule in schedules(seq):
            incremental, _ = run_incremental(primitive, x, schedule)
            torch.testing.assert_close(incremental, full, rtol=1e-4, atol=1e-5, msg=f"schedule {schedule}")


@pytest.mark.parametrize(("symbol", "options"), VARIANTS, ids=IDS)
def test_start_pos_zero_starts_a_new_sequence_in_a_used_cache(symbol, options):
    primitive = make(symbol, **options)
    first, second = torch.randn(2, BATCH, 20, primitive.config.d_model)
    with torch.no_grad():
        _, cache = run_incremental(primitive, first, [12, 1, 1, 3, 3], max_len=24)
        again = [primitive.forward_cached(second[:, :15], cache, 0)]
        again += [primitive.forward_cached(second[:, i : i + 1], cache, i) for i in range(15, 20)]
        torch.testing.assert_close(torch.cat(again, dim=1), primitive(second), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("max_len", [5, 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(("symbol", "options"), VARIANTS, ids=IDS)
def test_allocated_cache_is_the_analytic_cache(symbol, options, dtype, max_len):
    """``nbytes`` = batch x ``inference_cache(config, dtype bytes).bytes_at(max_len)``: A preallocates max_len
    tokens (the per-token figure at max_len), W min(window, max_len), S and D their fixed states."""
    primitive = make(symbol, **options)
    cache = primitive.init_cache(BATCH, max_len, dtype=dtype)
    spec = type(primitive).inference_cache(primitive.config, dtype_bytes=dtype.itemsize)
    allocated = 0 if cache is None else cache.nbytes()
    assert allocated == BATCH * spec.bytes_at(max_len)
    if cache is None:
        assert spec == CacheSpec()  # stateless: M, E
    else:
        assert all(t.dtype == dtype for t in cache.tensors())


def test_attention_cache_is_grouped_query_shaped_and_the_ring_is_bounded_by_the_window():
    a, w = make("A"), make("W")
    k = a.init_cache(BATCH, 100).k
    assert k.shape == (BATCH, 100, a.config.n_kv_heads, a.config.head_dim)
    assert a.config.n_kv_heads < a.config.n_heads
    assert w.init_cache(BATCH, 100).k.shape[1] == WINDOW
    assert w.init_cache(BATCH, 5).k.shape[1] == 5


@pytest.mark.parametrize("symbol", ["A", "W"])
def test_tokens_beyond_max_len_or_another_batch_size_are_refused(symbol):
    primitive = make(symbol)
    x = torch.randn(BATCH, 11, primitive.config.d_model)
    cache = primitive.init_cache(BATCH, 10)
    with pytest.raises(ValueError, match="max_len 10"):
        primitive.forward_cached(x, cache, 0)
    with pytest.raises(ValueError, match="batch"):
        primitive.forward_cached(x[:1, :3], cache, 0)


def test_a_primitive_with_a_declared_cache_but_no_decoding_refuses_to_decode():
    @dataclass(frozen=True)
    class ForgetfulConfig:
        d_model: int

    class Forgetful(Primitive):
        symbol, name, Config = "Z", "forgetful", ForgetfulConfig

        def forward(self, x):
            return x.cumsum(dim=1)

        def reset_parameters(self, init):
            pass

        @classmethod
        def param_count(cls, config):
            return 0

        @classmethod
        def flops_per_token(cls, config, seq_len):
            return 0

        @classmethod
        def inference_cache(cls, config, dtype_bytes=2):
            return CacheSpec(fixed_bytes=config.d_model * dtype_bytes)

    primitive = Forgetful(ForgetfulConfig(8))
    with pytest.raises(NotImplementedError, match="init_cache"):
        primitive.init_cache(1, 4)
    with pytest.raises(NotImplementedError, match="forward_cached"):
        primitive.forward_cached(torch.zeros(1, 1, 8), None, 0)
    with pytest.raises(NotImplementedError, match="decode_step"):
        primitive.decode_step(torch.zeros(1, 1, 8), None, torch.tensor(0))


def fill_with_noise(cache) -> None:
    """Garbage in every cached tensor: what a reused cache holds past its new prompt, and what a step over the
    whole preallocated cache must mask out."""
    for t in [] if cache is None else cache.tensors():
        t.copy_(torch.randn_like(t, dtype=torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-cache"])
@pytest.mark.parametrize(("symbol", "options"), VARIANTS, ids=IDS)
def test_decode_step_with_a_tensor_position_equals_forward_cached(symbol, options, dtype):
    """Prefill 5 tokens, then 14 single tokens through each path on its own cache (past W's window of 8, so the
    ring wraps; A's cache is longer than the tokens fed, its tail noise)."""
    primitive = make(symbol, **options)
    x = torch.randn(BATCH, 19, primitive.config.d_model)
    prefill = 5
    with torch.no_grad():
        caches = [primitive.init_cache(BATCH, 24, dtype=dtype) for _ in range(2)]
        for cache in caches:
            fill_with_noise(cache)
            primitive.forward_cached(x[:, :prefill], cache, 0)
        cached, stepped = [], []
        for pos in range(prefill, x.shape[1]):
            token = x[:, pos : pos + 1]
            cached.append(primitive.forward_cached(token, caches[0], pos))
            stepped.append(primitive.decode_step(token, caches[1], torch.tensor(pos)))
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 0, "atol": 1e-2}
    torch.testing.assert_close(torch.cat(stepped, dim=1), torch.cat(cached, dim=1), **tolerance)
