"""The DIEs behind a function's signature, for what a ValueLayout does not say: whether a C++ class travels
through a hidden reference (Itanium C++ ABI), and whether the function is Rust.

    dies = FunctionDies.find(index, static_address, len(signature.params))   # under index.lock
    dies.by_reference(dies.params[0])   # std::string by value -> True: rdi holds its address
    dies.nontrivial(dies.returns)       # returned through a hidden pointer whatever its size
    dies.rust                           # Rust's own ABI applies to aggregates (daemon/passing.py)

A class is not trivially copyable when it (or a base or member) has a user destructor or copy/move
constructor, virtual functions or virtual bases; clang's DW_AT_calling_convention on the type decides first
when present. A parameter's location, when it is a single expression, decides for that parameter (the
address in an argument register, or a frame slot holding the address at -O0). `params` is empty when the
DIEs list a different number of parameters than the signature. find() returns None when no DIE describes a
function at the address; it may raise ValueError or dwarf_forms.DECODE_ERRORS on damaged DWARF.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from strobe.symbols.dwarf_forms import LANG_RUST
from strobe.symbols.dwarf_types import POINTER_TAGS, STRUCT_TAGS, TypeTable
from strobe.symbols.variables import VariableIndex

_AT_CALLING_CONVENTION = 0x36
_CC_PASS_BY_REFERENCE, _CC_PASS_BY_VALUE = 4, 5
_AT_VIRTUALITY = 0x4C
_AT_DEFAULTED = 0x8B
_DEFAULTED_IN_CLASS = 1
_OP_DEREF = 0x06
_OP_FBREG = 0x91
_OP_BREG0 = 0x70
_ARGUMENT_DWARF_REGS = frozenset({5, 4, 1, 2, 8, 9})  # rdi, rsi, rdx, rcx, r8, r9 in DWARF numbering
_MAX_LEVEL = 12  # levels of bases and members looked into


@dataclass
class FunctionDies:
    types: TypeTable
    params: list[Die]  # formal parameters, as FunctionSignature lists them
    returns: int | None  # the return type's DIE
    rust: bool

    @classmethod
    def find(cls, index: VariableIndex, address: int, count: int) -> FunctionDies | None:
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
