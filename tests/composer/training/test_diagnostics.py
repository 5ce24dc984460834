"""``LayerDiagnostics``: gradient norms per layer and attention entropy per head over a run's first steps (issue 71),
recorded from a real run and checked against what they must be at initialisation."""

from __future__ import annotations

import math

from composer.training.config import TrainConfig
from composer.training.diagnostics import LayerDiagnostics
from composer.training.run import train

STEPS, PER_STEP, SEQ = 12, 4 * 64, 64
TINY = dict(arch="AAMW", preset="tiny", tokens=STEPS * PER_STEP, seq_len=SEQ, batch_size=4, max_documents=200,
            val_batches=2, val_tokens=512, wandb="off", log_interval=10**9, options={"W": {"window": 8}})


def test_a_run_records_each_layers_gradient_norm_and_each_heads_entropy(tmp_path):
    diagnostics = LayerDiagnostics(steps=8, entropy_every=4)
    summary = train(TrainConfig(**TINY, out=str(tmp_path / "run")), save_on_sigterm=False, callbacks=[diagnostics])
    record = diagnostics.record
    assert summary["steps"] == STEPS and record["layers"] == ["A", "A", "M", "W"]
    # the training loss of each of the first 8 steps, falling from about log(vocab) as the model learns
    assert [row["step"] for row in record["loss"]] == list(range(8))
    assert record["loss"][-1]["loss"] < record["loss"][0]["loss"] < math.log(512) + 1
    # a row per optimizer step of the first 8, one norm per layer, every layer trained
    assert [row["step"] for row in record["grad_norm"]] == list(range(8))
    assert all(len(row["norms"]) == 4 and all(0 < n < math.inf for n in row["norms"]) for row in record["grad_norm"])
    # entropy before the first step and after steps 4 and 8, for the attention layers (0, 1 and W's 3) only
    assert [row["step"] for row in record["entropy"]] == [0, 4, 8]
    heads = record["entropy"][0]["heads"]
    assert sorted(heads) == ["0", "1", "3"] and all(len(h) == 4 for h in heads.values())  # tiny: 4 heads
    # at initialisation (weights of std 0.02) every head attends nearly uniformly over what it sees: the causal
    # layers near the mean log(position + 1), the window of 8 at most log(8)
    uniform = record["uniform_entropy"]
    assert math.isclose(uniform, sum(math.log(i + 1) for i in range(SEQ)) / SEQ)  # the probe: SEQ inputs
    assert all(abs(e - uniform) < 0.05 for layer in ("0", "1") for e in heads[layer])
    assert all(e <= math.log(8) + 1e-6 and e > math.log(8) - 0.2 for e in heads["3"])


def test_a_run_of_several_processes_is_refused_in_one_line():
    """Under FSDP a layer's gradient is this rank's shard: its norm would be a part, so the callback refuses."""
    from types import SimpleNamespace

    import pytest

    from composer.errors import ConfigError

    with pytest.raises(ConfigError, match="one process"):
        LayerDiagnostics().setup(SimpleNamespace(world_size=2), None, "fit")
    LayerDiagnostics().setup(SimpleNamespace(world_size=1), None, "fit")
