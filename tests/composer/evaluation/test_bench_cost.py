"""composer.evaluation.bench_cost: a model's measured training, prefill and decode cost and its peak memory."""

from __future__ import annotations

import types

import pytest
import torch

from composer.costmodel import timing
from composer.evaluation import bench_cost
from composer.evaluation.bench_cost import (
    CPU_MEMORY_METHOD,
    CostGrid,
    DecodeKind,
    DecodePath,
    cpu_allocation_peak,
    figure,
    largest_batch,
    measure_cost,
    measure_decode_step,
    tensor_bytes,
)
from composer.model import build_model
from composer.presets import get_preset

TINY = get_preset("tiny").arch.with_pattern("AMSM")
# small enough to take a fraction of a second: 2 x 16 training tokens, decode at 16 and 32 tokens, batch 1 and 4
GRID = CostGrid(train_batch=2, seq_len=16, long_factor=2, large_batch=4, train_repeats=2, prefill_repeats=2,
                decode_repeats=2, min_repeat_seconds=0.0)


def test_the_record_has_every_figure_with_its_repeats_and_spread():
    threads = torch.get_num_threads()
    record = measure_cost(TINY, GRID, "cpu")
    assert torch.get_num_threads() == threads  # the process's threads given back
    assert record["device"] == "cpu" and record["dtype"] == record["train_dtype"] == "fp32"
    assert record["threads"] == 1 and record["device_name"]  # one thread unless the grid says otherwise
    assert record["clock"] == "this process's CPU time (one thread)"  # the one harness's clock for one CPU thread
    assert record["decode_path"] == "eager InferenceCache, fp32"  # the CPU's fastest path, named
    train = record["train_tokens_per_s"]
    assert (train["batch"], train["seq_len"], train["repeats"]) == (2, 16, 2)
    assert record["prefill_tokens_per_s"]["context"] == 16
    decode = record["decode_ms_per_token"]
    assert {batch: set(by_context) for batch, by_context in decode.items()} == {"1": {"16", "32"}, "4": {"16", "32"}}
    for value in [train, record["prefill_tokens_per_s"], *(v for by in decode.values() for v in by.values())]:
        assert 0 < value["min"] <= value["median"] <= value["max"] and value["repeats"] == 2
        assert value["spread"] == pytest.approx((value["max"] - value["min"]) / value["median"])
        assert value["noisy"] == (value["spread"] > record["noisy_spread"])
    assert len(record["noisy"]) == sum(value["noisy"] for value in [train, record["prefill_tokens_per_s"],
                                                                    *(v for by in decode.values() for v in by.values())])
    memory = record["peak_memory_bytes"]
    assert memory["method"] == CPU_MEMORY_METHOD and memory["decode_at"] == {"batch": 4, "context": 32}
    weights = tensor_bytes(build_model(TINY))
    assert memory["train"] > weights and memory["decode"] > weights  # gradients and activations; the cache
    assert record["grid"]["seq_len"] == 16 and record["seconds"] > 0


def test_a_grid_in_bf16_trains_and_decodes_in_bf16_at_its_decode_point_with_the_median_of_its_repeats():
    """The search trains in bf16 on a CPU that computes it: its cost is timed so, not in fp32; the cost limits
    read one decode point; every figure is the median of the repeats it keeps, its warm-up stated."""
    import dataclasses

    grid = dataclasses.replace(GRID, precision="bf16", short_decode=False, large_batch=1)
    record = measure_cost(TINY, grid, "cpu")
    assert record["dtype"] == "bf16" and record["train_dtype"] == "bf16 autocast, fp32 weights"
    assert record["decode_path"] == "eager InferenceCache, bf16" and record["warmup"] == bench_cost.WARMUP
    assert list(record["decode_ms_per_token"]) == ["1"]
    assert list(record["decode_ms_per_token"]["1"]) == [str(grid.decode_point(TINY.max_seq_len))] == ["32"]
    train = record["train_tokens_per_s"]
    assert len(train["values"]) == train["repeats"] and train["median"] == figure(train["values"])["median"]
    assert figure([3.0, 1.0, 9.0])["median"] == 3.0  # the median, not the fastest repeat
    assert GRID.dtype(torch.device("cpu")) == "fp32" and GRID.dtype(torch.device("cuda")) == "bf16"


def test_the_cpu_cuts_the_training_batch_and_contexts_stop_at_the_models_length():
    grid = CostGrid(train_batch=16, seq_len=128)
    assert grid.cpu_train_batch() == 8  # at most 1,024 tokens a step on the CPU
    assert CostGrid(train_batch=4, seq_len=128).cpu_train_batch() == 4
    assert grid.contexts(2048) == (128, 1024)
    assert CostGrid(train_batch=1, seq_len=256).contexts(1024) == (256, 1023)  # room for the decoded token
    assert CostGrid(train_batch=1, seq_len=2048).contexts(1024) == (1023,)


