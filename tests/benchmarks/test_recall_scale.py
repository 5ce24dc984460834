"""benchmarks/recall_scale.py (gpu_check.sh --recall-scale, issue 50): the plan sizes every model from the measured
rates and says what the budget cuts; the dry run trains and scores each model on the CPU and writes its loss and
recall; a run killed after its first model keeps that model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_sizes_each_model_and_names_what_the_budget_cuts(load_benchmark, capsys, tmp_path):
    bench = load_benchmark("recall_scale")
    models = bench.plan(["a", "b"], {part: list(bench.LAYOUTS[part]) for part in "ab"}, False, 520.0, {})
    assert [(m["part"], m["layout"]) for m in models] == [("a", layout) for layout in bench.LAYOUTS["a"]] + [
        ("b", layout) for layout in bench.LAYOUTS["b"]]
    for model in models:
        settings, guess = model["settings"], model["estimate"]
        assert settings["tokens"] >= (30_000_000 if model["part"] == "a" else 10_000_000)
        assert settings["tokens"] % (settings["batch_size"] * settings["seq_len"]) == 0  # whole steps
        assert settings["precision"] == "bf16-mixed" and settings["device"] == "cuda"
        assert guess["seconds"] > guess["train_s"] > 0 and guess["tokens_per_s"] > 0
        assert model["cache_32k"]["bytes"] > 0
    by = {(m["part"], m["layout"]): m for m in models}
    assert by[("a", "SDDMAS:keep")]["pattern"].count("A") == 1  # the answer keeps its one attention layer
    assert "A" not in by[("a", "SDDMDM:repeat")]["pattern"]
    # the plan simulates the run: what runs fits the budget, and every cut model is named with its second call
    assert sum(m["estimate"]["seconds"] for m in models if m["expected"] == "runs") <= 520
    cut = [m for m in models if m["expected"] != "runs"]
    text = bench.plan_text(models, 520.0, False)
    assert all(f"{m['part']}:{m['layout']}" in text for m in cut)
    assert ("--recall-scale --parts b" in text) == bool(cut)
    assert bench.main(["--plan-only", "--out", str(tmp_path / "out")]) == 0
    assert "recall_scale plan: 8 models" in capsys.readouterr().out and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_dry_run_records_every_models_loss_and_recall(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_DRY_RUN": "1", "OUT": str(out), "GPU_CHECK_WORK": str(tmp_path / "work"),
           "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "benchmarks/gpu_check.sh"), "--recall-scale", "--layouts-a",
                           "SDDMAS:keep", "--layouts-b", "nemotron-h"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((out / "recall_scale.json").read_text())
    assert report["complete"] and report["dry_run"]
    assert [(m["part"], m["layout"], m["status"]) for m in report["models"]] == [
        ("a", "SDDMAS:keep", "done"), ("b", "nemotron-h", "done")]
    for model in report["models"]:
        result = model["result"]
        assert result["val_loss"] > 0 and result["tokens_per_s"] > 0 and result["params"] > 0
        assert {row["kind"] for row in result["recall"]["copy"]} == {"text", "random"}
        assert "repeat_gain" in result["recall"]["ar_slice"]
        assert "trained_recall.py" in model["command"] and "--precision 32-true" in model["command"]
    table = (out / "recall_scale.md").read_text()
    assert "recall_scale plan: 2 models" in table and table.count("| done |") == 2
    assert (out / "recall_scale-files.tar.gz").stat().st_size > 0 and (out / "recall_scale.log").stat().st_size > 0


@pytest.mark.slow
def test_a_run_killed_after_its_first_model_keeps_that_model(tmp_path):
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, str(ROOT / "benchmarks/recall_scale.py"), "--dry-run", "--parts", "a",
                              "--layouts-a", "llama,SDDMDM:repeat", "--out", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path, report = out / "recall_scale.json", {}
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and child.poll() is None:
            try:
                report = json.loads(path.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                report = {}
            if any(m["status"] == "done" for m in report.get("models", [])):
                break
            time.sleep(0.2)
        assert child.poll() is None, "the run ended before it could be killed"
        child.send_signal(signal.SIGTERM)  # as a device call's timeout ends it
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    report = json.loads(path.read_text())
    first, second = report["models"]
    assert first["status"] == "done" and first["result"]["val_loss"] > 0 and first["result"]["recall"]["copy"]
    assert second["status"] == "pending" and not report["complete"]
    assert "| llama |" in (out / "recall_scale.md").read_text()
