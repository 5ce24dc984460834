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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.accounting import DTYPE_BYTES
from composer.costmodel.processor import processor_mismatch, warn_if_elsewhere
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


def _at_chunks(at_chunks: tuple[float, float, float], chunks: int) -> float:
    one, two, four = at_chunks
    if chunks <= 1:
        return one
    return max(0.0, two + (four - two) / 2 * (chunks - 2))


@dataclass(frozen=True)
class Counts:
    """Ops (or kernels) one layer runs in one phase, measured at 1, 2 and 4 chunks of its scan (the same three
    numbers for a layer without chunks), with the whole batch in one slice. A sequence of ``n`` chunks is
    interpolated linearly from 2 and 4 (one chunk is measured apart: a one-chunk scan skips its state passing).

    ``per_slice``: for each kernel the layer's CPU path runs a slice of the batch at a time (``short_conv``,
    ``ssd_scan``), the ops each further slice adds (at 1, 2 and 4 chunks). A batch of 16 sequences whose scan runs
    in 4 slices runs the scan's ops 4 times: counted at one slice, the op term of an S layer did not grow with
    the batch while its kernels' did."""

    at_chunks: tuple[float, float, float]
    per_slice: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    def at(self, chunks: int, slices: Iterable[tuple[str, int]] = ()) -> float:
        """The count at ``chunks`` chunks with ``slices`` ((kernel, number of slices) pairs, ``Work.slices``); a
        kernel this count has no per-slice figure for adds nothing."""
        total = _at_chunks(self.at_chunks, chunks)
        for kernel, n in slices:
            if kernel in self.per_slice and n > 1:
                total += (n - 1) * _at_chunks(self.per_slice[kernel], chunks)
        return total


@dataclass(frozen=True)
class Device:
    """A device's constants: ``peak_flops`` (FLOP/s at ``precision``), ``bandwidth`` (bytes/s), ``op_cost_s``
    (seconds per op or kernel, by phase), ``efficiency`` (phase -> key -> fraction of peak; keys are primitive
    symbols, ``head`` and ``optimizer``), ``activation_passes`` (phase -> key -> passes over a layer's
    ``d_model``-wide activations, :mod:`composer.costmodel.work`), the count each op cost multiplies
    (``overhead_unit``), the default training shape ``train_shape`` (batch, sequence length), the precision
    training runs in there (``train_precision``: ``bf16`` is autocast over ``precision``'s weights, the CPU's
    where it has native bf16) and whether it runs the CPU kernels that slice the batch (``batch_slices``: their op
    counts grow per slice). ``processor``: the CPU model a CPU entry was fitted on (empty for a GPU's, modeled from
    any machine); on another processor its figures are that processor's (:mod:`composer.costmodel.processor`):
    :meth:`warn_if_elsewhere` says so once, :meth:`check_here` refuses (what measures this machine against it)."""

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
    train_precision: str = ""
    batch_slices: bool = False
    activation_passes: dict[str, dict[str, Constant]] = field(default_factory=dict)
    processor: str = ""

    def warn_if_elsewhere(self) -> None:
        """One warning line a process when this entry was fitted on another processor than this machine's."""
        warn_if_elsewhere(self.name, self.processor)

    def check_here(self) -> None:
        """A one-line usage error when this entry was fitted on another processor than this machine's: for what
        compares this machine with the entry (``validate``), where the gap would read as the fit's error."""
        problem = processor_mismatch(self.name, self.processor)
        if problem:
            raise ConfigError(problem)

    def activation_passes_of(self, phase: str, key: str) -> Constant | None:
        """How many ``d_model``-wide passes over its tokens a ``key`` layer makes in ``phase`` (fitted where the
        device's entry has them, the CPU's; None elsewhere: a GPU's fitted efficiency absorbs them)."""
        return self.activation_passes.get(phase, {}).get(key)

    def activation_bytes(self, phase: str) -> int:
        """Bytes of an activation in ``phase``: the training precision's in training, else the weights'."""
        return DTYPE_BYTES[self.train_precision or self.precision if phase == "train" else self.precision]

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
    def counts_of_phase(units: dict[str, Any]) -> dict[str, Counts]:
        per_slice = units.get("per_slice", {})
        return {unit: Counts(tuple(float(n) for n in values),
                             {kernel: tuple(float(n) for n in by_unit[unit]) for kernel, by_unit in per_slice.items()})
                for unit, values in units.items() if unit != "per_slice"}

    counts = {key: {phase: counts_of_phase(units) for phase, units in phases.items()}
              for key, phases in counts_raw.get("per_key", {}).items()}
    devices = {}
    for name, d in raw.get("devices", {}).items():
        if d.get("overhead_unit") not in OVERHEAD_UNITS:
            raise ConfigError(f"{where}: device {name}'s overhead_unit must be one of {OVERHEAD_UNITS}")
        for field_name in ("precision", "train_precision"):
            if d.get(field_name, d.get("precision")) not in DTYPE_BYTES:
                raise ConfigError(f"{where}: device {name}'s {field_name} must be one of {', '.join(DTYPE_BYTES)}")
        devices[name] = Device(
            name=name,
            description=d.get("description", ""),
            precision=d["precision"],
            train_precision=d.get("train_precision", d["precision"]),
            batch_slices=bool(d.get("batch_slices", False)),
            processor=d.get("processor", ""),
            activation_passes={phase: {key: constant(v, f"{name}.activation_passes.{phase}.{key}")
                                       for key, v in keys.items()}
                               for phase, keys in d.get("activation_passes", {}).items()},
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


def constants_digest(raw: dict[str, Any], device: str) -> str:
    """A short hash of everything a prediction on ``device`` reads from the table (its entry, the shared counts
    and the sources they name). ``fit`` records it after writing the constants and ``validate`` records the one it
    predicted with: equal digests show that the validation checked the fit as written, with no refit in
    between."""
    import hashlib

    entry = {"device": raw["devices"][device], "counts": raw.get("counts", {})}
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]


def write_table(raw: dict[str, Any], path: str | Path | None = None) -> Path:
    """Check ``raw`` parses, then write it atomically (default: the package's ``constants.json``)."""
    parse_table(raw)
    return atomic_write_json(TABLE_PATH if path is None else Path(path), raw)
