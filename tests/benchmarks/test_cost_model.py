"""``benchmarks/cost_model.py``: fit writes constants that name their measurement, validate predicts held-out
models, loo predicts every stored GPU run from the others. Quick modes on a copy of the table: seconds."""

from __future__ import annotations

import json
import shutil

import pytest

from composer.costmodel import TABLE_PATH, load_table


@pytest.fixture
def table_copy(tmp_path):
    path = tmp_path / "constants.json"
    shutil.copy(TABLE_PATH, path)
    return path


def test_quick_fit_writes_the_cpu_constants_with_their_source_then_validate_predicts(
        load_benchmark, table_copy, tmp_path, capsys):
    script = load_benchmark("cost_model")
    out = tmp_path / "results"
    assert script.main(["fit", "--device", "cpu", "--quick", "--primitives", "AM", "--provisional",
                        "--table", str(table_copy), "--out", str(out)]) == 0
    results = json.loads(next(out.glob("cost_model_fit-*.json")).read_text())
    assert results["threads"] == 1 and results["roofs"]["peak_flops"] > 0
    assert {t["key"] for t in results["timings"]} == {"A", "M", "head"}
    table = load_table(table_copy)
    cpu = table.device("cpu")
    fitted = table.sources[cpu.efficiency["train"]["M"].source]
    assert fitted["kind"] == "fitted" and fitted["status"] == "provisional"
    assert fitted["results"].endswith(next(out.glob("cost_model_fit-*.json")).name) and "--quick" in fitted["command"]
    assert table.sources[cpu.peak_flops.source]["kind"] == "measured"
    assert cpu.peak_flops.value == pytest.approx(results["roofs"]["peak_flops"])
    assert table.counts_of("A", "decode", "ops").at(1) > table.counts_of("A", "decode", "kernels").at(1) > 0
    assert table.device("h200").peak_flops == load_table().device("h200").peak_flops  # other devices untouched
    capsys.readouterr()

    assert script.main(["validate", "--device", "cpu", "--quick", "--table", str(table_copy), "--out", str(out)]) == 0
    validation = json.loads(next(out.glob("cost_model_validation-*.json")).read_text())
    assert all(row["n_layers"] > 1 for row in validation["rows"])  # whole models: never what the fit ran
    for row in validation["rows"]:
        assert row["train_tokens_per_s"] > 0 and row["train_tokens_per_s_predicted"] > 0
        assert row["decode_ms_per_token"] > 0 and row["decode_ms_per_token_predicted"] > 0
    assert validation["errors"]["train_tokens_per_s"]["n"] == len(validation["rows"])
    assert "| tiny |" in capsys.readouterr().out


def test_loo_predicts_every_stored_gpu_run_from_the_others(load_benchmark, table_copy, tmp_path, capsys):
    script = load_benchmark("cost_model")
    assert script.main(["loo", "--table", str(table_copy), "--out", str(tmp_path), "--write-table"]) == 0
    report = json.loads(next(tmp_path.glob("cost_model_gpu_loo-*.json")).read_text())
    grouped = report["groupings"]["grouped"]
    assert grouped["not_predicted"] == 0 and grouped["errors"]["n"] == len(report["runs"]) >= 19
    assert set(grouped["efficiency_all_runs"]) == {"dense", "head", "S", "D"}
    assert all(0 < e <= 1 for e in grouped["efficiency_all_runs"].values())
    assert report["groupings"]["per-primitive"]["not_predicted"] >= 1  # E trained in one run only: said, not hidden
    h100 = load_table(table_copy).device("h100")
    assert h100.efficiency["train"]["S"].value == pytest.approx(grouped["efficiency_all_runs"]["S"])
    assert "| run1 (AM)x4 |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["fit", "--device", "h100", "--quick"], "fit measures the machine it runs on"),
    (["validate", "--device", "tpu", "--quick"], "unknown device 'tpu'; choose one of: cpu, h100, h200"),
    (["fit", "--primitives", "AQ", "--quick"], "unknown primitive(s) ['Q']"),
])
def test_usage_errors_exit_2_with_one_line(load_benchmark, table_copy, tmp_path, capsys, argv, message):
    script = load_benchmark("cost_model")
    assert script.main([*argv, "--table", str(table_copy), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
