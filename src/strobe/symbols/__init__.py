"""Symbols of native binaries: ELF facts, a fast DWARF function scanner, demangling and a cached index.

    from strobe.symbols import load_index
    index = load_index("/path/to/app", cache_dir)     # cached by build id in cache_dir/symbols.db
    index.by_address(0x1149)                           # -> FunctionInfo(name="process_command", ...)
    index.match(re.compile(r"auth::.*"))               # the functions whose whole name matches, cheaply
"""

from strobe.symbols.elf import ElfInfo, read_elf_info
from strobe.symbols.index import FunctionIndex, FunctionInfo, build_index, load_index

__all__ = ["ElfInfo", "FunctionIndex", "FunctionInfo", "build_index", "load_index", "read_elf_info"]
