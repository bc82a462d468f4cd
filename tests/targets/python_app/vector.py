"""Calls a C extension (fastmath, built by the test) from Python, one round per control file (argv[1])."""

import os
import sys
import time

import fastmath


def norm2(values: list[float]) -> float:
    return fastmath.dot(values, values)


def main(control: str) -> None:
    print("ready", flush=True)
    done = 0
    while True:
        if os.path.exists(os.path.join(control, f"round-{done + 1}")):
            done += 1
            print(f"norm {norm2([1.0, 2.0, float(done)])}", flush=True)
            print(f"round {done} done", flush=True)
        time.sleep(0.005)


if __name__ == "__main__":
    main(sys.argv[1])
