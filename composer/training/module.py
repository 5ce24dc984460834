"""``ComposerLM``: the LightningModule that trains a :class:`~composer.model.ComposerModel`.

The model is built in ``configure_model`` (Lightning's hook for sharded models), directly on the training
device, so FSDP2 shards it there; every rank seeds identically, so a sharded run starts from the same weights as
a single-device run. Parallelisation is applied from the outside (``parallelize.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import lightning as L
import torch

from composer.config import ArchConfig
from composer.model import ComposerModel
from composer.training import parallelize
from composer.training.schedule import ScheduleConfig, lr_multiplier


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float = 1.0
    schedule: ScheduleConfig = ScheduleConfig()


@dataclass(frozen=True)
class HybridizeConfig:
    """Start from a Composer model's weights (``init_from``, mapped by :func:`composer.hybridize.student.init_student`),
    freeze some groups, and distil a teacher's next-token distribution (``teacher``)."""

    init_from: str | None = None
    freeze: tuple[str, ...] = ()
    teacher: str | None = None
    temperature: float = 1.0
    kl_weight: float = 1.0
    hidden_weight: float = 0.0
    # supernet (composer.hybridize.supernet): every step runs a random placement of this many kept teacher attention layers
    supernet_keep: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class ParallelConfig:
    fsdp: bool = False
    fsdp_param_dtype: torch.dtype | None = None  # bf16 for bf16 training under FSDP2
    compile: bool = False
    activation_checkpointing: bool = False


