"""``[AS]``, ``[WS]``, ``[AD]``, ...: a parallel ("hybrid-head") layer, two or more primitives reading the same input.

Hymba (arXiv 2411.13676) and Falcon-H1 run attention heads and SSM heads side by side in one layer instead of
stacking them: attention gives high-resolution recall, the SSM a summary of the whole context. Hymba's fusion is
``Y = beta_1 * norm(attn(X)) + beta_2 * norm(ssm(X))``: each branch's output is normalised (so neither branch
dominates by scale) and the branches are mixed with learned per-channel scales.

Here each branch is a whole primitive (its own input and output projections), its output goes through an RMSNorm
whose weight *is* the per-channel scale ``beta_i``, and the branches are summed. ``beta_i`` starts at ``1 / n``
(the branches averaged, as in Hymba's released code, whose two norms start at 1 and are averaged). Hymba applies
one shared output projection after the fusion; here each branch keeps its own, which costs ``d_model^2`` per extra
branch but keeps every primitive unchanged, so any two primitives can be paired.

Accounting follows from the branches: parameters are theirs plus one ``beta`` vector per branch; FLOPs are their
sum; the inference cache is the attention branch's KV cache (a parallel layer holds at most one attention
primitive, ``composer.pattern``) plus every branch's fixed state. The classes are made on demand by the registry
(``REGISTRY.get("[AS]")``), one per branch combination.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from primitives.base import CacheSpec, InitScheme, LayerCache, Primitive


@dataclass(frozen=True)
class ParallelConfig:
    """The branches' own configs (in token order) and the width and epsilon of the output norms."""

    branches: tuple[Any, ...]
    d_model: int
    norm_eps: float = 1e-5


@dataclass
class ParallelCache(LayerCache):
    """Each branch's inference cache (``None`` for a stateless branch)."""

    branches: tuple[LayerCache | None, ...]

    def tensors(self) -> list[torch.Tensor]:
        return [t for cache in self.branches if cache is not None for t in cache.tensors()]


