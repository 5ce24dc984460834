"""What the calibration measures: the keys and shapes the fit times, and the whole models validate holds out
(out of sample by construction: no width and no single layer of the fit).
"""

from __future__ import annotations

from composer.costmodel.calibration.record import RESULTS
from composer.files import read_json_file
from composer.presets import get_preset

# the primitives fit knows, and what it times: each one's residual layer, and the head
PRIMITIVES = "AMSDWE"
KEYS = (*PRIMITIVES, "head")


# -- what fit measures: per width, the shapes of each phase (batch, tokens); decode tokens are the context.
# Training at search-1m is timed at 2,048 tokens a step, the regime models train in (their activations spill the
# core's cache): a 2 x 64 step's activations stayed in cache, so its layers ran faster per token than any model's,
# and the one efficiency it shared with 8 x 256 was too high for both (-33% to -49% in-sample at 8 x 256 on
# 2026-11-29). The head trains at fewer tokens (at a 128K vocabulary its step is 6 x 131M FLOPs a token) and at
# two counts, so that its matmuls (per token) and its embedding gradient (per step) can be told apart.
FIT_SHAPES = {
    "search-1m": {"train": [(8, 256), (16, 128)], "prefill": [(1, 256), (4, 64)], "decode": [(1, 128), (8, 128)],
                  "head_train": [(8, 64), (2, 16)]},
    "llama-350m": {"train": [(1, 256)], "prefill": [(1, 256)], "decode": [(1, 128)],
                   "head_train": [(1, 64), (1, 16)]},
}
QUICK_FIT_SHAPES = {"tiny": {"train": [(2, 64), (1, 32)], "prefill": [(1, 64)], "decode": [(1, 32)],
                             "head_train": [(2, 16)]}}


# -- what validate measures: (preset, pattern, training batch, training sequence, decode/prefill context) ------
# Out of sample by construction (tests/benchmarks/test_cost_model.py asserts it from these lists, and validate
# refuses a table whose fit ran any of them): no pattern is a single layer (the fit runs single layers only), and
# no width (d_model) is one the fit ran (FIT_SHAPES: 128, 1024). Six of each layout class
# (composer.costmodel.classes), so that each class's median and worst rest on more than a few models. The answer
# of the constrained AMSD search stacked to demo-4m (34 layers) and a 73-layer D-heavy stack like its
# llama-3.2-1b growth are the deep ones.
VALIDATION = [
    # A/M-heavy
    ("search-1m:d160", "AMAMAM", 8, 256, 128),
    ("search-1m:d160", "AMWMAM", 8, 256, 128),
    ("demo-4m", "(AM)x8", 16, 128, 128),
    ("demo-4m:d256", "(AMWM)x2", 16, 128, 128),
    ("demo-4m:d256", "AMAMSM", 16, 128, 128),
    ("llama-350m:d768", "AMWMAM", 1, 128, 64),
    # S/D-heavy
    ("search-1m:d160", "SDMMSD", 8, 256, 128),
    ("search-1m:d160", "(S5D)x6 A(S5D)x6", 4, 256, 128),
    ("demo-4m", "(SM)x3 A(SM)x3", 16, 128, 128),
    ("demo-4m", "(S4D)x3 SDA3D (S4D)x2 SDD", 16, 128, 128),
    ("demo-4m:d256", "(SMWM)x2", 16, 128, 128),
    ("llama-350m:d768", "AMSMDM", 1, 128, 64),
]
QUICK_VALIDATION = [("tiny:d96", "AMSDWM", 2, 32, 16), ("tiny:d96", "AMAM", 2, 32, 16)]


# -- what a change of the model is tried on first (``validate --cases development``): the models of the 2026-11-29
# validation at the fit's own widths (search-1m, llama-350m), read from its results; its demo-4m models are left
# out, demo-4m's width being VALIDATION's. Whole models, so they show what a model adds to its single layers, but
# they are not out of sample; VALIDATION is run once, after the fit is final.
DEVELOPMENT_FROM = RESULTS / "cost_model_validation-2026-11-29.json"


def development_cases() -> list[tuple]:
    rows = read_json_file(DEVELOPMENT_FROM, "the 2026-11-29 validation")["rows"]
    fit_widths = {get_preset(preset).arch.d_model for preset in FIT_SHAPES}
    return [(r["preset"], r["pattern"], *r["train_shape"], r["context"]) for r in rows
            if get_preset(r["preset"]).arch.d_model in fit_widths]
