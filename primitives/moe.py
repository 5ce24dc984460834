"""``E``: mixture-of-experts SwiGLU MLP with top-k token-choice routing (Mixtral / Switch Transformer style).

A bias-free linear router scores ``n_experts`` SwiGLU experts per token; each token goes to its ``top_k`` best
experts and their outputs are summed, weighted by the router probabilities (renormalised over the chosen experts
when ``norm_topk_prob``, as in Mixtral). There is no capacity limit and no token dropping, so every token is
processed exactly ``top_k`` times and the layer is causal (a token's output depends on that token only).

Options (``arch.options["E"]``):

* ``n_experts`` (8) and ``top_k`` (2): Mixtral's 8 experts, 2 active.
* ``expert_ffn_dim``: default ``arch.ffn_dim // top_k``, so the *active* expert FLOPs per token equal ``M``'s and
  a search trades ``M`` against ``E`` at equal compute: ``E`` then holds ``n_experts / top_k`` (4x) the expert
  parameters of ``M``. Set ``expert_ffn_dim = arch.ffn_dim`` for Mixtral's "every expert is a full dense FFN"
  (``top_k``x the compute of ``M``).
* ``aux_loss_coef`` (0.01, Switch Transformer's value): load-balancing loss ``n_experts * sum_i f_i * P_i`` where
  ``f_i`` is the share of the ``tokens * top_k`` routing assignments that go to expert ``i`` (no gradient) and
  ``P_i`` the mean router probability of expert ``i`` over the tokens. With ``f`` normalised to sum to 1 a
  perfectly balanced router scores exactly 1 for any ``top_k``; Hugging Face's Mixtral loss omits the
  ``1 / top_k`` and scores ``top_k``, so its coefficient is ``top_k`` times ours.
* ``z_loss_coef`` (0): ST-MoE's router z-loss ``mean(logsumexp(logits)^2)``, keeps router logits small (ST-MoE
  uses 1e-3).
* ``norm_topk_prob`` (True): renormalise the chosen experts' probabilities to sum to 1 (Mixtral); False keeps the
  raw softmax probabilities (Qwen-MoE's default, Switch). ``top_k=1`` needs False, else every weight is 1 and the
  router gets no gradient from the output.

The auxiliary loss (already multiplied by its coefficients) is stored as ``self.aux_loss`` by every forward;
:class:`composer.model.ComposerModel` adds the layers' values to the training loss. ``f`` and ``P`` are statistics of
the tokens of one forward (one micro-batch on one rank, as in Mixtral); they are not all-reduced across
data-parallel ranks, so 2 ranks x 4 sequences train like one process with 2 accumulated micro-batches of 4, not
like one batch of 8. Padding tokens are routed and counted like any other token (the primitive sees no targets).

Dispatch sorts the ``tokens * top_k`` assignments by expert and runs one matmul pair per expert on a contiguous
slice (no per-token Python loop); outputs are un-sorted with ``index_copy`` and summed per token with a reshape,
which is deterministic on CUDA, unlike ``index_add_``'s atomics. A decoding step
(:meth:`~MoESwiGLU.decode_step`) dispatches the same way when run eagerly, and gathers each token's experts'
weights only where it is traced into a graph (static shapes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from primitives.base import InitScheme, Primitive
from primitives.mlp import swiglu


def _in_graph(x: torch.Tensor) -> bool:
    """Whether ``x``'s step is being traced into a graph (``torch.compile``, or CUDA graph capture), where shapes
    must be static and nothing may synchronise with the host."""
    return torch.compiler.is_compiling() or (x.is_cuda and torch.cuda.is_current_stream_capturing())


@dataclass(frozen=True)
class MoEConfig:
    d_model: int
    expert_ffn_dim: int
    n_experts: int = 8
    top_k: int = 2
    aux_loss_coef: float = 0.01
    z_loss_coef: float = 0.0
    norm_topk_prob: bool = True

    def __post_init__(self) -> None:
        for name in ("d_model", "expert_ffn_dim", "n_experts", "top_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"MoE {name} must be a positive integer, got {value!r}")
        if self.top_k > self.n_experts:
            raise ValueError(f"MoE top_k ({self.top_k}) cannot exceed n_experts ({self.n_experts})")
        if not (self.aux_loss_coef >= 0 and self.z_loss_coef >= 0):
            raise ValueError(
                f"MoE aux_loss_coef and z_loss_coef must be >= 0, got {self.aux_loss_coef}, {self.z_loss_coef}"
            )
        if self.top_k == 1 and self.norm_topk_prob:
            raise ValueError(
                "MoE top_k=1 with norm_topk_prob=True gives every token weight 1 and the router no gradient "
                "from the output; set norm_topk_prob: false (Switch Transformer)"
            )

    @classmethod
    def from_arch(cls, arch, **options) -> MoEConfig:
        top_k = options.get("top_k", cls.top_k)
        if "expert_ffn_dim" not in options and isinstance(top_k, int) and top_k > 0:
            options["expert_ffn_dim"] = max(1, arch.ffn_dim // top_k)
        expert_ffn_dim = options.pop("expert_ffn_dim", arch.ffn_dim)
        return cls(d_model=arch.d_model, expert_ffn_dim=expert_ffn_dim, **options)


class MoESwiGLU(Primitive):
    """Top-k routed SwiGLU experts; see the module docstring for options, the auxiliary loss and dispatch."""

    symbol = "E"
    name = "moe"
    Config = MoEConfig
    description = "mixture-of-experts SwiGLU MLP (top-k routing, load-balancing loss)"

    def __init__(self, config: MoEConfig) -> None:
        super().__init__(config)
        c = config
        self.router = nn.Linear(c.d_model, c.n_experts, bias=False)
        # Experts stacked along dim 0 (one tensor each, so FSDP shards and AdamW steps them as one parameter),
        # in nn.Linear's [out, in] layout; gate (w1) and up (w3) fused as in primitives/mlp.py.
        self.w13 = nn.Parameter(torch.empty(c.n_experts, 2 * c.expert_ffn_dim, c.d_model))
        self.w2 = nn.Parameter(torch.empty(c.n_experts, c.d_model, c.expert_ffn_dim))
        self.aux_loss: torch.Tensor | None = None
        # usable on its own, like nn.Linear; the model re-initialises it with its own scheme
        if not self.w13.is_meta:
            self.reset_parameters(InitScheme())

    def reset_parameters(self, init: InitScheme) -> None:
        # Router: Switch Transformer's std sqrt(0.1 / fan_in). With unit-RMS (normed) inputs the logits start
        # with std ~0.3 at any width: routing is near-uniform at first, so no expert starves early on.
        nn.init.normal_(self.router.weight, std=math.sqrt(0.1 / self.config.d_model))
        # Experts exactly like M: inputs at std, the projection into the residual stream at the depth-scaled std.
        nn.init.normal_(self.w13, std=init.std)
        nn.init.normal_(self.w2, std=init.out_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        tokens = x.reshape(-1, c.d_model)
        logits = self.router(tokens)
        probs = logits.float().softmax(dim=-1)
        weights, experts = self._route(probs)
        counts = torch.bincount(experts.flatten(), minlength=c.n_experts)
        self.aux_loss = self._aux_loss(logits, probs, counts)
        return self._dispatch(tokens, weights, experts, counts).view_as(x)

    def _dispatch(
        self, tokens: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor, counts: torch.Tensor
    ) -> torch.Tensor:
        """``sum_j weights[t, j] * expert_{experts[t, j]}(tokens[t])`` for every token ``t``."""
        n_tokens, top_k = experts.shape
        order = experts.flatten().argsort(stable=True)  # assignment a belongs to token a // top_k
        routed = tokens[order // top_k]  # [tokens * top_k, d_model], grouped by expert
        outputs = []
        # unbind, not self.w13[e]: each indexing's backward would materialise a full-size zero gradient per expert
        for w13, w2, rows in zip(self.w13.unbind(0), self.w2.unbind(0), routed.split(counts.tolist())):
            if rows.shape[0]:
                outputs.append(F.linear(swiglu(F.linear(rows, w13)), w2))
        grouped = torch.cat(outputs)
        # undo the sort (order is a permutation: every row is written)
        per_assignment = torch.empty_like(grouped).index_copy_(0, order, grouped)
        per_assignment = per_assignment.view(n_tokens, top_k, -1) * weights.to(grouped.dtype).unsqueeze(-1)
        return per_assignment.sum(dim=1)

    def decode_step(self, x: torch.Tensor, cache: None, pos: torch.Tensor) -> torch.Tensor:
        """The layer on a decoding step's tokens. Run eagerly, the step dispatches as :meth:`forward` does: each
        expert's weights are a view of the stacked tensor, applied to the tokens routed to it, so nothing is copied
        (gathering ``w13[experts]`` copied ``top_k`` experts' weights per token, every step: at batch 1 three times
        the weight traffic of reading them). Traced into a graph (``torch.compile``, or captured as a CUDA graph),
        shapes must be static and the host may not read the routing, so each token's ``top_k`` experts' weights
        are gathered and applied by batched matmuls there (gpt-fast's MoE decode). No auxiliary loss: decoding
        does not train."""
        c = self.config
        tokens = x.reshape(-1, c.d_model)
        weights, experts = self._route(self.router(tokens).float().softmax(dim=-1))
        if not _in_graph(tokens):
            counts = torch.bincount(experts.flatten(), minlength=c.n_experts)
            return self._dispatch(tokens, weights, experts, counts).view_as(x)
        # products summed over the last dim, not ``w[experts] @ x``: Inductor fuses the expert index into the
        # reduction's loads, so no expert's weights are copied; a batched matmul on gathered weights is lowered
        # that way only where its decomposition heuristic says so (CPU at batch 1), else the gather is materialised
        hidden = swiglu((self.w13[experts] * tokens[:, None, None, :]).sum(-1))  # [tokens, top_k, 2 ffn]
        out = (self.w2[experts] * hidden[:, :, None, :]).sum(-1)  # [tokens, top_k, d_model]
        return (out * weights.to(out.dtype).unsqueeze(-1)).sum(dim=1).view_as(x)

    def _route(self, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's ``top_k`` experts (best first) and their weights, from the router's probabilities."""
        weights, experts = probs.topk(self.config.top_k, dim=-1)  # [tokens, top_k]
        if self.config.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights, experts

    def _aux_loss(self, logits: torch.Tensor, probs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        c = self.config
        aux = probs.new_zeros(())
        if c.aux_loss_coef > 0:
            share = counts.float() / counts.sum()  # f_i: share of the routing assignments
            mean_prob = probs.mean(dim=0)  # P_i: mean router probability
            aux = aux + c.aux_loss_coef * c.n_experts * (share * mean_prob).sum()
        if c.z_loss_coef > 0:
            aux = aux + c.z_loss_coef * logits.float().logsumexp(dim=-1).square().mean()
        return aux

    @classmethod
    def param_count(cls, config: MoEConfig) -> int:
        c = config
        return c.n_experts * 3 * c.d_model * c.expert_ffn_dim + c.d_model * c.n_experts

    @classmethod
    def active_param_count(cls, config: MoEConfig) -> int:
        """The router and the ``top_k`` experts a token is sent to."""
        c = config
        return c.top_k * 3 * c.d_model * c.expert_ffn_dim + c.d_model * c.n_experts

    @classmethod
    def flops_per_token(cls, config: MoEConfig, seq_len: int) -> int:
        # Only the top_k experts a token is routed to (and the router) do work for it: 6 FLOPs per active weight.
        return 6 * cls.active_param_count(config)

    @classmethod
    def weight_bytes(cls, config: MoEConfig, dtype_bytes: int = 2, tokens: int | None = None) -> int:
        """The router and the experts ``tokens`` tokens are routed to: with balanced routing each expert is
        missed by all of them with probability ``(1 - top_k / n_experts) ** tokens``, so one decoding step at
        batch 1 reads ``top_k`` experts and a large batch all of them."""
        c = config
        expert = 3 * c.d_model * c.expert_ffn_dim
        if tokens is None:
            touched = float(c.n_experts)
        else:
            touched = c.n_experts * (1.0 - (1.0 - c.top_k / c.n_experts) ** max(tokens, 0))
        return round((c.d_model * c.n_experts + touched * expert) * dtype_bytes)
