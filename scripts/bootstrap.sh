#!/usr/bin/env bash
# Set up everything Strobe and its tests need on a fresh Debian/Ubuntu machine: system packages
# (only when missing), a virtualenv in .venv, and the package with its dev dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
need_apt=()

command -v "$PYTHON" >/dev/null || { echo "bootstrap: $PYTHON not found; install Python 3.11+" >&2; exit 1; }
"$PYTHON" - <<'PY' || { echo "bootstrap: Python 3.11 or newer is required" >&2; exit 1; }
import sys
raise SystemExit(0 if sys.version_info >= (3, 11) else 1)
PY
command -v gcc >/dev/null || need_apt+=(gcc libc6-dev)
command -v make >/dev/null || need_apt+=(make)
command -v addr2line >/dev/null || need_apt+=(binutils)
# The symbolizer's tests compare with addr2line, and with llvm-addr2line where binutils misreads DWARF 5.
compgen -c llvm-addr2line | grep -q . || need_apt+=(llvm)
"$PYTHON" -c "import venv, ensurepip" 2>/dev/null || need_apt+=(python3-venv)
compgen -G "/usr/include/python3*/Python.h" >/dev/null || need_apt+=(python3-dev)  # a C extension test target
compgen -c python3 | grep -qE '^python3\.[0-9]+d$' || need_apt+=(python3-dbg)  # Python tracing of a debug build
# Test targets and test-framework adapters: real toolchains and frameworks, built and run at test time.
command -v g++ >/dev/null || need_apt+=(g++)
command -v cargo >/dev/null || need_apt+=(cargo)
command -v go >/dev/null || need_apt+=(golang-go)
command -v npm >/dev/null || need_apt+=(nodejs npm)
[ -f /usr/include/catch2/catch.hpp ] || need_apt+=(catch2)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
# Stacks of a stuck test: eu-stack (fast), gdb (richer).
command -v eu-stack >/dev/null || need_apt+=(elfutils)
command -v gdb >/dev/null || need_apt+=(gdb)
command -v ss >/dev/null || need_apt+=(iproute2)  # the proxy tests watch a paused daemon's socket queue
command -v chromium >/dev/null || need_apt+=(chromium)  # debug_export's HTML timeline, drawn headless in tests

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need_apt[*]} with apt-get"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# JavaScript test frameworks (jest, vitest, mocha, bun, deno) for the adapter tests, pinned in package.json.
if [ ! -f tests/toolchains/node_modules/.package-lock.json ] \
   || [ tests/toolchains/package.json -nt tests/toolchains/node_modules/.package-lock.json ]; then
  (cd tests/toolchains && npm install --no-audit --no-fund --loglevel=error)
fi
# Wheels: tests/packaging builds one with --no-build-isolation (so .venv needs the build requirements) and
# installs it into a fresh virtualenv offline, from a wheelhouse of the runtime dependencies as pip resolves
# them. Both are refreshed only when pyproject.toml's requirements (or the interpreter) change.
WHEELHOUSE=.venv/wheelhouse
toml_list() {
  .venv/bin/python -c 'import sys, tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))[sys.argv[1]][sys.argv[2]], sep="\n")' "$1" "$2"
}
mapfile -t build_requires < <(toml_list build-system requires)
mapfile -t runtime_deps < <(toml_list project dependencies)
[ ${#build_requires[@]} -gt 0 ] && [ ${#runtime_deps[@]} -gt 0 ] || { echo "bootstrap: cannot read pyproject.toml" >&2; exit 1; }
wheelhouse_key=$(printf '%s\n' "${build_requires[@]}" "${runtime_deps[@]}" "$(.venv/bin/python -VV)" | sha256sum | cut -c1-16)
if [ "$(cat "$WHEELHOUSE/.stamp" 2>/dev/null)" != "$wheelhouse_key" ]; then
  echo "bootstrap: build requirements into .venv, runtime dependencies into $WHEELHOUSE"
  .venv/bin/python -m pip install -q "${build_requires[@]}"
  rm -rf "$WHEELHOUSE.tmp"
  .venv/bin/python -m pip wheel -q -w "$WHEELHOUSE.tmp" "${runtime_deps[@]}"
  echo "$wheelhouse_key" >"$WHEELHOUSE.tmp/.stamp"
  rm -rf "$WHEELHOUSE"
  mv "$WHEELHOUSE.tmp" "$WHEELHOUSE"
fi
echo "bootstrap: ready (.venv)"
