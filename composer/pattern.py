"""Layer-pattern grammar: how architectures are written.

A pattern is a sequence of layer tokens, one per layer, with two shorthands::

    AAMMMM          letters, one layer each
    [AS]M[AS]M      a parallel layer: the primitives in brackets read the same input side by side (Hymba)
    2A4M            run length: a count before a letter, bracket or group repeats it ("2A4M" == "AAMMMM")
    (AM)x16         grouped repetition: a group followed by ``x N`` (or ``* N``) repeats it; groups nest
    (AAMMMM)x4 AMM  whitespace and ``+`` separate parts and are otherwise ignored

A layer *token* is one primitive symbol (``"A"``) or a parallel layer (``"[AS]"``): two or more different
primitives, at most one of them attention (``A`` or ``W``), written attention first and then in registry order
(``[SA]`` is ``[AS]``).

The *canonical* form is the expanded string of tokens (``"AMAM..."``, ``"[AS]M[AS]M"``): one token per layer,
unique for each architecture, which is what configs, leaderboards and caches compare. :func:`layers` splits it
into tokens; :func:`compact_pattern` gives a short form for display; both parse back to the same canonical
pattern. A pattern without brackets is one character per layer, as it always was.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from composer.errors import PatternError

MAX_LAYERS = 10_000
_SEPARATORS = " \t\n+"
_EXAMPLES = "e.g. 'AAMMMM', '2A4M', '(AM)x16' or '([AS]M)x4'"
ATTENTION_SYMBOLS = "AW"  # the primitives with a KV cache; a parallel layer holds at most one of them


def _allowed_symbols() -> tuple[str, str]:
    from primitives.registry import REGISTRY

    return REGISTRY.symbols, REGISTRY.describe()


class _Parser:
    def __init__(self, text: str, allowed: str, allowed_description: str) -> None:
        self.text = text
        self.pos = 0
        self.allowed = allowed
        self.allowed_description = allowed_description

    def error(self, problem: str, pos: int | None = None, fix: str = "") -> PatternError:
        where = self.pos if pos is None else pos
        message = f"{problem} at position {where} in pattern {self.text!r}"
        return PatternError(f"{message}; {fix}" if fix else message)

    def peek(self) -> str:
        while self.pos < len(self.text) and self.text[self.pos] in _SEPARATORS:
            self.pos += 1
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def count(self) -> int | None:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if start == self.pos:
            return None
        value = int(self.text[start : self.pos])
        if value < 1:
            raise self.error(f"repeat count {value}", start, fix="counts must be at least 1")
        return value

    def sequence(self, depth: int) -> list[str]:
        parts: list[str] = []
        while True:
            char = self.peek()
            if char == "" or char == ")":
                if char == ")" and depth == 0:
                    raise self.error("unmatched ')'", fix="remove it or add a '(' before it")
                return parts
            parts.extend(self.item(depth))
            if len(parts) > MAX_LAYERS:
                raise self.error(f"pattern expands to more than {MAX_LAYERS} layers")

    def item(self, depth: int) -> list[str]:
        start = self.pos
        prefix = self.count()
        if prefix is not None and self.peek() in ("", ")"):
            raise self.error(f"count {prefix} without a primitive or group after it", start, fix=_EXAMPLES)
        atom = self.atom(depth)
        if self.peek() in ("x", "*"):
            op_pos = self.pos
            self.pos += 1
            self.peek()
            suffix = self.count()
            if suffix is None:
                op = self.text[op_pos]
                raise self.error(f"'{op}' without a repeat count", op_pos, fix=f"write a count after it, {_EXAMPLES}")
        else:
            suffix = 1
        repeats = (prefix or 1) * suffix
        if len(atom) * repeats > MAX_LAYERS:
            raise self.error(f"pattern expands to more than {MAX_LAYERS} layers", start)
        return atom * repeats

    def atom(self, depth: int) -> list[str]:
        char = self.peek()
        if char == "(":
            open_pos = self.pos
            self.pos += 1
            inner = self.sequence(depth + 1)
            if self.peek() != ")":
                raise self.error("unclosed '('", open_pos, fix="add a matching ')'")
            self.pos += 1
            if not inner:
                raise self.error("empty group '()'", open_pos, fix="put primitive symbols inside it")
            return inner
        if char == "[":
            return [self.parallel()]
        if char == "]":
            raise self.error("unmatched ']'", fix="remove it or add a '[' before it")
        return [self.symbol()]

    def symbol(self) -> str:
        char = self.peek()
        if char in self.allowed:
            self.pos += 1
            return char
        hint = ""
        if char.isalpha() and char.upper() in self.allowed:
            hint = " (symbols are upper-case)"
        raise self.error(f"unknown primitive {char!r}", fix=f"allowed: {self.allowed_description}{hint}")

    def parallel(self) -> str:
        """``[AS]``: two or more different primitives, at most one attention, in registry order."""
        open_pos = self.pos
        self.pos += 1
        branches: list[str] = []
        while self.peek() != "]":
            if self.peek() in ("", "[", "(", ")") or self.peek().isdigit():
                raise self.error("a parallel layer '[...]' holds primitive symbols only and must be closed with "
                                 "']'", open_pos if self.peek() == "" else None, fix="e.g. '[AS]'")
            branches.append(self.symbol())
        self.pos += 1
        return parallel_token(branches, lambda problem: self.error(problem, open_pos, fix="e.g. '[AS]' or '[WD]'"))


def parallel_token(branches: list[str] | str, error=None) -> str:
    """The canonical token of a parallel layer with these branch symbols (registry order)."""
    from primitives.registry import REGISTRY

    def fail(problem: str) -> PatternError:
        return error(problem) if error else PatternError(f"{problem}; e.g. '[AS]' or '[WD]'")

    branches = list(branches)
    if len(branches) < 2:
        raise fail(f"a parallel layer needs two or more primitives, got {''.join(branches)!r} (write a single "
                   "primitive without brackets)")
    if len(set(branches)) != len(branches):
        raise fail(f"a parallel layer's primitives must differ, got {''.join(branches)!r}")
    if sum(b in ATTENTION_SYMBOLS for b in branches) > 1:
        raise fail(f"a parallel layer holds at most one attention primitive ({', '.join(ATTENTION_SYMBOLS)}), got "
                   f"{''.join(branches)!r}")
    order = REGISTRY.symbols  # attention first, then registry order: [AS], [WS], [AD]
    return "[" + "".join(sorted(branches, key=lambda b: (b not in ATTENTION_SYMBOLS, order.index(b)))) + "]"


def parse_pattern(text: str, allowed: str | None = None) -> str:
    """Parse ``text`` and return the canonical (expanded) pattern.

    ``allowed`` restricts the symbols (default: every registered primitive). Raises :class:`PatternError`
    with a message naming the bad part and the allowed symbols.
    """
    if not isinstance(text, str):
        raise PatternError(f"a pattern must be a string, got {type(text).__name__}")
    registered, description = _allowed_symbols()
    if allowed is None:
        allowed = registered
    else:
        description = ", ".join(part for part in description.split(", ") if part[0] in allowed)
    parser = _Parser(text, allowed, description)
    tokens = parser.sequence(depth=0)
    if not tokens:
        raise PatternError(f"empty pattern; write one primitive symbol per layer, {_EXAMPLES}")
    return "".join(tokens)


def layers(pattern: str) -> list[str]:
    """The layer tokens of a canonical pattern: ``"A[AS]M"`` -> ``["A", "[AS]", "M"]``."""
    if "[" not in pattern:
        return list(pattern)
    tokens, i = [], 0
    while i < len(pattern):
        end = pattern.index("]", i) + 1 if pattern[i] == "[" else i + 1
        tokens.append(pattern[i:end])
        i = end
    return tokens


def n_layers(pattern: str) -> int:
    """Number of layers of a canonical pattern."""
    return len(pattern) if "[" not in pattern else len(layers(pattern))


def is_parallel(token: str) -> bool:
    return token.startswith("[")


def branches(token: str) -> str:
    """The primitive symbols of a layer token: ``"[AS]"`` -> ``"AS"``, ``"A"`` -> ``"A"``."""
    return token[1:-1] if token.startswith("[") else token


def symbols_used(pattern: str) -> str:
    """Every primitive symbol the pattern uses, in order of first appearance, parallel branches included."""
    return "".join(dict.fromkeys(pattern.replace("[", "").replace("]", "")))


def runs(pattern: str) -> list[tuple[str, int]]:
    """Maximal runs of one layer token: ``"AAMMMA"`` -> ``[("A", 2), ("M", 3), ("A", 1)]``."""
    out: list[tuple[str, int]] = []
    for token in layers(pattern):
        if out and out[-1][0] == token:
            out[-1] = (token, out[-1][1] + 1)
        else:
            out.append((token, 1))
    return out


def counts(pattern: str) -> dict[str, int]:
    """Number of layers per layer token, in order of first appearance."""
    return dict(Counter(layers(pattern)))


def compact_pattern(pattern: str, max_unit: int = 64) -> str:
    """A short display form of a canonical pattern that parses back to it.

    Greedy over layer tokens: at each position take the repeated unit that covers the most layers (shortest
    unit on ties); runs of one token of length >= 3 use a count prefix, longer units become ``(unit)xN``.
    """
    return _compact(layers(pattern) if "[" in pattern else pattern, max_unit)  # a str is its own token list


def _compact(tokens: list[str] | str, max_unit: int) -> str:
    pieces: list[str] = []
    i = 0
    n = len(tokens)
    while i < n:
        best_len, best_reps = 1, 1
        for unit_len in range(1, min(max_unit, (n - i) // 2) + 1):
            unit = tokens[i : i + unit_len]
            reps = 1
            while tokens[i + reps * unit_len : i + (reps + 1) * unit_len] == unit:
                reps += 1
            if reps >= 2 and unit_len * reps > best_len * best_reps:
                best_len, best_reps = unit_len, reps
        unit = tokens[i : i + best_len]
        if best_len == 1:
            pieces.append(unit[0] * best_reps if best_reps < 3 else f"{best_reps}{unit[0]}")
        else:
            pieces.append(f"({_compact(unit, max_unit)})x{best_reps} ")
        i += best_len * best_reps
    return "".join(pieces).strip()


_CANONICAL = re.compile(r"^(?:[A-Z]|\[[A-Z]+\])+$")


@lru_cache(maxsize=4096)
def _canonical(pattern: str) -> str:
    """The canonical pattern; compact forms ("(AM)x2", "2A4M") go through ``parse_pattern``.

    A string that is already canonical (letters and bracketed parallel layers only) is taken as is: parsing needs
    the primitive registry, which imports torch, and a scheduler ranking canonical leaderboard rows needs neither."""
    if _CANONICAL.match(pattern):
        return pattern
    return parse_pattern(pattern)


def attention_share(pattern: str) -> float:
    """The share of the pattern's layers that hold softmax attention (``A`` or ``W``, ``ATTENTION_SYMBOLS``).

    Why one function: the leaderboard reports it and the halving search hedges by it
    (``search.forecast.hedge_by_share``: attention-heavy patterns learn late, and their curves cross the others'),
    and the two must count the same layers (``W`` has a KV cache too). A parallel layer holding an attention primitive
    (``[AS]``) counts as one attention layer: it has the KV cache and the softmax mixer. Compact forms are expanded
    first: ``attention_share("(AM)x2") == attention_share("AMAM") == 0.5``."""
    tokens = layers(_canonical(pattern))
    return sum(any(symbol in ATTENTION_SYMBOLS for symbol in token) for token in tokens) / len(tokens)
