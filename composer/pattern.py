"""Layer-pattern grammar: how architectures are written.

A pattern is a sequence of primitive symbols, one per layer, with two shorthands::

    AAMMMM          letters, one layer each
    2A4M            run length: a count before a letter or group repeats it ("2A4M" == "AAMMMM")
    (AM)x16         grouped repetition: a group followed by ``x N`` (or ``* N``) repeats it; groups nest
    (AAMMMM)x4 AMM  whitespace and ``+`` separate parts and are otherwise ignored

The *canonical* form is the expanded string (``"AMAM..."``): one character per layer, unique for each
architecture, which is what configs, leaderboards and caches compare. :func:`compact_pattern` gives a short
form for display; both parse back to the same canonical pattern.
"""

from __future__ import annotations

from collections import Counter

from composer.errors import PatternError

MAX_LAYERS = 10_000
_SEPARATORS = " \t\n+"
_EXAMPLES = "e.g. 'AAMMMM', '2A4M' or '(AM)x16'"


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

    def sequence(self, depth: int) -> str:
        parts: list[str] = []
        total = 0
        while True:
            char = self.peek()
            if char == "" or char == ")":
                if char == ")" and depth == 0:
                    raise self.error("unmatched ')'", fix="remove it or add a '(' before it")
                return "".join(parts)
            item = self.item(depth)
            total += len(item)
            if total > MAX_LAYERS:
                raise self.error(f"pattern expands to more than {MAX_LAYERS} layers")
            parts.append(item)

    def item(self, depth: int) -> str:
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

    def atom(self, depth: int) -> str:
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
        if char in self.allowed:
            self.pos += 1
            return char
        hint = ""
        if char.isalpha() and char.upper() in self.allowed:
            hint = " (symbols are upper-case)"
        raise self.error(f"unknown primitive {char!r}", fix=f"allowed: {self.allowed_description}{hint}")


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
    layers = parser.sequence(depth=0)
    if not layers:
        raise PatternError(f"empty pattern; write one primitive symbol per layer, {_EXAMPLES}")
    return layers


def runs(pattern: str) -> list[tuple[str, int]]:
    """Maximal runs of one primitive: ``"AAMMMA"`` -> ``[("A", 2), ("M", 3), ("A", 1)]``."""
    out: list[tuple[str, int]] = []
    for symbol in pattern:
        if out and out[-1][0] == symbol:
            out[-1] = (symbol, out[-1][1] + 1)
        else:
            out.append((symbol, 1))
    return out


def counts(pattern: str) -> dict[str, int]:
    """Number of layers per symbol, in order of first appearance."""
    return dict(Counter(pattern))


def compact_pattern(pattern: str, max_unit: int = 64) -> str:
    """A short display form of a canonical pattern that parses back to it.

    Greedy: at each position take the repeated unit that covers the most layers (shortest unit on ties); runs
    of one symbol of length >= 3 use a count prefix, longer units become ``(unit)xN``.
    """
    pieces: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        best_len, best_reps = 1, 1
        for unit_len in range(1, min(max_unit, (n - i) // 2) + 1):
            unit = pattern[i : i + unit_len]
            reps = 1
            while pattern.startswith(unit, i + reps * unit_len):
                reps += 1
            if reps >= 2 and unit_len * reps > best_len * best_reps:
                best_len, best_reps = unit_len, reps
        unit = pattern[i : i + best_len]
        if best_len == 1:
            pieces.append(unit * best_reps if best_reps < 3 else f"{best_reps}{unit}")
        else:
            pieces.append(f"({compact_pattern(unit, max_unit)})x{best_reps} ")
        i += best_len * best_reps
    return "".join(pieces).strip()
