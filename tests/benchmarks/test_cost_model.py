"""``benchmarks/cost_model.py``: fit writes constants that name their measurement, validate predicts held-out
models, loo predicts every stored GPU run from the others. Quick modes on a copy of the table: seconds."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest

from composer.costmodel import (
    TABLE_PATH,
    Counts,
    fit_nonnegative,
    load_table,
    predict_decode,
    predict_prefill,
    predict_train,
    predicted_s,
    step_work,
)
from composer.costmodel.calibration.cases import FIT_SHAPES, KEYS, VALIDATION, development_cases
from composer.costmodel.calibration.gpu_runs import GPU_GROUPINGS, GPU_RESULTS, gpu_cases, gpu_observations
from composer.costmodel.calibration.leave_one_out import gpu_rows
from composer.costmodel.calibration.op_counts import count_ops, measure_counts
from composer.costmodel.calibration.units import Unit, arch_for
from composer.costmodel.calibration.validate import check_out_of_sample
from composer.costmodel.classes import LAYOUT_CLASSES, layout_class
from composer.costmodel.processor import this_cpu_model


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
    assert results["processor"] == cpu.processor == this_cpu_model()  # the constants name the processor they fit
    assert cpu.processor in cpu.description
    for phase, keys in results["constants"]["efficiency"].items():  # the fit's figures, as fitted, in the table
        for key, value in keys.items():  # None: no time could be given to that key, its efficiency is kept
            assert value is None or cpu.efficiency[phase][key].value == pytest.approx(value, rel=1e-12), (phase, key)
    for phase, value in results["constants"]["op_cost_s"].items():
        assert cpu.op_cost_s[phase].value == pytest.approx(value, rel=1e-12), phase
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
    fitted = load_table(table_copy)
    for row in validation["rows"]:  # each figure is the fitted table's at the shape measured, the error their ratio
        arch, (batch, seq) = arch_for(row["preset"], row["pattern"]), row["train_shape"]
        decoded_after = row["context"] + len(row["decode_step_s"]) // 2  # the middle of the steps timed
        predicted = {
            "train_tokens_per_s": predict_train(arch, "cpu", batch=batch, seq_len=seq, table=fitted).tokens_per_s,
            "prefill_tokens_per_s": predict_prefill(arch, "cpu", seq_len=row["context"], table=fitted).tokens_per_s,
            "decode_ms_per_token": predict_decode(arch, "cpu", context=decoded_after, table=fitted).ms_per_token}
        # decode: the median over fresh processes (one under --quick), this process's own kept beside it
        assert validation["decode_processes"] == len(row["decode_process_medians_ms"]) == 1
        measured = {"train_tokens_per_s": batch * seq / statistics.median(row["train_step_s"]),
                    "decode_ms_per_token": statistics.median(row["decode_process_medians_ms"]),
                    "decode_in_process_ms": 1e3 * statistics.median(row["decode_step_s"])}
        for figure, value in predicted.items():
            assert row[f"{figure}_predicted"] == pytest.approx(value, rel=1e-9), (row["pattern"], figure)
            assert row["error"][figure] == pytest.approx(value / row[figure] - 1, rel=1e-9)
        for figure, value in measured.items():
            assert row[figure] == pytest.approx(value, rel=1e-9), (row["pattern"], figure)
    # what any fit must keep (its constants non-negative, every key costed): a stack twice as deep costs more in
    # every phase; attention's decode grows with the context its cache holds, S's fixed state does not
    for pattern in ("AMSDWM", "(AM)x2"):
        one, two = arch_for("tiny:d96", pattern), arch_for("tiny:d96", f"({pattern})x2")
        assert predict_train(two, "cpu", batch=2, seq_len=32, table=fitted).seconds > predict_train(
            one, "cpu", batch=2, seq_len=32, table=fitted).seconds
        for phase in (predict_prefill, predict_decode):
            length = {"seq_len": 32} if phase is predict_prefill else {"context": 32}
            assert phase(two, "cpu", table=fitted, **length).seconds > phase(one, "cpu", table=fitted, **length).seconds
    attention, state = arch_for("tiny:d96", "(AM)x2"), arch_for("tiny:d96", "(SM)x2")

    def decode_ms(arch, context):
        return predict_decode(arch, "cpu", context=context, table=fitted).ms_per_token

    assert decode_ms(attention, 16) < decode_ms(attention, 256) < decode_ms(attention, 1024)
    assert decode_ms(state, 16) == decode_ms(state, 256) == decode_ms(state, 1024)
    assert validation["errors"]["train_tokens_per_s"]["n"] == len(validation["rows"])
    assert validation["cpu_constants_digest"] == results["cpu_constants_digest"]  # the fit as written, validated
    assert validation["fit_source"]["id"] == cpu.efficiency["train"]["M"].source
    assert validation["fit_source"]["widths"] == {"tiny": 64}
    assert "tiny" not in {r["preset"] for r in validation["rows"]}
    assert {r["layout_class"] for r in validation["rows"]} == {"A/M-heavy", "S/D-heavy"}
    assert validation["errors_by_class"]["S/D-heavy"]["train_tokens_per_s"]["n"] == 1
    assert validation["train_precision"] == results["train_precision"] == table.device("cpu").train_precision
    assert "| tiny:d96 |" in capsys.readouterr().out


def test_loo_holds_out_each_pattern_on_both_gpus_and_counts_repeats_once(load_benchmark, table_copy, tmp_path,
                                                                         capsys):
    script = load_benchmark("cost_model")
    shipped = load_table(table_copy).device("h100").efficiency["train"]["S"]
    assert script.main(["loo", "--table", str(table_copy), "--out", str(tmp_path)]) == 0
    assert load_table(table_copy).device("h100").efficiency["train"]["S"] == shipped  # no --write-table: untouched
    report = json.loads(next(tmp_path.glob("cost_model_gpu_loo-*.json")).read_text())
    cases = report["cases"]
    assert len(cases) == len({run["config"] for run in report["runs"]}) < len(report["runs"])  # repeats joined
    assert sum(len(c["repeats"]) for c in cases) == len(report["runs"])
    grouped = report["groupings"]["grouped"]
    assert grouped["not_predicted"] == 0 and grouped["errors"]["n"] == len(cases)
    # a pattern that ran on both GPUs is one held-out group: its twin is never in the fit that predicts it
    twins = {c["group"] for c in cases if c["device"] == "h100"} & {c["group"] for c in cases if c["device"] == "h200"}
    assert twins and set(report["held_out_groups"]) == {c["group"] for c in cases}
    for group in twins:
        assert grouped["errors_by_held_out_group"][group]["n"] >= 2
    assert sum(v["n"] for v in grouped["errors_by_class"].values()) == len(cases)
    assert set(grouped["efficiency_all_cases"]) == {"dense", "head", "S", "D"}
    assert all(0 < e <= 1 for e in grouped["efficiency_all_cases"].values())
    assert report["groupings"]["per-primitive"]["not_predicted"] >= 1  # E trained in one run only: said, not hidden
    assert "| (AM)x16 at 8 x 2048 | h200 (AM)x16 | A/M-heavy | 3 |" in capsys.readouterr().out
    assert script.main(["loo", "--table", str(table_copy), "--out", str(tmp_path), "--write-table"]) == 0
    h100 = load_table(table_copy).device("h100")
    assert h100.efficiency["train"]["S"].value == pytest.approx(grouped["efficiency_all_cases"]["S"])


def test_loo_fits_without_the_held_out_patterns_twin(table_copy):
    """Each case is predicted by a fit to rows of other patterns only: the prediction of the H100's (DMAM)x4 does
    not move when its H200 twin's measurement does (it would, were the twin in the fit)."""
    runs = gpu_observations(GPU_RESULTS)
    table = load_table(table_copy)

    def h100_dmam_prediction(scale):
        moved = [{**r, "tokens_per_s": r["tokens_per_s"] * (scale if r["config"].startswith("h200|(DMAM)x4") else 1)}
                 for r in runs]
        cases = gpu_cases(moved)
        rows = gpu_rows(cases, table, GPU_GROUPINGS["grouped"])
        i = next(i for i, c in enumerate(cases) if c["device"] == "h100" and c["pattern"] == "(DMAM)x4")
        others = [r for r in rows if r.tags["group"] != cases[i]["group"]]
        return predicted_s(rows[i], fit_nonnegative(others))

    assert h100_dmam_prediction(3.0) == pytest.approx(h100_dmam_prediction(1.0))


