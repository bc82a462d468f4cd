"""Bytes read from the target turned into JSON values by their `ValueLayout` (host side; the agent only reads).

    decode(layout, data)                       # data: the bytes at the value's address (read_size(layout) of them)
    decode(layout, data, strings={0x5555: "hi"})  # C strings the agent read behind char* pointers
    decode(layout, data, named=True)           # structs beyond depth as "<TypeName>" instead of "<struct>"
    live_variant(layout, data)                 # the variant a Rust enum's bytes hold (None: unknown)

ints and floats as numbers (NaN/inf as strings), bools, char as a one-character string, pointers as "0x..."
hex or null (a char* the agent read as its string), enums as the enumerator's name (the number when no
name matches), structs as {field: value} ("<struct>" beyond depth), arrays as lists of at most 100
items (then a "<N more>" marker), char arrays as strings (up to the first NUL, at most 1024 chars),
Rust enums as {"Variant": payload} or "Variant" for a variant without data. Bytes missing from a short
read decode as null.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from strobe.symbols.types import MAX_ARRAY_ITEMS, MAX_STRING, Field, ValueLayout, Variant

_FLOATS = {2: "<e", 4: "<f", 8: "<d"}


def decode(layout: ValueLayout, data: bytes, strings: Mapping[int, str] | None = None, named: bool = False) -> Any:
    """The JSON value of `data` (little-endian) laid out as `layout`."""
    return _decode(layout, memoryview(data), 0, strings or {}, named)


def strings_by_pointer(data: bytes, texts: Mapping[int, str | None]) -> dict[int, str]:
    """The agent names each C string it read by where its pointer sits in the bytes read (offset -> text);
    `decode` looks strings up by the pointer's value."""
    out: dict[int, str] = {}
    for offset, text in texts.items():
        if text is not None and offset >= 0 and offset + 8 <= len(data):
            out[int.from_bytes(data[offset : offset + 8], "little")] = text
    return out


def _decode(layout: ValueLayout, data: memoryview, at: int, strings: Mapping[int, str], named: bool) -> Any:
    kind = layout.kind
    size = layout.size
    if kind == "struct":
        if layout.truncated:
            return f"<{layout.type_name}>" if named else "<struct>"
        return {f.name: _field(f, data, at, strings, named) for f in layout.fields}
    if kind == "array":
        return _array(layout, data, at, strings, named)
    if kind == "enum" and layout.variants:
        return _variant(layout, data, at, strings, named)
    if kind in ("void", "function"):
        return None
    if at + size > len(data) or size <= 0:
        return None
    raw = bytes(data[at : at + size])
    if kind == "bytes":
        return raw.hex(" ")
    if kind == "float":
        return _float(raw)
    if kind == "bool":
        return any(raw)
    number = int.from_bytes(raw, "little", signed=kind == "int")
    if kind in ("int", "uint"):
        return number
    if kind == "char":
        return chr(number) if number < 0x110000 and not 0xD800 <= number < 0xE000 else number
    if kind == "pointer":
        if number == 0:
            return None
        text = strings.get(number)
        return text if text is not None and layout.cstring else f"0x{number:x}"
    if kind == "enum":
        for value, name in layout.enumerators:
            if value & ((1 << (8 * size)) - 1) == number:
                return name
        if layout.signed and number >= 1 << (8 * size - 1):
            number -= 1 << (8 * size)
        return number
    return raw.hex(" ")


def _field(field: Field, data: memoryview, base: int, strings: Mapping[int, str], named: bool) -> Any:
    at = base + field.offset
    if field.bit_size is None:
        return _decode(field.layout, data, at, strings, named)
    bit = field.bit_offset or 0
    width = (bit + field.bit_size + 7) // 8
    if at + width > len(data):
        return None
    number = (int.from_bytes(bytes(data[at : at + width]), "little") >> bit) & ((1 << field.bit_size) - 1)
    kind = field.layout.kind
    if kind == "bool":
        return number != 0
    if (kind == "int" or (kind == "enum" and field.layout.signed)) and number >> (field.bit_size - 1):
        number -= 1 << field.bit_size
    if kind == "enum":
        return next((name for value, name in field.layout.enumerators if value == number), number)
    return number


def _array(layout: ValueLayout, data: memoryview, at: int, strings: Mapping[int, str], named: bool) -> Any:
    element = layout.element
    if element is None:
        return []
    if element.kind == "char" and element.size == 1:
        chunk = bytes(data[at : at + min(layout.count, MAX_STRING)])
        end = chunk.find(0)
        return chunk[: end if end >= 0 else len(chunk)].decode("utf-8", "replace")
    shown = min(layout.count, MAX_ARRAY_ITEMS)
    step = element.size
    items = [_decode(element, data, at + i * step, strings, named) for i in range(shown)]
    if layout.count > shown:
        items.append(f"<{layout.count - shown} more>")
    return items


def live_variant(layout: ValueLayout, data: bytes | memoryview, at: int = 0) -> Variant | None:
    """The variant of a Rust enum (`layout.variants`) its bytes at `at` hold: the one whose discriminant value
    matches, else the default (a niche layout's dataful variant), else the only one; None when the
    discriminant's bytes are missing or no variant matches."""
    discriminant = layout.discriminant
    chosen = None
    if discriminant is not None:
        start = at + discriminant.offset
        size = discriminant.layout.size
        if size <= 0 or start + size > len(data):
            return None
        number = int.from_bytes(bytes(data[start : start + size]), "little")
        mask = (1 << (8 * size)) - 1
        chosen = next((v for v in layout.variants if v.value is not None and v.value & mask == number), None)
    if chosen is None:
        chosen = next((v for v in layout.variants if v.value is None), None)
    if chosen is None and len(layout.variants) == 1:
        chosen = layout.variants[0]
    return chosen


def _variant(layout: ValueLayout, data: memoryview, at: int, strings: Mapping[int, str], named: bool) -> Any:
    if layout.discriminant is not None:
        start = at + layout.discriminant.offset
        if layout.discriminant.layout.size <= 0 or start + layout.discriminant.layout.size > len(data):
            return None
    chosen = live_variant(layout, data, at)
    if chosen is None:
        return f"<enum {layout.type_name}>"
    payload = chosen.field.layout
    if payload.kind == "struct" and not payload.truncated and not payload.fields:
        return chosen.field.name
    value = _decode(payload, data, at + chosen.field.offset, strings, named)
    if isinstance(value, dict) and value and all(k.startswith("__") and k[2:].isdigit() for k in value):
        items = list(value.values())  # a tuple variant: Some(5) -> {"Some": 5}
        value = items[0] if len(items) == 1 else items
    return {chosen.field.name: value}


def _float(raw: bytes) -> float | str:
    fmt = _FLOATS.get(len(raw))
    value = struct.unpack(fmt, raw)[0] if fmt else _x87(raw)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float(value)


def _x87(raw: bytes) -> float:
    """An x87 80-bit extended float (long double on x86: 10 bytes, padded to 12 or 16)."""
    mantissa = int.from_bytes(raw[:8], "little")
    top = int.from_bytes(raw[8:10], "little")
    sign = -1.0 if top & 0x8000 else 1.0
    exponent = top & 0x7FFF
    if exponent == 0x7FFF:
        return sign * math.inf if mantissa << 1 == 0 else math.nan
    if exponent == 0 and mantissa == 0:
        return sign * 0.0
    try:
        return sign * math.ldexp(mantissa, exponent - 16383 - 63)
    except OverflowError:
        return sign * math.inf
