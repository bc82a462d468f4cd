"""Register plans: where each parameter and the return value of a traced function sit in the registers the
agent captures, and how to show them (System V x86-64 calling convention, Itanium C++ ABI).

The agent records the six integer argument registers (rdi, rsi, rdx, rcx, r8, r9) on entry and rax on exit.
`register_plan(module, static_address)` reads the function's DWARF signature and works out, per parameter,
which of those registers hold which bytes of it, as JSON the store decodes at query time (store/registers.py):

    {"params": [{"name": "count", "type": "int", "value": {"kind": "int", "size": 4},
                 "pieces": [{"at": 0, "size": 4, "reg": "rdi"}]},
                {"name": "scale", "type": "double", "note": "<double in xmm register: not captured>"}],
     "returns": {"type": "long int", "value": {"kind": "int", "size": 8}, "pieces": [...rax...]},
     "variadic": false, "registers": 1}

A piece fills bytes [at, at + size) of the value from the low bytes of a register ("reg"), or says why they
are not available ("missing"). `value` is the value's layout in a compact form: kind (int, uint, bool, char,
float, pointer, enum, struct, array, bytes, opaque), size, and per kind fields/element/names. `registers`
is how many argument registers the plan reads (a struct may take two, a hidden return pointer one).

Classification (SysV §3.2.3): integers, pointers, bools, chars and enums are INTEGER; float/double SSE (xmm
registers, not captured); long double x87 (in memory); structs of at most 16 bytes are split in eightbytes
classed by their fields (INTEGER wins over SSE), larger ones or ones with a misaligned field are in memory.
An argument goes on the stack whole when its registers do not fit. A struct returned in memory takes rdi
for the hidden return pointer (before `this`) and rax holds that address on return. C++ classes that are not
trivially copyable (a user destructor or copy/move constructor, virtual functions) are passed and returned
through a hidden reference whatever their size: seen in the parameter's location (a dereference at -O0) or
in the class's members. Rust's own ABI differs for aggregates (see `_rust`); an enum with data stops the
decoding of the integer registers after it.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from strobe.errors import StrobeError
from strobe.symbols.dwarf_dies import (
    AT_ABSTRACT_ORIGIN,
    AT_ARTIFICIAL,
    AT_DECLARATION,
    AT_LOCATION,
    AT_SPECIFICATION,
    AT_TYPE,
    TAG_ARRAY_TYPE,
    TAG_FORMAL_PARAMETER,
    TAG_INHERITANCE,
    TAG_MEMBER,
    TAG_POINTER_TYPE,
    TAG_SUBPROGRAM,
    Die,
    DieReader,
)
from strobe.symbols.dwarf_forms import DECODE_ERRORS, LANG_RUST
from strobe.symbols.dwarf_types import POINTER_TAGS, STRUCT_TAGS, TypeTable
from strobe.symbols.elf import open_elf, read_symbol_table
from strobe.symbols.signatures import FunctionSignature
from strobe.symbols.types import ValueLayout
from strobe.symbols.variables import VariableIndex, variable_index

GPRS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
_SSE_REGS = 8
_DEPTH = 2  # struct levels first asked for; a small struct nested deeper is asked for again at _DEEP
_DEEP = 16
_AT_CALLING_CONVENTION = 0x36
_CC_PASS_BY_REFERENCE, _CC_PASS_BY_VALUE = 4, 5
_AT_VIRTUALITY = 0x4C
_AT_DEFAULTED = 0x8B
_DEFAULTED_IN_CLASS = 1
_OP_DEREF = 0x06
_OP_FBREG = 0x91
_OP_BREG0 = 0x70
_ARGUMENT_DWARF_REGS = frozenset({5, 4, 1, 2, 8, 9})  # rdi, rsi, rdx, rcx, r8, r9 in DWARF numbering
_MAX_LEVEL = 12

# Eightbyte classes.
NONE, INT, SSE, SSEUP, X87, X87UP, MEMORY = "none", "int", "sse", "sseup", "x87", "x87up", "memory"


class _Truncated(Exception):
    """A struct inside a register-passed value was cut by the layout depth: ask again deeper."""


class _Unknown(Exception):
    """A value whose passing convention this module cannot tell."""


@dataclass
class _Passing:
    """How one value travels: its eightbyte parts (offset, size, class), or memory / a hidden reference."""

    parts: list[tuple[int, int, str]] = field(default_factory=list)
    memory: bool = False
    reference: bool = False
    x87: bool = False


# --- the plan ---------------------------------------------------------------------------------------

@dataclass
class _Binary:
    plans: dict[int, str | None] = field(default_factory=dict)
    clones: frozenset[int] | None = None  # addresses of compiler-made copies with their own convention


_BINARIES: weakref.WeakKeyDictionary[VariableIndex, _Binary] = weakref.WeakKeyDictionary()
_BINARIES_LOCK = threading.Lock()
_CLONE_MARKS = (b".isra.", b".constprop.", b".part.")  # GCC's IPA-SRA, constant-propagation, split copies


def register_plan(module_path: str, static_address: int) -> str | None:
    """The JSON register plan of the function whose static low_pc is `static_address` in `module_path`, or
    None when DWARF describes no function there, the file has no DWARF, or the code there is a copy the
    compiler made with parameters of its own (foo.isra.0, foo.constprop.0, foo.part.0). Cached per binary."""
    index = variable_index(module_path)
    with _BINARIES_LOCK:
        binary = _BINARIES.setdefault(index, _Binary())
        if static_address in binary.plans:
            return binary.plans[static_address]
    try:
        plan = None if static_address in _clones(index, binary) else _plan(index, static_address)
    except (StrobeError, ValueError, *DECODE_ERRORS):
        plan = None
    text = None if plan is None else json.dumps(plan, separators=(",", ":"))
    with _BINARIES_LOCK:
        binary.plans[static_address] = text
    return text


def _clones(index: VariableIndex, binary: _Binary) -> frozenset[int]:
    if binary.clones is None:
        with open_elf(index.path) as elf:
            table = read_symbol_table(elf)
        found = np.unique(np.concatenate([table.addresses[table.containing(mark)] for mark in _CLONE_MARKS]))
        binary.clones = frozenset(int(a) for a in found.tolist())
    return binary.clones


def _plan(index: VariableIndex, address: int) -> dict[str, Any] | None:
    with index.lock:  # the index's DIE reader and type table are not thread-safe
        for depth in (_DEPTH, _DEEP):
            signature = index.signature(address, depth)
            if signature is None:
                return None
            try:
                return _Planner(index, signature, final=depth == _DEEP).plan()
            except _Truncated:
                continue
    return None


class _Planner:
    def __init__(self, index: VariableIndex, signature: FunctionSignature, final: bool) -> None:
        self.index = index
        self.signature = signature
        self.final = final  # a struct still cut by the depth is not decoded (instead of asking deeper)
        self._dies: _FunctionDies | None = None
        self._looked = False

    def plan(self) -> dict[str, Any]:
        sig = self.signature
        gpr, sse = 0, 0
        returns, sret, unsure = self._returns()
        if sret:
            gpr = 1  # the hidden return pointer, before `this`
        params: list[dict[str, Any]] = []
        lost: str | None = None  # why later integer registers cannot be told apart
        if unsure:
            lost = "<not decoded: the return value may take the first register>"
        for i, param in enumerate(sig.params):
            entry: dict[str, Any] = {"name": param.name, "type": param.layout.type_name}
            params.append(entry)
            if lost is not None:
                entry["note"] = lost
                continue
            try:
                passing = self._param(i, param.layout)
            except _Unknown:
                lost = "<not decoded: an earlier parameter's registers are unknown>"
                entry["note"] = "<not decoded: passed by the compiler's own convention>"
                continue
            ints = sum(1 for _, _, c in passing.parts if c == INT)
            sses = sum(1 for _, _, c in passing.parts if c == SSE)
            what = _what(param.layout)
            if passing.memory or passing.x87:
                entry["note"] = f"<{what} passed in memory: not captured>"
            elif gpr + ints > len(GPRS) or sse + sses > _SSE_REGS:
                entry["note"] = f"<{what} on the stack: not captured>"
            elif not passing.parts:
                entry["value"] = _spec(param.layout)  # an empty struct: nothing to pass
                entry["pieces"] = []
            elif ints == 0:
                sse += sses
                entry["note"] = f"<{what} in xmm register{'s' if sses > 1 else ''}: not captured>"
            else:
                pieces: list[dict[str, Any]] = []
                for at, size, cls in passing.parts:
                    if cls == INT:
                        pieces.append({"at": at, "size": size, "reg": GPRS[gpr]})
                        gpr += 1
                    else:
                        sse += 1
                        pieces.append({"at": at, "size": size, "missing": "<in xmm register: not captured>"})
                value = _POINTER if passing.reference else _spec(param.layout)
                entry.update(value=value, pieces=pieces)
                if passing.reference:
                    entry["reference"] = True
        return {"params": params, "returns": returns, "variadic": sig.variadic, "registers": gpr}

    # --- return value ----------------------------------------------------------------------------
    def _returns(self) -> tuple[dict[str, Any], bool, bool]:
        """The return value's plan; whether a hidden return pointer takes rdi; whether that is unknown."""
        layout = self.signature.returns
        if layout is None:
            return {"type": "void"}, False, False
        out: dict[str, Any] = {"type": layout.type_name}
        try:
            passing = self._classify(layout, self._return_by_reference(layout), returning=True)
        except _Unknown:
            out["note"] = "<not decoded: returned by the compiler's own convention>"
            return out, False, layout.size > 8  # larger values may come back through a hidden pointer
        what = _what(layout)
        if passing.memory or passing.reference:
            out.update(value=_POINTER, pieces=[{"at": 0, "size": 8, "reg": "rax"}], address=True)
            return out, True, False
        if passing.x87:
            out["note"] = f"<{what} in st0: not captured>"
            return out, False, False
        if not passing.parts:
            out.update(value=_spec(layout), pieces=[])
            return out, False, False
        if not any(cls == INT for _, _, cls in passing.parts):
            out["note"] = f"<{what} in xmm0: not captured>"
            return out, False, False
        pieces: list[dict[str, Any]] = []
        int_regs, sse_regs = iter(("rax", "rdx")), iter(("xmm0", "xmm1"))
        for at, size, cls in passing.parts:
            reg = next(int_regs) if cls == INT else next(sse_regs)
            if reg == "rax":
                pieces.append({"at": at, "size": size, "reg": reg})
            else:
                pieces.append({"at": at, "size": size, "missing": f"<in {reg}: not captured>"})
        out.update(value=_spec(layout), pieces=pieces)
        return out, False, False

    # --- classification --------------------------------------------------------------------------
    def _param(self, i: int, layout: ValueLayout) -> _Passing:
        return self._classify(layout, self._param_by_reference(i, layout), returning=False)

    def _classify(self, layout: ValueLayout, reference: bool, returning: bool) -> _Passing:
        if reference:
            return _Passing([(0, 8, INT)], reference=True)
        try:
            if _aggregate(layout) and self._rust():
                return _rust(layout, returning)
            return _sysv(layout)
        except _Truncated:
            if self.final:
                raise _Unknown from None
            raise

    def _param_by_reference(self, i: int, layout: ValueLayout) -> bool:
        if layout.kind != "struct":
            return False
        dies = self._function_dies()
        if dies is None or dies.rust or i >= len(dies.params):
            return False
        return dies.by_reference(dies.params[i])

    def _return_by_reference(self, layout: ValueLayout) -> bool:
        if layout.kind != "struct":
            return False
        dies = self._function_dies()
        if dies is None or dies.rust or dies.returns is None:
            return False
        return dies.nontrivial(dies.returns)

    def _rust(self) -> bool:
        dies = self._function_dies()
        return dies is not None and dies.rust

    def _function_dies(self) -> _FunctionDies | None:
        if not self._looked:
            self._looked = True
            try:
                self._dies = _FunctionDies.find(self.index, self.signature.address, len(self.signature.params))
            except (ValueError, *DECODE_ERRORS):
                self._dies = None
        return self._dies


