"""The one table of constants the cost model uses, and where each came from.

``constants.json`` (next to this module) holds, for every device (``cpu``, ``h100``, ``h200``): its peak FLOP/s
and memory bandwidth, the cost of one op or kernel per phase, and each primitive's efficiency (fraction of peak)
per phase; and, shared by all devices, how many ops and kernels each primitive's layer runs per phase. Every
constant names a *source*: an entry of the table's ``sources`` saying what kind of figure it is (``measured``,
``fitted``, ``datasheet`` or ``assumed``), whether it is ``provisional``, and the command, date and results file
(or the datasheet, or the reason for an assumption) behind it. The loader refuses a constant without a known
source, so no figure enters a prediction without saying where it came from.

``benchmarks/cost_model.py fit`` rewrites the ``cpu`` entry and the counts; ``... loo`` the GPUs' training
efficiencies. Nothing else writes the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.accounting import DTYPE_BYTES
from composer.errors import ConfigError
from composer.files import atomic_write_json

TABLE_PATH = Path(__file__).with_name("constants.json")
PHASES = ("train", "prefill", "decode")
SOURCE_KINDS = ("measured", "fitted", "datasheet", "assumed")
OVERHEAD_UNITS = ("ops", "kernels")  # every aten op a layer dispatches (eager CPU) or those that launch work
COUNT_PHASES = (*PHASES, "optimizer")  # the optimizer step's ops over one layer's parameters, for training
COUNT_CHUNKS = (1, 2, 4)  # a chunked scan's counts are measured at these numbers of chunks


@dataclass(frozen=True)
class Constant:
    """One figure of the table and the id of the source it came from."""

    value: float
    source: str


@dataclass(frozen=True)
class Counts:
    """Ops (or kernels) one layer runs in one phase, measured at 1, 2 and 4 chunks of its scan (the same three
    numbers for a layer without chunks). A sequence of ``n`` chunks is interpolated linearly from 2 and 4 (one
    chunk is measured apart: a one-chunk scan skips its state passing)."""

    at_chunks: tuple[float, float, float]

    def at(self, chunks: int) -> float:
        one, two, four = self.at_chunks
        if chunks <= 1:
            return one
        return max(0.0, two + (four - two) / 2 * (chunks - 2))


@dataclass(frozen=True)
class Device:
    """A device's constants: ``peak_flops`` (FLOP/s at ``precision``), ``bandwidth`` (bytes/s), ``op_cost_s``
    (seconds per op or kernel, by phase), ``efficiency`` (phase -> key -> fraction of peak; keys are primitive
    symbols, ``head`` and ``optimizer``), the count each op cost multiplies (``overhead_unit``) and the default
    training shape ``train_shape`` (batch, sequence length)."""

    name: str
    description: str
    precision: str
    threads: int | None
    overhead_unit: str
    train_shape: tuple[int, int]
    peak_flops: Constant
    bandwidth: Constant
    op_cost_s: dict[str, Constant]
    efficiency: dict[str, dict[str, Constant]]

    def efficiency_of(self, phase: str, key: str) -> Constant:
        try:
            return self.efficiency[phase][key]
        except KeyError:
            known = ", ".join(sorted(self.efficiency.get(phase, {})))
            raise ConfigError(f"device {self.name} has no {phase} efficiency for {key!r} (it has: {known}); "
                              f"fit one with benchmarks/cost_model.py") from None


@dataclass(frozen=True)
class Table:
    """The whole file: ``sources`` (id -> what it is), ``counts`` (key -> phase -> unit -> :class:`Counts`),
    ``counts_source`` and ``devices``. ``raw`` is the JSON it was read from (what ``fit`` edits and writes)."""

    sources: dict[str, dict[str, Any]]
    counts: dict[str, dict[str, dict[str, Counts]]]
    counts_source: str
    devices: dict[str, Device]
    raw: dict[str, Any]

    def device(self, name: str) -> Device:
        """The device ``name``; an unknown one is a one-line usage error that names the choices."""
        try:
            return self.devices[name]
        except KeyError:
            raise ConfigError(f"unknown device {name!r}; choose one of: {', '.join(self.devices)}") from None

    def counts_of(self, key: str, phase: str, unit: str) -> Counts:
        try:
            return self.counts[key][phase][unit]
        except KeyError:
            raise ConfigError(f"the cost table has no {phase} {unit} count for {key!r} (it has: "
                              f"{', '.join(self.counts)}); measure it with benchmarks/cost_model.py fit") from None

    def source(self, source_id: str) -> dict[str, Any]:
        return {"id": source_id, **self.sources[source_id]}


def load_table(path: str | Path | None = None) -> Table:
    """Read and check the table (default: the package's ``constants.json``)."""
    path = TABLE_PATH if path is None else Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no cost-model table at {path}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"the cost-model table {path} is not valid JSON: {err}") from None
    return parse_table(raw, str(path))


