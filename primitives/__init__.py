"""Interchangeable layer primitives for hybrid architectures.

Each primitive maps ``[batch, seq, d_model]`` to the same shape and owns its initialisation, its analytic
parameter / FLOP / inference-cache accounting and its no-weight-decay parameters (see ``primitives.base``).
"""

from primitives.attention import AttentionConfig, GroupedQueryAttention
from primitives.base import CacheSpec, InitScheme, Primitive
from primitives.mlp import SwiGLU, SwiGLUConfig
from primitives.registry import REGISTRY, PrimitiveRegistry, get_primitive, register_primitive
from primitives.rope import RopeScaling

__all__ = [
    "REGISTRY",
    "AttentionConfig",
    "CacheSpec",
    "GroupedQueryAttention",
    "InitScheme",
    "Primitive",
    "PrimitiveRegistry",
    "RopeScaling",
    "SwiGLU",
    "SwiGLUConfig",
    "get_primitive",
    "register_primitive",
]
