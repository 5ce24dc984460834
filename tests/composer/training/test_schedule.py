from __future__ import annotations

import pytest

from composer.training.schedule import ScheduleConfig, lr_multiplier


def test_cosine_warms_up_then_decays_to_the_floor():
    f = lr_multiplier(ScheduleConfig("cosine", warmup_steps=10, total_steps=110, min_lr_ratio=0.1))
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.55, abs=0.01)
    assert f(109) == pytest.approx(0.1)
    values = [f(s) for s in range(10, 110)]
    assert values == sorted(values, reverse=True)


def test_wsd_is_flat_then_decays_over_the_last_fraction():
    f = lr_multiplier(ScheduleConfig("wsd", warmup_steps=5, total_steps=100, min_lr_ratio=0.0, decay_fraction=0.2))
    assert [f(s) for s in (5, 50, 79)] == [1.0, 1.0, 1.0]
    assert 0 < f(90) < 1
    assert f(99) == pytest.approx(0.0)
    sqrt = lr_multiplier(ScheduleConfig("wsd", total_steps=100, min_lr_ratio=0.0, decay_shape="1-sqrt"))
    assert sqrt(90) < f(90)


def test_constant_and_validation():
    assert lr_multiplier(ScheduleConfig("constant", warmup_steps=0, total_steps=10))(7) == 1.0
    with pytest.raises(ValueError, match="unknown schedule"):
        ScheduleConfig("linear")
