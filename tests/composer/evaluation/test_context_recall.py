"""composer/evaluation/context_recall.py and ``composer eval --tasks recall``: the recall of a trained model.

The key check is that the measures tell a model that can copy from one that cannot. Two hand-built models share a
bigram table fitted on a training stream of a byte Markov chain; one adds an induction-head oracle (where the 4
tokens before a position occurred earlier in the sequence, it bets on the token that followed them there), the
other reads nothing but the previous token. On held-out text of the same chain, with repeated segments planted in
it, the oracle must show a copy gain and an AR repeat gain with intervals above 0, the bigram model none: the same
tokens after the same previous token score the same for it, so its gains are exactly 0. Scoring the wrong
positions turns this red (tried: the second copy scored one span later).
"""

from __future__ import annotations

import json
import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from composer.cli import main
from composer.data import ByteTokenizer, DataPipeline
from composer.evaluation import context_recall as recall
from composer.evaluation import loading

V = 257  # the byte tokenizer's ids; 256 is EOS
PRINTABLE = np.arange(32, 127)


# -- held-out text and the two models ------------------------------------------------------------------------
def markov_stream(n: int, seed: int, plant: bool) -> np.ndarray:
    """``n`` bytes of a sparse Markov chain over printable ASCII (each byte has 6 likely successors; the chain is
    the same for every ``seed``), EOS every ~2,000 bytes; ``plant``: a 24-byte segment of the last 100 bytes is
    repeated every ~50 bytes, so windows have associative-recall hits."""
    chain = np.random.default_rng(0)
    successors = chain.choice(PRINTABLE, size=(V, 6))
    weights = chain.dirichlet(np.ones(6), size=V)
    rng = np.random.default_rng(seed)
    out = [int(rng.choice(PRINTABLE))]
    while len(out) < n:
        if plant and len(out) > 120 and rng.random() < 1 / 50:
            start = len(out) - int(rng.integers(24, 100))
            out.extend(out[start:start + 24])
        elif rng.random() < 1 / 2000:
            out.append(256)
        else:
            previous = out[-1] if out[-1] != 256 else int(rng.choice(PRINTABLE))
            out.append(int(rng.choice(successors[previous], p=weights[previous])))
    return np.array(out[:n], np.int64)


def bigram_table(tokens: np.ndarray) -> torch.Tensor:
    counts = np.ones((V, V))
    np.add.at(counts, (tokens[:-1], tokens[1:]), 1)
    return torch.tensor(np.log(counts / counts.sum(axis=1, keepdims=True)), dtype=torch.float32)


