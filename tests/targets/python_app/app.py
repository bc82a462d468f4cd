"""Waits for files round-N in the control directory (argv[1]); each runs one checkout. A file named `crash`
ends the program with an uncaught exception."""

import os
import sys
import time

from shop import cart

rounds_done = 0


def serve(control: str) -> None:
    global rounds_done
    done = 0
    print("ready", flush=True)
    while True:
        if os.path.exists(os.path.join(control, "crash")):
            cart.explode(done)
        if os.path.exists(os.path.join(control, f"round-{done + 1}")):
            done += 1
            rounds_done = done
            total = cart.checkout(f"user{done}", ["apple", "pear", "fig", "kiwi"])
            print(f"total {total}", flush=True)
            print(f"round {done} done", flush=True)
        time.sleep(0.005)


if __name__ == "__main__":
    serve(sys.argv[1])
