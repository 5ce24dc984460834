"""``benchmarks/gpu_check.sh`` refuses a machine without CUDA at once, with one clear line and exit status 2.

What it checks on a GPU is covered on CPU by tests/primitives/test_compile.py (every primitive compiled against
eager) and the FSDP2 tests of tests/composer/training; the script repeats them in bf16 on CUDA. Its quick check's
plumbing (the prelude, the budget, quick.json, rung 0's candidates per hour) runs here through GPU_CHECK_DRY_RUN=1."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
QUICK_PARTS = ["prelude", "env", "cuda-tests", "attention", "mfu-SMWMx4", "mfu-AMx16",
               "rung0", "steps"]


def script_env(**settings: str) -> dict[str, str]:
    """This process's environment without the script's own settings (a developer's GPU_CHECK_DRY_RUN=1 would turn
    the no-CUDA test into a dry run), with this interpreter as the script's Python, plus ``settings``."""
    prefixes = ("GPU_CHECK_", "MFU_", "QUICK_", "RUNG0_", "STEPS_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(prefixes)}, "PYTHON": sys.executable,
            **settings}


@pytest.mark.skipif(torch.cuda.is_available() or shutil.which("nvidia-smi") is not None, reason="a GPU machine")
@pytest.mark.parametrize("args", [[], ["--quick"], ["--recall-scale"], ["--cost"]])
def test_without_cuda_it_stops_with_one_line_and_exit_2(tmp_path, args):
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                            env=script_env(OUT=str(tmp_path)), timeout=60)
    assert result.returncode == 2
    assert "no CUDA device: this script is for GPU machines" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_an_unknown_argument_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), "--quik"], capture_output=True, text=True,
                            env=script_env(OUT=str(tmp_path), GPU_CHECK_DRY_RUN="1"), timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        2, "gpu_check: unknown argument '--quik': the options are --quick, --cost and --recall-scale (see this "
           "script's header)")


