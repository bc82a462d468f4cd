"""Python breakpoint target (usage: app.py CONTROL_DIR). Thread "ticker" prints "tick N" every 5 ms until
CONTROL_DIR/quit exists; the main thread prints "ready", waits for CONTROL_DIR/go, runs orders.process_order for
orders 1..5 (quantity 50 each time more) and prints "orders done", then waits for CONTROL_DIR/quit."""

import os
import sys
import threading
import time

import orders


def ticker(control: str) -> None:
    n = 0
    while not os.path.exists(os.path.join(control, "quit")):
        print(f"tick {n}", flush=True)
        n += 1
        time.sleep(0.005)


def main(control: str) -> None:
    threading.Thread(target=ticker, args=(control,), name="ticker").start()
    account = orders.Account("ada")
    print("ready", flush=True)
    while not os.path.exists(os.path.join(control, "go")):
        time.sleep(0.002)
    for oid in range(1, 6):
        orders.process_order(oid, oid * 50, account)
    print(f"orders done {orders.factorial(4)}", flush=True)
    while not os.path.exists(os.path.join(control, "quit")):
        time.sleep(0.005)


if __name__ == "__main__":
    main(sys.argv[1])
