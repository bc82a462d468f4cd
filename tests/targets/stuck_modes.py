"""A Python program that deadlocks on purpose, for debug_stacks: two threads take two locks in opposite orders (a
barrier makes sure each holds its first before asking for the second); main waits for them. Prints "ready"."""

import threading

accounts_lock = threading.Lock()
ledger_lock = threading.Lock()
both_hold_one = threading.Barrier(2)


def transfer_funds() -> None:
    with accounts_lock:
        both_hold_one.wait()
        with ledger_lock:
            pass


def audit_ledger() -> None:
    with ledger_lock:
        both_hold_one.wait()
        with accounts_lock:
            pass


workers = [
    threading.Thread(target=transfer_funds, name="transfer"),
    threading.Thread(target=audit_ledger, name="audit"),
]
for worker in workers:
    worker.start()
print("ready", flush=True)
for worker in workers:
    worker.join()
