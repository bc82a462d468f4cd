"""Captured registers shown through a function's register plan (its `functions.signature` JSON, written by
daemon/signatures.py): arguments from the six integer argument registers of a function_enter (and xmm0-5 and
six stack words when its function captures them), the return value from rax of a function_exit (and rdx,
xmm0, xmm1).

    plan = parse_plan(text)                 # None for a missing or unreadable plan
    plan.arguments(words)                   # one value per parameter, in order
    plan.names, plan.types                  # parameter names and DWARF type names
    plan.return_type, plan.returns_value    # "void" (and no value) for a void function
    plan.return_value(rax, words)           # words: the exit's captured rdx, xmm0, xmm1, if any

A plan piece fills bytes [at, at + size) of a value from the low bytes of a register, so an int of -1 whose
register holds 0x00000000ffffffff, or garbage above a bool's low byte, shows right. Values follow the
serialization rules of typed reads: ints and floats as numbers, bools, chars as one-character strings,
pointers as "0x..." hex or null, enums by name (the number when no name matches), structs as
{field: value}, char arrays as strings. What was not captured (xmm6-7, stack arguments past 48 bytes, a call
recorded before its function's plan asked for more than the integer registers) shows as a
"<...: not captured>" note saying why.

Without a plan (a function with no DWARF signature) the registers show raw, the native runtime's value
renderer (daemon/runtimes/native.py) is built on these:

    raw_arguments(args)                     # argument registers as numbers, large ones (pointers) in hex
    register_value(word), decode_retval(retval), raw_return_type(value)
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ARGUMENT_REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
# An enter's stored words in order (records.WIDE_WORDS when its function captures more), an exit's extra words.
_ENTRY_WORDS = (*ARGUMENT_REGISTERS, *(f"xmm{i}" for i in range(6)), *(f"stack{i}" for i in range(6)))
_EXIT_WORDS = ("rdx", "xmm0", "xmm1")
_ENTRY_LATE = frozenset(_ENTRY_WORDS[6:])
_EXIT_LATE = frozenset(_EXIT_WORDS)
_LATE = "<not captured: recorded before the function's argument plan reached the program>"
_MASK = (1 << 64) - 1
_FLOATS = {2: "<e", 4: "<f", 8: "<d"}
_NOT_RECORDED = "<not captured>"
_MAX_ITEMS = 100
_MAX_STRING = 1024


@dataclass(frozen=True)
class _Slot:
    """One parameter or the return value: a note, or a layout and where its bytes come from."""

    note: str | None
    value: dict[str, Any] | None
    pieces: tuple[dict[str, Any], ...]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> _Slot:
        note = raw.get("note")
        value = raw.get("value")
        if not isinstance(value, dict):
            return cls(str(note) if note is not None else _NOT_RECORDED, None, ())
        pieces = tuple(p for p in raw.get("pieces", ()) if isinstance(p, dict))
        return cls(None, value, pieces)

    def show(self, registers: Mapping[str, int], late: frozenset[str] = frozenset()) -> Any:
        """The value, from the captured registers by name; `late`: the registers a call lacks only when it was
        recorded before its plan's capture bits were set."""
        if self.value is None:
            return self.note
        size = int(self.value.get("size", 0))
        data = bytearray(size)
        missing: list[tuple[int, int, str]] = []  # [start, end) byte ranges not held by a register, and why
        covered = bytearray(size)
        for piece in self.pieces:
            at, width = int(piece.get("at", 0)), int(piece.get("size", 0))
            end = min(at + width, size)
            if at >= end:
                continue
            reg = str(piece.get("reg"))
            word = registers.get(reg)
            if word is None:
                why = piece.get("missing") or (_LATE if reg in late else _NOT_RECORDED)
                missing.append((at, end, str(why)))
                continue
            data[at:end] = (word & _MASK).to_bytes(8, "little")[: end - at]
            covered[at:end] = b"\x01" * (end - at)
        gaps = [(at, at + 1, _NOT_RECORDED) for at in range(size) if not covered[at]]
        return _Decoder(bytes(data), missing + gaps).value(self.value, 0)