_POINTER = {"kind": "pointer", "size": 8}


def _what(layout: ValueLayout) -> str:
    if layout.kind == "struct":
        return "union" if layout.union else "struct"
    return layout.type_name


def _aggregate(layout: ValueLayout) -> bool:
    return layout.kind in ("struct", "array") or (layout.kind == "enum" and bool(layout.variants))


def _sysv(layout: ValueLayout) -> _Passing:
    size = layout.size
    if size > 16:
        return _Passing(memory=True)
    if size == 0:
        return _Passing()
    classes = [NONE] * ((size + 7) // 8)
    if not _merge_value(layout, 0, classes, 0):
        return _Passing(memory=True)
    if MEMORY in classes:
        return _Passing(memory=True)
    if X87 in classes or X87UP in classes:
        return _Passing(x87=True)
    parts: list[tuple[int, int, str]] = []
    for i, cls in enumerate(classes):
        at = 8 * i
        if cls == SSEUP and parts and parts[-1][2] == SSE:
            parts[-1] = (parts[-1][0], parts[-1][1] + min(8, size - at), SSE)  # one xmm register for both
        elif cls in (INT, SSE, SSEUP):
            parts.append((at, min(8, size - at), INT if cls == INT else SSE))
    return _Passing(parts)


def _merge_value(layout: ValueLayout, at: int, classes: list[str], level: int) -> bool:
    """Merge the classes of `layout`'s scalars (at byte `at`) into the eightbytes; False: a misaligned field."""
    kind = layout.kind
    if level > _MAX_LEVEL:
        raise _Unknown
    if kind == "struct":
        if layout.truncated:
            raise _Truncated
        for f in layout.fields:
            if f.bit_size is not None:
                end = at + f.offset + ((f.bit_offset or 0) + f.bit_size + 7) // 8
                _merge_range(classes, at + f.offset, end, INT)
            elif not _merge_value(f.layout, at + f.offset, classes, level + 1):
                return False
        return True
    if kind == "array":
        if layout.element is None:
            raise _Unknown
        step = layout.element.size
        return all(_merge_value(layout.element, at + i * step, classes, level + 1) for i in range(layout.count))
    leaf = _leaf_classes(layout)
    align = (layout.size // 2 if layout.kind == "bytes" else min(layout.size, 16)) or 1  # complex: its parts'
    if at % align:
        return False
    for i, cls in enumerate(leaf):
        _merge_range(classes, at + 8 * i, at + min(8 * (i + 1), layout.size), cls)
    return True


def _leaf_classes(layout: ValueLayout) -> list[str]:
    kind, size, name = layout.kind, layout.size, layout.type_name
    if kind in ("int", "uint", "bool", "char", "pointer") or (kind == "enum" and not layout.variants):
        if size <= 8:
            return [INT]
        if size == 16:
            return [INT, INT]  # __int128
    elif kind == "float":
        if size <= 8:
            return [SSE]
        if "long double" in name or size in (10, 12):
            return [X87, X87UP]
        return [SSE, SSEUP]  # _Float128
    elif kind == "bytes":
        if "complex" in name:
            if size == 8:
                return [SSE]
            if size == 16:
                return [SSE, SSE]
            return [MEMORY]
        if name == "<member pointer>" and size in (8, 16):
            return [INT] * (size // 8)
    raise _Unknown


def _merge_range(classes: list[str], start: int, end: int, cls: str) -> None:
    for i in range(start // 8, min((max(end, start + 1) + 7) // 8, len(classes))):
        classes[i] = _merge(classes[i], cls)


def _merge(a: str, b: str) -> str:
    if a == b:
        return a
    if a == NONE:
        return b
    if b == NONE:
        return a
    if MEMORY in (a, b):
        return MEMORY
    if INT in (a, b):
        return INT
    if a in (X87, X87UP) or b in (X87, X87UP):
        return MEMORY
    return SSE


def _rust(layout: ValueLayout, returning: bool) -> _Passing:
    """Rust's own ABI (as rustc 1.95 compiles it): a value with the ABI of one or two scalars is passed and
    returned as those scalars (a pair in two registers); other aggregates up to 8 bytes in one integer
    register, larger ones by reference (returned through a hidden pointer). Enums with data: not decoded."""
    if layout.size <= 16:  # (one or two scalars take at most 16 bytes)
        leaves = _rust_scalars(layout, 0)  # an enum with data: its scalars depend on rustc's layout (_Unknown)
        if leaves is not None:
            return _Passing([(at + 8 * i, min(8, leaf.size - 8 * i), cls) for at, leaf in leaves
                             for i, cls in enumerate(_leaf_classes(leaf))])
        if layout.size == 0:
            return _Passing()
        if layout.size <= 8:
            return _Passing([(0, layout.size, INT)])
    return _Passing(memory=True) if returning else _Passing([(0, 8, INT)], reference=True)


def _rust_scalars(layout: ValueLayout, at: int) -> list[tuple[int, ValueLayout]] | None:
    """The one or two scalars a Rust value is made of (newtypes looked through), or None."""
    if layout.kind in ("int", "uint", "bool", "char", "pointer", "float") or (
        layout.kind == "enum" and not layout.variants
    ):
        return [(at, layout)] if layout.size in (1, 2, 4, 8, 16) else None
    if layout.kind == "enum":
        raise _Unknown
    if layout.kind != "struct" or layout.union:
        return None
    if layout.truncated:
        raise _Truncated
    fields = [f for f in layout.fields if f.layout.size > 0]
    if any(f.bit_size is not None for f in fields):
        return None
    if len(fields) == 1 and fields[0].offset == 0 and fields[0].layout.size == layout.size:
        return _rust_scalars(fields[0].layout, at)
    if len(fields) == 2:
        first, second = (_rust_scalars(f.layout, at + f.offset) for f in fields)
        if first is not None and second is not None and len(first) == 1 and len(second) == 1:
            return sorted([first[0], second[0]], key=lambda leaf: leaf[0])
    return None


# --- the layout in the plan -------------------------------------------------------------------------


def _spec(layout: ValueLayout) -> dict[str, Any]:
    kind = layout.kind
    if kind == "struct":
        if layout.truncated:
            return {"kind": "opaque", "size": layout.size, "text": "<struct>"}
        fields = []
        for f in layout.fields:
            entry: dict[str, Any] = {"name": f.name, "offset": f.offset, "value": _spec(f.layout)}
            if f.bit_size is not None:
                entry.update(bitOffset=f.bit_offset or 0, bitSize=f.bit_size)
            fields.append(entry)
        return {"kind": "struct", "size": layout.size, "fields": fields}
    if kind == "array" and layout.element is not None:
        return {"kind": "array", "size": layout.size, "count": layout.count, "element": _spec(layout.element)}
    if kind == "enum":
        if layout.variants:
            return {"kind": "opaque", "size": layout.size, "text": f"<enum {layout.type_name}>"}
        return {"kind": "enum", "size": layout.size, "signed": layout.signed,
                "names": {str(value): name for value, name in layout.enumerators}}
    if kind in ("int", "uint", "bool", "char", "float", "pointer"):
        return {"kind": kind, "size": layout.size}
    return {"kind": "bytes", "size": layout.size}


# --- the function's DIEs: hidden references, language ----------------------------------------------


@dataclass
class _FunctionDies:
    types: TypeTable
    params: list[Die]  # formal parameters, as FunctionSignature lists them
    returns: int | None  # the return type's DIE
    rust: bool

    @classmethod
    def find(cls, index: VariableIndex, address: int, count: int) -> _FunctionDies | None:
        """The DIEs behind a signature (the caller holds the index's lock)."""
        types = index.types
        reader = types.reader
        die = index.function_die(address)
        if die is None:
            return None
        chain = _chain(reader, die)
        returns = next((d.ref(AT_TYPE) for d in chain if AT_TYPE in d.attrs), None)
        source = next((d for d in chain if any(c.tag == TAG_FORMAL_PARAMETER for c in reader.children(d))), die)
        params = [c for c in reader.children(source) if c.tag == TAG_FORMAL_PARAMETER]
        if len(params) != count:
            params = []
        return cls(types, params, returns, die.unit.language == LANG_RUST)

    def by_reference(self, param: Die) -> bool:
        """A class parameter passed through a hidden reference. Its location says so when it is a single
        expression: the address in an argument register, or a frame slot holding the address (-O0); a frame
        slot holding the value says it is not. Otherwise: when its class is not trivially copyable."""
        location = param.get(AT_LOCATION)
        if isinstance(location, bytes) and location:
            first = location[0]
            if first == _OP_FBREG or _OP_BREG0 <= first <= _OP_BREG0 + 31:
                return location[-1] == _OP_DEREF or first - _OP_BREG0 in _ARGUMENT_DWARF_REGS
        links = _chain(self.types.reader, param)
        type_ref = next((d.ref(AT_TYPE) for d in links if AT_TYPE in d.attrs), None)
        return type_ref is not None and self.nontrivial(type_ref)

    def nontrivial(self, ref: int, level: int = 0) -> bool:
        """Not trivially copyable or destructible for the purposes of calls (Itanium C++ ABI)."""
        die = self.types.strip(ref)
        while die is not None and die.tag == TAG_ARRAY_TYPE:
            die = self.types.strip(die.ref(AT_TYPE))
        if die is None or die.tag not in STRUCT_TAGS or level > _MAX_LEVEL:
            return False
        convention = die.integer(_AT_CALLING_CONVENTION)  # clang says it on the type
        if convention in (_CC_PASS_BY_REFERENCE, _CC_PASS_BY_VALUE):
            return convention == _CC_PASS_BY_REFERENCE
        reader = self.types.reader
        for child in reader.children(die):
            if child.tag == TAG_SUBPROGRAM:
                if child.get(_AT_VIRTUALITY):
                    return True
                user = not child.get(AT_ARTIFICIAL) and child.integer(_AT_DEFAULTED) != _DEFAULTED_IN_CLASS
                if user and (str(child.name or "").startswith("~") or self._copy_or_move(child, die)):
                    return True
            elif child.tag == TAG_INHERITANCE:
                base = child.ref(AT_TYPE)
                if child.get(_AT_VIRTUALITY) or (base is not None and self.nontrivial(base, level + 1)):
                    return True
            elif child.tag == TAG_MEMBER and not child.get(AT_DECLARATION):
                if str(child.name or "").startswith("_vptr"):
                    return True
                member = child.ref(AT_TYPE)
                if member is not None and self.nontrivial(member, level + 1):
                    return True
        return False

    def _copy_or_move(self, method: Die, owner: Die) -> bool:
        """A constructor whose first parameter is a reference to its own class."""
        name = (owner.name or "").split("<", 1)[0]
        if not name or method.name != name:
            return False
        params = [c for c in self.types.reader.children(method)
                  if c.tag == TAG_FORMAL_PARAMETER and not c.get(AT_ARTIFICIAL)]
        if not params:
            return False
        ref = self.types.strip(params[0].ref(AT_TYPE))
        if ref is None or ref.tag not in POINTER_TAGS or ref.tag == TAG_POINTER_TYPE:
            return False  # a constructor taking a pointer is not a copy constructor
        target = self.types.strip(ref.ref(AT_TYPE))
        return target is not None and (target.offset == owner.offset or target.name == owner.name)


def _chain(reader: DieReader, die: Die) -> list[Die]:
    """`die` and the DIEs it refers to through abstract origins and specifications."""
    chain = [die]
    for _ in range(8):
        last = chain[-1]
        target = reader.follow(last, AT_ABSTRACT_ORIGIN) or reader.follow(last, AT_SPECIFICATION)
        if target is None or any(target.offset == d.offset for d in chain):
            break
        chain.append(target)
    return chain