class Bigram(nn.Module):
    """Next-token log-probabilities from the previous token alone: a model without context."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table)

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None) -> SimpleNamespace:
        return SimpleNamespace(logits=self.table[input_ids])


class InductionOracle(Bigram):
    """The bigram model plus an exact induction head: where the ``k`` tokens ending at position t also ended
    earlier at j (the latest such j), ``bonus`` is added to the logit of token j + 1."""

    def __init__(self, table: torch.Tensor, k: int = 4, bonus: float = 8.0) -> None:
        super().__init__(table)
        self.k, self.bonus = k, bonus

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None) -> SimpleNamespace:
        logits = self.table[input_ids].clone()
        k, length = self.k, input_ids.shape[1]
        # keys[:, r]: the k-gram ending at position r + k - 1, as one integer
        keys = sum(input_ids[:, k - 1 - i:length - i] * V**i for i in range(k))
        r = keys.shape[1]
        earlier = torch.ones(r, r, dtype=torch.bool).tril(-1)
        match = (keys[:, :, None] == keys[:, None, :]) & earlier
        latest = torch.where(match, torch.arange(r), -1).max(dim=-1).values  # [b, r]
        following = input_ids.gather(1, (latest + k).clamp(min=0))  # the token after the earlier k-gram
        bonus = torch.zeros_like(logits[:, k - 1:]).scatter_(-1, following[..., None], self.bonus)
        logits[:, k - 1:] += bonus * (latest >= 0)[..., None]
        return SimpleNamespace(logits=logits)


@pytest.fixture(scope="module")
def held_out() -> np.ndarray:
    return markov_stream(60_000, seed=2, plant=True)


@pytest.fixture(scope="module")
def models() -> dict[str, nn.Module]:
    table = bigram_table(markov_stream(100_000, seed=1, plant=False))  # fitted on "training" text only
    return {"oracle": InductionOracle(table), "bigram": Bigram(table)}


def report(model: nn.Module, held_out: np.ndarray, seed: int = 0) -> dict:
    return recall.measure(model, ByteTokenizer(), held_out, seq_len=128, sequences=32, seed=seed)


# -- the key test ----------------------------------------------------------------------------------------------
def test_a_model_that_copies_gains_and_a_model_without_context_does_not(models, held_out):
    oracle, bigram = report(models["oracle"], held_out), report(models["bigram"], held_out)
    assert oracle["span"] == 32 and oracle["distances"] == [32, 64]  # 64 bytes capped at a quarter of 128
    assert [(row["kind"], row["distance"]) for row in oracle["copy"]] == [
        ("text", 32), ("text", 64), ("random", 32), ("random", 64)]
    for row in oracle["copy"]:
        assert row["n"] == 32 and row["gain"] > 1.0 and row["gain_ci"][0] > 0, row
        assert math.isclose(row["gain"], row["first_loss"] - row["second_loss"], abs_tol=1e-9)
    for row in bigram["copy"]:  # the same tokens after the same previous token: no gain but float rounding
        # (a CPU with AVX-512 sums a position's log-softmax in another order: 1.7e-9 nats, its interval excluding 0)
        noise = 1e-7
        assert row["gain"] == pytest.approx(0.0, abs=noise), row
        assert row["gain_ci"][0] <= noise and row["gain_ci"][1] >= -noise, row
        assert row["first_loss"] > 1.0
    # random printable bytes are unpredictable without a copy: far above the text spans for the bigram model
    assert bigram["copy"][2]["first_loss"] > bigram["copy"][0]["first_loss"] + 1.0

    ar_oracle, ar_bigram = oracle["ar_slice"], bigram["ar_slice"]
    assert ar_oracle["ngram"] == 8 and ar_oracle["n"] >= 20 and 0.05 < ar_oracle["hit_share"] < 0.5
    assert ar_oracle["repeat_gain_ci"][0] > 0 and ar_oracle["hit_advantage_ci"][0] > 0, ar_oracle
    assert ar_bigram["repeat_gain"] == pytest.approx(0.0, abs=1e-9)
    assert ar_bigram["hit_advantage_ci"][0] <= 0 <= ar_bigram["hit_advantage_ci"][1], ar_bigram
    json.dumps(oracle)  # JSON-ready as it is


def test_the_copy_sequences_hold_the_span_at_the_lead_and_a_distance_later():
    material = recall.draw_copy_material(np.arange(1000) % 200, ByteTokenizer(), 128, 16, 3, seed=0)
    for distance in recall.copy_distances(128, 16):
        sequences = recall.copy_sequences(material.fillers, material.spans["random"], distance)
        assert sequences.shape == (3, 129)
        assert (sequences[:, 16:32] == material.spans["random"]).all()
        assert (sequences[:, 16 + distance:32 + distance] == material.spans["random"]).all()
        untouched = np.ones(129, bool)
        untouched[16:32] = untouched[16 + distance:32 + distance] = False
        assert (sequences[:, untouched] == material.fillers[:, untouched]).all()


def test_token_losses_score_each_token_from_the_tokens_before_it(models):
    sequences = np.array([[65, 66, 67, 68, 69]])
    losses = recall.token_losses(models["bigram"], sequences, batch_size=1, device=torch.device("cpu"))
    table = models["bigram"].table
    assert losses.shape == (1, 4)
    assert np.allclose(losses[0], [-float(table[a, b]) for a, b in zip(sequences[0, :-1], sequences[0, 1:])])


def test_ar_hits_mark_tokens_that_complete_an_earlier_ngram():
    window = np.array([1, 2, 3, 9, 1, 2, 3, 1, 2, 4])
    hit, source = recall.ar_hits(window, 3)
    assert hit.tolist() == [False] * 6 + [True] + [False] * 3  # only the second "1 2 3" ends a repeated 3-gram
    assert source[6] == 2 and source[:2].tolist() == [-1, -1]
    hit, source = recall.ar_hits(window, 2)
    assert np.flatnonzero(hit).tolist() == [5, 6, 8] and source[8] == 1


# -- determinism -------------------------------------------------------------------------------------------
def test_spans_and_fillers_depend_on_the_seed_alone(held_out, models):
    torch.manual_seed(1)
    first = recall.draw_copy_material(held_out, ByteTokenizer(), 128, 32, 8, seed=5)
    torch.manual_seed(99)
    np.random.seed(99)
    again = recall.draw_copy_material(held_out, ByteTokenizer(), 128, 32, 8, seed=5)
    other = recall.draw_copy_material(held_out, ByteTokenizer(), 128, 32, 8, seed=6)
    assert (first.fillers == again.fillers).all()
    assert all((first.spans[kind] == again.spans[kind]).all() for kind in recall.KINDS)
    assert not (first.fillers == other.fillers).all() and not (first.spans["text"] == other.spans["text"]).all()
    assert np.isin(first.spans["random"], PRINTABLE).all()
    assert not (first.spans["text"] == 256).any()  # a text span stays inside one document

    torch.manual_seed(3)
    a = report(models["oracle"], held_out, seed=5)
    torch.manual_seed(4)
    b = report(models["oracle"], held_out, seed=5)
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert a == b


def test_defaults_follow_the_tokenizer():
    subword = SimpleNamespace(name="some/bpe", vocab_size=1000, eos_id=999)
    assert recall.default_span(ByteTokenizer(), 512) == 64 and recall.default_span(subword, 512) == 32
    assert recall.default_span(ByteTokenizer(), 128) == 32 and recall.default_ngram(ByteTokenizer()) == 8
    assert recall.default_ngram(subword) == 3
    assert recall.copy_distances(512, 64) == [64, 128, 256] and recall.copy_distances(128, 32) == [32, 64]
    assert recall.copy_distances(512, 48) == [64, 128, 256]
    ids = recall.random_span_ids(subword)
    assert ids.size == 999 and 999 not in ids
    assert recall.random_span_ids(ByteTokenizer()).tolist() == list(range(32, 127))


def test_the_fallback_split_is_composer_trains_default():
    from composer.training.config import TrainConfig

    assert loading.TRAIN_VAL_FRACTION == TrainConfig().val_fraction
    assert loading.TRAIN_DATA_SEED == TrainConfig().data_seed


def test_measure_refuses_what_cannot_be_measured(models, held_out):
    from composer.errors import ConfigError

    for options, words in (({"span": 60}, "does not fit"), ({"ngram": 1}, "ngram"),
                           ({"sequences": 1}, "sequences"), ({"seq_len": 2}, "seq_len")):
        with pytest.raises(ConfigError, match=words):
            recall.measure(models["bigram"], ByteTokenizer(), held_out, **{"seq_len": 128, **options})
    with pytest.raises(ConfigError, match="too few"):
        recall.measure(models["bigram"], ByteTokenizer(), held_out[:200], seq_len=128)


# -- composer eval --tasks recall ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A tiny model trained for a few steps by composer train (~10 s, with a short final validation), on the first
    200 documents of the default corpus and a data seed other than the default."""
    out = tmp_path_factory.mktemp("recall") / "run"
    assert main(["train", "--arch", "AM", "--preset", "tiny", "--seq-len", "64", "--batch-size", "8",
                 "--max-documents", "200", "--data-seed", "3", "--tokens", str(8 * 512), "--val-tokens", "4096",
                 "--curve-points", "0", "--wandb", "off", "--out", str(out)]) == 0
    return out


