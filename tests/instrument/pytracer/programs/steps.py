"""A program driven by the test: at each step it prints the step's name and waits for "go" on the go pipe,
while the test changes targets, evaluates chains and sets watches through the control pipe."""

import os
import sys


class Settings:
    timeout = 30

    def __init__(self):
        self.retries = 3

    @property
    def expensive(self):
        global PROPERTY_RAN
        PROPERTY_RAN = True
        return 1


PROPERTY_RAN = False
settings = Settings()
counter = 0
_go = os.fdopen(int(os.environ["STROBE_TEST_GO_FD"]), "rb", buffering=0)


def step(name):
    print(name, flush=True)
    assert _go.readline() == b"go\n"


def alpha(n):
    global counter
    counter += n
    return n


def beta(n):
    return alpha(n) * 2


beta(1)
step("one")
beta(2)
step("two")
beta(3)
step("three")
print("property ran" if PROPERTY_RAN else "property not run")
alpha(0)  # 3.11: a thread drops the stopped tracer's trace function at its next call
restored = sys.excepthook is sys.__excepthook__ and "_strobe_tracer" not in sys.modules
monitoring = getattr(sys, "monitoring", None)
tools = [monitoring.get_tool(i) for i in range(6)] if monitoring else []
print("uninstalled" if restored and sys.gettrace() is None and not any(tools) else "still installed", flush=True)
