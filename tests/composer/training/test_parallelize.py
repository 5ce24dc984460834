"""apply_compile: per-layer compilation that stays compiled for every primitive of a hybrid."""

from __future__ import annotations

import pytest
import torch

from composer.model import build_model
from composer.presets import get_preset
from composer.training.parallelize import apply_compile


@pytest.fixture
def strict_recompiles(monkeypatch):
    """Past its recompile limit dynamo runs a frame eagerly without a word: make that an error here."""
    monkeypatch.setattr(torch._dynamo.config, "fail_on_recompile_limit_hit", True)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_hybrid_stays_compiled_through_train_and_eval_steps(strict_recompiles, monkeypatch):
    """Every layer shares ``ResidualLayer.forward``'s code; each primitive type, in train and in eval (no grad),
    is one more cache entry of it. On an H200, ``(DMAM)x4`` at 1B widths passed dynamo's default limit of 8 and
    ran its later layers eagerly. Here the limit is 4 and three types x 2 modes need 6 (a six-type model at the
    default limit shows the same, in 3 minutes of compiling on CPU)."""
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 4)
    torch.manual_seed(0)
    arch = get_preset("tiny").arch.with_pattern("AWM")
    model = build_model(arch)
    apply_compile(model)
    assert torch._dynamo.config.recompile_limit == 4, "the process's limit was raised, not the compiled calls'"
    tokens = torch.randint(0, arch.vocab_size, (2, 16))
    for _ in range(2):
        model.train()
        model(tokens, tokens).loss.backward()
        model.eval()
        with torch.no_grad():
            model(tokens, tokens)
    assert torch._dynamo.config.recompile_limit == 4  # and it is 4 again after every compiled call
