"""Generation with the inference cache (composer/inference.py): prefill + decode logits equal the full forward's
on every primitive and on a pattern of all six; generate() is the argmax rollout, batched, reproducibly sampled,
continuable and resettable; the allocated cache is the analytic cache of composer/accounting.py; the static-shape
decoding step (ComposerModel.decode_step, DecodeStep) equals the cached forward, and falls back to eager where
compiling fails (the compiled step itself: tests/composer/test_compiled_decode.py)."""

from __future__ import annotations

import json

import pytest
import torch

from composer.accounting import analyze
from composer.config import ArchConfig
from composer.inference import EAGER, InferenceCache, StepKind, compile_decode_step, sample_next, stream
from composer.model import build_model

WINDOW, CHUNK, VOCAB = 8, 16, 96
ALL_SIX = "AMWSDE"


def tiny_arch(pattern: str) -> ArchConfig:
    # init_std 0.1 rather than 0.02: the layers then move the logits far more than the tolerance, so a wrong
    # cache cannot hide behind the (tied) embedding's share of the logits.
    return ArchConfig(
        pattern=pattern, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=128, vocab_size=VOCAB,
        max_seq_len=256, init_std=0.1,
        options={"W": {"window": WINDOW}, "S": {"chunk_size": CHUNK}, "D": {"chunk_size": CHUNK}},
    )


def tiny_model(pattern: str):
    return build_model(tiny_arch(pattern)).eval()


def prefill_and_decode(model, ids: torch.Tensor, prompt: int, cache: InferenceCache) -> torch.Tensor:
    """Logits of every position: the first ``prompt`` tokens in one call, then one token per call."""
    steps = [model(ids[:, :prompt], cache=cache).logits]
    steps += [model(ids[:, i : i + 1], cache=cache).logits for i in range(prompt, ids.shape[1])]
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("prompt", [5, 30], ids=["shorter-than-window", "longer-than-window-and-chunk"])
@pytest.mark.parametrize("pattern", ["A", "WM", "S", "D", "M", "E", ALL_SIX, "SWDAEM"])
def test_prefill_then_decode_equals_the_full_forward(pattern, prompt):
    model = tiny_model(pattern)
    ids = torch.randint(0, VOCAB, (2, prompt + 14))
    with torch.no_grad():
        full = model(ids).logits
        cache = model.init_cache(2, ids.shape[1])
        incremental = prefill_and_decode(model, ids, prompt, cache)
    assert cache.pos == ids.shape[1] and cache.remaining == 0
    torch.testing.assert_close(incremental, full, rtol=1e-4, atol=1e-5)


def test_cached_forward_returns_the_loss_of_the_new_positions():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 21))
    with torch.no_grad():
        full = model(ids[:, :-1], targets=ids[:, 1:])
        cache = model.init_cache(2, 20)
        model(ids[:, :12], cache=cache)
        tail = model(ids[:, 12:20], targets=ids[:, 13:21], cache=cache)
    expected = torch.nn.functional.cross_entropy(full.logits[:, 12:].flatten(0, 1), ids[:, 13:].flatten())
    torch.testing.assert_close(tail.lm_loss, expected, rtol=1e-4, atol=1e-5)


def greedy_rollout(model, ids: torch.Tensor, n: int) -> torch.Tensor:
    """The reference: the argmax of a full forward over everything so far, n times."""
    out = ids
    with torch.no_grad():
        for _ in range(n):
            out = torch.cat([out, model(out).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return out[:, ids.shape[1] :]


@pytest.mark.parametrize("pattern", [ALL_SIX, "(AM)x2"])
def test_greedy_generate_is_the_argmax_rollout_of_full_forwards_batched(pattern):
    model = tiny_model(pattern)
    ids = torch.randint(0, VOCAB, (2, 11))  # longer than the window
    out = model.generate(ids, max_new_tokens=12, temperature=0)
    assert out.shape == (2, 12) and out.dtype == torch.long
    torch.testing.assert_close(out, greedy_rollout(model, ids, 12), rtol=0, atol=0)
    # each row as a batch of one: the batch changes nothing
    for row in range(2):
        torch.testing.assert_close(model.generate(ids[row], 12, temperature=0), out[row], rtol=0, atol=0)


def test_sampling_is_reproducible_with_a_generator_and_top_k_1_is_greedy():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 6))

    def sample(seed, **kwargs):
        return model.generate(ids, 10, generator=torch.Generator().manual_seed(seed), **kwargs)

    settings = ({"temperature": 1.0}, {"temperature": 0.7, "top_k": 20}, {"temperature": 1.3, "top_p": 0.9})
    for kwargs in settings:
        torch.testing.assert_close(sample(1, **kwargs), sample(1, **kwargs), rtol=0, atol=0)
    assert not torch.equal(sample(1, temperature=2.0), sample(2, temperature=2.0))
    greedy = model.generate(ids, 10, temperature=0)
    torch.testing.assert_close(sample(3, top_k=1), greedy, rtol=0, atol=0)
    torch.testing.assert_close(sample(4, top_p=1e-6), greedy, rtol=0, atol=0)


