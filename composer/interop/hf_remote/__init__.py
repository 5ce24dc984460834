"""Remote code for ``composer export --format hf`` of a non-Llama pattern.

``configuration_composer.py`` and ``modeling_composer.py`` are copied verbatim into the export directory,
where transformers loads them with ``trust_remote_code=True`` (config.json's ``auto_map`` names them). They
are thin wrappers: the layers are this package's own :class:`~composer.model.ComposerModel`, imported at load
time, so the loading environment needs ``composer-hnas`` installed (the modeling file says so when it is
not). They live here, as real modules, so that they are linted and tested like any other code.
"""

from pathlib import Path

REMOTE_CODE_DIR = Path(__file__).resolve().parent
REMOTE_CODE_FILES = ("configuration_composer.py", "modeling_composer.py")

__all__ = ["REMOTE_CODE_DIR", "REMOTE_CODE_FILES"]
