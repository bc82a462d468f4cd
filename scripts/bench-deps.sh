#!/usr/bin/env bash
# What the benchmark's peers need on top of the test set-up: uftrace (Debian), frida-trace, viztracer and duckdb (PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uftrace >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq uftrace
fi
.venv/bin/python -m pip install -q "frida-tools>=14,<15"
# duckdb (PyPI): option c of bench/storage_options.py (the storage study of issue 20).
.venv/bin/python -m pip install -q "duckdb>=2.0,<3"
# viztracer (PyPI), the Python section's peer: a virtualenv per CPython 3.11-3.13 found, under bench/.build/venvs.
.venv/bin/python -m bench.python_bench install-peers