def test_sample_next_keeps_only_the_top_k_and_the_nucleus():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log().expand(4000, 4)
    gen = torch.Generator().manual_seed(0)
    assert set(sample_next(logits, top_k=2, generator=gen).tolist()) == {0, 1}
    # top_p 0.7: 0.5 alone falls short, 0.5 + 0.3 reaches it; token 2 and 3 are cut
    assert set(sample_next(logits, top_p=0.7, generator=gen).tolist()) == {0, 1}
    assert set(sample_next(logits, top_p=0.85, generator=gen).tolist()) == {0, 1, 2}
    draws = sample_next(logits, generator=gen)
    assert set(draws.tolist()) == {0, 1, 2, 3}
    assert abs((draws == 0).float().mean().item() - 0.5) < 0.05
    assert sample_next(logits[:2], temperature=0).tolist() == [0, 0]
    with pytest.raises(ValueError):
        sample_next(logits, top_p=0)


def test_a_cache_continues_where_generate_stopped_and_can_be_reset():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 9))
    whole = model.generate(ids, 16, temperature=0)
    cache = model.init_cache(2, 40)
    first = model.generate(ids, 6, temperature=0, cache=cache)
    assert cache.pos == 9 + 6 - 1  # the last token is returned, not fed
    second = model.generate(first[:, -1:], 11, temperature=0, cache=cache)
    torch.testing.assert_close(torch.cat([first, second], dim=1)[:, :16], whole, rtol=0, atol=0)
    cache.reset()
    assert cache.pos == 0
    torch.testing.assert_close(model.generate(ids, 16, temperature=0, cache=cache), whole, rtol=0, atol=0)


def test_generation_stops_at_eos_and_pads_finished_sequences_with_it():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 7))
    free = model.generate(ids, 12, temperature=0)
    eos = int(free[0, 3])  # row 0 emits it at step 3 (or earlier)
    out = model.generate(ids, 12, temperature=0, eos=eos)
    first = int((free[0] == eos).nonzero()[0])
    assert (out[0, first:] == eos).all() and torch.equal(out[0, :first], free[0, :first])
    if eos not in free[1].tolist():
        assert out.shape[1] == 12 and torch.equal(out[1], free[1])
    everyone = model.generate(ids, 12, temperature=0, eos=[int(free[0, 0]), int(free[1, 0])])
    assert everyone.shape == (2, 1)  # both finished at once: no more steps


def test_cache_bytes_equal_the_analytic_cache_of_accounting():
    """Allocated = batch x ``analyze(arch, seq_len=max_len, cache_dtype_bytes).cache_bytes_per_sequence``, per
    layer and in total, below and above W's window, in fp32 and bf16."""
    arch = tiny_arch("AMWSDE" + "AWS")
    model = build_model(arch)
    for max_len in (5, 64):
        for dtype in (torch.float32, torch.bfloat16):
            cache = model.init_cache(3, max_len, dtype=dtype)
            stats = analyze(arch, seq_len=max_len, cache_dtype_bytes=dtype.itemsize)
            assert cache.nbytes() == 3 * stats.cache_bytes_per_sequence
            per_layer = [3 * stats.per_primitive[symbol]["cache_bytes_per_layer"] for symbol in arch.pattern]
            assert cache.layer_nbytes() == per_layer
    # the per-token KV figure of accounting is the A layers' share that grows with max_len
    grow = model.init_cache(1, 65).nbytes() - model.init_cache(1, 64).nbytes()
    assert grow == analyze(arch, cache_dtype_bytes=4).kv_cache_bytes_per_token


def test_the_cache_refuses_what_does_not_fit():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 8))
    cache = model.init_cache(2, 10)
    assert isinstance(cache, InferenceCache) and "max_len=10" in repr(cache)
    with pytest.raises(ValueError, match="do not fit"):
        model.generate(ids, 4, cache=cache)  # 8 + 4 - 1 > 10
    with pytest.raises(ValueError, match="batch"):
        model(ids[:1], cache=cache)
    assert cache.pos == 0
    model.generate(ids, 3, cache=cache)  # 8 + 3 - 1 = 10 fits exactly
    assert cache.pos == 10



