"""Training data: sources, tokenizers, a token cache, packing, rank/worker sharding and resumable loading.

``TokenDataModule(DataConfig(...), micro_batch_size)`` is what the trainer uses; ``DataPipeline`` is the same
without Lightning. See docs/data.md for the design, the cache layout and the default corpus's origin and
licence. ``TokenDataModule`` is imported on first use, so that ``import composer.data`` does not pay for
importing Lightning.
"""

from typing import Any

from composer.data.config import DataConfig
from composer.data.errors import DataError
from composer.data.loader import ResumableStream, TokenLoader
from composer.data.packed import PackedTokenDataset, ValidationDataset
from composer.data.pipeline import DataPipeline, prepare
from composer.data.sources import resolve_source
from composer.data.streaming import StreamingTokenDataset
from composer.data.tokenizer import LLAMA3_TOKENIZER, ByteTokenizer, HFTokenizer, load_tokenizer, load_tokenizer_for

__all__ = [
    "LLAMA3_TOKENIZER",
    "ByteTokenizer",
    "DataConfig",
    "DataError",
    "DataPipeline",
    "HFTokenizer",
    "PackedTokenDataset",
    "ResumableStream",
    "StreamingTokenDataset",
    "TokenDataModule",
    "TokenLoader",
    "ValidationDataset",
    "load_tokenizer",
    "load_tokenizer_for",
    "prepare",
    "resolve_source",
]


def __getattr__(name: str) -> Any:
    if name == "TokenDataModule":
        from composer.data.datamodule import TokenDataModule

        return TokenDataModule
    raise AttributeError(f"module 'composer.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
