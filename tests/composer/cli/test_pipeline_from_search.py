"""The hand-off into the experiments (issue 49): ``composer pipeline`` from a finished search (``--from-search DIR``
or a recipe's ``from_search``) trains the search's answer grown by the search's own ``--attention-at-target`` at the
rate it chose, and ``composer transfer`` grows the patterns it trains from a search the same way. Asserted on the
models the trainings build (``composer.model.build_model`` from the config each run receives), on the finished
smoke search of ``conftest.py``, which grows its patterns with ``keep``."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from composer.cli import main
from composer.pattern import layers
from search.growth import grow

SMALL_TRAIN = {"tokens": 4096, "seq_len": 64, "batch_size": 8}


def rows(search: Path) -> dict[str, dict]:
    """The search's final leaderboard by pattern, and its answer under ``"answer"``."""
    by_pattern = {row["pattern"]: row for row in json.loads((search / "leaderboard.json").read_text())}
    return {**by_pattern, "answer": by_pattern[json.loads((search / "best.json").read_text())["recommended"]]}


def test_a_recipe_from_a_finished_search_trains_its_answer_as_the_search_grew_it(finished_search, built, tmp_path):
    answer = rows(finished_search)["answer"]
    recipe = tmp_path / "from-search.yaml"
    recipe.write_text(yaml.safe_dump({"out": str(tmp_path / "pipeline"), "from_search": str(finished_search),
                                      "extrapolate": {"target": "demo-4m"}, "baselines": ["llama", "sandwich"],
                                      "seeds": [0, 1], "train": SMALL_TRAIN}))
    assert main(["pipeline", "--recipe", str(recipe), "--json"]) == 0

    kept, stacked = (grow(answer["pattern"], "demo-4m", None, rule).layout for rule in ("keep", "repeat"))
    assert kept != stacked, "the test needs an answer whose growth depends on the rule"
    for seed in (0, 1):
        model = built[("composite", seed)]
        assert model["preset"] == "demo-4m" and model["symbols"] == kept, "grown as the search grew it (keep)"
        # keep: as many attention layers as the searched pattern, not one per stacked copy
        assert model["symbols"].count("A") == layers(answer["pattern"]).count("A") < stacked.count("A")
        assert model["lr"] == answer["lr"] == 1e-3, "the rate the search chose (TrainConfig's default is 3e-3)"
    llama = layers(built[("llama", 0)]["symbols"])
    assert built[("llama", 0)]["lr"] == rows(finished_search)["AMAMAM"]["lr"], "Llama's layout's rate in the search"
    assert built[("sandwich", 0)]["lr"] == 3e-3 and llama.count("A") == llama.count("M")
    aggregate = json.loads((tmp_path / "pipeline" / "aggregate.json").read_text())
    assert aggregate["pattern"] == answer["pattern"] and aggregate["from_search"]["attention_at_target"] == "keep"
    extrapolation = json.loads((tmp_path / "pipeline" / "extrapolate.json").read_text())
    assert extrapolation["attention"] == "keep" and str(finished_search) in extrapolation["attention_from"]


def test_from_search_replaces_the_recipes_search_and_trains_the_model_the_search_scored(finished_search, built,
                                                                                          tmp_path, capsys):
    """At the search's own target (tiny), the composite is the model the search trained: its grown layout."""
    recipe = tmp_path / "with-search.yaml"
    recipe.write_text(yaml.safe_dump({"search": {"evaluator": "mad", "trials": 2}, "aggregate": {"c": 0, "k": 5},
                                      "extrapolate": {"target": "demo-4m"}, "baselines": [], "train": SMALL_TRAIN}))
    out = tmp_path / "pipeline"
    assert main(["pipeline", "--recipe", str(recipe), "--from-search", str(finished_search), "--target", "tiny",
                 "--out", str(out), "--seeds", "2"]) == 0
    answer = rows(finished_search)["answer"]
    assert built[("composite", 0)]["symbols"] == answer["grown"]["layout"] == built[("composite", 1)]["symbols"]
    assert not (out / "search").exists(), "the recipe's search section did not run"
    err = capsys.readouterr().err
    assert f"== answer: {answer['pattern']}" in err and "the search's --attention-at-target keep" in err


def test_a_missing_search_is_one_line_exit_2(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"extrapolate": {"target": "tiny"}, "train": SMALL_TRAIN}))
    code = main(["pipeline", "--recipe", str(recipe), "--from-search", str(tmp_path / "nowhere"),
                 "--out", str(tmp_path / "p")])
    err = capsys.readouterr().err
    assert code == 2 and "no such directory" in err and err.strip().count("\n") == 0, err


def test_transfer_trains_each_pattern_as_the_search_grew_it(finished_search, built, tmp_path):
    """composer transfer reads the search's rule from its config.json: a new pattern keeps its attention layers,
    Llama's layout (a known layout the search entered) is stacked, as the search grew each."""
    patterns = {"AMAAAA": None, "MMMAMM": None, "AMAMAM": "llama"}
    assert main(["transfer", "--from-search", str(finished_search), "--patterns", ",".join(patterns), "--target",
                 "demo-4m", "--seeds", "2", "--baseline", "none", "--n-boot", "200", "--out", str(tmp_path / "t"),
                 "--tokens", "4096", "--seq-len", "64", "--batch-size", "8", "--json"]) == 0
    for pattern, known in patterns.items():
        model = built[(pattern, 0)]
        assert model["symbols"] == grow(pattern, "demo-4m", known, "keep").layout, pattern
    assert built[("AMAAAA", 0)]["symbols"].count("A") == 5 and built[("MMMAMM", 1)]["symbols"].count("A") == 1
    assert built[("AMAMAM", 0)]["symbols"].count("A") > 3, "Llama's layout stacked, as the search stacked it"
