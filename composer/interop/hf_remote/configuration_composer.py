"""transformers config of a Composer model exported by ``composer export --format hf`` (remote code).

``arch`` is the model's ``composer.config.ArchConfig`` as a dict (the exported ``config.json`` holds it
verbatim); the usual transformers fields are derived from it so that generic tools (generation,
lm-evaluation-harness, ``model.config.max_position_embeddings``) find what they look for.
"""

from __future__ import annotations

import re
from typing import Any

from transformers import PretrainedConfig


class ComposerConfig(PretrainedConfig):
    model_type = "composer_hnas"

    def __init__(self, arch: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.arch = dict(arch or {})
        if self.arch:
            kwargs.setdefault("tie_word_embeddings", bool(self.arch.get("tie_embeddings", True)))
            self.vocab_size = self.arch["vocab_size"]
            self.hidden_size = self.arch["d_model"]
            # one layer per token; a parallel layer "[AS]" is one (composer.pattern, without importing it here)
            self.num_hidden_layers = len(re.sub(r"\[[^\]]*\]", "#", self.arch["pattern"]))
            self.num_attention_heads = self.arch["n_heads"]
            self.num_key_value_heads = self.arch["n_kv_heads"]
            self.head_dim = self.arch["head_dim"]
            self.max_position_embeddings = self.arch["max_seq_len"]
            self.rms_norm_eps = self.arch["norm_eps"]
        for derived in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps"):
            kwargs.pop(derived, None)  # always taken from arch
        kwargs.setdefault("use_cache", False)  # the forward recomputes the whole prefix (no cache)
        super().__init__(**kwargs)
