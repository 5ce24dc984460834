"""composer.costmodel.timing: the one harness every timed figure goes through, its clock and its statistic."""

from __future__ import annotations

import gc

import pytest

from composer.costmodel import timing
from composer.costmodel.timing import clock_for, figure, time_calls


class FakeClock:
    """A clock that advances only when the timed call runs: ``cost`` seconds a call."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls = 0
        self.collector_on: list[bool] = []

    def read(self) -> float:
        return self.now

    def call(self, cost: float):
        def run() -> None:
            self.now += cost
            self.calls += 1
            self.collector_on.append(gc.isenabled())
        return run


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing, "CLOCKS", {"cpu": fake.read, "wall": lambda: 0.0})
    return fake


def test_a_repeat_fills_min_seconds_after_the_warm_call_with_the_collector_off(clock):
    timed = time_calls(clock.call(0.01), 3, warmup=1, min_seconds=0.05, clock="cpu")
    assert timed.calls == 5 and timed.clock == "cpu"  # 0.05 s of 0.01 s calls, sized by the warm call
    assert timed.seconds == pytest.approx([0.01] * 3)  # seconds per call, one value a repeat
    assert clock.calls == 1 + 3 * 5
    assert clock.collector_on == [True] + [False] * 15 and gc.isenabled()


def test_a_call_a_repeat_and_the_callers_warm_call(clock):
    timed = time_calls(clock.call(0.02), 4, warmup=3, clock="cpu")
    assert timed.calls == 1 and clock.calls == 3 + 4 and len(timed.seconds) == 4
    clock.calls = 0
    timed = time_calls(clock.call(0.02), 2, min_seconds=0.1, clock="cpu", first=0.02)  # warm call made already
    assert clock.calls == 2 * 5 and timed.calls == 5


def test_the_clock_is_cpu_time_on_one_cpu_thread_and_wall_elsewhere(clock):
    assert clock_for("cpu", 1) == "cpu"
    assert clock_for("cpu", 2) == "wall"  # several threads' CPU times add up
    assert clock_for("cuda", 1) == "wall"  # the host does not run the kernels
    assert time_calls(clock.call(0.01), 2, clock="wall").seconds == [0.0, 0.0]  # read on the clock it was given
    with pytest.raises(ValueError, match="clock must be one of cpu, wall"):
        time_calls(clock.call(0.01), 1, clock="gpu")


def test_the_device_is_synchronised_around_every_repeat(clock):
    synced = []
    time_calls(clock.call(0.01), 2, min_seconds=0.03, clock="cpu", sync=lambda: synced.append(clock.calls))
    assert synced == [0, 1, 1, 4, 4, 7]  # before and after the warm call and each repeat of 3 calls


def test_the_statistic_is_the_median_with_its_spread():
    assert figure([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "repeats": 3, "spread": 1.0,
                                       "noisy": True, "values": [3.0, 1.0, 2.0]}
    assert not figure([1.0, 1.05, 1.02])["noisy"]  # within NOISY_SPREAD
