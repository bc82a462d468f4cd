"""The tracer Strobe runs inside a traced CPython process (3.11-3.13), as source text for the host.

The host never imports these modules: it executes `source()` in one fresh module named MODULE_NAME inside the
target, then calls `install(sink, control_fd, config)` there (tracer.py's docstring has the contract). Run from
`PyRun_SimpleString`, the code executing it must not leave names in `__main__`, for example:

    exec(compile(SOURCE, "<strobe-tracer>", "exec"),
         __import__("sys").modules.setdefault("_strobe_tracer", type(__import__("sys"))("_strobe_tracer")).__dict__)
"""

from pathlib import Path

MODULE_NAME = "_strobe_tracer"
_HERE = Path(__file__).parent
# Executed in this order, in one namespace: each module uses the names of those before it.
SOURCE_PATHS = tuple(_HERE / name for name in ("reprs.py", "outbox.py", "backends.py", "tracer.py"))
SOURCE_PATH = SOURCE_PATHS[-1]  # the module with install()


def source() -> str:
    """The tracer's text, ready to be executed in the module MODULE_NAME."""
    return "\n\n".join(path.read_text(encoding="utf-8") for path in SOURCE_PATHS)
