"""Training engine: Lightning module, trainer factory, throughput/MFU, atomic checkpoints, parallelism and the
one-writer lock on a run directory (runlock).

Lightning is imported on first use, so ``composer info`` and the model API stay light.
"""

from composer.training.config import TrainConfig

_LAZY = {
    "train": "composer.training.run",
    "build": "composer.training.run",
    "load_pretrained": "composer.interop.model_dir",  # the model directory a run writes
    "latest_checkpoint": "composer.training.checkpoint",
}

__all__ = ["TrainConfig", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
