"""A finished search for the commands that read one back (``composer report``, ``train --from-search``), and a
stand-in for training (``built``) that records the model each training would build.

The real engine, smoke ladder and files (search.run), with training replaced by a deterministic stand-in
(``tests/search/test_bookkeeping.py``'s way) so that the search takes seconds: new patterns score 0.5 below the
known layouts at every rung and seed, so with 3 confirmation seeds the answer is ``new``, and the search grows
its patterns with ``--attention-at-target keep``, which a reader must not swap for the default ``repeat``. Where
the rung offers two rates, 1e-3 wins, so the rate chosen is not ``composer train``'s default (3e-3)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

KNOWN = ("AMAMAM", "AAMMMM")  # Llama's and the paper's layouts at the search's 6 layers


@pytest.fixture(scope="session")
def finished_search(tmp_path_factory) -> Path:
    from search import run as search_run
    from search.config import SearchConfig
    from search.growth import grow
    from search.lm import LanguageModelEvaluator

    known = set(KNOWN) | {grow(pattern, "tiny", name).layout
                          for pattern, name in zip(KNOWN, ("llama", "composer-paper"))}

    def train_once(evaluator, pattern: str, lr: float, seed: int):
        digest = hashlib.sha256(f"{pattern}|{lr}|{seed}".encode()).digest()
        penalty = 0.0 if lr == 1e-3 else 0.02
        return (3.0 if pattern in known else 2.5) + penalty + digest[0] / 255 / 100, 1000.0

    out = tmp_path_factory.mktemp("search") / "out"
    config = SearchConfig(evaluator="lm", strategy="successive-halving", budget="smoke", widths="tiny",
                          primitives="AM", sampler="random", trials=4, precision="fp32", wandb="off",
                          attention_at_target="keep", confirm_seeds=3, out=str(out))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LanguageModelEvaluator, "train_once", train_once)
        patch.setattr(search_run, "add_measured_cost", lambda *args, **kwargs: None)  # real models: seconds each
        search_run.run_search(config, echo=lambda _: None)
    return out


@pytest.fixture
def built(monkeypatch) -> dict[tuple[str, int], dict]:
    """(model, seed) -> the layer symbols of the model its training built, its widths and rate. Training itself is
    stood in for: the run writes the files a finished run writes, so the comparison reads them as usual."""
    from composer.model import build_model
    from composer.presets import resolve_architecture
    from composer.training.config import DEFAULT_PRESET

    models: dict[tuple[str, int], dict] = {}

    def train(config, resume=False, **_):
        arch, widths = resolve_architecture(config.arch, config.preset, DEFAULT_PRESET)
        model = build_model(arch)
        run = Path(config.out)
        models[(run.parent.name, config.seed)] = {"symbols": "".join(layer.symbol for layer in model.layers),
                                                  "preset": widths, "lr": config.lr}
        run.mkdir(parents=True, exist_ok=True)
        (run / "config.json").write_text(json.dumps({"train": config.to_dict()}))
        summary = {"pattern": config.arch, "val_loss": 5.0 + 0.1 * config.seed + len(config.arch) / 100,
                   "tokens": config.tokens, "tokens_per_s": 100.0, "params": 1000, "non_embedding_params": 500,
                   "val_fingerprint": "v", "val_tokens": 64, "loss_spikes": 0, "seed": config.seed,
                   "wall_time_s": 1.0}
        (run / "summary.json").write_text(json.dumps(summary))
        return summary

    monkeypatch.setattr("composer.training.run.train", train)
    return models