def test_the_cost_run_measures_every_layout_beside_the_model_on_the_cpu_dry_run(tmp_path):
    """``--cost`` (issue 58: the decode timings the cost model is checked against on a GPU), at tiny settings."""
    result = subprocess.run(["bash", str(SCRIPT), "--cost"], capture_output=True, text=True, timeout=240,
                            env=script_env(OUT=str(tmp_path), GPU_CHECK_DRY_RUN="1",
                                           COST_LAYOUTS="SADD:keep AMAM SMDM@8"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    saved = json.loads((tmp_path / "tiny" / "finalist_costs.json").read_text())
    assert [row["entry"] for row in saved["rows"]] == ["SADD:keep", "AMAM", "SMDM@8"]
    assert saved["rows"][2]["n_layers"] == 8 and "widths scaled" in saved["rows"][2]["how"]  # @8: by width
    for row in saved["rows"]:
        assert row["measured"]["decode_ms_per_token"]["64"] and row["predicted_here"]["decode_ms_per_token"]["64"]
    assert "SADD" in (tmp_path / "cost.log").read_text()


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=60).returncode == 0


def test_the_cuda_tests_it_runs_include_marks_named_at_module_level(tmp_path, load_benchmark):
    """The fla tests skip through a module-level ``needs_fla = pytest.mark.skipif(...cuda...)``; a search for
    ``skipif`` at the decorator alone missed them, so the H200 run checked no D kernel (2026-11-26, run 2)."""
    gpu_check = load_benchmark("gpu_check")
    (tmp_path / "test_x.py").write_text(
        "import pytest, torch\n"
        "needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA')\n"
        "other = pytest.mark.slow\n"
        "@needs_gpu\ndef test_named(): pass\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\ndef test_inline(): pass\n"
        "@other\ndef test_unrelated(): pass\n"
        "def test_plain(): pass\n")
    assert [node.rsplit("::", 1)[1] for node in gpu_check.cuda_test_ids(tmp_path)] == ["test_named", "test_inline"]
    assert ("tests/primitives/test_gated_deltanet.py::test_fla_kernel_forward_matches_torch_path"
            in gpu_check.cuda_test_ids(ROOT / "tests"))


def test_the_report_asks_only_for_the_primitives_it_was_asked_to_step(tmp_path, load_benchmark, capsys):
    """The H100 run asked for S and D alone (STEPS_PRIMITIVES=SD STEPS_ALL_SIX=0); the report failed it for
    'not reached: all six, A, W, M, E'. It now compares against the primitives the steps part was given."""
    gpu_check = load_benchmark("gpu_check")
    record = {"losses": [12.2, 12.1], "tokens_per_s": 1.0, "kernels": ["S:torch"], "graph_breaks": 0}
    row = {"primitive": "S", "pattern": "SM", "status": "pass", "eager": record, "compiled": record,
           "max_loss_rel_diff": 0.0, "compared_steps": 2, "speedup": 1.0}
    steps = {"precision": "bf16 autocast", "requested": ["S"], "rows": [row]}
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    gpu_check.main(["report", "--dir", str(tmp_path), "--mfu", ""])
    table = json.loads((tmp_path / "gpu_check.json").read_text())["table"]
    assert [r["check"] for r in table if r["part"] == "b"] == ["S (SM) eager vs compiled, bf16"]

    del steps["requested"]  # a steps.json written before the field existed asked for every primitive
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    gpu_check.main(["report", "--dir", str(tmp_path), "--mfu", ""])
    table = json.loads((tmp_path / "gpu_check.json").read_text())["table"]
    assert "not reached: all six, A, W, M, E, D" in [r["check"] for r in table]


def _function(name: str) -> str:
    """One function of gpu_check.sh, to run on its own."""
    return re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", SCRIPT.read_text(), re.S | re.M).group(0)


def _limit_function() -> str:
    return _function("limit")


@pytest.mark.parametrize(("left", "reserve", "floor", "expected"), [
    (600, 100, "", 150),  # plenty of time: the cap
    (200, 100, "", 100),  # what the reserve leaves
    (100, 100, "", 20),  # nothing left: the default floor
    (100, 100, "75", 75),  # the CUDA tests' own floor (57 s on a fresh H100; 20 s ran none)
])
def test_a_part_gets_its_cap_what_the_reserve_leaves_or_its_floor(left, reserve, floor, expected):
    program = f"{_limit_function()}DEADLINE=$((SECONDS + {left})); limit 150 {reserve} {floor}"
    assert subprocess.run(["bash", "-c", program], capture_output=True, text=True,
                          timeout=30).stdout.strip() == str(expected)


def test_the_cuda_tests_have_a_floor_and_the_mfu_runs_a_stable_rate():
    """On the H100 the MFU part's (DMAM)x4 diverged at train's defaults (lr 3e-3, a 1-step warmup) and the
    divergence guard stopped it: a speed check sets a rate and a warmup that every pattern survives."""
    script = SCRIPT.read_text()
    assert re.search(r"part cuda-tests \"\$\(limit 150 .*\) 75\)\"", script)
    assert '--lr "${MFU_LR:-0.001}" --warmup "${MFU_WARMUP:-5}"' in script


@pytest.mark.parametrize(("body", "rc", "status", "seen"), [
    ('echo installing\nexport MARK="a b"\nexport PYTHONPATH=/tmp/site', 0, "", "a b"),  # its exports reach the parts
    ("export MARK=late\nfalse", 1, "", "late"),  # its final import check failed: exports kept, the failure recorded
    ("export MARK=early\nexit 3", 3, "", ""),  # exit midway (pip failed): nothing taken, recorded, the check goes on
    ("sleep 30", 124, "", ""),  # hangs: stopped at its limit
    ("export GPU_PRELUDE=no-wheels MARK=x", 0, "skipped", "x"),  # gpu_prelude.sh's word: it installed nothing
])
def test_the_prelude_is_sourced_apart_and_only_its_exports_come_back(tmp_path, body, rc, status, seen):
    """Sourced in the check's own shell, a prelude that exits (the carried one does, when pip fails) or hangs
    would end or stall the whole device call; sourced in a child shell, the variables it exported come back."""
    prelude = tmp_path / "prelude.sh"
    prelude.write_text(body + "\n")
    record = f"record_part() {{ printf '%s\\n' \"$2\" \"$6\" \"$7\" >{tmp_path}/record; }}\n"
    program = (f"{_function('source_prelude')}{record}WORK={tmp_path} PRELUDE={prelude}\nsource_prelude 2\n"
               "echo \"MARK=${MARK-}\"\n")
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if k not in ("MARK", "GPU_PRELUDE")})
    assert result.returncode == 0, result.stderr
    assert f"MARK={seen}" in result.stdout.splitlines()
    code, written_status, detail = (tmp_path / "record").read_text().splitlines()
    assert (int(code), written_status) == (rc, status)
    taken = detail.split("exports taken over: ")[1].split(";")[0].split()
    assert ("MARK" in taken) == bool(seen)
    assert "PWD" not in taken and "SHLVL" not in taken
    assert not list(tmp_path.glob("prelude-env.*"))  # the whole environment is not left for the archive


def test_the_stacked_answer_comes_from_the_extrapolator():
    """The MFU part's stacked:SDMMSD is the halving answer grown to llama-3.2-1b by `composer extrapolate`."""
    program = (f"{_function('resolve_pattern')}PY={sys.executable} MFU_PRESET=llama-3.2-1b\n"
               "resolve_pattern stacked:SDMMSD\nresolve_pattern '(AM)x16'\n")
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.stdout.split() == ["(SDMMSD)x6", "(AM)x16"], result.stderr