class ComposerLM(L.LightningModule):
    def __init__(self, arch: ArchConfig, optim: OptimConfig, parallel: ParallelConfig = ParallelConfig(),
                 hybridize: HybridizeConfig = HybridizeConfig()) -> None:
        super().__init__()
        self.arch = arch
        self.optim = optim
        self.parallel = parallel
        self.hybridize = hybridize
        self.model: ComposerModel | None = None
        self.init_notes: list[str] = []
        self.frozen: list[str] = []
        self._val_sum: torch.Tensor | None = None
        self._val_count: torch.Tensor | None = None
        self._val_kl: torch.Tensor | None = None
        self.save_hyperparameters({"arch": arch.to_dict()})

    @property
    def teacher(self) -> ComposerModel | None:
        """The frozen teacher, kept out of the module's children so that checkpoints hold the student only."""
        return self.__dict__.get("_teacher")

    # -- model --------------------------------------------------------------------------------------------
    def configure_model(self) -> None:
        if self.model is not None:
            return
        device = self.trainer.strategy.root_device if self._trainer else torch.device("cpu")
        with torch.device(device):
            model = ComposerModel(self.arch)
        h = self.hybridize
        if h.init_from is not None:  # a resumed run then loads its checkpoint over these weights
            from composer.hybridize.student import freeze, init_student, read_model

            teacher_arch, state = read_model(h.init_from)
            self.init_notes = init_student(model, teacher_arch, state)
            self.frozen = freeze(model, h.freeze)
        if h.teacher is not None:
            from composer.interop.model_dir import load_pretrained

            teacher = load_pretrained(h.teacher, device=device).requires_grad_(False)
            self.__dict__["_teacher"] = teacher  # not a submodule: not trained, not checkpointed
        if self.parallel.activation_checkpointing:
            parallelize.apply_activation_checkpointing(model)
        if self.parallel.compile:
            parallelize.apply_compile(model)
        if self.parallel.fsdp:
            parallelize.apply_fsdp(model, self.device_mesh["data_parallel"], self.parallel.fsdp_param_dtype)
        self.model = model

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None):
        return self.model(input_ids, targets)

    # -- steps --------------------------------------------------------------------------------------------
    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        """Minimise ``loss`` (cross-entropy + auxiliary losses); log it as ``train/loss``.

        Models with auxiliary losses (MoE) also log the two parts, ``train/lm_loss`` (comparable with a dense
        model's ``train/loss``) and ``train/aux_loss``; dense models skip them (no extra all-reduces per step).
        """
        if self.hybridize.supernet_keep is not None:
            return self._supernet_step(batch)
        if self.teacher is not None:
            return self._distillation_step(batch)
        out = self.model(batch[:, :-1], batch[:, 1:])
        size = batch.size(0)
        self.log("train/loss", out.loss.detach(), prog_bar=True, sync_dist=True, batch_size=size)
        if self.model.has_aux_loss:
            self.log("train/lm_loss", out.lm_loss.detach(), sync_dist=True, batch_size=size)
            self.log("train/aux_loss", out.aux_loss.detach(), sync_dist=True, batch_size=size)
        return out.loss

    def _distillation_step(self, batch: torch.Tensor) -> torch.Tensor:
        """``kl_weight * KL(teacher || student) + (1 - kl_weight) * CE (+ hidden_weight * residual MSE)``."""
        from composer.hybridize.distill import kl_divergence, layer_outputs

        h = self.hybridize
        inputs, targets = batch[:, :-1], batch[:, 1:]
        with torch.no_grad():
            teacher_states = layer_outputs(self.teacher, inputs) if h.hidden_weight else None
            teacher_logits = self.teacher(inputs).logits
        if h.hidden_weight:
            states = layer_outputs(self.model, inputs)
            logits, lm_loss = self.model.logits_and_loss(states[-1], targets)
            aux = self.model.collect_aux_loss()
            hidden = torch.stack([torch.nn.functional.mse_loss(s.float(), t.float())
                                  for s, t in zip(states, teacher_states, strict=True)]).mean()
        else:
            out = self.model(inputs, targets)
            logits, lm_loss, aux, hidden = out.logits, out.lm_loss, out.aux_loss, None
        kl = kl_divergence(logits, teacher_logits, h.temperature)
        loss = h.kl_weight * kl + (1.0 - h.kl_weight) * lm_loss
        if aux is not None:
            loss = loss + aux
        if hidden is not None:
            loss = loss + h.hidden_weight * hidden
            self.log("train/hidden_mse", hidden.detach(), sync_dist=True, batch_size=batch.size(0))
        size = batch.size(0)
        self.log("train/loss", loss.detach(), prog_bar=True, sync_dist=True, batch_size=size)
        self.log("train/kl", kl.detach(), sync_dist=True, batch_size=size)
        self.log("train/lm_loss", lm_loss.detach(), sync_dist=True, batch_size=size)
        return loss

    def _supernet_step(self, batch: torch.Tensor) -> torch.Tensor:
        """One random placement of ``supernet_keep`` kept attention layers, distilled (composer.hybridize.supernet)."""
        from composer.hybridize.distill import kl_divergence
        from composer.hybridize.supernet import attention_positions, placement_forward, sample_placement

        h = self.hybridize
        generator = torch.Generator().manual_seed(h.seed * 1_000_003 + self.global_step)  # resumes identically
        kept = sample_placement(attention_positions(self.teacher.arch), h.supernet_keep, generator)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        with torch.no_grad():
            teacher_logits = self.teacher(inputs).logits
        logits = placement_forward(self.model, self.teacher, inputs, kept)
        kl = kl_divergence(logits, teacher_logits, h.temperature)
        loss = kl
        if h.kl_weight < 1.0:
            from composer.loss import cross_entropy

            loss = h.kl_weight * kl + (1.0 - h.kl_weight) * cross_entropy(logits, targets)
        self.log("train/loss", loss.detach(), prog_bar=True, sync_dist=True, batch_size=batch.size(0))
        self.log("train/kl", kl.detach(), sync_dist=True, batch_size=batch.size(0))
        return loss

    def _validation_logits(self, inputs: torch.Tensor, targets: torch.Tensor):
        """(logits, lm_loss) of the model being trained; a supernet is validated at its uniform placement."""
        if self.hybridize.supernet_keep is None:
            out = self.model(inputs, targets)
            return out.logits, out.lm_loss
        from composer.hybridize.supernet import attention_positions, placement_forward, uniform_placement
        from composer.loss import cross_entropy

        kept = uniform_placement(attention_positions(self.teacher.arch), self.hybridize.supernet_keep)
        logits = placement_forward(self.model, self.teacher, inputs, kept)
        return logits, cross_entropy(logits, targets)

    def on_validation_epoch_start(self) -> None:
        self._val_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        self._val_count = torch.zeros((), device=self.device, dtype=torch.float64)
        self._val_kl = torch.zeros((), device=self.device, dtype=torch.float64)

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        targets = batch[:, 1:]
        logits, lm_loss = self._validation_logits(batch[:, :-1], targets)  # the pure LM loss: comparable
        n = targets.numel()
        self._val_sum += lm_loss.detach().double() * n
        self._val_count += n
        if self.teacher is not None:
            from composer.hybridize.distill import kl_divergence

            kl = kl_divergence(logits, self.teacher(batch[:, :-1]).logits, 1.0)
            self._val_kl += kl.detach().double() * n

    def on_validation_epoch_end(self) -> None:
        total = self.trainer.strategy.reduce(self._val_sum, reduce_op="sum")
        count = self.trainer.strategy.reduce(self._val_count, reduce_op="sum")
        val_loss = (total / count.clamp(min=1)).float()
        self.log("val/loss", val_loss, prog_bar=True, rank_zero_only=True)
        self.log("val/ppl", val_loss.exp(), rank_zero_only=True)
        self.log("val/tokens", count.float(), rank_zero_only=True)
        if self.teacher is not None:
            kl = self.trainer.strategy.reduce(self._val_kl, reduce_op="sum")
            self.log("val/kl", (kl / count.clamp(min=1)).float(), rank_zero_only=True)

    # -- optimisation -------------------------------------------------------------------------------------
    def configure_optimizers(self):
        o = self.optim
        optimizer = torch.optim.AdamW(
            self.model.parameter_groups(o.weight_decay), lr=o.lr, betas=o.betas, eps=o.eps
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(o.schedule))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_train_start(self) -> None:
        """Set each rate from this run's schedule at the step it starts from. A fresh run starts at multiplier(0)
        anyway; a run continued from a checkpoint would otherwise take its first step at the rate the checkpoint's
        own schedule had set (the restored optimizer's), so a search continuing a candidate's constant-rate trunk
        into a longer budget's cooldown (search.lm) would not equal a fresh run of that budget."""
        for config in self.trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            if isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
                step = max(scheduler.last_epoch, 0)
                for group, base, rule in zip(scheduler.optimizer.param_groups, scheduler.base_lrs,
                                             scheduler.lr_lambdas):
                    group["lr"] = base * rule(step)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Clip the global gradient norm (DTensor-aware under FSDP2) and log the norm before clipping."""
        max_norm = self.optim.grad_clip if self.optim.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        self.last_grad_norm = norm.detach()  # read by StabilityMonitor
        self.log("train/grad_norm", norm, rank_zero_only=True)
        self.log("train/lr", optimizer.param_groups[0]["lr"], rank_zero_only=True)
