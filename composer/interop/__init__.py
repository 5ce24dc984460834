"""Models on disk: Composer's own model directory, and in and out of other formats.

* :mod:`composer.interop.model_dir`: a Composer model directory (weights, architecture, tokenizer), as
  ``composer train`` writes it and every command that takes a model reads it.
* :mod:`composer.interop.hf_import`: a transformers checkpoint (Llama family) into a Composer model directory
  (``composer import``).
* :mod:`composer.interop.export`: a Composer model directory into a transformers directory loadable with
  ``trust_remote_code`` (``composer export``).
* :mod:`composer.interop.hf_remote`: the remote code that export copies next to the weights.
* :mod:`composer.interop.formats`: a pattern in the notations of other engines (Megatron-LM, Hugging Face, fla).
"""