def test_rung0_extrapolates_candidates_per_hour_to_the_full_rung(load_benchmark):
    gpu_check = load_benchmark("gpu_check")
    spec, reduced = gpu_check.reduced_budget("rung-gpu-0", 0.1)
    assert (spec.tokens, spec.seq_len, spec.batch_size, spec.lrs) == (5_000_000, 1024, 32, (1e-3, 3e-3))
    assert (reduced.tokens, reduced.seq_len, reduced.batch_size, reduced.lrs) == (15 * 32 * 1024, 1024, 32, spec.lrs)

    rows = [{"status": "pass", "seconds": 10.0, "tokens_per_s": 100_000.0},
            {"status": "pass", "seconds": 20.0, "tokens_per_s": 50_000.0},
            {"status": "fail", "seconds": 1.0}]  # a diverged run is no candidate's time
    estimate = gpu_check.rung0_estimate(rows, full_tokens=5_000_000, tokens=500_000, runs=2)
    # the rest of the tokens at each run's rate: 10 + 45 s and 20 + 90 s, mean 82.5 s, two rates
    assert estimate["candidates_per_hour"] == pytest.approx(3600 / 165)
    # whole runs scaled: 15 s x 10 x 2 rates
    assert estimate["candidates_per_hour_scaled"] == pytest.approx(3600 / 300)
    assert estimate["patterns_timed"] == 2
    assert gpu_check.rung0_estimate(rows[2:], 5_000_000, 500_000, 2) == {}


def test_a_summary_mid_run_shows_the_parts_not_yet_run(tmp_path, load_benchmark):
    """quick.json is rewritten after every part: the parts not run yet are pending (an older run's summary in a
    run directory does not pass for them), and once the check has ended they were not reached."""
    gpu_check = load_benchmark("gpu_check")
    planned = ["prelude", "env", "cuda-tests", "attention", "mfu-AMx16", "rung0", "steps"]
    (tmp_path / "run.json").write_text(json.dumps({"mode": "quick", "dry_run": False, "budget_s": 500,
                                                   "started": time.time(), "planned": planned}))
    (tmp_path / "parts.tsv").write_text("prelude\t\t0\t\t\tskipped\tno .whl folder\nenv\t0\t3\tenv.log\t35\t\t\n")
    (tmp_path / "mfu-AMx16").mkdir()
    (tmp_path / "mfu-AMx16" / "summary.json").write_text(json.dumps({"train_loss": 2.0, "tokens_per_s": 1.0}))
    args = ["report", "--dir", str(tmp_path), "--mfu", "AMx16", "--summary", str(tmp_path / "quick.json")]

    assert gpu_check.main([*args, "--quiet"]) == 1
    quick = json.loads((tmp_path / "quick.json").read_text())
    assert {name: part["status"] for name, part in quick["parts"].items()} == {
        **{name: "pending" for name in planned}, "prelude": "skipped", "env": "done"}
    assert (quick["overall"], quick["complete"]) == ("running", False)
    assert {row["status"] for row in quick["table"] if row["part"] != "0"} == {"pending"}

    assert gpu_check.main([*args, "--final"]) == 1
    quick = json.loads((tmp_path / "quick.json").read_text())
    assert quick["parts"]["rung0"]["status"] == "not reached"
    assert quick["overall"] == "incomplete"