def test_decode_at_a_large_batch_is_milliseconds_per_step_not_per_sequence(monkeypatch):
    """A fake clock advanced 1 ms per sequence by each step: a step of 4 sequences reads 4 ms (the latency each
    sequence sees per token), not 1 ms."""
    now = [0.0]
    monkeypatch.setattr(bench_cost, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(timing, "CLOCKS", {"cpu": lambda: now[0], "wall": lambda: now[0]})  # the harness's clocks
    model = build_model(TINY).eval()
    real = model.next_token_logits

    def step(ids, cache):
        now[0] += 1e-3 * ids.shape[0]
        return real(ids, cache)

    monkeypatch.setattr(model, "next_token_logits", step)
    path = DecodePath.for_device(torch.device("cpu"), "fp32")
    for batch in (1, 4):
        value, peak = measure_decode_step(model, batch, 16, GRID, torch.device("cpu"), path, "fp32", profile=False)
        assert value["median"] == pytest.approx(batch) and peak is None


def test_the_cpu_peak_counts_what_a_step_allocates_at_once():
    def step():
        held = torch.ones(1_000_000)  # 4 MB live together with the next
        again = torch.ones(250_000)
        del held, again

    peak = cpu_allocation_peak(step)
    assert 5_000_000 <= peak < 5_200_000


def test_the_large_batch_is_halved_until_its_cache_takes_a_quarter_of_the_free_memory():
    from composer.accounting import analyze

    one = analyze(TINY, seq_len=33, cache_dtype_bytes=4).cache_bytes_per_sequence  # one sequence's cache
    assert largest_batch(TINY, 64, 33, "fp32", None) == 64  # free memory unknown: as asked
    assert largest_batch(TINY, 64, 33, "fp32", 4 * 64 * one) == 64
    assert largest_batch(TINY, 64, 33, "fp32", 4 * 20 * one) == 16
    assert largest_batch(TINY, 64, 33, "fp32", one) == 1
    assert figure([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "repeats": 3, "spread": 1.0,
                                       "noisy": True, "values": [3.0, 1.0, 2.0]}


def test_each_device_names_the_decode_path_it_runs():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert DecodePath.for_device(cpu, "fp32").name == "eager InferenceCache, fp32"
    assert DecodePath.for_device(cuda, "bf16").name == "CUDA graph of the static decode step, bf16"
    assert DecodePath.for_device(cuda, "bf16").kind is DecodeKind.CUDA_GRAPH  # nothing touches the device yet


def test_a_failed_cuda_graph_capture_is_measured_eagerly_and_named_so(monkeypatch):
    """Where the CUDA graph cannot be captured the step runs eagerly, the record's label says so and why, and the
    capture is not tried again at the next batch or context. On the CPU: the capture's failure is staged."""
    captures = []

    def capture_fails(model, cache, ids, position):
        captures.append(position)
        raise RuntimeError("operation not permitted when stream is capturing\nsecond line")

    monkeypatch.setattr(bench_cost, "cuda_graph_step", capture_fails)
    model = build_model(TINY).eval()
    path = DecodePath.for_device(torch.device("cuda"), "fp32")
    for context in (16, 32):
        value, _ = measure_decode_step(model, 1, context, GRID, torch.device("cpu"), path, "fp32", profile=False)
        assert value["median"] > 0
    assert captures == [16]
    assert path.kind is DecodeKind.EAGER
    assert path.name == ("eager InferenceCache, fp32 (CUDA graph capture failed: RuntimeError: operation not "
                         "permitted when stream is capturing)")


def test_a_compiled_step_that_falls_back_is_measured_eagerly_and_named_so():
    """The CPU's compiled step (``compile_decode``) whose compilation fails: eager from then on, the label naming
    the failure (a stand-in compiler that raises, as Inductor does without a C++ compiler)."""
    from composer.inference import COMPILED_CPU, DecodeStep

    def no_compiler(*args):
        raise OSError("no C++ compiler found")

    model = build_model(TINY).eval()
    path = DecodePath(DecodeKind.COMPILED_CPU, "fp32", decoder=DecodeStep(model, no_compiler, COMPILED_CPU))
    assert path.name == "compiled (inductor, cpu), fp32"
    with pytest.warns(RuntimeWarning, match="decoding eagerly"):
        measure_decode_step(model, 1, 16, GRID, torch.device("cpu"), path, "fp32", profile=False)
    assert path.kind is DecodeKind.EAGER and path.decoder is None
    assert path.name == "eager InferenceCache, fp32 (compile failed: OSError: no C++ compiler found)"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA-graph decode path needs a CUDA device")
def test_on_cuda_the_decode_step_is_a_cuda_graph_and_memory_is_the_allocators():
    record = measure_cost(TINY, GRID, "cuda")
    assert record["device"] == "cuda" and record["dtype"] == "bf16"
    assert record["decode_path"] == DecodePath(DecodeKind.CUDA_GRAPH, "bf16").name, record["decode_path"]
    assert record["peak_memory_bytes"]["method"].startswith("cuda: torch.cuda.max_memory_allocated")
    assert record["peak_memory_bytes"]["decode"] > 0 and record["train_tokens_per_s"]["batch"] == 2