def test_validation_is_out_of_sample_by_construction():
    """No validation model's width (d_model) is one the fit times, none is a single layer (what the fit runs),
    and each layout class has at least 5 models."""
    fit_widths = {arch_for(preset, "AM").d_model for preset in FIT_SHAPES}
    archs = [arch_for(preset, pattern) for preset, pattern, *_ in VALIDATION]
    assert not fit_widths & {a.d_model for a in archs}
    assert all(a.n_layers > 1 and a.compact not in KEYS for a in archs)
    classes = [layout_class(a) for a in archs]
    assert all(classes.count(c) >= 5 for c in LAYOUT_CLASSES)
    check_out_of_sample(VALIDATION, {"id": "fit-cpu-test"})  # FIT_SHAPES's widths: passes


def test_validate_refuses_a_model_the_fit_ran_in_one_line(load_benchmark, table_copy, tmp_path, capsys):
    script = load_benchmark("cost_model")
    raw = json.loads(table_copy.read_text())
    fit_id = raw["devices"]["cpu"]["efficiency"]["train"]["A"]["source"]
    raw["sources"][fit_id]["widths"] = {"tiny:d96": 96}  # as if the fit had timed the quick validation's width
    table_copy.write_text(json.dumps(raw))
    assert script.main(["validate", "--quick", "--table", str(table_copy), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is in the sample of fit" in err and err.count("\n") == 1


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


def test_the_development_models_share_no_width_with_the_validation():
    """What a change is tried on before the one validation run stays at the fit's widths, never validation's."""
    development = {arch_for(preset, "AM").d_model for preset, *_ in development_cases()}
    validation = {arch_for(preset, "AM").d_model for preset, *_ in VALIDATION}
    assert development and not development & validation


def test_op_counts_follow_the_kernels_batch_slices():
    """The counts fit measures (at batch 1, plus what each further slice of a slicing kernel adds) predict what
    the profiler counts for S and D at a batch the kernels run in several slices; the count of one slice alone
    (what a count at a small batch gave every batch before) misses S's by more than a fifth."""
    arch = arch_for("tiny", "AM").replace(max_seq_len=4096)
    counts = measure_counts("tiny", ("S", "D"))
    for key in "SD":
        unit = Unit(arch, key, copies=1)
        measured = counts[key]["train"]
        per_slice = {kernel: tuple(by_unit["ops"]) for kernel, by_unit in measured["per_slice"].items()}
        ops = Counts(tuple(measured["ops"]), per_slice)
        work = next(u for u in step_work(arch.with_pattern(key), "train", 40, 64, 4) if u.key == key)
        assert max(n for _, n in work.slices) > 1
        profiled = count_ops(unit.call("train", 40, 64))["ops"]
        assert ops.at(work.chunks, work.slices) == pytest.approx(profiled, rel=0.05), key
        if key == "S":
            assert ops.at(work.chunks) < 0.8 * profiled