def parse_table(raw: dict[str, Any], where: str = "the cost-model table") -> Table:
    """A :class:`Table` from its JSON form; every constant must name a source of a known kind."""
    sources = raw.get("sources", {})
    for source_id, source in sources.items():
        if source.get("kind") not in SOURCE_KINDS:
            raise ConfigError(f"{where}: source {source_id!r} has kind {source.get('kind')!r}; "
                              f"choose one of {', '.join(SOURCE_KINDS)}")

    def constant(entry: Any, what: str, positive: bool = False) -> Constant:
        if not isinstance(entry, dict) or "value" not in entry or "source" not in entry:
            raise ConfigError(f"{where}: {what} must be {{\"value\": ..., \"source\": ...}}, got {entry!r}")
        if entry["source"] not in sources:
            raise ConfigError(f"{where}: {what} names source {entry['source']!r}, which the table does not list")
        value = float(entry["value"])
        if not (value > 0 if positive else value >= 0):
            raise ConfigError(f"{where}: {what} must be {'> 0' if positive else '>= 0'}, got {value}")
        return Constant(value, entry["source"])

    counts_raw = raw.get("counts", {})
    counts_source = counts_raw.get("source", "")
    if counts_raw and counts_source not in sources:
        raise ConfigError(f"{where}: the counts name source {counts_source!r}, which the table does not list")
    counts = {
        key: {phase: {unit: Counts(tuple(float(n) for n in values)) for unit, values in units.items()}
              for phase, units in phases.items()}
        for key, phases in counts_raw.get("per_key", {}).items()
    }
    devices = {}
    for name, d in raw.get("devices", {}).items():
        if d.get("overhead_unit") not in OVERHEAD_UNITS:
            raise ConfigError(f"{where}: device {name}'s overhead_unit must be one of {OVERHEAD_UNITS}")
        if d.get("precision") not in DTYPE_BYTES:
            raise ConfigError(f"{where}: device {name}'s precision must be one of {', '.join(DTYPE_BYTES)}")
        devices[name] = Device(
            name=name,
            description=d.get("description", ""),
            precision=d["precision"],
            threads=d.get("threads"),
            overhead_unit=d["overhead_unit"],
            train_shape=tuple(d["train_shape"]),
            peak_flops=constant(d["peak_flops"], f"{name}.peak_flops", positive=True),
            bandwidth=constant(d["bandwidth"], f"{name}.bandwidth", positive=True),
            op_cost_s={phase: constant(v, f"{name}.op_cost_s.{phase}") for phase, v in d["op_cost_s"].items()},
            efficiency={phase: {key: constant(v, f"{name}.efficiency.{phase}.{key}", positive=True)
                                for key, v in keys.items()}
                        for phase, keys in d["efficiency"].items()},
        )
    return Table(sources=sources, counts=counts, counts_source=counts_source, devices=devices, raw=raw)


def write_table(raw: dict[str, Any], path: str | Path | None = None) -> Path:
    """Check ``raw`` parses, then write it atomically (default: the package's ``constants.json``)."""
    parse_table(raw)
    return atomic_write_json(TABLE_PATH if path is None else Path(path), raw)