class RegisterPlan:
    """A parsed plan; `parse_plan` makes one."""

    def __init__(self, raw: dict[str, Any]) -> None:
        params = [p for p in raw.get("params", ()) if isinstance(p, dict)]
        self.names: list[str] = [str(p.get("name", f"arg{i}")) for i, p in enumerate(params)]
        self.types: list[str] = [str(p.get("type", "?")) for p in params]
        self._params = [_Slot.parse(p) for p in params]
        returns = raw.get("returns")
        if not isinstance(returns, dict):
            returns = {}
        self.return_type: str = str(returns.get("type", "void"))
        self.returns_value = self.return_type != "void" or "value" in returns
        self._returns = _Slot.parse(returns)
        self.variadic = bool(raw.get("variadic", False))

    def arguments(self, words: Sequence[int]) -> list[Any]:
        """The parameters' values from the words captured on entry: the integer argument registers (rdi first;
        fewer when the recording kept fewer), then xmm0-5 and six stack words when the call captured them."""
        registers = dict(zip(_ENTRY_WORDS, words, strict=False))
        return [slot.show(registers, _ENTRY_LATE) for slot in self._params]

    def return_value(self, rax: int | None, words: Sequence[int] = ()) -> Any:
        """The return value from rax and, when the call captured them, the exit's rdx, xmm0 and xmm1."""
        registers = dict(zip(_EXIT_WORDS, words, strict=False))
        if rax is not None:
            registers["rax"] = rax
        return self._returns.show(registers, _EXIT_LATE)


def parse_plan(text: str | None) -> RegisterPlan | None:
    if not text:
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    return RegisterPlan(raw) if isinstance(raw, dict) else None


