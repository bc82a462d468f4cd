"""The tracer Strobe runs inside a traced CPython process (3.11-3.13), as source text for the host.

The host never imports these modules: it executes `source()` in one fresh module named MODULE_NAME inside the
target, then calls `install(sink, control_fd, config)` there (tracer.py's docstring has the contract). Run from
`PyRun_SimpleString`, the code executing it must not leave names in `__main__`, for example:

    exec(compile(SOURCE, "<strobe-tracer>", "exec"),
         __import__("sys").modules.setdefault("_strobe_tracer", type(__import__("sys"))("_strobe_tracer")).__dict__)
"""

import json
from pathlib import Path

MODULE_NAME = "_strobe_tracer"
_HERE = Path(__file__).parent
# Executed in this order, in one namespace: each module uses the names of those before it.
SOURCE_PATHS = tuple(
    _HERE / name
    for name in ("reprs.py", "outbox.py", "backends.py", "templates.py", "breaks.py", "control.py", "tracer.py")
)
SOURCE_PATH = SOURCE_PATHS[-1]  # the module with install()


def source() -> str:
    """The tracer's text, ready to be executed in the module MODULE_NAME."""
    return "\n\n".join(path.read_text(encoding="utf-8") for path in SOURCE_PATHS)


# The last lines of the injected text: the agent replaces the two placeholders (the address of its
# NativeCallback(pointer, size_t) and the read end of the command pipe) before running it.
_START = '''
def _strobe_start(address, control_fd, config):
    import ctypes
    import json

    send = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_size_t)(address)

    def sink(data, _send=send):
        _send(data, len(data))

    install(sink, control_fd, json.loads(config))


_strobe_start(@SINK@, @CONTROL_FD@, {config!r})
del _strobe_start
'''


def bootstrap(config: dict[str, object]) -> str:
    """The statement the agent runs with PyRun_SimpleString (agent/src/cpython/tracer.ts): it executes the tracer
    in a fresh module MODULE_NAME (nothing is left in `__main__`) and installs it with `config` (tracer.py's
    install()), sending batches through the agent's callback. Placeholders "@SINK@" and "@CONTROL_FD@" appear
    once each, before any data, as the agent replaces only their first occurrence."""
    text = _START.format(config=json.dumps(config, separators=(",", ":")))
    code = source() + "\n\n" + text
    assert "@SINK@" not in source() and "@CONTROL_FD@" not in source()
    return (f"exec(compile({code!r}, '<strobe-tracer>', 'exec'), __import__('sys').modules.setdefault("
            f"{MODULE_NAME!r}, type(__import__('sys'))({MODULE_NAME!r})).__dict__)")
