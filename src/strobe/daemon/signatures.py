"""Register plans: where each parameter and the return value of a traced function sit in the registers and
stack words the agent captures, and how to show them (System V x86-64 calling convention, Itanium C++ ABI).

The agent records the six integer argument registers (rdi, rsi, rdx, rcx, r8, r9) on entry and rax on exit;
a function whose plan says so (`capture`, records.WATCH_CAPTURE_* bits, sent to the agent with its follow
plan) also gets the low 8 bytes of xmm0-xmm5 and six stack words (rsp + 8 ... rsp + 48) on entry, and rdx,
xmm0 and xmm1 on exit. `register_plan(module, static_address)` reads the function's DWARF signature and works
out, per parameter, which of those hold which bytes of it, as JSON the store decodes at query time
(store/registers.py):

    {"params": [{"name": "count", "type": "int", "value": {"kind": "int", "size": 4},
                 "pieces": [{"at": 0, "size": 4, "reg": "rdi"}]},
                {"name": "scale", "type": "double", "value": {"kind": "float", "size": 8},
                 "pieces": [{"at": 0, "size": 8, "reg": "xmm0"}]}],
     "returns": {"type": "long int", "value": {"kind": "int", "size": 8}, "pieces": [...rax...]},
     "variadic": false, "registers": 1, "capture": 128}

A piece fills bytes [at, at + size) of the value from the low bytes of a register or captured stack word ("reg":
rdi…r9, xmm0…xmm5, stack0…stack5 on entry; rax, rdx, xmm0, xmm1 on exit), or says why they are not available
("missing": xmm6-7, stack arguments past 48 bytes, the upper half of a vector register). `value` is the value's
layout in a compact form: kind (int, uint, bool, char, float, pointer, enum, struct, array, bytes, opaque), size,
and per kind fields/element/names. `registers` is how many argument registers the plan reads (a struct may take two,
a hidden return pointer one).

Which eightbytes of a value travel in integer registers, xmm registers, x87 registers or memory is worked out by
daemon/passing.py (SysV §3.2.3, and Rust's own ABI for Rust aggregates); whether a C++ class travels through a
hidden reference whatever its size (not trivially copyable: a user destructor or copy/move constructor, virtual
functions) by daemon/function_dies.py. This module assigns the registers in order: an argument goes on the stack
whole when its registers do not fit (and so do values passed in memory: structs over 16 bytes, long double), each
stack argument 8-byte aligned (16 for 16-aligned types); a struct returned in memory takes rdi for the hidden return
pointer (before `this`) and rax holds that address on return; a value whose convention is unknown (a Rust enum with
data) stops the decoding of the integer registers after it.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from strobe.daemon.function_dies import FunctionDies
from strobe.daemon.passing import (
    INT,
    SSE,
    Passing,
    TruncatedLayout,
    UnknownPassing,
    is_aggregate,
    rust_passing,
    sysv_passing,
)
from strobe.errors import StrobeError
from strobe.instrument.records import WATCH_CAPTURE_RETURN, WATCH_CAPTURE_STACK, WATCH_CAPTURE_XMM
from strobe.symbols.debug_files import open_dwarf_elf
from strobe.symbols.dwarf_forms import DECODE_ERRORS
from strobe.symbols.elf import read_symbol_table
from strobe.symbols.signatures import FunctionSignature
from strobe.symbols.types import ValueLayout
from strobe.symbols.variables import VariableIndex, variable_index

GPRS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
_SSE_REGS = 8
_DEPTH = 2  # struct levels first asked for; a small struct nested deeper is asked for again at _DEEP
_DEEP = 16


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
        with open_dwarf_elf(index.path) as (elf, debug):  # .symtab may be only in its separate debug file
            table = read_symbol_table(elf, debug)
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
            except TruncatedLayout:
                continue
    return None


class _Planner:
    def __init__(self, index: VariableIndex, signature: FunctionSignature, final: bool) -> None:
        self.index = index
        self.signature = signature
        self.final = final  # a struct still cut by the depth is not decoded (instead of asking deeper)
        self._dies: FunctionDies | None = None
        self._looked = False

    def plan(self) -> dict[str, Any]:
        sig = self.signature
        returns, sret, unsure = self._returns()
        regs = _Registers(gpr=1 if sret else 0)  # the hidden return pointer comes before `this`
        params: list[dict[str, Any]] = []
        lost: str | None = None  # why later registers cannot be told apart
        if unsure:
            lost = "<not decoded: the return value may take the first register>"
        elif self._hidden_environment():
            params.append({"name": CLOSURE_ENVIRONMENT, "type": "closure environment", "value": _POINTER,
                           "pieces": [{"at": 0, "size": 8, "reg": GPRS[regs.gpr]}]})
            regs.gpr += 1
        for i, param in enumerate(sig.params):
            entry: dict[str, Any] = {"name": param.name, "type": param.layout.type_name}
            params.append(entry)
            if lost is not None:
                entry["note"] = lost
                continue
            try:
                passing = self._param(i, param.layout)
            except UnknownPassing:
                lost = "<not decoded: an earlier parameter's registers are unknown>"
                entry["note"] = "<not decoded: passed by the compiler's own convention>"
                continue
            if not passing.parts and not passing.memory and not passing.x87:
                entry["value"] = _spec(param.layout)  # an empty struct: nothing to pass
                entry["pieces"] = []
                continue
            pieces = regs.assign(passing, param.layout)
            value = _POINTER if passing.reference else _spec(param.layout)
            entry.update(value=value, pieces=pieces)
            if passing.reference:
                entry["reference"] = True
        capture = regs.capture | (returns.pop("capture", 0))
        out = {"params": params, "returns": returns, "variadic": sig.variadic, "registers": regs.gpr}
        if capture:
            out["capture"] = capture
        return out

    # --- return value ----------------------------------------------------------------------------
    def _returns(self) -> tuple[dict[str, Any], bool, bool]:
        """The return value's plan; whether a hidden return pointer takes rdi; whether that is unknown."""
        layout = self.signature.returns
        if layout is None:
            return {"type": "void"}, False, False
        out: dict[str, Any] = {"type": layout.type_name}
        try:
            passing = self._classify(layout, self._return_by_reference(layout), returning=True)
        except UnknownPassing:
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
        pieces: list[dict[str, Any]] = []
        int_regs, sse_regs = iter(("rax", "rdx")), iter(("xmm0", "xmm1"))
        for at, size, cls in passing.parts:
            reg = next(int_regs) if cls == INT else next(sse_regs)
            pieces += _register_pieces(at, size, reg)
        if any(p.get("reg") != "rax" for p in pieces):
            out["capture"] = WATCH_CAPTURE_RETURN
        out.update(value=_spec(layout), pieces=pieces)
        return out, False, False

    # --- classification --------------------------------------------------------------------------
    def _param(self, i: int, layout: ValueLayout) -> Passing:
        return self._classify(layout, self._param_by_reference(i, layout), returning=False)

    def _classify(self, layout: ValueLayout, reference: bool, returning: bool) -> Passing:
        if reference:
            return Passing([(0, 8, INT)], reference=True)
        try:
            if is_aggregate(layout) and self._rust():
                return rust_passing(layout, returning)
            return sysv_passing(layout)
        except TruncatedLayout:
            if self.final:
                raise UnknownPassing from None
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

    def _hidden_environment(self) -> bool:
        """A Rust closure whose DWARF leaves out its environment parameter (rustc does when the closure captures
        something; the captures show as its variables): the environment still takes the first register, a
        pointer (or the captures themselves when they fit in it), and the declared parameters follow it."""
        sig = self.signature
        if not _CLOSURE.search(sig.name) or not self._rust():
            return False
        return not sig.params or "closure_env" not in sig.params[0].layout.type_name

    def _rust(self) -> bool:
        dies = self._function_dies()
        return dies is not None and dies.rust

    def _function_dies(self) -> FunctionDies | None:
        if not self._looked:
            self._looked = True
            try:
                self._dies = FunctionDies.find(self.index, self.signature.address, len(self.signature.params))
            except (ValueError, *DECODE_ERRORS):
                self._dies = None
        return self._dies


