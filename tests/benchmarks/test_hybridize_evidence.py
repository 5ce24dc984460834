"""``benchmarks/hybridize_evidence.py`` at a tiny budget: teacher, supernet, placements, distilled and from-scratch
students over two seeds, the (a)-(d) table and the supernet-vs-distilled Spearman; a second call trains nothing."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_hybridize_evidence_runs_every_arm_and_resumes(tmp_path, monkeypatch, load_benchmark):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    script = load_benchmark("hybridize_evidence")
    argv = ["--preset", "tiny", "--teacher-tokens", "10240", "--supernet-tokens", "2048", "--tokens", "2048",
            "--score-tokens", "512", "--val-tokens", "1024", "--seq-len", "64", "--batch-size", "8",
            "--max-documents", "200", "--placements", "4", "--out", str(tmp_path / "ev")]
    assert script.main(argv) == 0
    report = json.loads((tmp_path / "ev" / "hybridize.json").read_text())
    assert [row["model"][:3] for row in report["rows"]] == ["(a)", "(b)", "(c)", "(d)"]
    assert all(set(row["losses"]) == {"0", "1"} for row in report["rows"][1:])
    assert report["rows"][1]["cache_bytes"] < report["rows"][0]["cache_bytes"]
    assert len(report["supernet_vs_distilled"]["placements"]) >= 4
    assert report["b_minus_d"]["n"] == 2 and "Spearman" in (tmp_path / "ev" / "hybridize.md").read_text()
    summaries = {p: p.stat().st_mtime_ns for p in (tmp_path / "ev").rglob("summary.json")}
    assert script.main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "ev").rglob("summary.json")} == summaries
