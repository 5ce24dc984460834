"""``Heartbeat``: a training run reports where it is while it trains (issue 36: a search was silent for 150 s)."""

from __future__ import annotations

from composer.training.config import TrainConfig
from composer.training.progress import Heartbeat
from composer.training.run import train

STEPS, PER_STEP = 16, 4 * 128
TINY = dict(arch="AMSA", preset="tiny", tokens=STEPS * PER_STEP, seq_len=128, batch_size=4, max_documents=200,
            val_batches=2, val_tokens=1024, wandb="off", log_interval=10**9)


def test_a_run_reports_while_it_trains_and_at_its_last_step(tmp_path):
    often, rarely = [], []
    context = {"pattern": "AMSA", "run": 1, "runs": 2, "tokens_per_step": PER_STEP}
    summary = train(TrainConfig(**TINY, out=str(tmp_path / "run")), save_on_sigterm=False,
                    callbacks=[Heartbeat(often.append, every_s=0, context=context),
                               Heartbeat(rarely.append, every_s=3600, context=context)])
    assert summary["steps"] == STEPS
    # every_s=0: a report at every step, during training, with the caller's context and rising tokens
    assert [r["step"] for r in often] == list(range(1, STEPS + 1))
    assert [r["tokens"] for r in often] == [step * PER_STEP for step in range(1, STEPS + 1)]
    assert all(r["pattern"] == "AMSA" and r["run"] == 1 and r["runs"] == 2 for r in often)
    assert all(r["steps"] == STEPS and r["total_tokens"] == STEPS * PER_STEP for r in often)
    assert all(r["tokens_per_s"] is None or r["tokens_per_s"] > 0 for r in often)
    assert often[-1]["tokens_per_s"] > 0
    # throttled to once an hour, a run still reports its last step, once
    assert [(r["step"], r["tokens"]) for r in rarely] == [(STEPS, STEPS * PER_STEP)]
