from __future__ import annotations

import pytest

from composer.data import DataConfig, DataError
from composer.errors import ComposerUsageError


def test_defaults_are_offline():
    config = DataConfig()
    assert (config.source, config.tokenizer, config.seq_len, config.streaming) == (None, None, 256, None)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"seq_len": 0}, "seq_len must be an integer >= 1"),
        ({"val_fraction": 1.0}, r"val_fraction \(--val-fraction\) must be the share .* in \[0, 1\)"),
        ({"val_fraction": "0.1"}, "val_fraction must be a number"),
        ({"num_workers": -1}, "num_workers must be an integer >= 0"),
        ({"max_documents": 0}, "max_documents must be an integer >= 1"),
        ({"text_unit": "sentence"}, "text_unit must be one of paragraph, line, document"),
        ({"text_field": ""}, "text_field must be a non-empty column name"),
        ({"source": ""}, "source must be a non-empty string or None"),
        ({"streaming": "yes"}, "streaming must be True, False or None"),
    ],
)
def test_invalid_values_are_data_errors(changes, message):
    with pytest.raises(DataError, match=message):
        DataConfig(**changes)


def test_data_error_is_a_usage_error():
    assert issubclass(DataError, ComposerUsageError)


def test_dict_round_trip_and_unknown_fields():
    config = DataConfig(source="x.jsonl", seq_len=64, seed=3)
    assert DataConfig.from_dict(config.to_dict()) == config
    with pytest.raises(DataError, match=r"unknown data field\(s\) \['seqlen'\]"):
        DataConfig.from_dict({"seqlen": 3})
    with pytest.raises(DataError, match="unknown data field"):
        config.replace(batch=4)
