"""Predicted step times: the work of :mod:`composer.costmodel.work` on a device of :mod:`composer.costmodel.table`.

Per unit (a layer of one primitive, the LM head, the optimizer over some parameters)::

    seconds = max(flops / (peak_flops * e), bytes / (bandwidth * e)) + passes * activation_bytes / bandwidth
              + ops * op_cost

with ``e`` the unit's efficiency on that device in that phase (one fraction of peak for both roofs: a fitted
constant that absorbs how far the implementation is from either), ``passes`` the passes over its ``d_model``-wide
activations the unit's kernels make (fitted on the CPU; none on a GPU), ``ops`` the ops (eager CPU) or kernels (GPU)
the unit runs, measured once per primitive, and ``op_cost`` the device's cost of one in that phase. A step is
the sum over its units; nothing overlaps. Training tokens/s and prefill tokens/s are ``batch x length`` over the
step; decode milliseconds per token is one step (one token of every sequence of the batch).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from composer.accounting import DTYPE_BYTES
from composer.config import ArchConfig
from composer.costmodel.table import Constant, Device, Table, load_table
from composer.costmodel.work import Work, step_work
from composer.errors import ConfigError

DECODE_POINT = 4_096
"""The one decode context a modeled figure is read at where no search's decode point is given (``composer info``,
the cost limits modeled on a device, growth to equal cost), within the model's length: :func:`decode_point`."""


def decode_point(max_seq_len: int, context: int = DECODE_POINT) -> int:
    """``context`` (default :data:`DECODE_POINT`) within a model of ``max_seq_len`` positions: the decode step after
    it writes position ``context``, so at most ``max_seq_len - 1`` (as the measured decode points,
    ``composer.evaluation.bench_cost.CostGrid.contexts``, are)."""
    return min(context, max_seq_len - 1)
DEFAULT_BATCHES = (1, 64)


@dataclass(frozen=True)
class UnitTime:
    """One unit's share of a step: per layer ``compute_s``, ``memory_s`` (at its efficiency) and ``overhead_s``
    (its ops times the op cost); ``seconds`` is all ``layers`` of it."""

    key: str
    count_key: str
    layers: int
    flops: float
    bytes: float
    ops: float
    compute_s: float
    memory_s: float
    overhead_s: float
    activation_s: float = 0.0

    @property
    def seconds(self) -> float:
        return self.layers * (max(self.compute_s, self.memory_s) + self.activation_s + self.overhead_s)

    @property
    def bound(self) -> str:
        """What dominates one layer: ``compute``, ``memory`` (weights, cache, activations) or ``overhead``."""
        memory = max(self.memory_s, self.activation_s)
        if self.overhead_s > max(self.compute_s, memory):
            return "overhead"
        return "compute" if self.compute_s >= memory else "memory"


@dataclass(frozen=True)
class Prediction:
    """One predicted step of ``phase`` on ``device``: its ``seconds``, the units it sums, and the constants used
    (name -> :class:`Constant`)."""

    device: str
    phase: str
    batch: int
    length: int
    precision: str
    units: list[UnitTime]
    constants: dict[str, Constant] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(unit.seconds for unit in self.units)

    @property
    def tokens_per_s(self) -> float:
        """Tokens processed per second: ``batch x length`` per step (training, prefill), ``batch`` (decode)."""
        tokens = self.batch if self.phase == "decode" else self.batch * self.length
        return tokens / self.seconds

    @property
    def ms_per_token(self) -> float:
        """Decode: milliseconds per generated token of each sequence (one step)."""
        return 1e3 * self.seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device, "phase": self.phase, "batch": self.batch, "length": self.length,
            "precision": self.precision, "seconds": self.seconds, "tokens_per_s": self.tokens_per_s,
            "units": [{**asdict(u), "seconds": u.seconds, "bound": u.bound} for u in self.units],
            "constants": {name: asdict(c) for name, c in self.constants.items()},
        }


def predict(
    arch: ArchConfig, device: str | Device, phase: str, *, batch: int, length: int, table: Table | None = None
) -> Prediction:
    """One ``phase`` step of ``arch`` on ``device`` (a name of the table or a :class:`Device`); ``length`` as in
    :func:`~composer.costmodel.work.step_work`."""
    table = load_table() if table is None else table
    dev = table.device(device) if isinstance(device, str) else device
    dev.warn_if_elsewhere()
    dtype_bytes = DTYPE_BYTES[dev.precision]
    used: dict[str, Constant] = {f"{dev.name}.peak_flops": dev.peak_flops, f"{dev.name}.bandwidth": dev.bandwidth}
    units = []
    for work in step_work(arch, phase, batch, length, dtype_bytes, dev.activation_bytes(phase)):
        units.append(_unit_time(work, phase, dev, table, used))
    precision = dev.train_precision if phase == "train" and dev.train_precision else dev.precision
    return Prediction(dev.name, phase, batch, length, precision, units, used)