class ParallelPrimitive(Primitive):
    """Base of the generated classes; ``branch_classes`` holds the primitives side by side, in token order."""

    branch_classes: tuple[type[Primitive], ...] = ()
    Config = ParallelConfig
    description = "parallel layer: branches on the same input, each normalised, scaled per channel and summed"

    def __init__(self, config: ParallelConfig) -> None:
        super().__init__(config)
        self.branches = nn.ModuleList(cls(c) for cls, c in zip(self.branch_classes, config.branches, strict=True))
        # the output norm of each branch; its weight is the branch's per-channel scale beta
        self.scales = nn.ModuleList(nn.RMSNorm(config.d_model, eps=config.norm_eps) for _ in self.branch_classes)
        if any(hasattr(branch, "aux_loss") for branch in self.branches):
            self.aux_loss: torch.Tensor | None = None  # e.g. an MoE branch's load balancing (ComposerModel sums)

    @classmethod
    def config_from_arch(cls, arch) -> ParallelConfig:
        branches = tuple(branch.config_from_arch(arch) for branch in cls.branch_classes)
        return ParallelConfig(branches, arch.d_model, arch.norm_eps)

    def reset_parameters(self, init: InitScheme) -> None:
        for branch, scale in zip(self.branches, self.scales, strict=True):
            branch.reset_parameters(init)
            nn.init.constant_(scale.weight, 1.0 / len(self.branches))

    def no_weight_decay(self) -> set[str]:
        names = {f"scales.{i}.weight" for i in range(len(self.scales))}
        for i, branch in enumerate(self.branches):
            names.update(f"branches.{i}.{name}" for name in branch.no_weight_decay())
        return names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = sum(scale(branch(x)) for branch, scale in zip(self.branches, self.scales, strict=True))
        self._collect_aux_loss()
        return out

    def _collect_aux_loss(self) -> None:
        if hasattr(self, "aux_loss"):
            terms = [b.aux_loss for b in self.branches if getattr(b, "aux_loss", None) is not None]
            self.aux_loss = torch.stack(terms).sum() if terms else None

    # -- analytic accounting ------------------------------------------------------------------------------
    @classmethod
    def param_count(cls, config: ParallelConfig) -> int:
        return sum(b.param_count(c) for b, c in cls._pairs(config)) + len(cls.branch_classes) * config.d_model

    @classmethod
    def active_param_count(cls, config: ParallelConfig) -> int:
        return sum(b.active_param_count(c) for b, c in cls._pairs(config)) + len(cls.branch_classes) * config.d_model

    @classmethod
    def flops_per_token(cls, config: ParallelConfig, seq_len: int) -> int:
        return sum(b.flops_per_token(c, seq_len) for b, c in cls._pairs(config))

    @classmethod
    def inference_cache(cls, config: ParallelConfig, dtype_bytes: int = 2) -> CacheSpec:
        specs = [b.inference_cache(c, dtype_bytes) for b, c in cls._pairs(config)]
        growing = [spec for spec in specs if spec.bytes_per_token]  # at most one: the attention branch
        return CacheSpec(bytes_per_token=sum(spec.bytes_per_token for spec in growing),
                         fixed_bytes=sum(spec.fixed_bytes for spec in specs),
                         window=growing[0].window if growing else None)

    @classmethod
    def forward_flops_per_token(cls, config: ParallelConfig, seq_len: int) -> int:
        return sum(b.forward_flops_per_token(c, seq_len) for b, c in cls._pairs(config))

    @classmethod
    def decode_flops_per_token(cls, config: ParallelConfig, context: int) -> int:
        return sum(b.decode_flops_per_token(c, context) for b, c in cls._pairs(config))

    @classmethod
    def weight_bytes(cls, config: ParallelConfig, dtype_bytes: int = 2, tokens: int | None = None) -> int:
        scales = len(cls.branch_classes) * config.d_model * dtype_bytes
        return sum(b.weight_bytes(c, dtype_bytes, tokens) for b, c in cls._pairs(config)) + scales

    @classmethod
    def decode_cache_bytes(cls, config: ParallelConfig, context: int, dtype_bytes: int = 2) -> int:
        return sum(b.decode_cache_bytes(c, context, dtype_bytes) for b, c in cls._pairs(config))

    @classmethod
    def _pairs(cls, config: ParallelConfig):
        return zip(cls.branch_classes, config.branches, strict=True)

    # -- incremental decoding -----------------------------------------------------------------------------
    def init_cache(self, batch: int, max_len: int, device=None, dtype=None) -> ParallelCache:
        return ParallelCache(tuple(b.init_cache(batch, max_len, device, dtype) for b in self.branches))

    def forward_cached(self, x: torch.Tensor, cache: LayerCache | None, start_pos: int) -> torch.Tensor:
        out = sum(scale(branch.forward_cached(x, branch_cache, start_pos))
                  for branch, scale, branch_cache in self._with_caches(cache))
        self._collect_aux_loss()
        return out

    def decode_step(self, x: torch.Tensor, cache: LayerCache | None, pos: torch.Tensor) -> torch.Tensor:
        return sum(scale(branch.decode_step(x, branch_cache, pos))
                   for branch, scale, branch_cache in self._with_caches(cache))

    def _with_caches(self, cache: LayerCache | None):
        """``(branch, scale, branch's cache)`` triples of a decoding call."""
        if not isinstance(cache, ParallelCache):
            raise TypeError(f"{self.symbol} decodes with the ParallelCache its init_cache returns, got "
                            f"{type(cache).__name__}")
        return zip(self.branches, self.scales, cache.branches, strict=True)


_CLASSES: dict[tuple[type[Primitive], ...], type[ParallelPrimitive]] = {}


def parallel_primitive(token: str, branch_classes: tuple[type[Primitive], ...]) -> type[ParallelPrimitive]:
    """The class of the parallel layer ``token`` (e.g. ``"[AS]"``) over ``branch_classes``, made once."""
    if branch_classes not in _CLASSES:
        _CLASSES[branch_classes] = type(
            f"Parallel{''.join(cls.__name__ for cls in branch_classes)}", (ParallelPrimitive,),
            {"symbol": token, "name": "parallel(" + "+".join(cls.name for cls in branch_classes) + ")",
             "branch_classes": branch_classes, "__doc__": f"{token}: " + ParallelPrimitive.description},
        )
    return _CLASSES[branch_classes]


__all__ = ["ParallelCache", "ParallelConfig", "ParallelPrimitive", "parallel_primitive"]
