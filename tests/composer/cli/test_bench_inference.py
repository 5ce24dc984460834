"""``composer bench-inference``: measured throughput and cache bytes, equal to the analytic cache, vs Llama."""

from __future__ import annotations

import json

import pytest

from composer.accounting import analyze
from composer.cli import main
from composer.interop.model_dir import export_weights
from composer.model import build_model
from composer.presets import resolve_architecture

FAST = ["--preset", "tiny", "--batch-sizes", "1,2", "--context-lengths", "8,24", "--new-tokens", "3",
        "--repeats", "1"]
KEYS = ("prefill_tokens_per_s", "time_to_first_token_s", "decode_tokens_per_s", "decode_tokens_per_s_total",
        "cache_bytes", "cache_bytes_analytic", "cache_bytes_ratio")


def bench_json(capsys, tmp_path, *argv):
    assert main(["bench-inference", *argv, "--out", str(tmp_path / "bench"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads((tmp_path / "bench" / "bench_inference.json").read_text()) == printed
    assert (tmp_path / "bench" / "bench_inference.png").stat().st_size > 0
    return printed


def test_hybrid_with_s_and_w_measured_cache_equals_analytic(tmp_path, capsys):
    data = bench_json(capsys, tmp_path, "AMSMWM", *FAST)
    assert data["compact"] == "AMSMWM" and data["dtype"] == "fp32"
    assert [(r["batch"], r["context"]) for r in data["results"]] == [(1, 8), (1, 24), (2, 8), (2, 24)]
    arch, _ = resolve_architecture("AMSMWM", "tiny", "tiny")
    for row in data["results"]:
        for key in KEYS:
            assert row[key] > 0, key
        assert row["cache_bytes"] == row["cache_bytes_analytic"] and row["cache_bytes_ratio"] == 1.0
        stats = analyze(arch, seq_len=row["context"] + 3, cache_dtype_bytes=4)
        assert row["cache_bytes"] == row["batch"] * stats.cache_bytes_per_sequence
        assert row["decode_tokens_per_s_total"] == pytest.approx(row["decode_tokens_per_s"] * row["batch"])
    llama = data["llama"]
    assert set(llama["pattern"]) == {"A", "M"} and not llama.get("same_as_pattern")
    assert len(llama["results"]) == len(data["vs_llama"]) == 4
    for row in llama["results"]:
        assert row["cache_bytes"] == row["cache_bytes_analytic"]
    for ours, theirs, ratio in zip(data["results"], llama["results"], data["vs_llama"]):
        assert ratio["cache_bytes_ratio"] == pytest.approx(ours["cache_bytes"] / theirs["cache_bytes"])
        assert ratio["decode_tokens_per_s_ratio"] > 0


def test_llama_pattern_is_its_own_baseline(tmp_path, capsys):
    data = bench_json(capsys, tmp_path, "(AM)x2", *FAST)
    assert data["llama"]["same_as_pattern"] and data["llama"]["compact"] == "(AM)x2"
    assert all(r["decode_tokens_per_s_ratio"] == 1.0 and r["cache_bytes_ratio"] == 1.0 for r in data["vs_llama"])
    assert all(r["cache_bytes"] == r["cache_bytes_analytic"] for r in data["results"])


def test_bf16_cache_is_half_the_fp32_one(tmp_path, capsys):
    argv = ["AMSMDM", "--preset", "tiny", "--batch-sizes", "1", "--context-lengths", "16", "--new-tokens", "2",
            "--repeats", "1", "--no-baseline"]
    bf16 = bench_json(capsys, tmp_path, *argv, "--precision", "bfloat16")  # torch's name for bf16 works too
    assert bf16["dtype"] == "bf16"
    bf16 = bf16["results"][0]
    fp32 = bench_json(capsys, tmp_path, *argv)["results"][0]
    assert bf16["cache_bytes"] == bf16["cache_bytes_analytic"] == fp32["cache_bytes"] // 2


def test_compile_decodes_through_the_compiled_step_and_names_it(tmp_path, capsys, monkeypatch):
    """``--compile``: each row's decode_path names the compiled step (torch.compile stubbed out here: compiling
    is tests/composer/test_compiled_decode.py's; the plumbing is this test's), the default says eager."""
    monkeypatch.setattr("torch.compile", lambda fn, **kwargs: fn)
    argv = ["AMSDWM", "--preset", "tiny", "--batch-sizes", "1,2", "--context-lengths", "8", "--new-tokens", "3",
            "--repeats", "1", "--no-baseline"]
    compiled = bench_json(capsys, tmp_path, *argv, "--compile")
    assert compiled["compile"] and {r["decode_path"] for r in compiled["results"]} == {"compiled (inductor, cpu)"}
    assert all(r["decode_tokens_per_s"] > 0 for r in compiled["results"])
    eager = bench_json(capsys, tmp_path, *argv)
    assert not eager["compile"] and {r["decode_path"] for r in eager["results"]} == {"eager"}


def test_trained_model_directory_and_human_output(tmp_path, capsys):
    arch, _ = resolve_architecture("AMWM", "tiny", "tiny")
    directory = export_weights(build_model(arch).state_dict(), arch, tmp_path / "model")
    assert main(["bench-inference", "--model", str(directory), "--batch-sizes", "1", "--context-lengths", "8",
                 "--new-tokens", "2", "--repeats", "1", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "AMWM" in out and "analytic" in out and "Llama" in out and "bench_inference.png" in out
    assert "decode: eager" in out
    data = json.loads((tmp_path / "b" / "bench_inference.json").read_text())
    assert data["model"] == str(directory) and data["widths"] == "tiny"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["AM", "--preset", "nope"], "unknown preset 'nope'"),
        (["AQ"], "unknown primitive 'Q'"),
        ([], "give a SPEC"),
        (["AM", "--model", "x"], "not both"),
        (["AM", "--batch-sizes", "1,x"], "--batch-sizes must be comma-separated positive integers"),
        (["AM", "--context-lengths", "0"], "--context-lengths must be comma-separated positive integers"),
        (["AM", "--new-tokens", "0"], "--new-tokens must be a positive integer"),
        (["AM", "--repeats", "-1"], "--repeats must be a positive integer"),
        (["--model", "/nonexistent/model"], "does not exist"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, argv, message):
    assert main(["bench-inference", *argv, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_decode_speed_is_printed_with_the_range_of_its_repeats_or_not_at_all(tmp_path, capsys):
    """Issue 61, item 4: a model's decode tokens/s read 128 on one run and 12 on its re-run, printed alone. Each
    row keeps its repeats' ms per token (median, min, max, spread) and the table prints the median with the
    range; one timed run (--repeats 1) prints no decode figure, as it has no spread."""
    argv = ["bench-inference", "(AM)x2", "--preset", "tiny", "--batch-sizes", "1", "--context-lengths", "8",
            "--new-tokens", "3", "--no-baseline", "--out", str(tmp_path / "bench")]
    assert main([*argv, "--repeats", "3"]) == 0
    text = capsys.readouterr().out
    row = json.loads((tmp_path / "bench" / "bench_inference.json").read_text())["results"][0]
    ms = row["decode_ms_per_token"]
    assert ms["repeats"] == 3 and ms["min"] <= ms["median"] <= ms["max"] and ms["spread"] >= 0
    assert row["decode_tokens_per_s"] == pytest.approx(1000 / ms["median"])
    assert "decode tok/s/seq: the median, in brackets the range, over 3 repeats" in text
    cell = f"{row['decode_tokens_per_s']:,.1f} ({1000 / ms['max']:,.1f}-{1000 / ms['min']:,.1f})"
    assert cell in text
    assert main([*argv, "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    single = json.loads((tmp_path / "bench" / "bench_inference.json").read_text())["results"][0]
    assert "decode tok/s not printed: one timed run has no spread" in text
    assert f"{single['decode_tokens_per_s']:,.1f}" not in text
