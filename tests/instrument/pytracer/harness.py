"""Runs a program under Strobe's Python tracer the way the agent's bootstrap does, inside the interpreter under test.

    python -I harness.py <work dir> <program.py>

<work dir> holds `tracer_source.py` (the text `strobe.instrument.pytracer.source()` gave the test, which is what
the host injects) and `config.py` (a Python literal: install()'s config, plus "control": true to read commands
from stdin). The source is executed in a fresh module `_strobe_tracer`, installed with a sink that appends
each batch as one line to `batches.jsonl`, then the program runs as `__main__`. Before the program ends (or
raises), `report.py` gets a Python literal: the modules the tracer added, its stats, the live threads.

Only `sys` and `os` are imported before the tracer, so the modules it adds are its own doing.
"""

import os
import sys


def main() -> None:
    work, program = sys.argv[1], sys.argv[2]
    with open(os.path.join(work, "config.py"), encoding="utf-8") as file:
        config = eval(file.read(), {"__builtins__": {}})  # a literal written by the test
    with open(os.path.join(work, "tracer_source.py"), encoding="utf-8") as file:
        source = file.read()
    out = os.open(os.path.join(work, "batches.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def sink(data: bytes) -> None:
        os.write(out, data + b"\n")

    control = None
    if config.pop("control", False):  # the test writes commands to our stdin; the program gets /dev/null
        control = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    before = set(sys.modules)
    module = type(sys)("_strobe_tracer")
    sys.modules["_strobe_tracer"] = module
    exec(compile(source, "<strobe-tracer>", "exec"), module.__dict__)
    tracer = module.install(sink, control, config)
    report = {"added_modules": sorted(set(sys.modules) - before), "stdlib": sorted(sys.stdlib_module_names)}
    try:
        import runpy

        runpy.run_path(program, run_name="__main__")
    finally:
        import threading

        report["stats"] = tracer.stats()
        report["threads"] = [(t.name, t.daemon) for t in threading.enumerate()]
        with open(os.path.join(work, "report.py"), "w", encoding="utf-8") as file:
            file.write(repr(report))


main()
