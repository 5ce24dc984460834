"""Every command given a search's answer builds the one model the search scored (issue 60).

For four answers (a new pattern, Llama's 1:1 alternation, the paper's stacked winner and Nemotron-H, under each
``--attention-at-target``) the model is built the way each command builds it: ``train --from-search`` and
``pipeline --from-search`` (the layers of the model their training builds, training stood in for), ``extrapolate
--from-search --json``, ``transfer --search``, the search's own trials at the target (the cost and cache it
measures, ``search.engine.pattern_at_target``) and its plan's FLOPs (``search.progress``). They must be one model:
the published family in its own layout (Nemotron-H at ``demo-4m``: 1 attention layer in 16), never its 6-layer fit
stacked (``(SMSAMS)x3``: 3), which ``extrapolate`` and ``pipeline`` printed and trained before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from composer.cli import main
from composer.pattern import layers
from search.growth import grow

TARGET = "demo-4m"
SMALL_TRAIN = {"tokens": 4096, "seq_len": 64, "batch_size": 8}
ANSWERS = {  # the search's answer -> the known layout it is (None: a new pattern)
    "AMMMMM": None,
    "AMAMAM": "llama",
    "AAMMMM": "composer-paper",
    "SMSAMS": "nemotron-h",
}
OTHERS = ("MMMAMM", "MAMMMM")  # scored beside the answer, so composer transfer has the three patterns it needs


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_SILENT", "true")


def finished_search(root: Path, answer: str, known: str | None, rule: str) -> Path:
    """A finished search's files as ``composer search`` writes them, answering ``answer`` under ``rule``."""
    out = root / f"{known or 'new'}-{rule}"
    out.mkdir(parents=True)
    entered = [{"name": name, "pattern": pattern} for pattern, name in ANSWERS.items() if name is not None]
    rows = [{"pattern": pattern, "score": 3.0 + i / 10, "lr": 1e-3, "known": ANSWERS.get(pattern)}
            for i, pattern in enumerate((answer, *OTHERS))]
    (out / "config.json").write_text(json.dumps({"attention_at_target": rule, "evaluator": "lm"}))
    (out / "best.json").write_text(json.dumps({"recommended": answer, "answer": "known" if known else "new",
                                               "direction": "minimize", "known_layouts": entered,
                                               "evaluator": "lm"}))
    (out / "leaderboard.json").write_text(json.dumps(rows))
    return out


def models_built(search: Path, answer: str, built: dict, capsys, tmp_path: Path) -> dict[str, str]:
    """Command -> the layers of the model it builds for ``search``'s answer at the target."""
    from search.engine import pattern_at_target
    from search.growth import Growth
    from search.progress import trained_flops_per_token

    rule = json.loads((search / "config.json").read_text())["attention_at_target"]
    known = ANSWERS[answer]
    found = {}
    built.clear()
    assert main(["train", "--from-search", str(search), "--target", TARGET, "--out", str(tmp_path / "train" / "train"),
                 "--tokens", "4096", "--seq-len", "64", "--batch-size", "8"]) == 0
    found["train --from-search"] = built.pop(("train", 0))["symbols"]

    capsys.readouterr()
    assert main(["extrapolate", "--from-search", str(search), "--target", TARGET, "--json"]) == 0
    found["extrapolate --from-search"] = json.loads(capsys.readouterr().out)["pattern"]

    recipe = tmp_path / "pipeline.yaml"
    recipe.write_text(yaml.safe_dump({"out": str(tmp_path / "pipeline"), "from_search": str(search),
                                      "extrapolate": {"target": TARGET}, "baselines": [], "seeds": [0],
                                      "train": SMALL_TRAIN}))
    assert main(["pipeline", "--recipe", str(recipe), "--json"]) == 0
    found["pipeline --from-search"] = built.pop(("composite", 0))["symbols"]

    assert main(["transfer", "--from-search", str(search), "--patterns", ",".join((answer, *OTHERS)),
                 "--target", TARGET,
                 "--seeds", "2", "--baseline", "none", "--n-boot", "200", "--out", str(tmp_path / "transfer"),
                 "--tokens", "4096", "--seq-len", "64", "--batch-size", "8", "--json"]) == 0
    found["transfer --search"] = built[(answer, 0)]["symbols"]

    found["search's trials at the target"] = pattern_at_target(answer, TARGET, known, Growth(rule))
    from composer.accounting import analyze
    from composer.presets import get_preset

    plan_flops = trained_flops_per_token(answer, "search-1m", TARGET, 256, rule, known)
    assert plan_flops == analyze(get_preset(TARGET).arch.with_pattern(found["search's trials at the target"]),
                                 seq_len=256).flops_per_token, "the plan costs the model the trials train"
    return found


@pytest.mark.parametrize("rule", ["keep", "repeat"])
@pytest.mark.parametrize("answer", list(ANSWERS))
def test_every_command_builds_the_model_the_search_scored(answer, rule, built, capsys, tmp_path):
    known = ANSWERS[answer]
    search = finished_search(tmp_path / "searches", answer, known, rule)
    expected = grow(answer, TARGET, known, rule).layout
    found = models_built(search, answer, built, capsys, tmp_path)
    assert found == dict.fromkeys(found, expected), f"{answer} ({known or 'new'}, {rule}): {found}"
    symbols = layers(expected)
    if known == "nemotron-h":  # its own layout (about 1 attention in 13), not its 6-layer fit stacked
        assert symbols.count("A") == 1 and expected != "SMSAMS" * 3, expected
    elif known is not None:  # Llama's and the paper's own rule is stacking, whatever the search's rule
        assert expected == grow(answer, TARGET, None, "repeat").layout, "stacked"
    elif rule == "keep":
        stacked = layers(grow(answer, TARGET, None, "repeat").layout)
        assert symbols.count("A") == 1 < stacked.count("A"), "keep: one attention layer, as the search grew it"
