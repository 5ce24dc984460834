"""composer pipeline measures each trained model's recall (composer/experiments/pipeline_recall.py, issue 48): once per
run, kept in the run, shown per model in comparison.json/.csv/.md, with a plain sentence when no model retrieves."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from composer.cli import main
from composer.errors import ConfigError
from composer.experiments.pipeline import PipelineConfig
from composer.experiments.pipeline_recall import RECORD, statement, summarize
from search.trained_recall import RETRIEVAL_SHARE

SEEDS = (0, 1)
MODELS = ("composite", "llama")
SEQUENCES = 4  # per kind of span and AR windows: the fewest that give an interval its spread, at tiny widths


def recipe(tmp: Path) -> Path:
    """A pipeline at tiny widths from a search's leaderboard (no search runs): the composite and Llama, 2 seeds,
    2 steps each on 200 documents of the default corpus."""
    rows = [{"rank": i, "pattern": p, "score": s, "trial": i} for i, (p, s) in
            enumerate([("AAMMMM", 0.95), ("AMAMAM", 0.6), ("MMMMAM", 0.1)])]
    (tmp / "out" / "search").mkdir(parents=True)
    (tmp / "out" / "search" / "leaderboard.json").write_text(json.dumps(rows))
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump({
        "out": str(tmp / "out"), "extrapolate": {"target": "tiny"}, "baselines": ["llama"], "seeds": list(SEEDS),
        "train": {"tokens": 2 * 8 * 64, "seq_len": 64, "batch_size": 8, "max_documents": 200, "val_tokens": 1024,
                  "curve_points": 0, "wandb": "off", "recall_sequences": SEQUENCES}}))
    return path


def pipeline(path: Path, out: Path, *flags: str) -> int:
    return main(["pipeline", "--recipe", str(path), "--out", str(out), "--stages",
                 "aggregate,extrapolate,train,compare", *flags])


def runs(out: Path) -> list[Path]:
    return [out / "train" / name / f"seed-{seed}" for seed in SEEDS for name in MODELS]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The pipeline trained and measured once (4 runs, ~15 s); tests that change it work on a copy."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("pipeline-recall")
    path = recipe(tmp)
    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        assert pipeline(path, tmp / "out") == 0
    return path, tmp / "out", stderr.getvalue(), stdout.getvalue()


def copy_of(trained, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(trained[1], out)
    return out


def test_every_run_records_its_recall_and_the_comparison_shows_it_per_model(trained):
    _, out, progress, printed = trained
    for run in runs(out):
        record = json.loads((run / RECORD).read_text())
        assert record["pipeline_recall"] == {"sequences": SEQUENCES, "seq_len": 64}
        random = [row for row in record["copy"] if row["kind"] == "random"]
        assert random and all(row["n"] == SEQUENCES and row["gain_ci"][0] < row["gain_ci"][1] for row in random)
        assert len(record["random_gains"]) == SEQUENCES and len(record["ar_gains"]["repeat_gains"]) == SEQUENCES
    assert progress.count("== recall: ") == 4 and f"on {SEQUENCES} held-out sequences at 64 tokens" in progress

    comparison = json.loads((out / "comparison.json").read_text())
    block = comparison["recall"]
    assert block["sequences"] == SEQUENCES and "each averaged over seeds 0, 1" in block["interval"]
    for row in comparison["models"]:
        recall = row["recall"]
        assert recall["seeds"] == list(SEEDS) and set(recall["per_seed"]) == {"0", "1"}
        figure = recall["random_copy_gain"]
        assert figure["seeds"] == list(SEEDS) and figure["sequences"] == SEQUENCES and figure["distance"] == 32
        assert figure["ci"][0] < figure["value"] < figure["ci"][1]
        assert recall["ar_repeat_gain"]["value"] is not None and recall["retrieves"] == "no"
        assert 0.5 < recall["second_copy_share"] < 1.5, "two steps of training copy nothing"
    # models trained for two steps retrieve nothing: the comparison says so in words, not as a ranking
    assert block["none_retrieves"] and block["statement"].startswith("**No model retrieves.**")
    table = (out / "comparison.md").read_text()
    assert "| random copy gain at 32 tokens |" in table and "**No model retrieves.**" in table
    assert "random copy gain at 32 tokens" in printed
    with open(out / "comparison.csv", newline="") as f:
        rows = {row["model"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(MODELS)
    assert all(float(row["recall_random_gain_ci_low"]) < float(row["recall_random_gain"])
               < float(row["recall_random_gain_ci_high"]) and row["recall_retrieves"] == "no" for row in rows.values())


def test_the_comparison_gives_each_models_whole_cache_at_32k(trained):
    """Deliverable 4 of issue 48 compares the models' cache at 32K (the length the search's --max-kv reads); this
    pipeline's comparison is the one that shows it, so it is checked on the same runs."""
    import torch

    from composer.model import build_model
    from composer.presets import get_preset

    out = trained[1]
    rows = {row["model"]: row for row in json.loads((out / "comparison.json").read_text())["models"]}
    extrapolation = json.loads((out / "extrapolate.json").read_text())
    patterns = {"composite": extrapolation["pattern"], "llama": extrapolation["baselines"]["llama"]}
    for name, pattern in patterns.items():  # what each model's cache allocates for one 32K sequence, in bf16
        model = build_model(get_preset("tiny").arch.with_pattern(pattern))
        allocated = model.init_cache(batch=1, max_len=32768, dtype=torch.bfloat16).nbytes()
        assert rows[name]["cache_bytes"]["32768"] == allocated, (name, rows[name]["cache_bytes"], allocated)
    assert "| cache @32K |" in (out / "comparison.md").read_text()
    with open(out / "comparison.csv", newline="") as f:
        assert {row["model"]: int(row["cache_bytes_32768"]) for row in csv.DictReader(f)} == {
            name: row["cache_bytes"]["32768"] for name, row in rows.items()}


