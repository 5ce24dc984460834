from __future__ import annotations

import json

import pytest

from composer.config import ArchConfig
from composer.errors import ConfigError, PatternError
from composer.presets import get_preset


def test_pattern_is_canonicalised():
    arch = get_preset("tiny").arch.with_pattern("2A4M")
    assert arch.pattern == "AAMMMM" and arch.n_layers == 6 and arch.counts == {"A": 2, "M": 4}
    assert arch.compact == "AA4M"


@pytest.mark.parametrize("name", ["llama-3.2-1b", "llama-3.1-8b", "tiny"])
def test_dict_round_trip_through_json(name):
    arch = get_preset(name).arch
    assert ArchConfig.from_dict(json.loads(json.dumps(arch.to_dict()))) == arch


def test_unknown_and_missing_fields():
    data = get_preset("tiny").arch.to_dict()
    with pytest.raises(ConfigError, match="unknown architecture field.*'d_modle'"):
        ArchConfig.from_dict({**data, "d_modle": 3})
    del data["d_model"]
    with pytest.raises(ConfigError, match="incomplete architecture config"):
        ArchConfig.from_dict(data)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"d_model": 0}, "d_model must be a positive integer"),
        ({"n_kv_heads": 3}, r"invalid config for primitive A \(attention\): n_heads \(4\) must be a multiple"),
        ({"options": {"Q": {}}}, "options for unknown primitive 'Q'"),
        ({"options": {"M": {"bogus": 1}}},
         r"unknown option 'bogus' for primitive M \(mlp\) in --options; valid: ffn_dim$"),
        ({"rope_scaling": {"factor": 0}}, "invalid rope_scaling"),
    ],
)
def test_invalid_values_raise_config_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        get_preset("tiny").arch.replace(**changes)


def test_bad_pattern_raises_pattern_error():
    with pytest.raises(PatternError):
        get_preset("tiny").arch.with_pattern("AXM")


def test_options_reach_the_primitive_config():
    arch = get_preset("tiny").arch.replace(options={"A": {"backend": "sdpa"}, "M": {"ffn_dim": 128}})
    configs = arch.primitive_configs()
    assert configs["A"].backend == "sdpa" and configs["M"].ffn_dim == 128
