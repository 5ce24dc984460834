from __future__ import annotations

import math

import pytest

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.presets import get_preset
from scaling.rules import hyperparameters, lr_anchors, peak_lr, token_budget


def _stats(preset: str):
    return analyze(get_preset(preset).arch)


def test_token_budgets():
    assert token_budget(1_235_814_400, "paper") == 37_500_000_000  # the paper's 1B budget
    assert token_budget(1_000_000_000) == 20_000_000_000  # Chinchilla: 20 tokens per parameter
    assert token_budget(_stats("llama-3.2-1b").params) == 24_700_000_000
    assert token_budget(1_000_000, 35.5) == 35_500_000
    assert token_budget(123_456_789, 1, digits=9) == 123_456_789


@pytest.mark.parametrize("bad", [("x", "chinchilla"), (0, "chinchilla"), (10, "kaplan"), (10, -1.0), (10, True)])
def test_token_budget_errors(bad):
    with pytest.raises(ConfigError):
        token_budget(*bad)


@pytest.mark.parametrize("preset, lr", [("llama-350m", 3e-3), ("llama-3.2-1b", 6e-4), ("llama-3.2-3b", 3e-4)])
def test_lr_at_the_anchors(preset, lr):
    assert hyperparameters(_stats(preset).non_embedding_params)["lr"] == lr


def test_lr_interpolates_log_log_and_clamps_outside():
    (n0, lr0), (n1, lr1), _ = lr_anchors()
    middle = round(math.sqrt(n0 * n1))
    assert peak_lr(middle) == pytest.approx(math.sqrt(lr0 * lr1), rel=1e-6)
    assert lr1 < peak_lr(n0 + 1) < lr0
    assert peak_lr(1_000) == 3e-3 and peak_lr(_stats("llama-3.1-8b").non_embedding_params) == 3e-4
    assert peak_lr(100, anchors=((10, 1.0), (1000, 0.01))) == pytest.approx(0.1)
    with pytest.raises(ConfigError):
        peak_lr(100, anchors=((10, -1.0),))


def test_hyperparameters_batch_schedule_overrides_and_sources():
    settings = hyperparameters(973_146_112)
    assert settings["global_batch_tokens"] == settings["batch_size"] * settings["seq_len"] == 2_097_152
    assert (settings["seq_len"], settings["schedule"], settings["warmup"]) == (8192, "wsd", 2000)
    assert all(isinstance(source, str) and source for source in settings["sources"].values())
    assert hyperparameters(973_146_112, seq_len=4096)["batch_size"] == 512
    assert hyperparameters(973_146_112, lr=1e-3)["lr"] == 1e-3
    with pytest.raises(ConfigError, match="unknown hyperparameter"):
        hyperparameters(973_146_112, learning_rate=1e-3)
    with pytest.raises(ConfigError, match="multiple of seq_len"):
        hyperparameters(973_146_112, global_batch_tokens=1000)