def test_a_resumed_pipeline_measures_only_the_runs_without_a_record(trained, tmp_path, monkeypatch, capsys):
    import search.trained_recall

    out = copy_of(trained, tmp_path)
    old = runs(out)[1]
    (old / RECORD).unlink()  # a run trained before recall was recorded (or killed before its measurement)
    kept = {run: (run / RECORD).read_text() for run in runs(out) if run != old}
    measured = []
    real = search.trained_recall.measure_run
    monkeypatch.setattr(search.trained_recall, "measure_run",
                        lambda model_dir, *args, **kwargs: measured.append(Path(model_dir)) or real(model_dir, *args,
                                                                                                     **kwargs))
    assert pipeline(trained[0], out) == 0
    assert measured == [old / "model"], "only the run without a record is measured"
    assert "4 of 4 runs already finished; not trained again" in capsys.readouterr().err
    assert all((run / RECORD).read_text() == text for run, text in kept.items())
    assert (old / RECORD).is_file()
    rows = json.loads((out / "comparison.json").read_text())["models"]
    assert all(row["recall"]["seeds"] == list(SEEDS) for row in rows)


def test_the_compare_stage_alone_measures_a_run_without_a_record(trained, tmp_path):
    """``--stages compare`` on runs trained before recall was recorded: the table must not come out without it."""
    out = copy_of(trained, tmp_path)
    old = runs(out)[0]
    (old / RECORD).unlink()
    assert main(["pipeline", "--recipe", str(trained[0]), "--out", str(out), "--stages", "compare"]) == 0
    assert (old / RECORD).is_file()
    rows = json.loads((out / "comparison.json").read_text())["models"]
    assert all(row["recall"]["seeds"] == list(SEEDS) for row in rows)


def test_recall_sequences_0_measures_nothing_and_shows_no_recall(trained, tmp_path):
    out = copy_of(trained, tmp_path)
    for run in runs(out):
        (run / RECORD).unlink()
    assert pipeline(trained[0], out, "--recall-sequences", "0") == 0
    assert not any((run / RECORD).exists() for run in runs(out))
    comparison = json.loads((out / "comparison.json").read_text())
    assert "recall" not in comparison and all("recall" not in row for row in comparison["models"])
    assert "copy gain" not in (out / "comparison.md").read_text()
    assert "recall_random_gain" not in (out / "comparison.csv").read_text()


@pytest.mark.parametrize("value", [1, -2, "32", True])
def test_a_bad_number_of_recall_sequences_is_one_line(value, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"train.recall_sequences must be 0 \(recall not measured\) or an integer"):
        PipelineConfig(extrapolate={"target": "tiny"}, train={"recall_sequences": value})
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"extrapolate": {"target": "tiny"}}))
    assert main(["pipeline", "--recipe", str(path), "--recall-sequences", "1"]) == 2
    assert "recall_sequences must be 0" in capsys.readouterr().err


def compact(first: float, second: float, half_width: float) -> dict:
    """One seed's compact report whose random spans cost ``first`` then ``second`` nats at distances 16 and 32."""
    gain = first - second
    rows = [{"kind": "random", "distance": d, "first_loss": first, "second_loss": second, "gain": gain,
             "gain_ci": [gain - half_width, gain + half_width], "n": 4} for d in (16, 32)]
    settings = {"seq_len": 64, "span": 16, "lead": 16, "distances": [16, 32], "ngram": 8, "sequences": 4, "seed": 0}
    return {"settings": settings, "copy": rows, "ar_slice": {}, "random_gains": [gain] * 3 + [gain + half_width],
            "ar_gains": {}, "seconds": 0.1}


def test_the_statement_names_models_that_retrieve_and_does_not_rank_by_overlapping_intervals():
    def row(model, first, second, half_width):
        return {"model": model, "recall": summarize({"0": compact(first, second, half_width)})}

    copying = row("llama", 6.5, 0.5, 0.2)  # the second copy costs 8% of the first: it retrieves
    blind = row("composite", 6.5, 6.4, 0.05)
    assert copying["recall"]["retrieves"] == "yes" and blind["recall"]["retrieves"] == "no"
    said = statement([copying, blind])
    assert said.startswith("**Recall:** retrieves") and "llama" in said and "does not retrieve: composite" in said
    assert "cannot order" not in said
    unclear = row("samba", 6.5, 4.0, 2.0)  # its interval reaches both sides of the threshold
    assert unclear["recall"]["retrieves"] == "unclear" and "unclear (the interval reaches both): samba" in statement(
        [blind, unclear])
    close = [row("a", 6.5, 6.45, 0.05), row("b", 6.5, 6.44, 0.05)]
    said = statement(close)
    assert said.startswith("**No model retrieves.**") and f"more than {RETRIEVAL_SHARE:.0%}" in said
    assert "the measurement cannot order the models by it" in said


def test_a_model_without_an_interval_is_named_as_not_judged():
    """A model whose copy rows have no interval has no verdict: the sentence names it instead of "**Recall:** ."."""
    text = statement([{"model": "composite", "recall": {"retrieves": None}}])
    assert text == "**Recall:** not judged (no interval: fewer than 2 sequences measured): composite."

