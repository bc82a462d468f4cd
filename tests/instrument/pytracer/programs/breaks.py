"""Breakpoints, logpoints and steps (test_pytracer_breaks.py): the scenario named by STROBE_TEST_SCENARIO runs once
the test, having set its breakpoints after "ready", says go (see steps.py). Lines the tests use are marked `# @name`
(runner.marked_line). Its threads are daemons: a failed test never leaves this program waiting for them."""

import _thread
import os
import sys
import threading
import time

_go = os.fdopen(int(os.environ["STROBE_TEST_GO_FD"]), "rb", buffering=0)
ticks = 0
ticking = True
go_other, done_other = threading.Event(), threading.Event()


def step(name):
    print(name, flush=True)
    assert _go.readline() == b"go\n"


def ticker():
    global ticks
    while ticking:
        ticks += 1  # @tick
        time.sleep(0.001)


def compute(order, qty):
    total = qty * 2  # @compute-first
    subtotal = total + 1  # @compute
    return subtotal


def handle(order):
    qty = order * 10
    return compute(order, qty)  # @handle-call


def record(i):
    square = i * i  # @record
    return square


def leaf(x):
    y = x + 1  # @leaf
    return y * 2  # @leaf-return


def middle(x):
    a = leaf(x)  # @middle-call
    b = a + 1  # @middle-after
    return b


def fact(n):
    if n <= 1:  # @fact-first
        return 1
    r = n * fact(n - 1)  # @fact-rec
    return r  # @fact-return


def outer():
    def inner(v):
        return v * 3  # @inner

    return inner(2)


def flush_tracer():
    sys.modules["_strobe_tracer"]._installed.flush()  # @flush-call


def shared(role):
    if role == "main":
        go_other.set()  # @shared-go
        done_other.wait()  # @shared-wait
    value = role.upper()  # @shared-value
    return value


def lonely(done):
    done.release()  # @lonely-last


def other():
    go_other.wait()
    print("other", shared("other"), flush=True)
    done_other.set()


scenario = os.environ["STROBE_TEST_SCENARIO"]
if scenario == "threads":  # a thread keeps ticking while the main thread handles an order
    worker = threading.Thread(target=ticker, name="ticker", daemon=True)
    worker.start()
    step("ready")
    print("handled", handle(7), flush=True)
    ticking = False
    worker.join()
elif scenario == "running":  # breakpoints set while the ticker's loop runs
    worker = threading.Thread(target=ticker, name="ticker", daemon=True)
    worker.start()
    step("ready")
    step("stop ticking")
    ticking = False
    worker.join()
    print("ticked", flush=True)
elif scenario == "loop":
    step("ready")
    print("squares", sum(record(i) for i in range(int(os.environ["STROBE_TEST_LOOP"]))), flush=True)
elif scenario == "steps":
    step("ready")
    m = middle(1)
    f = fact(3)  # @module-fact
    o = outer()  # @module-outer
    flush_tracer()  # @module-flush
    print("steps", m, f, o, flush=True)  # @module-print
elif scenario == "other":  # another thread runs the lines a paused thread steps through
    worker = threading.Thread(target=other, name="other", daemon=True)
    worker.start()
    step("ready")
    print("main", shared("main"), flush=True)
    worker.join()
elif scenario == "fork":  # the child cannot be sent commands: its breakpoints never stop it
    step("ready")
    pid = os.fork()
    if pid == 0:
        record(1)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), "parent", record(2), flush=True)
elif scenario == "lonely":  # a thread whose only Python frame steps over its last line: the step cannot end
    step("ready")
    finished = _thread.allocate_lock()
    finished.acquire()
    _thread.start_new_thread(lonely, (finished,))
    finished.acquire()
    step("finished")
elif scenario == "import":  # a module imported after the breakpoints were set in it
    step("ready")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import breaks_later

    print("imported", breaks_later.total, flush=True)
