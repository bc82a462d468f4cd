"""Benchmark target (bench/python_bench.py), a pure-Python program on CPython 3.11+:

    run.py loop CALLS REPS [plain|setprofile|viztracer|viztracer-args]
        REPS timed loops of CALLS calls to work.hot(), each printing "loop <rep> <wall ns> <thread cpu ns>" (timed
        inside the process: start-up is not counted), then work.checksum() once and a 300 ms pause (so a tracer
        can drain). With a recorder named, it is started just before the loops and stopped after them, and
        "recorded <calls of work.hot>" is printed. Then "done".
    run.py rate CALLS_PER_SECOND SECONDS GO_FILE
        Prints "ready", waits for GO_FILE, calls work.paced() at a steady rate for SECONDS, prints "done <calls>".

The recorders are the peers a Strobe-traced run is compared with: `setprofile` is a plain Python profile function
that appends (event, name, time) for every call and return of work.py's functions; `viztracer` is VizTracer with
its defaults (no arguments or return values), `viztracer-args` the same with arguments and return values logged.
"""

import os
import sys
import time
from types import FrameType

import work

PAUSE_S = 0.3
WORK_FILE = work.__file__


class ProfileRecorder:
    """A pure-Python tracer: sys.setprofile appends (event, qualname, perf_counter_ns) for work.py's functions."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []

    def start(self) -> None:
        append, now, filename = self.events.append, time.perf_counter_ns, WORK_FILE

        def profile(frame: FrameType, event: str, arg: object) -> None:
            if event == "call" or event == "return":
                code = frame.f_code
                if code.co_filename == filename:
                    append((event, code.co_qualname, now()))

        sys.setprofile(profile)

    def stop(self) -> int:
        sys.setprofile(None)
        return sum(1 for event, name, _ in self.events if event == "call" and name == "hot")


class VizRecorder:
    """VizTracer's own API, its ring buffer sized for every call of the run."""

    def __init__(self, entries: int, values: bool) -> None:
        from viztracer import VizTracer

        self.tracer = VizTracer(tracer_entries=entries, verbose=0, log_func_args=values, log_func_retval=values)

    def start(self) -> None:
        self.tracer.start()

    def stop(self) -> int:
        self.tracer.stop()
        self.tracer.parse()
        return sum(1 for e in self.tracer.data["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("hot "))


def loops(calls: int, reps: int, recorder: "ProfileRecorder | VizRecorder | None") -> None:
    wall, cpu, hot = time.perf_counter_ns, time.thread_time_ns, work.hot
    print(work.describe(calls, reps), flush=True)
    if recorder is not None:
        recorder.start()
    for rep in range(reps):
        total = 0
        c0 = cpu()
        t0 = wall()
        for i in range(calls):
            total = hot(total, i)
        t1 = wall()
        c1 = cpu()
        print(f"loop {rep} {t1 - t0} {c1 - c0}", flush=True)
        work.checksum(total)
        time.sleep(PAUSE_S)
    if recorder is not None:
        print(f"recorded {recorder.stop()}", flush=True)


def rate(per_second: int, seconds: float, go: str) -> None:
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.002)
    clock, paced = time.perf_counter_ns, work.paced
    start = clock()
    end = start + int(seconds * 1e9)
    calls = total = 0
    while True:
        now = clock()
        if now >= end:
            break
        due = (now - start) * per_second // 1_000_000_000
        while calls < due:
            total = paced(total, calls)
            calls += 1
        time.sleep(0.0002)
    print(f"done {calls}", flush=True)


def main(argv: list[str]) -> None:
    if argv[0] == "rate":
        rate(int(argv[1]), float(argv[2]), argv[3])
        return
    calls, reps = int(argv[1]), int(argv[2])
    mode = argv[3] if len(argv) > 3 else "plain"
    recorder: ProfileRecorder | VizRecorder | None = None
    if mode == "setprofile":
        recorder = ProfileRecorder()
    elif mode.startswith("viztracer"):
        recorder = VizRecorder(calls * reps + 100_000, mode == "viztracer-args")
    loops(calls, reps, recorder)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
