"""A finished search for the commands that read one back (``composer report``, ``train --from-search``).

The real engine, smoke ladder and files (search.run), with training replaced by a deterministic stand-in
(``tests/search/test_bookkeeping.py``'s way) so that the search takes seconds: new patterns score 0.5 below the
known layouts at every rung and seed, so with 3 confirmation seeds the answer is ``new``, and the search grows
its patterns with ``--attention-at-target keep``, which a reader must not swap for the default ``repeat``. Where
the rung offers two rates, 1e-3 wins, so the rate chosen is not ``composer train``'s default (3e-3)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

KNOWN = ("AMAMAM", "AAMMMM")  # Llama's and the paper's layouts at the search's 6 layers


@pytest.fixture(scope="session")
def finished_search(tmp_path_factory) -> Path:
    from search import run as search_run
    from search.config import SearchConfig
    from search.known import layout_at_target
    from search.lm import LanguageModelEvaluator

    known = set(KNOWN) | {layout_at_target(pattern, "tiny", name)[0]
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