def run_quick(tmp_path: Path, **settings: str) -> tuple[subprocess.CompletedProcess, dict]:
    """The quick check's dry run into tmp_path/out (its runs in tmp_path/work), with no wheels to carry."""
    result = subprocess.run(["bash", str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=600,
                            env=script_env(GPU_CHECK_DRY_RUN="1", OUT=str(tmp_path / "out"),
                                           GPU_CHECK_WORK=str(tmp_path / "work"),
                                           GPU_CHECK_WHEELS=str(tmp_path / "no-wheels"), **settings))
    summary = tmp_path / "out" / "quick.json"
    assert summary.exists(), f"no quick.json; exit status {result.returncode}: {result.stderr[-2000:]}"
    return result, json.loads(summary.read_text())


@pytest.mark.slow
def test_the_quick_dry_run_records_every_part_and_rung0s_candidates_per_hour(tmp_path):
    """Every part of the quick check at tiny settings on the CPU (55-130 s on 2 cores): each part has a status in
    quick.json, the missing wheels are recorded and not fatal, rung 0's figure is there, and $OUT holds the four
    files the device tool brings back."""
    result, quick = run_quick(tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert (quick["mode"], quick["dry_run"], quick["final"], quick["overall"]) == ("quick", True, True, "pass")
    assert {name: part["status"] for name, part in quick["parts"].items()} == {
        **{name: "done" for name in QUICK_PARTS}, "prelude": "skipped", "steps": "skipped"}
    assert list(quick["parts"]) == QUICK_PARTS
    assert "no-wheels folder" in quick["parts"]["prelude"]["detail"]
    assert {row["part"] for row in quick["table"] if row["status"] == "pass"} == {"a", "c", "d"}

    rung0 = quick["d_rung0"]
    assert [row["status"] for row in rung0["rows"]] == ["pass"] * 3
    mean_seconds = statistics.fmean(row["seconds"] for row in rung0["rows"])
    assert rung0["candidates_per_hour_scaled"] == pytest.approx(
        3600 / (mean_seconds * rung0["full_tokens"] / rung0["tokens"] * rung0["runs_per_candidate"]))
    assert rung0["candidates_per_hour"] >= rung0["candidates_per_hour_scaled"] > 0

    out = tmp_path / "out"
    assert sorted(path.name for path in out.iterdir()) == [
        "quick-files.tar.gz", "quick-report.txt", "quick.json", "quick.log"]
    assert "PASS" in (out / "quick-report.txt").read_text()
    with tarfile.open(out / "quick-files.tar.gz") as archive:
        names = set(archive.getnames())
        mfu_summary = json.load(archive.extractfile("./mfu-AMx16/summary.json"))
    assert {"./rung0.json", "./parts.tsv", "./mfu-AMx16/summary.json"} <= names
    assert not any("data-cache" in name or "checkpoints" in name for name in names)
    # the MFU runs measure speed only: no validation to recompile for, no 1B export after the timed steps
    assert mfu_summary["tokens_per_s"] > 0 and mfu_summary["val_loss"] is None and mfu_summary["model_dir"] is None


def test_a_part_that_no_longer_fits_the_budget_is_recorded_not_started(tmp_path):
    """With 25 s the parts whose floor does not fit are "no time" (the CUDA-only tests need 75 s): never started,
    so the check ends within its budget, exit status 1, incomplete; a prelude that fails is recorded, not fatal."""
    (tmp_path / "no-wheels").mkdir()  # here: wheels to carry, and a prelude that fails at its end
    prelude = tmp_path / "prelude.sh"
    prelude.write_text("echo installing\nexport PRELUDE_MARK=1\nfalse\n")
    started = time.monotonic()
    result, quick = run_quick(tmp_path, GPU_CHECK_BUDGET="25", GPU_CHECK_PRELUDE=str(prelude))
    assert result.returncode == 1, result.stdout[-4000:]
    assert time.monotonic() - started < 25 + 30  # the budget, and the report after it
    parts = quick["parts"]
    assert parts["prelude"]["status"] == "failed"
    assert "exit status 1; exports taken over: PRELUDE_MARK" in parts["prelude"]["detail"]
    assert {parts[name]["status"] for name in ("cuda-tests", "mfu-SMWMx4", "mfu-AMx16", "rung0")} == {"no time"}
    assert all(part["status"] in ("done", "failed", "timed out", "no time", "skipped") for part in parts.values())
    assert (quick["overall"], quick["complete"]) == ("fail", False)


def write_metrics(run: Path, steps: int, mfu: float = 0.42, loss: float = 2.8) -> None:
    """A `composer train` CSV log as Lightning's CSVLogger writes it: one row per logged step."""
    logs = run / "logs" / "version_0"
    logs.mkdir(parents=True)
    rows = ["epoch,perf/mfu,perf/tokens_per_s,step,train/loss,val/loss"]
    rows += [f"0,{mfu if step else 0.0004},{120_000.0 if step else 134.0},{step},{loss + 0.1 * (steps - step)},"
             for step in range(steps)]
    (logs / "metrics.csv").write_text("\n".join(rows) + "\n")


def test_a_run_killed_after_its_steps_keeps_its_figures_from_the_csv_log(tmp_path, load_benchmark):
    """An H200 quick check killed both MFU runs in their final validation's recompilation, after all 20 steps: the
    steady figures come from the CSV log, and a run that logged too little still fails."""
    report = load_benchmark("gpu_check_report")
    write_metrics(tmp_path / "mfu-SMWMx4", steps=20)
    part = {"status": "timed out", "rc": 137, "log": "mfu-SMWMx4.log"}

    record = report.mfu_record(tmp_path, "SMWMx4", "NVIDIA H200", part)

    assert (record["status"], record["from_log"], record["logged_steps"]) == ("pass", True, 20)
    assert record["mfu_second_half"] == pytest.approx(0.42)
    assert record["median_tokens_per_s_second_half"] == pytest.approx(120_000.0)
    assert record["train_loss"] == pytest.approx(2.9)
    assert "20 steps logged" in report.mfu_rows([record])[0][3]

    write_metrics(tmp_path / "mfu-AMx16", steps=3)
    short = report.mfu_record(tmp_path, "AMx16", "NVIDIA H200", part)
    assert short["status"] == "fail" and "exit status 137 (timed out)" in short["reason"]
