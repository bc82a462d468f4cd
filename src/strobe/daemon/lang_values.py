"""Language values as their language shows them: which Rust and C++ library types a `ValueLayout` is, where
the memory they own sits, and how to present their decoded bytes. Pure: layouts in, shapes and JSON out.

    found = shape(layout, template_args)     # None: an ordinary value
    found = Counted(pointer=8, count=16, end=False, element=u8, text=True, cap=MAX_STRING)  # a String

A `Counted` value owns an array somewhere else: a data pointer at `pointer` and, at `count`, its element
count (a usize) or, with `end`, a pointer one past its last element (C++ vectors). The follow plan
(daemon/follow.py) has the agent copy at most `cap` elements of it at call time; `text` ones show as a string.
A `Smart` value holds a pointer to what it owns (Box, Rc, Arc, unique_ptr, shared_ptr), shown as that value
with its address. A `Sized` value (std::map) shows its element count only.

Recognised (by DWARF type name and field names, so a layout cut by depth below the fields used still works):

| type | shape | shown as |
|---|---|---|
| Rust `&str`, `String` | Counted, text | "the text" (a cut one ends in "…<K more bytes>") |
| Rust `&[T]`, `Vec<T, A>` | Counted | [items…] (then "… K more") |
| C++ `std::string` (libstdc++ `basic_string<char>`) | Counted, text | "the text" |
| C++ `std::vector<T>` | Counted (end pointer) | [items…] |
| Rust `Box<T>`, C++ `std::unique_ptr<T>` | Smart | {"address": "0x…", "value": v}; null when null |
| Rust `Rc<T>`, `Arc<T>` | Smart | {"address", "strong", "weak", "value"} |
| C++ `std::shared_ptr<T>` | Smart | {"address", "useCount", "value"} |
| C++ `std::map<K, V>` | Sized | {"size": n, "entries": "<not read: …>"} |
| Rust `Option<T>` | (variant) | null for None, the value for Some |
| Rust `Result<T, E>` | (variant) | {"Ok": v} or {"Err": e} |
| other Rust enums | (variant) | {"Variant": payload}, or "Variant" without data |

`template_args(layout)` gives a generic type's type arguments' layouts (from DWARF's template parameters): a
Rust Vec's buffer pointer is type-erased (`*const u8`), so its element type comes from `Vec<T, A>`'s T.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from strobe.symbols.types import MAX_ARRAY_ITEMS, MAX_STRING, ValueLayout

TemplateArgs = Callable[[ValueLayout], Sequence[ValueLayout]]
MAP_NOTE = "<not read: map entries are not followed; debug_read the map's nodes for them>"


@dataclass(frozen=True, slots=True)
class Counted:
    pointer: int  # offset of the data pointer, in the value
    count: int  # offset of the element count (a usize), or of the end pointer when `end`
    end: bool
    element: ValueLayout | None  # None: the element type is unknown (shown as the count only)
    text: bool  # UTF-8 text
    cap: int  # elements copied at most


@dataclass(frozen=True, slots=True)
class Smart:
    pointer: int  # offset of the owning pointer, in the value
    pointee: ValueLayout | None  # what is shown behind it (Rc/Arc: the RcInner/ArcInner block)
    kind: Literal["box", "rc", "shared"]
    counts: int = -1  # shared_ptr: offset of its control block pointer (_M_pi)


@dataclass(frozen=True, slots=True)
class Sized:
    count: int  # offset of the element count


Shape = Counted | Smart | Sized


def shape(layout: ValueLayout, template_args: TemplateArgs | None = None) -> Shape | None:
    """The language shape of a value laid out as `layout`, or None for an ordinary value."""
    name = _bare(layout.type_name)
    if layout.kind == "pointer":
        if name.startswith("Box<"):
            return Smart(0, layout.pointee, "box")
        return None
    if layout.kind != "struct" or layout.union or layout.truncated:
        return None
    if name in ("&str", "&mut str"):
        return _slice(layout, text=True)
    if name.startswith(("&[", "&mut [")):
        return _slice(layout, text=False)
    if name == "String":
        vec = _at(layout, "vec")
        if vec is not None:
            found = _vec(vec[1], vec[0], _U8)
            return None if found is None else Counted(found.pointer, found.count, False, _U8, True, MAX_STRING)
        return None
    if name.startswith("Vec<"):
        args = template_args(layout) if template_args is not None else ()
        return _vec(layout, 0, args[0] if args else None)
    if name.startswith(("Rc<", "Arc<")):
        return _rc(layout)
    return _cpp(layout, name)


def _bare(name: str) -> str:
    """A type name without its leading path: "alloc::vec::Vec<T, A>" -> "Vec<T, A>"."""
    head = name.split("<", 1)[0]
    cut = head.rfind("::")
    if cut < 0 or name.startswith("&"):
        return name
    return name[cut + 2:]


_U8 = ValueLayout("uint", "u8", 1)


def _at(layout: ValueLayout, *path: str) -> tuple[int, ValueLayout] | None:
    """(offset, layout) of the field at a path of field names, or None."""
    offset = 0
    for step in path:
        if layout.kind != "struct" or layout.truncated:
            return None
        found = layout.field(step)
        if found is None or found.bit_size is not None:
            return None
        offset += found.offset
        layout = found.layout
    return offset, layout


def _slice(layout: ValueLayout, text: bool) -> Counted | None:
    data, length = _at(layout, "data_ptr"), _at(layout, "length")
    if data is None or length is None or data[1].kind != "pointer":
        return None
    element = _U8 if text else data[1].pointee
    if element is not None and element.size <= 0:
        element = None
    return Counted(data[0], length[0], False, element, text, MAX_STRING if text else MAX_ARRAY_ITEMS)


def _vec(layout: ValueLayout, base: int, element: ValueLayout | None) -> Counted | None:
    """A Rust Vec's buffer pointer (RawVec.inner.ptr since Rust 1.80, RawVec.ptr before) and its len."""
    length = _at(layout, "len")
    pointer = _at(layout, "buf", "inner", "ptr") or _at(layout, "buf", "ptr")
    if length is None or pointer is None:
        return None
    if element is not None and element.size <= 0:
        element = None
    text = element is _U8
    return Counted(base + pointer[0], base + length[0], False, element, text, MAX_STRING if text else MAX_ARRAY_ITEMS)


