"""Which processor the table's CPU constants describe, and whether that is this machine's.

The ``cpu`` entry of ``constants.json`` is one machine's fit: its peak, bandwidth, per-op cost and efficiencies
were timed on one processor model. They do not carry to another: fitted on 2 AMD EPYC cores, the table predicted a
batch-1 decode on 2 Intel Xeon cores 46-80% too slow for small models and 25% too fast at ``d768``, median error
about 60% (``benchmarks/results/decode_noise-2026-12-07.json``), while a fit on the Intel machine erred 17%. So
the entry names the processor it was fitted on (``processor``: the CPU's model name, family and model as
``/proc/cpuinfo`` gives them, written by ``benchmarks/cost_model.py fit``), and a modeled ``cpu`` figure asked for on another processor comes
with one warning line a process that names the processor it models and the fix, rather than passing for this
machine's.

Why a warning and not a refusal: the entry models a named processor, as ``h200`` models a GPU the user may not
have, and growth to equal cost must rebuild the same model from the same words on any machine (``train
--from-search`` on a GPU box rebuilds what a search on a laptop scored). What the warning stops is reading those
figures as this machine's. ``validate``, which measures this machine against the entry, refuses instead.

``COMPOSER_CPU_MODEL`` stands in for this machine's model name: set it to the entry's processor to model that
CPU from another machine on purpose (the test suite does, so that its figures do not depend on the CI machine).
"""

from __future__ import annotations

import functools
import os
import platform
import sys

CPU_MODEL_ENV = "COMPOSER_CPU_MODEL"
FIT_COMMAND = "python benchmarks/cost_model.py fit --device cpu"


@functools.cache
def detected_cpu_model() -> str:
    """This machine's CPU model name from /proc/cpuinfo (else the platform's processor, else ``cpu``)."""
    return _cpuinfo().get("model name") or platform.processor() or "cpu"


@functools.cache
def detected_processor() -> str:
    """This machine's processor as the table keys it: the model name with its family and model numbers,
    ``AMD EPYC (family 25, model 17)``. A cloud VM's model name can be generic ("AMD EPYC" names every Zen
    generation), the numbers are not."""
    info = _cpuinfo()
    if "cpu family" in info and "model" in info:
        return f"{detected_cpu_model()} (family {info['cpu family']}, model {info['model']})"
    return detected_cpu_model()


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def this_cpu_model() -> str:
    """The processor the cost model takes this machine to be: ``COMPOSER_CPU_MODEL`` if set, else the detected."""
    return os.environ.get(CPU_MODEL_ENV) or detected_processor()


def same_processor(fitted_on: str, here: str) -> bool:
    """Whether an entry fitted on ``fitted_on`` describes ``here``: the same name and numbers, or, for an entry
    written before fits recorded the numbers (the 2026-12-07 table: "AMD EPYC"), the same model name."""
    return fitted_on == here or fitted_on == here.split(" (family ")[0]


def processor_mismatch(device_name: str, fitted_on: str) -> str | None:
    """The one line a warning or a refusal gives when ``device_name``'s constants were fitted on ``fitted_on`` and
    this machine is another processor; None when they match or the entry names no processor (a GPU's, modeled from anywhere)."""
    if not fitted_on:
        return None
    here = this_cpu_model()
    if same_processor(fitted_on, here):
        return None
    return (f"the cost model's {device_name} constants were fitted on {fitted_on!r}, not on this machine's "
            f"{here!r}: its {device_name} figures are that processor's (about 60% off on another); fit this "
            f"machine's with `{FIT_COMMAND}` (about 4 minutes), or set {CPU_MODEL_ENV}={fitted_on!r} to model "
            f"that CPU on purpose")


_warned: set[str] = set()


def warn_if_elsewhere(device_name: str, fitted_on: str) -> None:
    """Print :func:`processor_mismatch`'s line to stderr, once a process for each message."""
    problem = processor_mismatch(device_name, fitted_on)
    if problem and problem not in _warned:
        _warned.add(problem)
        print(f"warning: {problem}", file=sys.stderr, flush=True)