_POINTER = {"kind": "pointer", "size": 8}
_CLOSURE = re.compile(r"\{(?:\{closure\}|closure#\d+)\}$")  # legacy and v0 manglings' closure names
CLOSURE_ENVIRONMENT = "(closure environment)"
_XMM_CAPTURED = 6  # xmm0-5: the words of a KIND_XMM record
_STACK_CAPTURED = 6  # stack words of a KIND_STACK record (48 bytes from rsp + 8)


class _Registers:
    """Where the next argument goes (SysV §3.2.3): integer registers, xmm registers, or the stack, an argument
    whose registers do not all fit going on the stack whole; and what its calls must capture for that."""

    def __init__(self, gpr: int) -> None:
        self.gpr = gpr
        self.sse = 0
        self.stack = 0  # bytes of stack arguments so far (from rsp + 8 on entry)
        self.capture = 0

    def assign(self, passing: Passing, layout: ValueLayout) -> list[dict[str, Any]]:
        ints = sum(1 for _, _, c in passing.parts if c == INT)
        sses = sum(1 for _, _, c in passing.parts if c == SSE)
        if passing.memory or passing.x87 or self.gpr + ints > len(GPRS) or self.sse + sses > _SSE_REGS:
            return self._on_stack(layout)
        pieces: list[dict[str, Any]] = []
        for at, size, cls in passing.parts:
            if cls == INT:
                pieces.append({"at": at, "size": size, "reg": GPRS[self.gpr]})
                self.gpr += 1
            else:
                if self.sse < _XMM_CAPTURED:
                    pieces += _register_pieces(at, size, f"xmm{self.sse}")
                    self.capture |= WATCH_CAPTURE_XMM
                else:
                    pieces.append({"at": at, "size": size,
                                   "missing": f"<in xmm{self.sse}: not captured (Strobe keeps xmm0-xmm5)>"})
                self.sse += 1
        return pieces

    def _on_stack(self, layout: ValueLayout) -> list[dict[str, Any]]:
        """The value's eightbytes in the stack words its calls capture (SysV: each argument 8-aligned, 16 for
        16-aligned types, in order)."""
        align = 16 if _alignment(layout) > 8 else 8
        start = (self.stack + align - 1) // align * align
        size = layout.size
        self.stack = start + (size + 7) // 8 * 8
        pieces: list[dict[str, Any]] = []
        for at in range(0, size, 8):
            word = (start + at) // 8
            width = min(8, size - at)
            if word < _STACK_CAPTURED:
                pieces.append({"at": at, "size": width, "reg": f"stack{word}"})
                self.capture |= WATCH_CAPTURE_STACK
            else:
                pieces.append({"at": at, "size": width, "missing": "<on the stack past the first "
                               f"{8 * _STACK_CAPTURED} bytes of stack arguments: not captured>"})
        return pieces