def _unit_time(work: Work, phase: str, dev: Device, table: Table, used: dict[str, Constant]) -> UnitTime:
    eff = dev.efficiency_of(phase, work.key)
    used[f"{dev.name}.efficiency.{phase}.{work.key}"] = eff
    ops, op_cost = 0.0, 0.0
    if work.count_phase is not None:
        try:
            constant = dev.op_cost_s[work.count_phase]
        except KeyError:
            raise ConfigError(f"device {dev.name} has no op cost for {work.count_phase}") from None
        used[f"{dev.name}.op_cost_s.{work.count_phase}"] = constant
        op_cost = constant.value
        if op_cost:
            counts = table.counts_of(work.count_key, work.count_phase, dev.overhead_unit)
            ops = counts.at(work.chunks, work.slices if dev.batch_slices else ())
    activation_s = 0.0
    passes = dev.activation_passes_of(phase, work.key) if work.activation_bytes else None
    if passes is not None:
        used[f"{dev.name}.activation_passes.{phase}.{work.key}"] = passes
        activation_s = passes.value * work.activation_bytes / dev.bandwidth.value
    return UnitTime(
        key=work.key, count_key=work.count_key, layers=work.layers, flops=work.flops, bytes=work.bytes, ops=ops,
        compute_s=work.flops / (dev.peak_flops.value * eff.value),
        memory_s=work.bytes / (dev.bandwidth.value * eff.value),
        overhead_s=ops * op_cost, activation_s=activation_s,
    )


def predict_train(arch: ArchConfig, device: str | Device, *, batch: int | None = None, seq_len: int | None = None,
                  table: Table | None = None) -> Prediction:
    """A training step (forward, backward, clipping and AdamW) at ``batch x seq_len``; each defaults to the
    device's ``train_shape``, the sequence capped by the model's ``max_seq_len``."""
    table = load_table() if table is None else table
    dev = table.device(device) if isinstance(device, str) else device
    default_batch, default_seq = dev.train_shape
    seq_len = min(default_seq, arch.max_seq_len) if seq_len is None else seq_len
    return predict(arch, dev, "train", batch=batch or default_batch, length=seq_len, table=table)


def predict_prefill(arch: ArchConfig, device: str | Device, *, seq_len: int, batch: int = 1,
                    table: Table | None = None) -> Prediction:
    """A ``batch x seq_len`` prompt through the inference cache, logits of its last position."""
    return predict(arch, device, "prefill", batch=batch, length=seq_len, table=table)


def predict_decode(arch: ArchConfig, device: str | Device, *, context: int, batch: int = 1,
                   table: Table | None = None) -> Prediction:
    """One decoding step of ``batch`` sequences whose caches hold ``context`` tokens."""
    return predict(arch, device, "decode", batch=batch, length=context, table=table)


def serving_summary(
    arch: ArchConfig,
    device: str,
    *,
    context: int = DECODE_POINT,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
    train_seq_len: int | None = None,
    table: Table | None = None,
) -> dict[str, Any]:
    """What ``composer info --device`` reports: training tokens/s at the device's training shape, prefill tokens/s
    and decode ms per token at each of ``batches`` after ``context`` tokens (:func:`decode_point`), the
    constants used and their sources. Batch keys are strings (``"1"``, ``"64"``), as JSON has them."""
    table = load_table() if table is None else table
    dev = table.device(device)
    context = decode_point(arch.max_seq_len, context)
    train = predict_train(arch, dev, seq_len=train_seq_len, table=table)
    prefill = {str(b): predict_prefill(arch, dev, seq_len=context, batch=b, table=table) for b in batches}
    decode = {str(b): predict_decode(arch, dev, context=context, batch=b, table=table) for b in batches}
    constants: dict[str, Constant] = {}
    for prediction in (train, *prefill.values(), *decode.values()):
        constants.update(prediction.constants)
    source_ids = sorted({c.source for c in constants.values()} | {table.counts_source} - {""})
    return {
        "device": dev.name,
        "description": dev.description,
        "precision": dev.precision,
        "threads": dev.threads,
        "train_batch": train.batch,
        "train_seq_len": train.length,
        "train_tokens_per_s": train.tokens_per_s,
        "context": context,
        "prefill_tokens_per_s": {b: p.tokens_per_s for b, p in prefill.items()},
        "decode_ms_per_token": {b: p.ms_per_token for b, p in decode.items()},
        "decode_bound": {b: _dominant(p) for b, p in decode.items()},
        "constants": {name: asdict(c) for name, c in sorted(constants.items())},
        "counts_source": table.counts_source,
        "sources": {source_id: table.sources[source_id] for source_id in source_ids},
    }


def _dominant(prediction: Prediction) -> str:
    """Which of compute, memory and overhead takes most of the step's time."""
    totals = {"compute": 0.0, "memory": 0.0, "overhead": 0.0}
    for unit in prediction.units:
        totals[unit.bound] += unit.seconds
    return max(totals, key=totals.get)


__all__ = ["DECODE_POINT", "DEFAULT_BATCHES", "Prediction", "UnitTime", "predict", "predict_decode",
           "predict_prefill", "predict_train", "decode_point", "serving_summary"]
