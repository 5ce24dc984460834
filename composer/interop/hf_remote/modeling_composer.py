"""transformers model of a Composer model exported by ``composer export --format hf`` (remote code).

Load with ``AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True)``. This file is a wrapper,
not a re-implementation: the layers are ``composer.model.ComposerModel`` from the ``composer-hnas`` package,
which must be installed where the model is loaded (``pip install composer-hnas``). The weights keep their
Composer names under ``model.``.

Limits: no KV/state cache is returned, so ``generate`` recomputes the whole prefix at every step (correct,
slower than an incremental decoder); attention masks may only mark right padding (a causal model ignores what
follows a position, so right-padded rows are exact; left padding would shift positions and is refused).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_composer import ComposerConfig

try:
    from composer.config import ArchConfig
    from composer.model import ComposerModel, ResidualLayer
    from primitives.base import Primitive
except ImportError as err:  # transformers' import check skips try blocks: this message is the one users see
    raise ImportError(
        "this model was exported by Composer and runs on its layers: install the composer-hnas package "
        f"(pip install composer-hnas) where you load it ({err})"
    ) from err


class ComposerForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = ComposerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = [ResidualLayer.__name__]
    supports_gradient_checkpointing = False

    def __init__(self, config: ComposerConfig) -> None:
        super().__init__(config)
        self.model = ComposerModel(ArchConfig.from_dict(config.arch))
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: torch.nn.Module) -> None:
        """Recompute a primitive's non-persistent buffers (e.g. attention's rotary ``inv_freq``).

        They are not in the checkpoint: transformers 5 builds the model on the meta device and leaves them
        uninitialised, then calls this for each module it did not load completely. Weights are left alone:
        the checkpoint holds every one of them.
        """
        names = getattr(module, "_non_persistent_buffers_set", ())
        if not isinstance(module, Primitive) or not names:
            return
        with torch.device("cpu"):
            fresh = type(module)(module.config)  # computes the buffers from the config, as training did
        for name in names:
            buffer = getattr(module, name, None)
            if buffer is not None:
                buffer.copy_(getattr(fresh, name).to(buffer.device, buffer.dtype))

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.model.tok_embeddings

    def set_input_embeddings(self, value: torch.nn.Embedding) -> None:
        self.model.tok_embeddings = value

    def get_output_embeddings(self) -> torch.nn.Linear | None:
        return self.model.output  # None when tied: the head is the embedding matrix itself

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        if input_ids is None:
            raise ValueError("Composer models take input_ids (inputs_embeds is not supported)")
        if attention_mask is not None and not bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all()):
            raise ValueError(
                "Composer models support right padding only (set tokenizer.padding_side = 'right'); the "
                "attention mask has a padded position before a real token"
            )
        logits = self.model(input_ids).logits
        loss = None
        if labels is not None:  # transformers' convention: labels are the inputs, shifted here
            shifted = labels[:, 1:].flatten().to(logits.device)
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), shifted, ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        # No cache: every step sees the whole sequence so far.
        return {"input_ids": input_ids, "attention_mask": attention_mask}


__all__ = ["ComposerConfig", "ComposerForCausalLM"]
