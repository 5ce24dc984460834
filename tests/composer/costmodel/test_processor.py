"""The CPU entry of the cost table names the processor it was fitted on, and a modeled CPU figure on another
processor comes with one warning line naming the fix; validating it there is refused (composer.costmodel.processor)."""

from __future__ import annotations

import dataclasses

import pytest

from composer.costmodel import load_table, predict_decode, processor
from composer.costmodel.processor import CPU_MODEL_ENV, processor_mismatch, same_processor, this_cpu_model
from composer.errors import ConfigError
from composer.presets import get_preset
from search.cost.limits import check_device


@pytest.fixture
def arch():
    return get_preset("demo-4m").arch.with_pattern("AM")


def test_the_committed_cpu_entry_names_its_processor_and_the_suite_stands_in_for_it():
    cpu = load_table().device("cpu")
    assert cpu.processor and cpu.processor in cpu.description
    assert this_cpu_model() == cpu.processor  # tests/conftest.py: figures do not depend on the CI machine


def test_a_cpu_figure_on_another_processor_warns_once_naming_the_fit(monkeypatch, capsys, arch):
    monkeypatch.setattr(processor, "_warned", set())
    here = predict_decode(arch, "cpu", context=128).seconds
    assert capsys.readouterr().err == ""  # the entry's own processor: no warning
    monkeypatch.setenv(CPU_MODEL_ENV, "Some Other CPU 9000")
    assert predict_decode(arch, "cpu", context=128).seconds == here  # the entry's figures, not another's
    assert predict_decode(arch, "cpu", context=256).seconds > 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ") and "Some Other CPU 9000" in err[0], err  # once
    assert "benchmarks/cost_model.py fit --device cpu" in err[0] and CPU_MODEL_ENV in err[0]
    monkeypatch.setattr(processor, "_warned", set())
    check_device("cpu")  # `composer search --cost-device cpu` says it before its first trial
    assert capsys.readouterr().err.strip().splitlines() == err
    check_device("h200")  # a GPU's entry names no processor: modeled from any machine, silently
    assert predict_decode(arch, "h200", context=128).seconds > 0
    assert capsys.readouterr().err == ""


def test_validating_another_processors_fit_here_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv(CPU_MODEL_ENV, "Some Other CPU 9000")
    with pytest.raises(ConfigError) as err:
        load_table().device("cpu").check_here()
    assert "\n" not in str(err.value) and "Some Other CPU 9000" in str(err.value)


def test_the_same_processor_predicts_and_an_entry_without_one_predicts_anywhere(monkeypatch, arch):
    cpu = load_table().device("cpu")
    monkeypatch.setenv(CPU_MODEL_ENV, cpu.processor)
    assert predict_decode(arch, "cpu", context=128).seconds > 0
    monkeypatch.setenv(CPU_MODEL_ENV, "Some Other CPU 9000")
    load_table().device("h200").check_here()
    assert predict_decode(arch, dataclasses.replace(cpu, processor=""), context=128).seconds > 0
    assert processor_mismatch("h200", "") is None


def test_a_processor_is_its_name_family_and_model_and_an_older_entry_matches_by_name():
    """A cloud VM's model name can be generic ("AMD EPYC" for every Zen generation): fits record the family and
    model numbers too; the 2026-12-07 entry, written before they did, matches any processor of its name."""
    here = "AMD EPYC (family 25, model 17)"
    assert same_processor(here, here) and same_processor("AMD EPYC", here)
    assert not same_processor("AMD EPYC (family 25, model 1)", here)
    assert not same_processor("Intel(R) Xeon(R) Processor", here)