def words_of(blob: bytes | None) -> list[int]:
    """The int64 words of a stored argument blob."""
    if not blob:
        return []
    return list(struct.unpack(f"<{len(blob) // 8}q", blob[: len(blob) // 8 * 8]))


_HEX_FROM = 1 << 32


def register_value(value: int) -> int | str:
    """A raw register as the agent sees it: small values as integers, large ones (pointers) in hex."""
    if -_HEX_FROM < value < _HEX_FROM:
        return value
    return hex(value & _MASK)


def raw_arguments(args: bytes | str | None) -> Any:
    """Stored arguments without a plan: a blob of int64 registers, or JSON text."""
    if isinstance(args, bytes):
        return [register_value(v) for v in struct.unpack(f"<{len(args) // 8}q", args)]
    return None if args is None else json.loads(args)


def decode_retval(value: Any) -> Any:
    """Structured return values are stored as JSON text; other text is returned as it is."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def raw_return_type(value: Any) -> str:
    """The kind of a return value without a plan (after decode_retval)."""
    if value is None:
        return "null"
    if isinstance(value, int):
        return "int" if -_HEX_FROM < value < _HEX_FROM else "pointer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "pointer" if value.startswith("0x") else "string"
    return "object"


class _Decoder:
    def __init__(self, data: bytes, missing: list[tuple[int, int, str]]) -> None:
        self.data = data
        self.missing = missing

    def _gap(self, start: int, end: int) -> str | None:
        """Why some of bytes [start, end) are not known, or None if they all are."""
        for lo, hi, why in self.missing:
            if lo < end and start < hi:
                return why
        return None

    def value(self, spec: dict[str, Any], at: int) -> Any:
        kind = spec.get("kind")
        size = int(spec.get("size", 0))
        if kind == "struct":
            return {str(f.get("name")): self._field(f, at) for f in spec.get("fields", ()) if isinstance(f, dict)}
        if kind == "array":
            return self._array(spec, at)
        if kind == "opaque":
            return spec.get("text", "<?>")
        if kind == "variants":
            return self._variants(spec, at)
        gap = self._gap(at, at + size)
        if gap is not None:
            return gap
        raw = self.data[at : at + size]
        if kind == "float":
            return _float(raw)
        if kind == "bool":
            return any(raw)
        number = int.from_bytes(raw, "little", signed=kind == "int" or (kind == "enum" and bool(spec.get("signed"))))
        if kind in ("int", "uint"):
            return number
        if kind == "char":
            return chr(number) if 0 <= number < 0x110000 and not 0xD800 <= number < 0xE000 else number
        if kind == "pointer":
            return None if number == 0 else f"0x{number:x}"
        if kind == "enum":
            return _enum(spec, number)
        return raw.hex(" ")

    def _field(self, f: dict[str, Any], base: int) -> Any:
        at = base + int(f.get("offset", 0))
        spec = f.get("value")
        if not isinstance(spec, dict):
            spec = {"kind": "bytes", "size": 0}
        bits = f.get("bitSize")
        if bits is None:
            return self.value(spec, at)
        bit, bits = int(f.get("bitOffset", 0)), int(bits)
        width = (bit + bits + 7) // 8
        gap = self._gap(at, at + width)
        if gap is not None:
            return gap
        number = (int.from_bytes(self.data[at : at + width], "little") >> bit) & ((1 << bits) - 1)
        kind = spec.get("kind")
        if kind == "bool":
            return number != 0
        if (kind == "int" or (kind == "enum" and spec.get("signed"))) and bits and number >> (bits - 1):
            number -= 1 << bits
        return _enum(spec, number) if kind == "enum" else number

    def _variants(self, spec: dict[str, Any], at: int) -> Any:
        """A Rust enum's live variant (daemon/signatures.py's spec): the one its discriminant selects, else the
        default one, else the only one; Option as null or its value, others as {"Variant": data} or "Variant"."""
        variants = [v for v in spec.get("variants", ()) if isinstance(v, dict)]
        chosen = None
        found = spec.get("discriminant")
        if isinstance(found, dict):
            start, size = at + int(found.get("offset", 0)), int(found.get("size", 0))
            gap = self._gap(start, start + size)
            if gap is not None:
                return gap
            number = int.from_bytes(self.data[start : start + size], "little")
            mask = (1 << (8 * size)) - 1
            chosen = next((v for v in variants if "match" in v and int(v["match"]) & mask == number), None)
        chosen = chosen or next((v for v in variants if "match" not in v), None)
        if chosen is None:
            if len(variants) != 1:
                return "<enum: its discriminant matches no variant>"
            chosen = variants[0]
        show = chosen.get("show")
        if show == "none":
            return None
        if show == "unit" or not isinstance(chosen.get("value"), dict):
            return str(chosen.get("name"))
        data = self.value(chosen["value"], at + int(chosen.get("offset", 0)))
        if isinstance(data, dict) and data and all(k.startswith("__") and k[2:].isdigit() for k in data):
            data = next(iter(data.values())) if len(data) == 1 else list(data.values())  # a tuple variant's fields
        return data if show == "value" else {str(chosen.get("name")): data}

    def _array(self, spec: dict[str, Any], at: int) -> Any:
        element = spec.get("element")
        count = int(spec.get("count", 0))
        if not isinstance(element, dict):
            return []
        step = int(element.get("size", 0))
        if element.get("kind") == "char" and step == 1:
            shown = min(count, _MAX_STRING)
            gap = self._gap(at, at + shown)
            if gap is not None:
                return gap
            chunk = self.data[at : at + shown]
            end = chunk.find(0)
            return chunk[: end if end >= 0 else len(chunk)].decode("utf-8", "replace")
        items = [self.value(element, at + i * step) for i in range(min(count, _MAX_ITEMS))]
        if count > _MAX_ITEMS:
            items.append(f"<{count - _MAX_ITEMS} more>")
        return items


def _enum(spec: dict[str, Any], number: int) -> Any:
    names = spec.get("names")
    if isinstance(names, dict):
        name = names.get(str(number))
        if name is None and number < 0:  # enumerators stored unsigned, value read signed (or the reverse)
            name = names.get(str(number & ((1 << (8 * int(spec.get("size", 8)))) - 1)))
        if name is not None:
            return name
    return number


def _float(raw: bytes) -> float | str | None:
    fmt = _FLOATS.get(len(raw))
    if fmt is None:
        return _extended(raw) if len(raw) in (10, 12, 16) else raw.hex(" ")
    value = float(struct.unpack(fmt, raw)[0])
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _extended(raw: bytes) -> float | str:
    """An x87 80-bit extended value (long double, stored in 10 of its 12 or 16 bytes), as the nearest double."""
    mantissa = int.from_bytes(raw[:8], "little")
    top = int.from_bytes(raw[8:10], "little")
    sign, exponent = -1.0 if top >> 15 else 1.0, top & 0x7FFF
    if exponent == 0x7FFF:
        return "NaN" if mantissa << 1 & _MASK else ("-Infinity" if sign < 0 else "Infinity")
    try:
        return sign * math.ldexp(mantissa, (exponent or 1) - 16383 - 63)
    except OverflowError:
        return "-Infinity" if sign < 0 else "Infinity"
