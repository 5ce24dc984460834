"""The report of ``benchmarks/gpu_check.sh`` (``python benchmarks/gpu_check.py report --dir DIR``): the parts'
files and their statuses (parts.tsv, junit XML, the JSON each part wrote) read into one table and
``gpu_check.json``. Kept apart from the parts that measure, so the table can be rebuilt from a run's files alone."""

from __future__ import annotations

import csv
import datetime
import json
import math
import statistics
import time
import xml.etree.ElementTree as ET
from pathlib import Path



# All six primitives in one model first (it compiles every primitive, so the rows after it mostly hit Inductor's
# cache, and a timeout later still leaves every primitive checked), then one small pattern per primitive, which
# tells which primitive a failure of the first row comes from.
STEP_PATTERNS = {"all six": "AWMESD", "A": "AM", "W": "WM", "M": "MM", "E": "EM", "S": "SM", "D": "DM"}


def fallback_peak_bf16(device_name: str) -> float | None:
    """Dense bf16 peak where Lightning's table has no entry: the product's own table (composer train uses it too),
    plus the H100 for summaries written before composer train had it. Imported here, not at the top: torch and
    Lightning take seconds to import, and ``report`` (run after every part of the quick check) needs neither."""
    from composer.training.throughput import FALLBACK_PEAK_BF16, fallback_peak

    return fallback_peak(device_name, {**FALLBACK_PEAK_BF16, "h100": 989.4e12})


