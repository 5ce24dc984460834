"""Registry of primitives: one-letter pattern symbol and name -> primitive class (which carries its config).

Adding a primitive is one new module plus one line in ``_BUILTIN`` below; code outside this package can
register its own with :func:`register_primitive`.
"""

from __future__ import annotations

from collections.abc import Iterator

from primitives.attention import GroupedQueryAttention
from primitives.base import Primitive
from primitives.gated_deltanet import GatedDeltaNet
from primitives.mamba2 import Mamba2
from primitives.mlp import SwiGLU
from primitives.moe import MoESwiGLU
from primitives.parallel import parallel_primitive
from primitives.sliding_window import SlidingWindowAttention

_BUILTIN: tuple[type[Primitive], ...] = (
    GroupedQueryAttention,  # A
    SwiGLU,  # M
    Mamba2,  # S
    GatedDeltaNet,  # D
    SlidingWindowAttention,  # W
    MoESwiGLU,  # E
)


class PrimitiveRegistry:
    """Maps symbols (``"A"``) and names (``"attention"``) to primitive classes."""

    def __init__(self) -> None:
        self._by_symbol: dict[str, type[Primitive]] = {}

    def register(self, cls: type[Primitive], *, replace: bool = False) -> type[Primitive]:
        symbol = getattr(cls, "symbol", None)
        if not (isinstance(symbol, str) and len(symbol) == 1 and symbol.isascii() and symbol.isupper()):
            raise ValueError(f"{cls.__name__}.symbol must be one upper-case ASCII letter, got {symbol!r}")
        for other in self._by_symbol.values():
            if replace and other.symbol == symbol:
                continue
            if other.symbol == symbol or other.name == cls.name:
                raise ValueError(
                    f"cannot register {cls.__name__} as {symbol}/{cls.name}: "
                    f"{other.__name__} already uses {other.symbol}/{other.name}"
                )
        self._by_symbol[symbol] = cls
        return cls

    def get(self, key: str) -> type[Primitive]:
        """Look a primitive up by symbol, by name, or by parallel-layer token (``"[AS]"``, made on demand)."""
        if key in self._by_symbol:
            return self._by_symbol[key]
        if key.startswith("[") and key.endswith("]"):
            symbols = key[1:-1]
            if len(symbols) < 2 or len(set(symbols)) != len(symbols):
                raise KeyError(f"parallel layer {key!r} needs two or more different primitives, e.g. '[AS]'")
            return parallel_primitive(key, tuple(self.get(symbol) for symbol in symbols))
        for cls in self._by_symbol.values():
            if cls.name == key:
                return cls
        raise KeyError(f"unknown primitive {key!r}; registered: {self.describe()}")

    def __contains__(self, symbol: str) -> bool:
        """Whether ``symbol`` is a registered primitive symbol (parallel tokens are built from these)."""
        return symbol in self._by_symbol

    def __iter__(self) -> Iterator[type[Primitive]]:
        return iter(self._by_symbol.values())

    def __len__(self) -> int:
        return len(self._by_symbol)

    @property
    def symbols(self) -> str:
        return "".join(self._by_symbol)

    def describe(self) -> str:
        """``"A (attention), M (mlp)"``: for error messages and help texts."""
        return ", ".join(f"{cls.symbol} ({cls.name})" for cls in self)


REGISTRY = PrimitiveRegistry()
for _cls in _BUILTIN:
    REGISTRY.register(_cls)


def register_primitive(cls: type[Primitive]) -> type[Primitive]:
    """Register a user primitive; usable as a class decorator."""
    return REGISTRY.register(cls)


def get_primitive(key: str) -> type[Primitive]:
    return REGISTRY.get(key)
