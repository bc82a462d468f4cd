"""Parameters and return type of a function, by its static low_pc, for argument serialization.

The compile unit comes from the units' address ranges (DW_AT_low_pc/high_pc or DW_AT_ranges of each
unit DIE, read once); its functions are mapped low_pc -> DIE the first time one of them is asked for
(namespaces, Rust modules and nested functions walked; type subtrees skipped). A parameter's name and
type may live on the DIE its concrete copy refers to (DW_AT_abstract_origin, DW_AT_specification).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from strobe.symbols.demangle import demangle
from strobe.symbols.dwarf_dies import (
    AT_ABSTRACT_ORIGIN,
    AT_ARTIFICIAL,
    AT_DECLARATION,
    AT_SPECIFICATION,
    AT_TYPE,
    TAG_FORMAL_PARAMETER,
    TAG_LEXICAL_BLOCK,
    TAG_MODULE,
    TAG_NAMESPACE,
    TAG_SUBPROGRAM,
    TAG_UNSPECIFIED_PARAMETERS,
    Die,
    DieReader,
)
from strobe.symbols.dwarf_forms import DECODE_ERRORS
from strobe.symbols.dwarf_types import TypeTable
from strobe.symbols.types import ValueLayout

_WALKED = frozenset({TAG_NAMESPACE, TAG_MODULE, TAG_SUBPROGRAM, TAG_LEXICAL_BLOCK})
_MAX_HOPS = 8


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str  # "this" for C++'s artificial object pointer; "arg<N>" when DWARF has no name
    layout: ValueLayout
    artificial: bool = False


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    name: str  # demangled linkage name without parameters, or DW_AT_name
    address: int  # static low_pc
    params: tuple[Parameter, ...]  # in order, `this` included
    returns: ValueLayout | None  # None for void
    variadic: bool = False


class SignatureReader:
    """Signatures of one file's functions. Not thread-safe: callers hold a lock."""

    def __init__(self, reader: DieReader, types: TypeTable) -> None:
        self.reader = reader
        self.types = types
        self._ranges: list[tuple[int, int, int]] | None = None  # (start, end, unit index), sorted
        self._starts: list[int] = []
        self._unranged: list[int] = []  # units without address ranges
        self._functions: dict[int, dict[int, int]] = {}  # unit index -> {low_pc: DIE offset}
        self._signatures: dict[tuple[int, int], FunctionSignature | None] = {}

    def signature(self, address: int, depth: int = 1) -> FunctionSignature | None:
        key = (address, depth)
        if key not in self._signatures:
            die = self._find(address)
            self._signatures[key] = self._build(die, address, depth) if die is not None else None
        return self._signatures[key]

    def function_die(self, address: int) -> Die | None:
        """The DIE of the function whose static low_pc is `address` (the one `signature` describes)."""
        offset = self._find(address)
        return None if offset is None else self.reader.die(offset)

    # --- finding the DIE -------------------------------------------------------------------------
    def _unit_ranges(self) -> list[tuple[int, int, int]]:
        if self._ranges is None:
            ranges: list[tuple[int, int, int]] = []
            for index, unit in enumerate(self.reader.units):
                try:
                    found = self.reader.ranges(self.reader.unit_die(unit))
                except (ValueError, *DECODE_ERRORS):
                    found = []
                if found:
                    ranges += [(start, end, index) for start, end in found]
                else:
                    self._unranged.append(index)
            ranges.sort()
            self._ranges = ranges
            self._starts = [start for start, _, _ in ranges]
        return self._ranges

    def _find(self, address: int) -> int | None:
        ranges = self._unit_ranges()
        candidates: list[int] = []
        at = bisect_right(self._starts, address) - 1
        while at >= 0 and len(candidates) < 4:
            start, end, index = ranges[at]
            if start <= address < end and index not in candidates:
                candidates.append(index)
            if start < address - (1 << 32):
                break
            at -= 1
        for index in [*candidates, *self._unranged]:
            found = self._functions_of(index).get(address)
            if found is not None:
                return found
        return None

    def _functions_of(self, index: int) -> dict[int, int]:
        functions = self._functions.get(index)
        if functions is None:
            functions = self._functions[index] = {}
            try:
                self._collect(self.reader.unit_die(self.reader.units[index]), functions)
            except (ValueError, *DECODE_ERRORS):
                pass
        return functions

    def _collect(self, parent: Die, functions: dict[int, int]) -> None:
        for child in self.reader.children(parent):
            if child.tag not in _WALKED:
                continue
            if child.tag == TAG_SUBPROGRAM and not child.get(AT_DECLARATION):
                ranges = self.reader.ranges(child)
                if ranges:
                    functions.setdefault(ranges[0][0], child.offset)
            if child.has_children:
                self._collect(child, functions)

    # --- building the signature ------------------------------------------------------------------
    def _chain(self, die: Die) -> list[Die]:
        """`die` and the DIEs it refers to through abstract origins and specifications."""
        chain = [die]
        for _ in range(_MAX_HOPS):
            last = chain[-1]
            target = self.reader.follow(last, AT_ABSTRACT_ORIGIN) or self.reader.follow(last, AT_SPECIFICATION)
            if target is None or any(target.offset == d.offset for d in chain):
                break
            chain.append(target)
        return chain

    def _build(self, offset: int, address: int, depth: int) -> FunctionSignature:
        die = self.reader.die(offset)
        chain = self._chain(die)
        name = next((d.linkage_name for d in chain if d.linkage_name), None)
        shown = demangle(name).name if name else next((d.name for d in chain if d.name), None) or f"0x{address:x}"
        returns_ref = next((d.ref(AT_TYPE) for d in chain if AT_TYPE in d.attrs), None)
        returns = self.types.layout(returns_ref, depth) if returns_ref is not None else None
        # The concrete DIE's parameters, or (an inline function's out-of-line copy without any) the abstract ones.
        source = next((d for d in chain if any(c.tag == TAG_FORMAL_PARAMETER for c in self.reader.children(d))), die)
        params: list[Parameter] = []
        variadic = False
        for child in self.reader.children(source):
            if child.tag == TAG_UNSPECIFIED_PARAMETERS:
                variadic = True
            if child.tag != TAG_FORMAL_PARAMETER:
                continue
            links = self._chain(child)
            param_name = next((d.name for d in links if d.name), None) or f"arg{len(params)}"
            type_ref = next((d.ref(AT_TYPE) for d in links if AT_TYPE in d.attrs), None)
            artificial = any(bool(d.get(AT_ARTIFICIAL)) for d in links)
            params.append(Parameter(param_name, self.types.layout(type_ref, depth), artificial))
        if not variadic:
            variadic = any(c.tag == TAG_UNSPECIFIED_PARAMETERS for d in chain[1:] for c in self.reader.children(d))
        return FunctionSignature(shown, address, tuple(params), returns, variadic)
