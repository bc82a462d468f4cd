"""The oracle: compile a file with the interpreter running this script and print, as JSON, every code object
it makes (walking co_consts recursively) with the keys the Python index must reproduce.

    python3.12 code_objects.py FILE  ->  {"version": [3, 12], "code_objects": [{"qualname": ..., ...}, ...]}

Run by tests/symbols/test_python_index.py under each interpreter it finds; it must not import strobe.
"""

import json
import sys
import types


def walk(code: types.CodeType, found: list[dict[str, object]]) -> None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            flags = const.co_flags
            count = const.co_argcount + const.co_kwonlyargcount + bool(flags & 0x4) + bool(flags & 0x8)
            found.append({
                "name": const.co_name,
                "qualname": const.co_qualname,
                "first_line": const.co_firstlineno,
                "params": list(const.co_varnames[:count]),
                "flags": flags,
            })
            walk(const, found)


def main(path: str) -> None:
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec", dont_inherit=True)
    found: list[dict[str, object]] = []
    walk(code, found)
    json.dump({"version": list(sys.version_info[:2]), "code_objects": found}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
