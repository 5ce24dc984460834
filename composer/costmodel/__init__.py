"""A cost model: what a layout costs on the device it will train and serve on, without that device.

For an architecture (a pattern at a preset's widths) on a named device (``cpu``, ``h100``, ``h200``) it predicts
training tokens/s, prefill tokens/s and decode milliseconds per token at a batch size after a context. Each
layer's FLOPs and bytes moved per phase come from its primitive's own accounting (``primitives.base.Primitive``:
``flops_per_token``, ``forward_flops_per_token``, ``decode_flops_per_token``, ``weight_bytes``,
``decode_cache_bytes``, ``inference_cache``); the device turns them into seconds through a roofline with one
fitted efficiency per primitive and phase, plus the ops a layer runs times a per-op cost (what dominates a small
model's decode). The constants live in one table (:mod:`composer.costmodel.table`, ``constants.json``), each
naming the measurement, datasheet or assumption it came from; its calibration
(:mod:`composer.costmodel.calibration`, run as ``benchmarks/cost_model.py``) fits and validates them, and nothing
here imports it.

What it is not: a simulator. Nothing overlaps (compute, memory traffic and op overhead add up per unit); one
efficiency per primitive and phase stands for every width and sequence length; op counts are those of this
project's PyTorch paths measured on the CPU, so a fused CUDA kernel (flash-attn, mamba-ssm, fla) or
``torch.compile`` shows up only through the device's fitted or assumed constants.

    from composer.costmodel import predict_train, predict_decode, serving_summary
    predict_train(arch, "h200").tokens_per_s
    predict_decode(arch, "h200", context=4096, batch=64).ms_per_token
"""

from composer.costmodel.classes import LAYOUT_CLASSES, layout_class
from composer.costmodel.fit import (
    Row,
    design_row,
    error_summary,
    fit_nonnegative,
    predicted_s,
    relative_error,
)
from composer.costmodel.predict import (
    DECODE_POINT,
    DEFAULT_BATCHES,
    Prediction,
    UnitTime,
    decode_point,
    predict,
    predict_decode,
    predict_prefill,
    predict_train,
    serving_summary,
)
from composer.costmodel.table import (
    TABLE_PATH,
    Constant,
    Counts,
    Device,
    Table,
    load_table,
    parse_table,
    write_table,
)
from composer.costmodel.work import OPTIMIZER_BYTES_PER_PARAM, Work, step_work


def device_names() -> list[str]:
    """The devices the table has constants for."""
    return list(load_table().devices)


__all__ = [
    "DECODE_POINT", "DEFAULT_BATCHES", "LAYOUT_CLASSES", "OPTIMIZER_BYTES_PER_PARAM", "TABLE_PATH", "Constant",
    "Counts", "Device", "Prediction", "Row", "Table", "UnitTime", "Work", "design_row", "device_names",
    "error_summary", "fit_nonnegative", "layout_class", "load_table", "parse_table", "predict", "predict_decode",
    "predict_prefill", "predict_train", "predicted_s", "relative_error", "serving_summary", "step_work",
    "decode_point",
    "write_table",
]