def write_json(path: str | Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def fmt_losses(record: dict) -> str:
    losses = record.get("losses")
    return "[" + ", ".join(f"{v:.4f}" for v in losses[:3]) + (", ...]" if len(losses) > 3 else "]") if losses else "-"


# -- rung0: the gpu ladder's rung 0, timed at a fraction of its tokens ---------------------------------------


def junit_cases(path: Path) -> list[dict]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    cases = []
    for case in root.iter("testcase"):
        status, detail = "pass", ""
        for tag, name in (("failure", "fail"), ("error", "fail"), ("skipped", "skip")):
            element = case.find(tag)
            if element is not None:
                status, detail = name, (element.get("message") or element.text or "").strip().splitlines()[0:1]
                detail = detail[0] if detail else ""
                break
        cases.append({"test": f"{case.get('classname', '')}::{case.get('name', '')}", "status": status,
                      "seconds": float(case.get("time") or 0), "detail": detail[:200]})
    return cases


# A part's status: parts.tsv's sixth column, else its exit status: done (0), timed out (124, 137), failed. Written
# ones: skipped (on purpose: no prelude to source, steps in quick mode), no time (the budget was spent first). A
# planned part (run.json) with no row yet is pending, and not reached once the check has ended. A part in INCOMPLETE
# leaves the check incomplete: what it measures is missing.
INCOMPLETE = ("timed out", "no time", "pending", "not reached")


def parts_table(path: Path, planned=()) -> dict[str, dict]:
    """``parts.tsv`` written by gpu_check.sh: part, exit status, seconds, log, and in newer rows the part's limit,
    a written status and a detail; a planned part without a row yet is pending."""
    parts: dict[str, dict] = {name: {"status": "pending"} for name in planned}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        name, rc, seconds, log, limit, status, detail = (line.split("\t") + [""] * 6)[:7]
        code = int(rc) if rc.lstrip("-").isdigit() else None
        parts[name] = {"status": status or ("done" if code == 0 else "timed out" if code in (124, 137) else "failed"),
                       "rc": code, "seconds": float(seconds) if seconds else None, "log": log,
                       "limit_s": int(limit) if limit.isdigit() else None}
        if detail:
            parts[name]["detail"] = detail
    return parts


def absent_row(code: str, check: str, part: dict | None, missing: str) -> tuple[str, str, str, str]:
    """The row of a check whose result file is missing, as its part explains it: not run yet (pending), not run on
    purpose or for lack of time (skip, with the part's reason), or run and failed (its exit status and log)."""
    status = (part or {}).get("status")
    if status == "pending":
        return code, check, "pending", "not run yet"
    if status in ("skipped", "no time", "not reached"):
        return code, check, "skip", part.get("detail") or status
    if part is None:
        return code, check, "fail", f"no {missing}: its part did not run"
    timed_out = " (timed out)" if status == "timed out" else ""
    return code, check, "fail", f"no {missing}; exit status {part.get('rc')}{timed_out}, see {part.get('log')}"


def steady_tokens_per_s(run: Path) -> dict:
    """Per-step tokens/s from the run's CSV log (perf/tokens_per_s, logged every --log-interval steps), with the
    logged MFU and the last training loss: all a run killed after its steps, before summary.json, leaves."""
    rates, mfus, losses = [], [], []
    for metrics in sorted(run.glob("logs/version_*/metrics.csv")):
        with metrics.open() as handle:
            for row in csv.DictReader(handle):
                value = row.get("perf/tokens_per_s")
                if value:
                    rates.append(float(value))
                    if row.get("perf/mfu"):
                        mfus.append(float(row["perf/mfu"]))
                if row.get("train/loss"):
                    losses.append(float(row["train/loss"]))
    if len(rates) < 4:
        return {"logged_steps": len(rates)}
    half = rates[len(rates) // 2:]  # the second half: compilation and warmup long over
    steady = {"logged_steps": len(rates), "median_tokens_per_s_second_half": statistics.median(half),
              "first_step_tokens_per_s": rates[0], "last_logged_train_loss": losses[-1] if losses else None}
    if len(mfus) == len(rates):
        steady["logged_mfu_second_half"] = statistics.median(mfus[len(mfus) // 2:])
    return steady


def mfu_from_log(record: dict, run: Path) -> dict:
    """A run with no summary.json: its steady figures from the CSV log when it logged its steps (killed in the
    final validation's recompilation or its checkpoint, as an H200's quick check saw twice), else a failure."""
    record.update(steady_tokens_per_s(run))
    loss = record.get("last_logged_train_loss")
    if record.get("logged_mfu_second_half") is None or loss is None or not math.isfinite(loss):
        record["status"] = "fail"
        record["reason"] = "no summary.json (see the log)"
        return record
    record.update(status="pass", from_log=True, train_loss=loss, mfu_second_half=record["logged_mfu_second_half"],
                  mfu_source="the CSV log's perf/mfu (Lightning's peak table); no summary.json")
    return record


def mfu_run(out: Path, label: str, device_name: str | None) -> dict:
    run = out / f"mfu-{label}"
    summary = read_json(run / "summary.json")
    record: dict = {"label": label, "run_dir": str(run)}
    if summary is None:
        return mfu_from_log(record, run)
    keys = ("pattern", "compact", "widths", "params", "tokens_per_s", "tokens_per_s_per_device", "mfu", "flops_per_token",
            "peak_memory_bytes", "steps", "tokens", "seq_len", "batch_size", "strategy", "precision", "compile", "train_loss",
            "val_loss", "wall_time_s", "world_size")
    record.update({key: summary.get(key) for key in keys})
    record.update(steady_tokens_per_s(run))
    record["mfu_source"] = "summary.json (Lightning's peak table)" if summary.get("mfu") is not None else None
    peak = None
    if summary.get("mfu") is None and device_name:
        peak = fallback_peak_bf16(device_name)
        if peak and summary.get("tokens_per_s_per_device"):
            record["mfu"] = summary["tokens_per_s_per_device"] * summary["flops_per_token"] / peak
            record["mfu_source"] = f"computed: {peak / 1e12:.1f} TFLOP/s dense bf16 (not in Lightning's table)"
    if summary.get("mfu") is not None:
        peak = summary["tokens_per_s_per_device"] * summary["flops_per_token"] / summary["mfu"]
    if peak and record.get("median_tokens_per_s_second_half"):
        record["mfu_second_half"] = (record["median_tokens_per_s_second_half"] / (summary.get("world_size") or 1)
                                     * summary["flops_per_token"] / peak)
    finite = summary.get("train_loss") is not None and math.isfinite(summary["train_loss"])
    record["status"] = "pass" if finite and summary.get("tokens_per_s") else "fail"
    if not finite:
        record["reason"] = f"train_loss {summary.get('train_loss')}"
    return record


def mfu_record(out: Path, label: str, device_name: str | None, part: dict | None) -> dict:
    """One MFU run's record, by its part first: a run not (yet) run is pending or skipped whatever an older run left
    in its directory, and a failed one names its exit status and log."""
    status = (part or {}).get("status")
    if status in ("pending", "skipped", "no time", "not reached"):
        _, _, row_status, reason = absent_row("c", label, part, "summary.json")
        return {"label": label, "status": row_status, "reason": reason}
    record = mfu_run(out, label, device_name)
    if part and part.get("detail") and record["status"] != "pass":  # not run, and why (a pattern not resolved)
        record["reason"] = part["detail"]
    elif part and part.get("rc") not in (0, None) and record["status"] != "pass":
        record["reason"] = (f"exit status {part['rc']}" + (" (timed out)" if status == "timed out" else "")
                            + f"; see {part.get('log')}")
    return record


def prelude_rows(part: dict | None) -> list[tuple[str, str, str, str]]:
    """Row 0 of the quick check: the carried wheels, sourced (pass), absent (skip: recorded, never fatal) or not."""
    if part is None:
        return []
    status = {"done": "pass", "skipped": "skip", "pending": "pending"}.get(part["status"], "fail")
    return [("0", "carried wheels (gpu_prelude.sh)", status, part.get("detail") or part["status"])]


def kernel_rows(cases: list[dict], attention: dict | None, parts: dict) -> list[tuple[str, str, str, str]]:
    """Part a: each CUDA-only test (kernel against the PyTorch path), and A through flash-attn against SDPA."""
    rows = [("a", case["test"].split(".")[-1], case["status"], case["detail"] or f"{case['seconds']:.1f} s")
            for case in cases]
    if not cases:
        rows.append(absent_row("a", "CUDA-only tests", parts.get("cuda-tests"), "JUnit report"))
    check = "A flash-attn vs SDPA (max rel. error)"
    if attention:
        detail = attention.get("reason") or attention.get("error") or ", ".join(
            f"{k} {v:.1e}" for k, v in attention.get("relative_max_error", {}).items())
        rows.append(("a", check, attention["status"], detail))
    elif "attention" in parts:
        rows.append(absent_row("a", check, parts["attention"], "attention.json"))
    return rows


def steps_rows(steps: dict | None, part: dict | None) -> list[tuple[str, str, str, str]]:
    """Part b: one compiled training step per primitive against eager, and the primitives asked for but not reached."""
    if not (steps and steps.get("rows")):
        return [absent_row("b", "compiled step per primitive", part, "steps.json")]
    rows = []
    for row in steps["rows"]:
        e, c = row["eager"], row["compiled"]
        if row["status"] == "pass" or "losses" in e and "losses" in c:
            detail = (f"loss {e['losses'][0]:.4f} vs {c['losses'][0]:.4f}, max rel. diff "
                      f"{fmt(row.get('max_loss_rel_diff'), '.1e')} over {row.get('compared_steps')} steps; "
                      f"tok/s x{fmt(row.get('speedup'), '.2f')}; graph breaks {c.get('graph_breaks', '-')}; "
                      f"kernels {' '.join(c.get('kernels') or ['-'])}")
            if row["status"] != "pass":
                detail = f"{row.get('reason')}; {detail}"
        else:
            detail = row.get("reason", "")
        rows.append(("b", f"{row['primitive']} ({row['pattern']}) eager vs compiled, "
                     f"{'bf16' if 'bf16' in steps['precision'] else 'fp32'}", row["status"], detail))
    # a steps.json from before "requested" existed asked for them all
    missing = [s for s in steps.get("requested", STEP_PATTERNS) if s not in {r["primitive"] for r in steps["rows"]}]
    if missing:
        part = part or {}
        rows.append(("b", f"not reached: {', '.join(missing)}", "fail",
                     f"exit status {part.get('rc')}" + (" (timed out)" if part.get("rc") == 124 else "")))
    return rows


def mfu_rows(mfu: list[dict]) -> list[tuple[str, str, str, str]]:
    """Part c: tokens/s and MFU of each `composer train` run at 1B widths."""
    rows = []
    for record in mfu:
        if record["status"] == "pass" and record.get("from_log"):
            detail = (f"{record['logged_steps']} steps logged, then killed before summary.json; 2nd half median "
                      f"{fmt(record.get('median_tokens_per_s_second_half'), ',.0f')} tok/s, MFU "
                      f"{fmt(record.get('mfu_second_half'), '.1%')} (CSV log); last loss "
                      f"{fmt(record.get('train_loss'), '.3f')}")
        elif record["status"] == "pass":
            detail = (f"{fmt(record.get('tokens_per_s'), ',.0f')} tok/s, MFU {fmt(record.get('mfu'), '.1%')} "
                      f"(summary.json, steps 2..{record.get('steps')}); 2nd half median "
                      f"{fmt(record.get('median_tokens_per_s_second_half'), ',.0f')} tok/s, MFU "
                      f"{fmt(record.get('mfu_second_half'), '.1%')}; "
                      f"peak {fmt((record.get('peak_memory_bytes') or 0) / 2**30 or None, '.1f')} GiB; "
                      f"{fmt(record.get('params'), ',')} params")
        else:
            detail = record.get("reason", "")
        compiled = "eager" if record.get("compile") is False else "compile"  # summaries before the key: compile
        what = (f"{record.get('widths')} widths, {record.get('strategy')} {record.get('precision')}, {compiled}"
                if record.get("strategy") else "composer train")
        rows.append(("c", f"{record['label']}: {what}", record["status"], detail))
    return rows


def rung0_rows(rung0: dict | None, part: dict | None) -> list[tuple[str, str, str, str]]:
    """Part d: the gpu ladder's rung 0 in candidates per hour, and a row for each pattern that failed or was not
    reached (the figure then rests on the others)."""
    if not rung0:
        return [absent_row("d", "rung 0 of the gpu ladder: candidates/hour", part, "rung0.json")] if part else []
    check = (f"{rung0['budget']} throughput, {rung0['widths']} widths, {rung0['precision']}"
             + (", compiled" if rung0.get("compile") else ""))
    if rung0.get("candidates_per_hour"):
        rows = [("d", check, "pass",
                 f"{rung0['candidates_per_hour']:.0f} candidates/hour, extrapolated to the full rung "
                 f"({rung0['full_tokens']:,} tokens x {rung0['runs_per_candidate']} rates) from "
                 f"{rung0['patterns_timed']} patterns at {rung0['tokens']:,} tokens, "
                 f"{rung0['seconds_per_run_measured']:.1f} s per run; whole runs scaled: "
                 f"{rung0['candidates_per_hour_scaled']:.0f}/hour")]
    else:
        rows = [("d", check, "fail", "no pattern trained")]
    rows += [("d", f"{check}: {row['pattern']}", "fail", row.get("reason") or row.get("error", ""))
             for row in rung0["rows"] if row["status"] != "pass"]
    missing = [pattern for pattern in rung0.get("requested", ()) if pattern not in {r["pattern"] for r in rung0["rows"]}]
    if missing:
        part = part or {}
        rows.append(("d", f"{check}: not reached: {', '.join(missing)}", "fail",
                     f"part {part.get('status', '?')}, exit status {part.get('rc')}, see {part.get('log')}"))
    return rows


def overall_status(statuses: list[str], parts: dict) -> str:
    """fail: a check failed; running: parts still pending; incomplete: a part timed out or had no time (what it
    measures is missing, though nothing failed); else pass."""
    if "fail" in statuses:
        return "fail"
    if any(part["status"] == "pending" for part in parts.values()):
        return "running"
    if any(part["status"] in INCOMPLETE for part in parts.values()):
        return "incomplete"
    return "pass"


def table_lines(report: dict, rows: list[tuple[str, str, str, str]], out: Path, work: Path) -> list[str]:
    """The printed report: the machine and its kernel packages, then one line per check; ``out`` is the summary
    written, ``work`` the parts' directory."""
    env, install = report["environment"], report["install"]
    mode = " (quick)" if report["mode"] == "quick" else ""
    where = "DRY RUN on the CPU, tiny settings" if report["dry_run"] else \
        f"{env.get('device', '?')} (x{env.get('device_count', '?')})"
    lines = ["", f"GPU check{mode}: {where}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), triton "
                 f"{env.get('triton')}, python {env.get('python')}"]
    for package in env.get("packages", []):
        state = (f"{package.get('version') or '?'} ok" if package["ok"]
                 else f"MISSING ({package.get('error', '')[:90]})")
        lines.append(f"  {package['name']:<24} for {package['used_by']:<5} {state}")
    if install:
        lines.append(f"  install: {install.get('status')}: {install.get('detail', '')}")
    if env.get("missing"):
        lines.append("  -> the primitives fall back to their pure-PyTorch paths where a kernel package is missing; "
                     "the tests")
        lines.append("     that compare those kernels are SKIPPED below, not passed")
    lines.append("")
    width = max(len(check) for _, check, _, _ in rows)
    lines.append(f"  {'':<2} {'check':<{width}}  {'result':<7}  detail")
    lines.append("  " + "-" * (width + 60))
    lines += [f"  {part:<2} {check:<{width}}  {status.upper():<7}  {detail}" for part, check, status, detail in rows]
    lines.append("")
    statuses = [status for _, _, status, _ in rows]
    counts = ", ".join(f"{statuses.count(s)} {word}" for s, word in
                       (("pass", "passed"), ("skip", "skipped"), ("fail", "failed"), ("pending", "pending")))
    elapsed = f" in {report['elapsed_s']:.0f} s of the {report['budget_s']} s budget" if report.get("elapsed_s") else ""
    if report["mode"] == "quick":
        lines.append(f"  {counts} -> {report['overall'].upper()}{elapsed}; summary {out}, the runs in {work}/")
    else:
        lines.append(f"  {counts} -> {report['overall'].upper()}{elapsed}; everything in {work}/ (gpu_check.json, logs)")
    return lines


def cmd_report(args) -> int:
    out = Path(args.dir)
    run = read_json(out / "run.json") or {}  # the quick check's plan (mode, budget, parts); the full check has none
    env = read_json(out / "env.json") or read_json(out / "env_before.json") or {}
    before = read_json(out / "env_before.json") or {}
    parts = parts_table(out / "parts.tsv", run.get("planned", ()))
    if args.final:
        for part in parts.values():
            if part["status"] == "pending":
                part.update(status="not reached", detail="not reached: the check ended before it")
    install = read_json(out / "install.json") or {}
    attention = read_json(out / "attention.json")
    steps = read_json(out / "steps.json")
    rung0 = read_json(out / "rung0.json")
    cases = junit_cases(out / "cuda_tests.xml")
    labels = [label for label in args.mfu.split(",") if label]
    mfu = [mfu_record(out, label, env.get("device"), parts.get(f"mfu-{label}")) for label in labels]

    rows = [*prelude_rows(parts.get("prelude")), *kernel_rows(cases, attention, parts),
            *steps_rows(steps, parts.get("steps")), *mfu_rows(mfu), *rung0_rows(rung0, parts.get("rung0"))]
    statuses = [status for _, _, status, _ in rows]
    overall = overall_status(statuses, parts)
    report = {
        "benchmark": "gpu_check", "mode": run.get("mode", "full"), "dry_run": run.get("dry_run", False),
        "finished": datetime.datetime.now().isoformat(timespec="seconds"), "final": args.final,
        "overall": overall, "complete": not any(part["status"] in INCOMPLETE for part in parts.values()),
        "budget_s": run.get("budget_s"), "elapsed_s": time.time() - run["started"] if run.get("started") else None,
        "environment": env, "packages_before_install": before.get("packages"), "install": install, "parts": parts,
        "a_cuda_tests": cases, "a_attention_flash": attention, "b_steps": steps, "c_mfu": mfu, "d_rung0": rung0,
        "table": [{"part": p, "check": c, "status": s, "detail": d} for p, c, s, d in rows],
    }
    summary = Path(args.summary or out / "gpu_check.json")
    write_json(summary, report)
    lines = table_lines(report, rows, summary, out)
    if args.table:
        Path(args.table).write_text("\n".join(lines) + "\n")
    if args.quiet:
        done = sum(part["status"] != "pending" for part in parts.values())
        print(f"gpu_check: {summary}: {done} of {len(parts)} parts done, {overall} so far")
    else:
        print("\n".join(lines))
    return 0 if overall == "pass" else 1


# -- main ---------------------------------------------------------------------------------------------------
