"""The compiled decoding step (composer.inference.compile_decode_step): the static-shape step of every primitive
compiles as one graph (fullgraph) that serves every position, and computes what the eager step computes.

Compiling is the cost here (seconds a graph on a CPU), so the module compiles once, a tiny model with all six
primitives (a module-scoped fixture), and every check on it is one test. The CUDA-graphs test runs on CUDA only.
"""

from __future__ import annotations

import pytest
import torch

from composer.config import ArchConfig
from composer.inference import COMPILED_CPU, CUDA_GRAPHS, RECOMPILE_LIMIT, DecodeStep, compile_decode_step
from composer.model import build_model

VOCAB, BATCH, PROMPT, STEPS = 64, 2, 5, 10


def tiny_model(device: str = "cpu"):
    # W's window 4 and a 5-token prompt: the compiled ring wraps; init_std 0.1 so the layers move the logits
    arch = ArchConfig(pattern="AWSDME", d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, ffn_dim=64,
                      vocab_size=VOCAB, max_seq_len=64, init_std=0.1,
                      options={"W": {"window": 4}, "S": {"chunk_size": 8}, "D": {"chunk_size": 8}})
    torch.manual_seed(0)
    return build_model(arch, device=device).eval()


def eager_and_compiled_logits(model, step, device: str = "cpu"):
    """Logits of ``STEPS`` tokens after a prompt, from the eager step and from ``step``, each on its own cache;
    and the graphs dynamo compiled after the first compiled step (0: one graph serves every position)."""
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT + STEPS), generator=torch.Generator().manual_seed(1)).to(device)
    caches = [model.init_cache(BATCH, PROMPT + STEPS + 3, device=device) for _ in range(2)]
    eager, compiled = [], []
    with torch.no_grad():
        for cache in caches:
            model(ids[:, :PROMPT], cache=cache)
        for pos in range(PROMPT, PROMPT + STEPS):
            token = ids[:, pos : pos + 1]
            eager.append(model.decode_step(token, caches[0], torch.tensor(pos, device=device)))
            compiled.append(step(token, caches[1]))
            if pos == PROMPT:
                graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert caches[1].pos == PROMPT + STEPS
    return torch.stack(eager), torch.stack(compiled), torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs


@pytest.fixture(scope="module")
def compiled_cpu_step():
    model = tiny_model()
    return model, compile_decode_step(model)


def test_the_compiled_step_is_one_graph_for_every_position_and_equals_the_eager_step(compiled_cpu_step):
    model, step = compiled_cpu_step
    assert step.path == COMPILED_CPU
    eager, compiled, new_graphs = eager_and_compiled_logits(model, step)
    assert step.compiled, f"the step fell back: {step.path}"
    assert step.compile_s is not None and step.compile_s > 0
    assert new_graphs == 0, "a position recompiled the step"
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device; the CPU compiles with "
                                                           "Inductor (the test above)")
def test_on_cuda_the_step_is_replayed_as_cuda_graphs_and_equals_the_eager_step():
    model = tiny_model("cuda")
    step = compile_decode_step(model)
    assert step.path == CUDA_GRAPHS
    skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
    eager, compiled, new_graphs = eager_and_compiled_logits(model, step, "cuda")
    assert step.compiled, f"the step fell back: {step.path}"
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == skips, "the step ran outside CUDA graphs"
    assert new_graphs == 0
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)


def test_the_recompile_limit_is_raised_only_while_a_step_may_compile():
    """A compiled step raises dynamo's recompile limit for its calls that may compile (the first on each cache),
    and leaves the process's limit, which every other compiled function (a search worker's training) runs under,
    as it was (issue 69: it was raised for the whole process)."""
    model = tiny_model()
    before = torch._dynamo.config.recompile_limit
    assert before < RECOMPILE_LIMIT
    compile_decode_step(model)  # lazy: building a step changes nothing
    assert torch._dynamo.config.recompile_limit == before
    seen = []

    def compiled(ids, cache, pos):  # stands in for the compiled step: records the limit it runs under
        seen.append(torch._dynamo.config.recompile_limit)
        return model.decode_step(ids, cache, pos)

    step, ids = DecodeStep(model, compiled, COMPILED_CPU), torch.zeros(1, 1, dtype=torch.long)
    cache = model.init_cache(1, 8)
    with torch.no_grad():
        step(ids, cache)
        step(ids, cache)  # the same cache: its graph replays
        step(ids, model.init_cache(1, 16))  # a new cache: may compile
    assert seen == [RECOMPILE_LIMIT, before, RECOMPILE_LIMIT]
    assert torch._dynamo.config.recompile_limit == before
