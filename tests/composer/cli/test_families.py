from __future__ import annotations

import json

import pytest
import torch

from composer.accounting import non_embedding_params
from composer.cli import main
from composer.layouts import FAMILIES, jamba
from composer.model import build_model
from composer.presets import get_preset, resolve_architecture


def test_info_jamba_at_1b_is_one_attention_per_eight_mixers_with_moe_in_every_other_ffn(capsys):
    assert main(["info", "jamba", "--preset", "llama-3.2-1b", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    mixers, ffns = info["pattern"][0::2], info["pattern"][1::2]
    assert len(mixers) % 8 == 0 and mixers.count("A") * 8 == len(mixers) and set(mixers) == {"A", "S"}
    assert ffns == "ME" * (len(ffns) // 2)
    # matched to Llama 3.2 1B's non-embedding size in whole periods of 8 Jamba layers: no other depth is nearer
    base = get_preset("llama-3.2-1b").arch
    target = non_embedding_params(base)
    gap = abs(info["non_embedding_params"] - target)
    assert info["n_layers"] % 16 == 0 and info["preset"] == "llama-3.2-1b"
    for n in range(16, 16 * 8, 16):
        assert abs(non_embedding_params(base.with_pattern(jamba(n))) - target) >= gap


def test_a_named_depth_and_bad_specs(capsys):
    arch, widths = resolve_architecture("samba:8", "tiny", "tiny")
    assert arch.pattern == "SMWMSMWM" and widths == "tiny"
    assert main(["info", "jamba:7", "--preset", "tiny"]) == 2
    assert "jamba needs a depth that is a positive multiple of 2" in capsys.readouterr().err
    assert main(["info", "samba:x"]) == 2
    assert "the depth after ':' must be a number of layers" in capsys.readouterr().err
    assert main(["info", "jambo"]) == 2
    assert "a hybrid family (jamba, samba" in capsys.readouterr().err


def test_families_lists_each_with_its_source(capsys):
    assert main(["families", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == list(FAMILIES)
    assert all(row["source"] and row["layout"] for row in rows)
    assert main(["families", "--preset", "tiny"]) == 0
    assert "arXiv 2403.19887" in capsys.readouterr().out


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_builds_and_trains_a_few_steps_at_tiny(name):
    torch.manual_seed(0)
    arch, _ = resolve_architecture(f"{name}:{FAMILIES[name].period}", "tiny", "tiny")
    model = build_model(arch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, arch.vocab_size, (4, 33))
    losses = []
    for _ in range(4):
        logits = model(tokens[:, :-1])
        logits = logits.logits if hasattr(logits, "logits") else logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