def test_bf16_caches_and_bf16_models_decode_close_to_their_full_forward():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 30))
    with torch.no_grad():
        full = model(ids).logits
        cache = model.init_cache(2, 30, dtype=torch.bfloat16)  # an fp32 model with a bf16 cache
        torch.testing.assert_close(prefill_and_decode(model, ids, 20, cache), full, rtol=0, atol=5e-2)
        model = model.to(torch.bfloat16)
        cache = model.init_cache(2, 30)
        assert all(t.dtype == torch.bfloat16 for layer in cache.layers if layer for t in layer.tensors())
        full = model(ids).logits
        torch.testing.assert_close(prefill_and_decode(model, ids, 20, cache), full, rtol=0, atol=5e-2)


def test_the_cached_path_computes_no_gradients_and_runs_under_inference_mode():
    model = tiny_model(ALL_SIX)
    ids = torch.randint(0, VOCAB, (2, 9))
    expected = model.generate(ids, 4, temperature=0)
    cache = model.init_cache(2, 12)
    assert not model(ids, cache=cache).logits.requires_grad  # grad mode on: still no graph through the cache
    with torch.inference_mode():
        cache.reset()
        torch.testing.assert_close(model.generate(ids, 4, temperature=0, cache=cache), expected, rtol=0, atol=0)
        inside = model.init_cache(2, 12)
        torch.testing.assert_close(model.generate(ids, 4, temperature=0, cache=inside), expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-cache"])
def test_decode_step_with_a_tensor_position_equals_next_token_logits(dtype):
    """The model's static-shape step, position as a tensor, against the cached forward, 14 tokens at batch 2
    after a 5-token prompt (past W's window: its ring wraps). It leaves ``cache.pos`` to its caller."""
    model = tiny_model(ALL_SIX + "[AS]")
    ids = torch.randint(0, VOCAB, (2, 19))
    caches = [model.init_cache(2, 24, dtype=dtype) for _ in range(2)]
    with torch.no_grad():
        for cache in caches:
            model(ids[:, :5], cache=cache)
        for pos in range(5, ids.shape[1]):
            token = ids[:, pos : pos + 1]
            expected = model.next_token_logits(token, caches[0])
            logits = model.decode_step(token, caches[1], torch.tensor(pos))
            assert caches[1].pos == pos
            caches[1].pos += 1
            tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 0, "atol": 2e-2}
            torch.testing.assert_close(logits, expected, **tolerance, msg=f"position {pos}")


def test_the_eager_decode_step_advances_the_cache_and_streams_the_greedy_rollout():
    model = tiny_model(ALL_SIX)
    step = compile_decode_step(model, enabled=False)
    assert step.path == EAGER and not step.compiled
    ids = torch.randint(0, VOCAB, (2, 9))
    out = torch.stack(list(stream(model, ids, 12, temperature=0, decode=step)), dim=1)
    torch.testing.assert_close(out, model.generate(ids, 12, temperature=0), rtol=0, atol=0)
    cache = model.init_cache(2, 10)
    model(ids, cache=cache)
    with pytest.raises(ValueError, match=r"\[batch, 1\]"):
        step(ids[:, :2], cache)
    step(ids[:, :1], cache)
    assert cache.pos == 10
    with pytest.raises(ValueError, match="do not fit"):
        step(ids[:, :1], cache)


def test_a_step_that_fails_to_compile_warns_once_and_decodes_eagerly(monkeypatch):
    """Where Inductor cannot compile (no C++ compiler, an Inductor error) the step decodes eagerly, says why in
    its ``path`` and warns once; the cache is not advanced twice."""

    def broken(*args, **kwargs):
        raise RuntimeError("InductorError: no C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: broken)
    model = tiny_model(ALL_SIX)
    step = compile_decode_step(model)
    assert step.compiled and step.kind is StepKind.COMPILED_CPU and step.path == "compiled (inductor, cpu)"
    ids = torch.randint(0, VOCAB, (2, 9))
    with pytest.warns(RuntimeWarning, match="decoding eagerly: RuntimeError: InductorError: no C\\+\\+ compiler") as caught:
        out = torch.stack(list(stream(model, ids, 6, temperature=0, decode=step)), dim=1)
    assert sum(issubclass(w.category, RuntimeWarning) for w in caught) == 1
    assert not step.compiled and step.compile_s is None
    assert step.kind is StepKind.EAGER and step.failure == "RuntimeError: InductorError: no C++ compiler found"
    assert step.path == "eager (compile failed: RuntimeError: InductorError: no C++ compiler found)"
    assert json.loads(json.dumps({"decode_path": step.path})) == {"decode_path": step.path}
    torch.testing.assert_close(out, model.generate(ids, 6, temperature=0), rtol=0, atol=0)
