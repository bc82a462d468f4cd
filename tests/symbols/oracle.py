"""A deliberately plain pyelftools DIE walk: the reference the fast scanner is compared against.

It follows the same naming rules as the scanner (deepest named DIE along abstract_origin/specification,
its enclosing namespace/class/struct/union/function scopes), but computes them the obvious way:
parent links and attribute lookups on fully parsed DIEs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

UNITS = {"DW_TAG_compile_unit", "DW_TAG_partial_unit"}
SCOPES = {
    "DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type",
    "DW_TAG_interface_type", "DW_TAG_module",
}

# (linkage, qualified, address, file, line, params, inlined_only)
Entry = tuple[str | None, str | None, int, str | None, int | None, int, bool]


def _name(die: Any) -> str | None:
    attr = die.attributes.get("DW_AT_name")
    return attr.value.decode() if attr is not None else None


def _linkage(die: Any) -> str | None:
    for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
        attr = die.attributes.get(key)
        if attr is not None:
            return str(attr.value.decode())
    return None


def _ref(die: Any) -> Any:
    for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
        if key in die.attributes:
            return die.get_DIE_from_attribute(key)
    return None


def _chain(die: Any) -> list[Any]:
    chain = []
    while die is not None and len(chain) < 8:
        chain.append(die)
        die = _ref(die)
    return chain


def _prefix(die: Any) -> str:
    parent = die.get_parent()
    if parent is None or parent.tag in UNITS:
        return ""
    if parent.tag in SCOPES:
        return _scope_name(parent) + "::"
    if parent.tag == "DW_TAG_subprogram":
        named = next((d for d in _chain(parent) if _name(d) is not None), None)
        if named is None:
            return _prefix(parent) + "{unknown}::"
        return _prefix(named) + str(_name(named)) + "::"
    return _prefix(parent)


def _scope_name(scope: Any) -> str:
    if "DW_AT_specification" in scope.attributes:
        return _scope_name(scope.get_DIE_from_attribute("DW_AT_specification"))
    name = _name(scope)
    if name is None:
        name = "(anonymous namespace)" if scope.tag == "DW_TAG_namespace" else "{unnamed type}"
    return _prefix(scope) + name


def _files(dwarf: Any, cu: Any, comp_dir: str) -> list[str | None]:
    program = dwarf.line_program_for_CU(cu)
    if program is None:
        return []
    header = program.header
    dirs = [d.decode() for d in header["include_directory"]]
    result: list[str | None] = []
    if header["version"] >= 5:
        for entry in header["file_entry"]:
            directory = os.path.join(comp_dir, dirs[entry.dir_index])
            result.append(os.path.normpath(os.path.join(directory, entry.name.decode())))
        return result
    result.append(None)
    for entry in header["file_entry"]:
        directory = comp_dir if entry.dir_index == 0 else os.path.join(comp_dir, dirs[entry.dir_index - 1])
        result.append(os.path.normpath(os.path.join(directory, entry.name.decode())))
    return result


def _unit_files(dwarf: Any, cu: Any, cache: dict[int, list[str | None]]) -> list[str | None]:
    if cu.cu_offset not in cache:
        comp_dir_attr = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
        comp_dir = comp_dir_attr.value.decode() if comp_dir_attr is not None else ""
        cache[cu.cu_offset] = _files(dwarf, cu, comp_dir)
    return cache[cu.cu_offset]


def _symbol_addresses(elf: ELFFile) -> dict[str, int]:
    table = elf.get_section_by_name(".symtab")
    if table is None:
        return {}
    return {s.name: s["st_value"] for s in table.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}


def oracle_functions(path: str | Path, unit_filter: str | None = None) -> set[Entry]:
    """Concrete and inline-only functions of every compile unit (whose name contains `unit_filter`)."""
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        dwarf = elf.get_dwarf_info()
        symbols = _symbol_addresses(elf)
        tombstone = (1 << elf.elfclass) - 2
        concrete: set[Entry] = set()
        abstract: list[Any] = []
        file_tables: dict[int, list[str | None]] = {}
        emitted: set[int] = set()
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE()
            if top.tag not in UNITS:
                continue
            if unit_filter is not None and unit_filter not in (_name(top) or ""):
                continue
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_subprogram" or "DW_AT_declaration" in die.attributes:
                    continue
                entry = _describe(die, lambda unit: _unit_files(dwarf, unit, file_tables))
                if "DW_AT_low_pc" in die.attributes:
                    address = die.attributes["DW_AT_low_pc"].value
                elif "DW_AT_ranges" in die.attributes:
                    # The entry of a hot/cold split function: its symbol (checked independently of range lists).
                    address = symbols.get(entry[0] or entry[1] or "", 0)
                else:
                    inline = die.attributes.get("DW_AT_inline")
                    if inline is not None and inline.value in (1, 3):
                        abstract.append((die, entry))
                    continue
                if not 0 < address < tombstone:
                    continue
                if "DW_AT_abstract_origin" in die.attributes:
                    emitted.add(die.get_DIE_from_attribute("DW_AT_abstract_origin").offset)
                concrete.add((entry[0], entry[1], address, entry[2], entry[3], entry[4], False))
        keys = {(e[0] or e[1], e[3], e[4]) for e in concrete}
        inline_only: set[Entry] = set()
        for die, entry in abstract:
            if die.offset in emitted or (entry[0] is None and entry[1] is None):
                continue
            key = (entry[0] or entry[1], entry[2], entry[3])
            if key in keys:
                continue  # emitted out of line elsewhere, or already listed from another unit
            keys.add(key)
            inline_only.add((entry[0], entry[1], 0, entry[2], entry[3], entry[4], True))
        return concrete | inline_only


def _describe(
    die: Any, files_of: Callable[[Any], list[str | None]]
) -> tuple[str | None, str | None, str | None, int | None, int]:
    """(linkage, qualified, file, line, params) of a function DIE, following its chain."""
    chain = _chain(die)
    linkage = next((name for name in map(_linkage, chain) if name is not None), None)
    named = [d for d in chain if _name(d) is not None]
    qualified = _prefix(named[-1]) + str(_name(named[-1])) if named else None
    file = line = None
    for d in chain:
        if file is None and "DW_AT_decl_file" in d.attributes:
            index = d.attributes["DW_AT_decl_file"].value
            files = files_of(d.cu)
            file = files[index] if 0 <= index < len(files) else None
        if line is None and "DW_AT_decl_line" in d.attributes:
            line = d.attributes["DW_AT_decl_line"].value
    params = 0
    for d in chain:
        params = sum(1 for child in d.iter_children() if child.tag == "DW_TAG_formal_parameter")
        if params:
            break
    return linkage, qualified, file, line, params
