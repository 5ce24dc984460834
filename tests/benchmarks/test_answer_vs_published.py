"""benchmarks/answer_vs_published.py: a new answer paired per seed with stored runs, only under one protocol."""

from __future__ import annotations

import copy
import json

import pytest


@pytest.fixture
def avp(load_benchmark):
    return load_benchmark("answer_vs_published")


def comparison(rows: dict[str, dict[int, float]], fingerprint: str = "abc", tokens: int = 499712) -> dict:
    models = [{"model": name, "pattern": name.upper(), "val_losses": {str(s): v for s, v in losses.items()},
               "val_loss": sum(losses.values()) / len(losses), "tokens": tokens, "chosen_lr": 1e-3}
              for name, losses in rows.items()]
    return {"seeds": [0, 1, 2], "validation": {"val_fingerprint": fingerprint, "val_tokens": 65536},
            "lr_sweep": {"rates": [5e-4, 1e-3], "fraction": 0.25}, "models": models}


STORED = comparison({"composite": {0: 1.30, 1: 1.31, 2: 1.32}, "samba": {0: 1.35, 1: 1.37, 2: 1.36},
                     "llama": {0: 1.70, 1: 1.72, 2: 1.74}})


def test_the_answer_is_paired_seed_by_seed_with_every_stored_model(avp):
    new = comparison({"composite": {0: 1.34, 1: 1.35, 2: 1.36}})
    report = avp.pair(new, {"comparison": STORED}, label="default")
    rows = {row["model"]: row["diff"] for row in report["against"]}
    assert set(rows) == {"stored composite", "samba", "llama"}
    assert rows["samba"]["differences"] == pytest.approx([-0.01, -0.02, 0.0])
    assert rows["samba"]["verdict"] == "within noise"
    assert rows["llama"]["mean"] == pytest.approx(-0.37) and rows["llama"]["verdict"] == "lower"
    assert rows["stored composite"]["differences"] == pytest.approx([0.04, 0.04, 0.04])
    assert [row["model"] for row in report["against"]] == ["stored composite", "samba", "llama"]  # best first


@pytest.mark.parametrize("change, message", [
    (lambda c: c["validation"].update(val_fingerprint="other"), "validation tokens differ"),
    (lambda c: c.update(lr_sweep={"rates": [1e-3], "fraction": 0.25}), "rate sweeps differ"),
    (lambda c: c.update(seeds=[7]), "no common seeds"),
    (lambda c: c["models"][0].update(tokens=250_000), "trained {'tokens': 250000}"),
])
def test_a_different_protocol_is_refused_with_its_reason(avp, change, message, tmp_path, capsys):
    new = comparison({"composite": {0: 1.34, 1: 1.35, 2: 1.36}})
    change(new)
    with pytest.raises(avp.ProtocolMismatch, match=message.replace("{", r"\{").replace("}", r"\}")):
        avp.pair(new, copy.deepcopy(STORED))
    (tmp_path / "new.json").write_text(json.dumps(new))
    (tmp_path / "stored.json").write_text(json.dumps(STORED))
    assert avp.main([str(tmp_path / "new.json"), "--families", str(tmp_path / "stored.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_stored_results_reproduce_their_own_paired_differences(avp):
    """The halving answer paired with its own stored comparison gives the docs' -0.036 against Samba."""
    stored = json.loads(avp.DEFAULT_FAMILIES.read_text())
    report = avp.pair(stored, stored)
    samba = next(row for row in report["against"] if row["model"] == "samba")
    assert round(samba["diff"]["mean"], 3) == -0.036
    assert [round(x, 3) for x in samba["diff"]["ci"]] == [-0.046, -0.026]