def _rc(layout: ValueLayout) -> Smart | None:
    found = _at(layout, "ptr", "pointer")
    if found is None or found[1].kind != "pointer":
        return None
    return Smart(found[0], found[1].pointee, "rc")


def _cpp(layout: ValueLayout, name: str) -> Shape | None:
    text = _at(layout, "_M_dataplus", "_M_p")
    length = _at(layout, "_M_string_length")
    if text is not None and length is not None and text[1].kind == "pointer":
        pointee = text[1].pointee
        if pointee is None or pointee.size == 1:  # basic_string<char> (wide strings stay raw)
            return Counted(text[0], length[0], False, _U8, True, MAX_STRING)
        return None
    start, finish = _at(layout, "_M_impl", "_M_start"), _at(layout, "_M_impl", "_M_finish")
    if start is not None and finish is not None and start[1].kind == "pointer" and name.startswith("vector<"):
        element = start[1].pointee
        if element is None or element.size <= 0 or element.kind == "bool":
            return None
        return Counted(start[0], finish[0], True, element, False, MAX_ARRAY_ITEMS)
    if name.startswith("unique_ptr<"):
        found = _first_pointer(layout, 0, 0)
        return None if found is None else Smart(found[0], found[1].pointee, "box")
    pointer, counts = _at(layout, "_M_ptr"), _at(layout, "_M_refcount", "_M_pi")
    if pointer is not None and counts is not None and name.startswith("shared_ptr<"):
        return Smart(pointer[0], pointer[1].pointee, "shared", counts[0])
    count = _at(layout, "_M_t", "_M_impl", "_M_node_count")
    if count is not None and name.startswith(("map<", "multimap<", "set<", "multiset<")):
        return Sized(count[0])
    return None


def _first_pointer(layout: ValueLayout, base: int, level: int) -> tuple[int, ValueLayout] | None:
    if layout.kind == "pointer":
        return base, layout
    if layout.kind != "struct" or layout.truncated or level > 8:
        return None
    for f in layout.fields:
        found = _first_pointer(f.layout, base + f.offset, level + 1)
        if found is not None:
            return found
    return None


# --- presentation ------------------------------------------------------------------------------------

def text(data: bytes, total: int) -> str:
    """Counted text: its bytes as UTF-8, a cut one marked with how many bytes were left."""
    shown = data.decode("utf-8", "replace")
    if total > len(data):
        shown += f"…<{total - len(data)} more bytes>"
    return shown


def items(values: list[Any], total: int) -> list[Any]:
    """Counted elements: the ones copied, then "… K more" for those that were not."""
    if total > len(values):
        values.append(f"… {total - len(values)} more")
    return values


def unreadable(why: str) -> str:
    return f"<unreadable: {why}>"


def smart(shape_: Smart, address: int, value: Any, counts: dict[str, Any] | None = None) -> Any:
    """An owning pointer as what it owns, with its address (Rc/Arc: the counts of its block and its value)."""
    if address == 0:
        return None
    out: dict[str, Any] = {"address": f"0x{address:x}"}
    if shape_.kind == "rc" and isinstance(value, dict):
        out["strong"], out["weak"] = _count(value.get("strong")), _count(value.get("weak"))
        out["value"] = value.get("value", value.get("data"))
        return out
    if counts:
        out.update(counts)
    out["value"] = value
    return out


def _count(value: Any) -> Any:
    """Rc's Cell<usize>{value: UnsafeCell{value: n}}, Arc's AtomicUsize{v: UnsafeCell{value: n}}: the n."""
    for _ in range(4):
        if not isinstance(value, dict) or len(value) != 1:
            break
        value = next(iter(value.values()))
    return value


def sized(count: int) -> dict[str, Any]:
    return {"size": count, "entries": MAP_NOTE}


def enum_value(layout: ValueLayout, variant: str, payload: Any, unit: bool) -> Any:
    """A Rust enum's live variant: Option as null or the value, Result as {"Ok": v} / {"Err": e}, others as
    {"Variant": payload} or "Variant" (a variant without data)."""
    name = _bare(layout.type_name)
    if name.startswith("Option<") and variant in ("None", "Some"):
        return None if variant == "None" else payload
    if unit:
        return variant
    return {variant: payload}


def tuple_payload(value: Any) -> Any:
    """A tuple variant's fields (__0, __1…) as its one value or a list: Some(5) -> 5."""
    if isinstance(value, dict) and value and all(k.startswith("__") and k[2:].isdigit() for k in value):
        fields = list(value.values())
        return fields[0] if len(fields) == 1 else fields
    return value
