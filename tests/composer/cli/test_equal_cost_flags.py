"""``--equal-cost`` on every command that grows a model: the same words build the same model (issue 68), a search
grown to equal cost hands its rule to ``train --from-search`` and ``extrapolate --from-search``, and the flags
refuse what they cannot mean in one line."""

from __future__ import annotations

import json

import pytest

from composer.cli import build_parser, main
from scaling.equal_cost import EqualCost
from search.growth import grow

WORDS = ["--equal-cost", "nemotron-h", "--deployed-at", "llama-3.2-1b", "--cost-device", "h200"]
RULE = EqualCost("nemotron-h", "llama-3.2-1b", "h200")


def finished_search(root, answer: str = "SMMMAD"):
    """A finished search's files, grown to Nemotron-H's cost at llama-3.2-1b on the H200, attention kept."""
    out = root / "search"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({
        "attention_at_target": "keep", "evaluator": "lm", "equal_cost": "nemotron-h",
        "deployed_at": "llama-3.2-1b", "cost_device": "h200", "equal_cost_figure": "both"}))
    (out / "best.json").write_text(json.dumps({"recommended": answer, "answer": "new", "direction": "minimize",
                                               "known_layouts": [], "evaluator": "lm"}))
    (out / "leaderboard.json").write_text(json.dumps([{"pattern": answer, "score": 3.0, "lr": 2e-3}]))
    return out


def test_extrapolate_info_and_train_build_one_model_from_the_same_words(capsys):
    from composer.cli.train import config_from_args

    expected = grow("SMMMAD", "demo-4m", None, "keep", equal_cost=RULE)
    assert main(["extrapolate", "SMMMAD", "--target", "demo-4m", "--attention-at-target", "keep", *WORDS,
                 "--json"]) == 0
    extrapolated = json.loads(capsys.readouterr().out)
    assert main(["info", "SMMMAD", "--preset", "demo-4m", "--attention-at-target", "keep", *WORDS, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    args = build_parser().parse_args(["train", "--arch", "SMMMAD", "--preset", "demo-4m", "--attention-at-target",
                                      "keep", *WORDS, "--out", "unused"])
    trained = config_from_args(args)
    assert extrapolated["pattern"] == info["pattern"] == trained.arch == expected.layout
    assert extrapolated["target"] == info["preset"] == trained.preset == expected.widths != "demo-4m"
    assert extrapolated["equal_cost"] == info["equal_cost"] == expected.cost


def test_a_search_grown_to_equal_cost_hands_its_rule_to_from_search(tmp_path, capsys):
    from composer.cli.train import config_from_args

    search = finished_search(tmp_path)
    expected = grow("SMMMAD", "demo-4m", None, "keep", equal_cost=RULE)
    assert main(["extrapolate", "--from-search", str(search), "--target", "demo-4m", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pattern"] == expected.layout
    args = build_parser().parse_args(["train", "--from-search", str(search), "--target", "demo-4m", "--out", "x"])
    trained = config_from_args(args)
    assert (trained.arch, trained.preset) == (expected.layout, expected.widths)
    # a flag given beside the search's rule overrides that part of it
    args = build_parser().parse_args(["train", "--from-search", str(search), "--target", "demo-4m", "--cost-device",
                                      "cpu", "--out", "x"])
    cpu = grow("SMMMAD", "demo-4m", None, "keep", equal_cost=EqualCost("nemotron-h", "llama-3.2-1b", "cpu"))
    assert config_from_args(args).preset == cpu.widths


def test_extrapolate_prints_the_cost_and_where_it_rests_on_assumed_constants(capsys):
    assert main(["extrapolate", "SMMMAD", "--target", "demo-4m", *WORDS]) == 0
    out = capsys.readouterr().out
    assert "nemotron-h's own layout at llama-3.2-1b on h200 (cost model)" in out
    assert "deployed shape" in out and "rest on assumed constants" in out


@pytest.mark.parametrize("argv, message", [
    (["extrapolate", "SMMMAD", "--target", "demo-4m", "--cost-device", "h200"], "give --equal-cost FAMILY"),
    (["extrapolate", "SMMMAD", "--target", "demo-4m", "--deployed-at", "llama-3.2-1b"], "give --equal-cost FAMILY"),
    (["extrapolate", "SMMMAD", "--target", "demo-4m", "--equal-cost", "llama"], "is not a published family"),
    (["info", "demo-4m", "--equal-cost", "nemotron-h"], "give a pattern, not a preset"),
    (["extrapolate", "SMMMAD", "--target", "demo-4m", "--equal-cost", "nemotron-h", "--params", "1M"],
     "give one of them"),
])
def test_words_that_cannot_mean_anything_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_growth_by_another_processors_cpu_constants_says_so_once_and_still_builds_the_same_model(monkeypatch,
                                                                                                  capsys):
    """The table's CPU constants are one processor's fit (composer.costmodel.processor): on another, growth by them
    builds the same model (the same words, the same widths on any machine) and says once whose figures they are."""
    from composer.costmodel import processor

    monkeypatch.setattr(processor, "_warned", set())
    argv = ["extrapolate", "SMMMAD", "--target", "demo-4m", "--equal-cost", "nemotron-h"]
    assert main(argv) == 0
    here = capsys.readouterr()
    assert "warning" not in here.err and "on cpu (AMD EPYC) (cost model)" in here.out  # whose constants
    monkeypatch.setenv("COMPOSER_CPU_MODEL", "Some Other CPU 9000")
    assert main(argv) == 0
    there = capsys.readouterr()
    assert there.out == here.out
    err = [line for line in there.err.splitlines() if line.startswith("warning")]
    assert len(err) == 1 and "Some Other CPU 9000" in err[0] and "benchmarks/cost_model.py fit" in err[0], err
