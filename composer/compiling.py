"""What ``torch.compile`` needs from the process around a compiled call, held to that call.

Why one place: a model's compiled layers (``composer.training.parallelize.apply_compile``) and its compiled decode
step (``composer.inference.DecodeStep``) each need dynamo's recompile limit above its default of 8 (one cache
entry per primitive type, grad mode and input variant; on an H200 ``(DMAM)x4`` at 1B widths hit it) but only while
they may compile: the process's own limit governs every other compiled function (a search worker's cost
measurement, a user's code) and is left as it was.
"""

from __future__ import annotations

import contextlib

import torch


def recompile_limit_at_least(limit: int) -> contextlib.AbstractContextManager:
    """Dynamo's recompile limit at least ``limit`` inside the block, restored after it; nothing is patched where the
    process's limit is already that high (a patch costs ~10 us, a decode step at batch 1 ~100 us on a GPU)."""
    if torch._dynamo.config.recompile_limit >= limit:
        return contextlib.nullcontext()
    return torch._dynamo.config.patch(recompile_limit=limit)


__all__ = ["recompile_limit_at_least"]
