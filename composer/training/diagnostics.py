"""Per-layer gradient norms and per-head attention entropy over a run's first steps.

Why: two layouts whose losses part early can differ because one trains worse (a layer whose gradients vanish or
blow up, attention heads that collapse onto a single key) or only because it needs another rate. Issue 71 asks
this of the paper's adjacent attention layers (``AAMMMM``) against Llama's alternation; the loss curve alone cannot
tell the two apart. :class:`LayerDiagnostics` is a Lightning callback a caller passes to
``composer.training.train(config, callbacks=[...])``; it keeps its figures in ``record`` (plain JSON):

* ``loss``: the training loss of every step of the first ``steps`` (this process's batch), the curve in which a
  plateau or a late escape from one shows, which the held-out curve's few points can miss;
* ``grad_norm``: each layer's gradient norm (all its parameters, the residual's norm included) at every optimizer
  step of the first ``steps``, before clipping;
* ``entropy``: each attention layer's per-head entropy in nats (``GroupedQueryAttention.head_entropy``) on a fixed
  probe (the first training batch's first sequences, or the caller's), before the first step and every
  ``entropy_every`` steps after it, with the probe's mean ``log(visible keys)``, the entropy of attending uniformly.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch

from composer.errors import ConfigError
from primitives.attention import GroupedQueryAttention


class LayerDiagnostics(L.Callback):
    """Gradient norms per layer and attention entropy per head over the first ``steps`` steps (module docstring)."""

    def __init__(self, steps: int = 300, entropy_every: int = 25, probe: torch.Tensor | None = None,
                 probe_sequences: int = 4) -> None:
        self.steps, self.entropy_every, self.probe_sequences = steps, entropy_every, probe_sequences
        self._probe = probe
        self.record: dict[str, Any] = {"steps": steps, "entropy_every": entropy_every, "layers": [],
                                       "loss": [], "grad_norm": [], "entropy": [], "uniform_entropy": None}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if trainer.world_size > 1:  # a sharded layer's gradient is a shard's: its norm would be this rank's part
            raise ConfigError(f"LayerDiagnostics reads whole layers' gradients: run it in one process (this run has "
                              f"{trainer.world_size})")

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        model = pl_module.model
        if not self.record["layers"]:
            self.record["layers"] = [layer.symbol for layer in model.layers]
        if self._probe is None:
            self._probe = batch[: self.probe_sequences].detach().clone()  # inputs and their targets
        if trainer.global_step == 0 and not self.record["entropy"]:
            self._entropy(model, 0)

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: Any) -> None:
        step = trainer.global_step  # steps finished before this one: this step's index
        if step >= self.steps:
            return
        norms = []
        for layer in pl_module.model.layers:
            grads = [p.grad.detach().float() for p in layer.parameters() if p.grad is not None]
            norms.append(float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0)
        self.record["grad_norm"].append({"step": step, "norms": norms})

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        done = trainer.global_step
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if done <= self.steps and loss is not None:
            self.record["loss"].append({"step": done - 1, "loss": float(loss)})
        if done <= self.steps and done % self.entropy_every == 0 and \
                (not self.record["entropy"] or self.record["entropy"][-1]["step"] != done):
            self._entropy(pl_module.model, done)

    @torch.no_grad()
    def _entropy(self, model: torch.nn.Module, step: int) -> None:
        """Each attention layer's per-head entropy on the probe, the layer's normed input captured by a hook."""
        inputs: dict[int, torch.Tensor] = {}
        hooks = []
        for index, layer in enumerate(model.layers):
            if isinstance(layer.primitive, GroupedQueryAttention):
                hooks.append(layer.primitive.register_forward_pre_hook(
                    lambda module, args, index=index: inputs.__setitem__(index, args[0].detach())))
        if not hooks:
            return
        probe = self._probe.to(next(model.parameters()).device)
        was_training = model.training
        model.eval()
        try:
            model(probe[:, :-1], probe[:, 1:])
        finally:
            model.train(was_training)
            for hook in hooks:
                hook.remove()
        heads = {str(index): model.layers[index].primitive.head_entropy(x.float()).tolist()
                 for index, x in sorted(inputs.items())}
        self.record["entropy"].append({"step": step, "heads": heads})
        if self.record["uniform_entropy"] is None:
            seq = probe.shape[1] - 1
            self.record["uniform_entropy"] = sum(math.log(i + 1) for i in range(seq)) / seq


__all__ = ["LayerDiagnostics"]
