"""Every command given a search's answer builds the one model the search scored (issues 60 and 69).

For four answers (a new pattern, Llama's 1:1 alternation, the paper's stacked winner and Nemotron-H, under each
``--attention-at-target``, grown by depth and at ``--depth-at-target``) the model is built the way each command
builds it: ``train --from-search`` and ``pipeline --from-search`` (the layers and preset of the model their
training builds, training stood in for), ``extrapolate --from-search --json``, ``transfer --search``, the model the
search's own engine records for the answer's trial at the target (its ``grown`` attribute, whose cost and cache it
measures) and its plan's FLOPs (``search.progress``). They must be one model: the layout the growth rule gives
(the published family in its own layout, never its 6-layer fit stacked, which ``extrapolate`` and ``pipeline``
printed and trained before), at widths computed here independently of it: the target's, or at a depth the width,
of every one tried, whose size comes nearest the target's."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml

from composer.cli import main
from composer.pattern import layers
from search.growth import grow
from tests.search.test_growth import nearest_width

TARGET = "demo-4m"
DEPTH = 16  # --depth-at-target: every model at the target laid out at 16 layers, its widths scaled to its size
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


def finished_search(root: Path, answer: str, known: str | None, rule: str, depth: int | None) -> Path:
    """A finished search's files as ``composer search`` writes them, answering ``answer`` under ``rule``."""
    out = root / f"{known or 'new'}-{rule}-{depth}"
    out.mkdir(parents=True)
    entered = [{"name": name, "pattern": pattern} for pattern, name in ANSWERS.items() if name is not None]
    rows = [{"pattern": pattern, "score": 3.0 + i / 10, "lr": 1e-3, "known": ANSWERS.get(pattern)}
            for i, pattern in enumerate((answer, *OTHERS))]
    (out / "config.json").write_text(json.dumps({"attention_at_target": rule, "evaluator": "lm",
                                                 **({"depth_at_target": depth} if depth else {})}))
    (out / "best.json").write_text(json.dumps({"recommended": answer, "answer": "known" if known else "new",
                                               "direction": "minimize", "known_layouts": entered,
                                               "evaluator": "lm"}))
    (out / "leaderboard.json").write_text(json.dumps(rows))
    return out


def trial_model(answer: str, known: str | None, rule: str, depth: int | None, out: Path,
                monkeypatch) -> tuple[str, str]:
    """``(layout, widths)`` the search's engine records for the answer's trial at the target: the ``grown``
    attribute its cost, cache and last rungs are of (training stood in for)."""
    from search.config import SearchConfig
    from search.engine import Stage, enqueue_first, make_objective, open_study
    from search.evaluation import Evaluation
    from search.evaluators import make_evaluator
    from search.lm import LanguageModelEvaluator
    from search.space import SearchSpace

    config = SearchConfig(evaluator="lm", budget="rung-smoke-0", strategy="one-shot", primitives="AMS", layers=6,
                          target=TARGET, attention_at_target=rule, depth_at_target=depth, wandb="off",
                          out=str(out), study="trials")
    stage = Stage(0, SearchSpace(6, "AMS"), 1, "trials", ((answer, {"known": known} if known else
                                                            {"promoted_from": 0}),), only_first=True)
    evaluator = make_evaluator("lm", "rung-smoke-0", "tiny", None, None, "fp32", False)
    monkeypatch.setattr(LanguageModelEvaluator, "__call__", lambda *args: Evaluation(3.0, {}, 0.0))
    study = open_study(config, stage, evaluator)
    enqueue_first(study, stage)
    with warnings.catch_warnings():  # Optuna's note that its storage's heartbeat is for Study.optimize
        warnings.simplefilter("ignore", UserWarning)
        trial = study.ask()
    make_objective(config, stage, evaluator, study)(trial)
    record = study.trials[-1].user_attrs["grown"]
    return record["layout"], record["widths"]


