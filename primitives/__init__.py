"""Interchangeable layer primitives for hybrid architectures.

Each primitive maps ``[batch, seq, d_model]`` to the same shape and owns its initialisation, its analytic
parameter / FLOP / inference-cache accounting and its no-weight-decay parameters (see ``primitives.base``).
"""

from primitives.attention import AttentionConfig, GroupedQueryAttention
from primitives.base import CacheSpec, InitScheme, LayerCache, Primitive, Widths
from primitives.gated_deltanet import GatedDeltaNet, GatedDeltaNetConfig
from primitives.mamba2 import Mamba2, Mamba2Config
from primitives.mlp import SwiGLU, SwiGLUConfig
from primitives.moe import MoEConfig, MoESwiGLU
from primitives.registry import REGISTRY, PrimitiveRegistry, get_primitive, register_primitive
from primitives.rope import RopeScaling
from primitives.sliding_window import SlidingWindowAttention, SlidingWindowConfig

__all__ = [
    "REGISTRY",
    "AttentionConfig",
    "CacheSpec",
    "GatedDeltaNet",
    "GatedDeltaNetConfig",
    "GroupedQueryAttention",
    "InitScheme",
    "LayerCache",
    "Mamba2",
    "Mamba2Config",
    "MoEConfig",
    "MoESwiGLU",
    "Primitive",
    "PrimitiveRegistry",
    "RopeScaling",
    "SlidingWindowAttention",
    "SlidingWindowConfig",
    "SwiGLU",
    "SwiGLUConfig",
    "Widths",
    "get_primitive",
    "register_primitive",
]