def test_composer_eval_recall_end_to_end(trained_run, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # recall alone needs no lm-eval
    capsys.readouterr()
    assert main(["eval", "--model", str(trained_run / "model"), "--tasks", "recall", "--limit", "8",
                 "--seed", "7"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["kind", "distance", "first", "loss"]
    assert [line.split()[:2] for line in lines[1:5]] == [["text", "16"], ["text", "32"], ["random", "16"],
                                                         ["random", "32"]]
    assert "rest - hits" in out and "first occurrence - repeat" in out and "the run's data split" in out

    written = json.loads((trained_run / "eval.json").read_text())
    result = written["recall"]
    assert written["pattern"] == "AM" and written["tokenizer"]["name"] == "bytes"
    assert result["seq_len"] == 64 and result["seq_len_source"] == "the run's config.json" and result["seed"] == 7
    assert result["data"]["split_seed"] == 3 and result["data"]["max_documents"] == 200
    assert len(result["copy"]) == 4 and all(row["n"] == 8 for row in result["copy"])

    # the held-out text is the run's own validation split: the fingerprint composer train recorded
    summary = json.loads((trained_run / "summary.json").read_text())
    config, _ = loading.held_out_config(trained_run / "model", "bytes")
    identity = DataPipeline(config.replace(seq_len=64)).validation_identity(summary["val_sequences"])
    assert identity["val_fingerprint"] == summary["val_fingerprint"]


def test_composer_eval_recall_on_a_local_text_file(trained_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    paragraphs = [" ".join(rng.choice(words, 40)) for _ in range(400)]  # ~2,000 held-out bytes at 0.02
    (tmp_path / "notes.txt").write_text("\n\n".join(paragraphs))
    out = tmp_path / "out"
    assert main(["eval", "--model", str(trained_run / "model"), "--tasks", "recall", "--data",
                 str(tmp_path / "notes.txt"), "--limit", "4", "--seq-len", "32", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    result = json.loads((out / "eval.json").read_text())["recall"]
    assert printed["recall"] == result and printed["path"] == str(out / "eval.json")
    assert result["data"]["source"] == str(tmp_path / "notes.txt")
    assert result["data"]["split"] == "a split other than the run's" and result["data"]["max_documents"] is None
    assert result["seq_len"] == 32 and result["seq_len_source"] == "given" and result["span"] == 8
    assert result["distances"] == [8, 16] and all(row["n"] == 4 for row in result["copy"])


def test_composer_eval_recall_refuses_bad_input_in_one_line(trained_run, tmp_path, capsys, monkeypatch):
    model = str(trained_run / "model")
    cases = [
        (["--model", model, "--tasks", "recall", "--span", "40"], "does not fit"),
        (["--model", model, "--tasks", "recall", "--ngram", "1"], "ngram"),
        (["--model", model, "--tasks", "recall", "--limit", "1"], "at least 2"),
        (["--model", model, "--tasks", "recall", "--limit", "0.5"], "whole number"),
        (["--model", model, "--tasks", "recall", "--seq-len", "100000"], "max_seq_len"),
        (["--model", model, "--tasks", "recall", "--data", str(tmp_path / "missing.txt")], "missing.txt"),
        (["--model", str(tmp_path / "nowhere"), "--tasks", "recall"], "does not exist"),
        (["--model", str(trained_run), "--tasks", "recall"], "run directory"),
        (["--model", model, "--tasks", " , "], "no task"),
    ]
    capsys.readouterr()
    for argv, words in cases:
        assert main(["eval", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (argv, err)
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # a harness task beside recall still needs lm-eval
    assert main(["eval", "--model", model, "--tasks", "recall,arc_easy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'composer-hnas[eval]'" in err, err


def test_composer_eval_recall_beside_a_harness_task(trained_run, tmp_path, monkeypatch, capsys):
    pytest.importorskip("lm_eval", reason="lm-eval is the [eval] extra (.ci/run installs it)")
    from tests.composer.evaluation.test_downstream import OFFLINE, TASK, write_task

    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    tasks = write_task(tmp_path / "tasks")
    out = tmp_path / "out"
    assert main(["eval", "--model", str(trained_run / "model"), "--tasks", f"{TASK},recall", "--include-path",
                 str(tasks), "--limit", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    written = json.loads((out / "eval.json").read_text())
    assert set(written["tasks"]) == {TASK} and len(written["recall"]["copy"]) == 4
    assert printed.index("acc") < printed.index("random") < printed.index("rest - hits")
