from __future__ import annotations

import json
import subprocess
import sys

import pytest

from composer.cli import main
from composer.cli.extrapolate import parse_count


def run_json(capsys, *argv):
    assert main(["extrapolate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_paper_checks_json(capsys):
    stacked = run_json(capsys, "AAMMMM", "--target", "llama-3.2-1b")
    assert (stacked["method"], stacked["n_layers"], stacked["counts"]) == ("stack", 27, {"A": 9, "M": 18})
    assert stacked["compact"] == "(AA4M)x4 AMM"
    stretched = run_json(capsys, "AAMMMMMAAMMMAMMM", "--target", "llama-3.2-1b")
    assert (stretched["method"], stretched["n_layers"], stretched["counts"]) == ("stretch", 29, {"A": 10, "M": 19})
    for data in (stacked, stretched):
        for key in ("pattern", "counts", "params", "non_embedding_params", "kv_cache_bytes_per_token"):
            assert key in data
        assert data["target_non_embedding_params"] == 973_146_112
        assert data["relative_error"] == pytest.approx(data["difference"] / 973_146_112)


def test_method_params_rounding_and_baselines_json(capsys):
    forced = run_json(capsys, "AAMMMM", "--target", "llama-3.2-1b", "--method", "stretch")
    assert forced["method"] == "stretch" and forced["pattern"] == "A" * 9 + "M" * 18
    sized = run_json(capsys, "AAMMMM", "--target", "llama-350m", "--params", "1.5B", "--rounding", "nearest")
    assert sized["target_non_embedding_params"] == 1_500_000_000 and sized["rounding"] == "nearest"
    with_baselines = run_json(capsys, "AAMMMM", "--target", "llama-3.2-1b", "--baselines")
    assert set(with_baselines["baselines"]) == {"llama", "sandwich", "striped-1:2", "random"}
    assert with_baselines["baselines"]["llama"]["compact"] == "(AM)x16"


def test_attention_kept_json_and_text(capsys):
    kept = run_json(capsys, "SDDMAS", "--target", "demo-4m", "--attention-at-target", "keep")
    assert kept["attention"] == "keep" and kept["pattern"] == "SDDMSSDDMSASDDMSSDDMS" and kept["counts"]["A"] == 1
    assert main(["extrapolate", "SDDMAS", "--target", "demo-4m", "--attention-at-target", "keep"]) == 0
    assert "stack: 3 x SDDMS + remainder stretched x0.6994, then its 1 attention layer at the middles" in (
        capsys.readouterr().out)


def test_human_output(capsys):
    assert main(["extrapolate", "AAMMMM", "--target", "llama-3.2-1b", "--baselines"]) == 0
    out = capsys.readouterr().out
    assert "(AA4M)x4 AMM" in out and "1,000,398,848" in out and "+2.80%" in out and "18,432 bytes" in out
    assert "sandwich" in out and "(AM)x16" in out


def test_parse_count():
    assert parse_count("973146112") == parse_count("973_146_112") == 973_146_112
    assert parse_count("1e9") == parse_count("1B") == parse_count("1000m") == 1_000_000_000
    assert parse_count("1.5B") == 1_500_000_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["AQM", "--target", "llama-3.2-1b"], "unknown primitive 'Q' at position 1"),
        (["AM", "--target", "nope"], "unknown preset 'nope'"),
        (["AM", "--target", "tiny", "--params", "lots"], "--params must be a number"),
        (["AM", "--target", "tiny", "--params", "10"], "above the final norm"),
        (["AM", "--target", "tiny", "--params", "1e12"], "more than the 10,000"),
    ],
)
def test_usage_errors_exit_2_with_one_line(capsys, argv, message):
    assert main(["extrapolate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, size", [([], "tiny's 123,200"), (["--params", "150000"], "--params 150,000")])
def test_a_pattern_larger_than_the_target_is_refused_not_shrunk(capsys, argv, size):
    """Issue 47: ``AAMMMM --to tiny`` printed the 5-layer AAMMM, exit 0, without a word: the 6 layers already weigh
    more than tiny, and below one copy the extrapolator cuts every run short. A usage error naming the fix."""
    assert main(["extrapolate", "AAMMMM", "--target", "tiny", *argv]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"composer extrapolate: error: AAMMMM already has 221,632 non-embedding parameters at "
                          f"tiny's widths, more than {size}: extrapolating would shrink it to ")
    assert "give a larger --target preset or --params of at least 221,632" in err
    assert "composer train --arch AAMMMM --preset tiny" in err
    # a target it reaches in whole copies, or one it fits without losing a layer, is extrapolated as before
    assert run_json(capsys, "AAMMMM", "--target", "tiny", "--params", "221632")["pattern"] == "AAMMMM"
    assert run_json(capsys, "AM", "--target", "tiny")["pattern"] == "AMAM"


def test_console_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "composer", "extrapolate", "AAMMMMMAAMMMAMMM", "--target", "llama-3.2-1b", "--json"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0 and json.loads(result.stdout)["counts"] == {"A": 10, "M": 19}
