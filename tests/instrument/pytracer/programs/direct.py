"""Drives the installed tracer through its Python API (no control pipe): commands and their replies, an error
reported in the next batch, and on 3.12+ a second tracer installed while every sys.monitoring tool id is taken
(what it sent is printed as JSON lines)."""

import sys

module = sys.modules["_strobe_tracer"]
tracer = module._installed


def f(x):
    return x


target = {"id": 5, "file": f.__code__.co_filename, "line": f.__code__.co_firstlineno, "qualname": "f"}
tracer.command({"cmd": "targets", "id": 1, "targets": [target]})
f(1)
tracer.command({"cmd": "depth", "depth": 11})  # no id: the error goes to the next batch
tracer.command({"cmd": "bogus", "id": 2})
tracer.command({"cmd": "targets", "id": 3, "targets": [{"id": "x"}]})
tracer.command({"cmd": "flush", "id": 4})

monitoring = getattr(sys, "monitoring", None)
if monitoring is not None:
    tracer.command({"cmd": "stop", "id": 5})
    free = [i for i in range(6) if monitoring.get_tool(i) is None]
    for i in free:
        monitoring.use_tool_id(i, "someone else")
    sent = []
    second = module.install(sent.append, None, {})
    second.command({"cmd": "targets", "id": 6, "targets": [target]})
    f(2)
    second.stop()
    for i in free:
        monitoring.free_tool_id(i)
    for data in sent:
        print(data.decode())