def models_built(search: Path, answer: str, depth: int | None, built: dict, capsys, tmp_path: Path,
                 monkeypatch) -> dict[str, tuple[str, str]]:
    """Command -> the layers and the preset of the model it builds for ``search``'s answer at the target."""
    from search.growth import Growth
    from search.progress import trained_flops_per_token

    rule = json.loads((search / "config.json").read_text())["attention_at_target"]
    known = ANSWERS[answer]
    found = {}
    built.clear()
    assert main(["train", "--from-search", str(search), "--target", TARGET, "--out", str(tmp_path / "train" / "train"),
                 "--tokens", "4096", "--seq-len", "64", "--batch-size", "8"]) == 0
    model = built.pop(("train", 0))
    found["train --from-search"] = model["symbols"], model["preset"]

    capsys.readouterr()
    assert main(["extrapolate", "--from-search", str(search), "--target", TARGET, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    found["extrapolate --from-search"] = data["pattern"], data["target"]

    found["search's trials at the target"] = trial_model(answer, known, rule, depth, tmp_path / "trials",
                                                          monkeypatch)
    layout, widths = found["search's trials at the target"]
    from composer.accounting import analyze
    from composer.presets import get_preset

    plan_flops = trained_flops_per_token(answer, "search-1m", TARGET, 256, Growth(rule, depth), known)
    assert plan_flops == analyze(get_preset(widths).arch.with_pattern(layout), seq_len=256).flops_per_token, \
        "the plan costs the model the trials train"
    if depth is not None:  # grown by width: composer pipeline and transfer grow by depth, so they refuse it
        return found

    recipe = tmp_path / "pipeline.yaml"
    recipe.write_text(yaml.safe_dump({"out": str(tmp_path / "pipeline"), "from_search": str(search),
                                      "extrapolate": {"target": TARGET}, "baselines": [], "seeds": [0],
                                      "train": SMALL_TRAIN}))
    assert main(["pipeline", "--recipe", str(recipe), "--json"]) == 0
    model = built.pop(("composite", 0))
    found["pipeline --from-search"] = model["symbols"], model["preset"]

    assert main(["transfer", "--from-search", str(search), "--patterns", ",".join((answer, *OTHERS)),
                 "--target", TARGET,
                 "--seeds", "2", "--baseline", "none", "--n-boot", "200", "--out", str(tmp_path / "transfer"),
                 "--tokens", "4096", "--seq-len", "64", "--batch-size", "8", "--json"]) == 0
    found["transfer --search"] = built[(answer, 0)]["symbols"], built[(answer, 0)]["preset"]
    return found


@pytest.mark.parametrize("depth", [None, DEPTH], ids=["by-depth", f"depth-{DEPTH}"])
@pytest.mark.parametrize("rule", ["keep", "repeat"])
@pytest.mark.parametrize("answer", list(ANSWERS))
def test_every_command_builds_the_model_the_search_scored(answer, rule, depth, built, capsys, tmp_path,
                                                          monkeypatch):
    from composer.presets import get_preset

    known = ANSWERS[answer]
    search = finished_search(tmp_path / "searches", answer, known, rule, depth)
    layout = grow(answer, TARGET, known, rule, depth).layout  # the growth rule's layout
    width = get_preset(TARGET).arch.d_model if depth is None else nearest_width(layout, TARGET)  # tried them all
    widths = TARGET if width == get_preset(TARGET).arch.d_model else f"{TARGET}:d{width}"
    found = models_built(search, answer, depth, built, capsys, tmp_path, monkeypatch)
    assert found == dict.fromkeys(found, (layout, widths)), f"{answer} ({known or 'new'}, {rule}, {depth}): {found}"
    symbols = layers(layout)
    assert len(symbols) == DEPTH if depth else len(symbols) > 6
    if known == "nemotron-h":  # its own layout (about 1 attention in 13), not its 6-layer fit stacked
        assert symbols.count("A") == 1 and "SMSAMS" * 2 not in layout, layout
    elif known is not None:  # Llama's and the paper's own rule is stacking, whatever the search's rule
        period = answer if known == "llama" else "AAMMMM"
        assert layout.startswith(period * (len(symbols) // 6)), layout
    elif rule == "keep":  # one attention layer, as the search grew it; repeated, one in every six
        assert symbols.count("A") == 1, layout
    else:
        assert symbols.count("A") == -(-len(symbols) // 6), layout