def _register_pieces(at: int, size: int, reg: str) -> list[dict[str, Any]]:
    """A part in one register: only the low 8 bytes of an xmm register are captured."""
    if size <= 8:
        return [{"at": at, "size": size, "reg": reg}]
    return [{"at": at, "size": 8, "reg": reg},
            {"at": at + 8, "size": size - 8, "missing": f"<upper half of {reg}: not captured>"}]


def _alignment(layout: ValueLayout) -> int:
    if layout.kind == "struct":
        return max((_alignment(f.layout) for f in layout.fields), default=1)
    if layout.kind == "array" and layout.element is not None:
        return _alignment(layout.element)
    return min(max(layout.size, 1), 16)


def _what(layout: ValueLayout) -> str:
    if layout.kind == "struct":
        return "union" if layout.union else "struct"
    return layout.type_name

# --- the layout in the plan -------------------------------------------------------------------------


def _variants_spec(layout: ValueLayout) -> dict[str, Any]:
    """A Rust enum with data: where its discriminant is, and per variant the discriminant value that selects it
    ("match"; none: the default, a niche layout's dataful variant), its data and how it shows ("show": "none"
    for Option's None, "value" for Some's, "unit" for a variant without data, else "tagged": {name: data})."""
    option = layout.type_name.startswith(("core::option::Option<", "Option<"))
    variants: list[dict[str, Any]] = []
    for variant in layout.variants:
        data = variant.field.layout
        unit = data.kind == "struct" and not data.truncated and not data.fields
        name = variant.field.name
        show = ("none" if name == "None" else "value") if option and name in ("None", "Some") else (
            "unit" if unit else "tagged")
        entry: dict[str, Any] = {"name": name, "show": show}
        if variant.value is not None:
            entry["match"] = variant.value
        if not unit:
            entry.update(offset=variant.field.offset, value=_spec(data))
        variants.append(entry)
    out: dict[str, Any] = {"kind": "variants", "size": layout.size, "variants": variants}
    if layout.discriminant is not None:
        out["discriminant"] = {"offset": layout.discriminant.offset, "size": layout.discriminant.layout.size}
    return out


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
            return _variants_spec(layout)
        return {"kind": "enum", "size": layout.size, "signed": layout.signed,
                "names": {str(value): name for value, name in layout.enumerators}}
    if kind in ("int", "uint", "bool", "char", "float", "pointer"):
        return {"kind": kind, "size": layout.size}
    return {"kind": "bytes", "size": layout.size}
