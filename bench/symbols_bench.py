"""Symbol-index benchmark: a generated C++ binary with many small functions, indexed cold and cached.

    python bench/symbols_bench.py WORK_DIR [--functions 400000]

The C++ tree (namespaces, classes with out-of-line methods, static member functions, anonymous-namespace
helpers, explicit template instances, lambdas, types shared through a header) is generated under
WORK_DIR/cxx-<functions>/ and compiled with `g++ -O0 -g` over many small translation units, as many at
once as there are cores. The linked binary is kept there, so a rerun skips compiling; delete the directory
to force a rebuild. Then it times `load_index` with an empty cache, again with the cache filled, and one
trace pattern matched over every function name (`FunctionIndex.match`, and the per-function loop callers
use today). Timings are wall-clock: on a shared machine, run it twice and keep the lower figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GENERATOR_VERSION = 1
GROUP_FUNCTIONS = 18  # functions each generated group contributes to the index (checked at tiny size by a test)
GROUPS_PER_UNIT = 64  # ~1,000 functions per translation unit
PATTERN = "proj0::mod*::Widget1*::method2"  # 11 functions per unit of proj0, at any size

_HEADER = """\
#pragma once
#include <cstddef>
namespace common {
enum class Level { Low, Mid, High, Critical };
struct Point { int x; int y; double weight; Level level; };
struct Span { const char* data; std::size_t size; };
struct Base {
  virtual ~Base();
  virtual int id() const;
  int base_value = 0;
  Point origin{};
};
template <typename T> struct Box {
  T value;
  T get() const { return value; }
  Box<T> with(T other) const { return Box<T>{value + other}; }
};
union Word { int i; float f; unsigned char bytes[4]; };
int shared_counter(int seed);
}  // namespace common
"""

_COMMON = """\
#include "common.h"
namespace common {
Base::~Base() = default;
int Base::id() const { return base_value; }
int shared_counter(int seed) { return seed * 7; }
}  // namespace common
int main(int argc, char**) { return common::shared_counter(argc) == 1 ? 1 : 0; }
"""


def _group(unit: int, group: int) -> str:
    """One group: GROUP_FUNCTIONS functions of assorted shapes, with locals, lexical blocks and own types."""
    g = f"{group}"
    return f"""
namespace {{
int helper_{g}(int a) {{ int doubled = a * 2; long wide = doubled + {group + 3}; return static_cast<int>(wide) + 1; }}
struct Local{g} {{ int n; double d; }};
}}  // namespace
struct Rec{g} {{
  int a; double b; long c; common::Level level; common::Point where;
  unsigned short flags; char tag[8]; float ratio; const char* label; long long stamp; bool active;
}};
enum Mode{g} {{ kOff{g}, kOn{g}, kAuto{g}, kManual{g}, kFailed{g}, kRetry{g} }};
enum class Phase{g} : unsigned char {{ Init, Load, Parse, Check, Plan, Run, Drain, Flush, Close, Done }};
struct Config{g} {{
  int retries; int timeout_ms; double backoff; Phase{g} phase; bool verbose; char name[16];
  unsigned mask; long budget; short priority; const Rec{g}* parent; float jitter; int reserved[3];
}};
class Widget{g} : public common::Base {{
 public:
  int method0(int x) const;
  int method1(int x, const Rec{g}& r) const;
  long method2(long a, long b, Mode{g} m);
  double method3(double v) const;
  void method4(common::Point* p);
  bool method5(const char* s, unsigned n) const;
  static int counter{g}();
  static Widget{g}* make(int v);
 private:
  struct Stats {{
    long calls; long errors; double mean; double max; int last; unsigned window; Phase{g} phase;
    bool dirty; long long started; long long finished;
  }};
  int value_ = {group};
  Rec{g} rec_{{}};
  Stats stats_{{}};
}};
int Widget{g}::method0(int x) const {{ int base = value_; int extra = helper_{g}(x); return x + base + extra; }}
int Widget{g}::method1(int x, const Rec{g}& r) const {{
  int level = static_cast<int>(r.level);
  if (r.active) {{ int bonus = r.flags; level += bonus; }}
  return x + r.a + level;
}}
long Widget{g}::method2(long a, long b, Mode{g} m) {{
  long product = a * b;
  int mode = static_cast<int>(m);
  value_ += mode;
  return product + value_;
}}
double Widget{g}::method3(double v) const {{ Local{g} l{{value_, v}}; double scaled = l.d * l.n; return scaled; }}
void Widget{g}::method4(common::Point* p) {{ int dx = value_; int dy = rec_.a; p->x += dx; p->y -= dy; }}
bool Widget{g}::method5(const char* s, unsigned n) const {{
  unsigned seen = 0;
  for (unsigned i = 0; i < n; ++i) {{ char c = s[i]; if (c == static_cast<char>(value_)) {{ ++seen; }} }}
  return seen > 0;
}}
int Widget{g}::counter{g}() {{ static int calls = 0; return ++calls + {unit}; }}
Widget{g}* Widget{g}::make(int v) {{ static Widget{g} w; w.value_ = v; return &w; }}
template <typename T> T scale{g}(T v, int k) {{ T factor = static_cast<T>(k + {group}); return v * factor; }}
template int scale{g}<int>(int, int);
template double scale{g}<double>(double, int);
int sum{g}(const int* xs, int n) {{
  int total = 0;
  for (int i = 0; i < n; ++i) {{ int x = xs[i]; total += x; }}
  return total;
}}
int apply{g}(int a) {{
  int offset = a + {group};
  auto twice = [a, offset](int b) {{ int both = a + b; return 2 * both + offset; }};
  return twice(a);
}}
extern "C" int c_entry_{unit}_{g}(int a, int b) {{ int mixed = a ^ b; return mixed; }}
int words{g}(common::Word w, common::Span s, const Config{g}& config) {{
  Rec{g} r{{}};
  r.a = w.i + config.retries;
  return r.a + static_cast<int>(s.size);
}}
"""


def _unit_source(unit: int, groups: int) -> str:
    body = "".join(_group(unit, group) for group in range(groups))
    return f'#include "common.h"\nnamespace proj{unit % 16} {{ namespace mod{unit} {{\n{body}\n}} }}\n'


def _plan(functions: int) -> list[int]:
    """Groups per translation unit for about `functions` functions."""
    groups = max(1, round(functions / GROUP_FUNCTIONS))
    units = max(2, -(-groups // GROUPS_PER_UNIT))
    base, extra = divmod(groups, units)
    return [base + (1 if i < extra else 0) for i in range(units) if base or i < extra]


def ensure_binary(work_dir: Path, functions: int, jobs: int | None = None) -> tuple[Path, dict[str, float]]:
    """The generated binary for `functions`, compiled unless a previous run left it in `work_dir`."""
    root = work_dir / f"cxx-{functions}"
    binary = root / "generated"
    stamp = root / "build.json"
    if binary.is_file() and stamp.is_file():
        facts: dict[str, float] = json.loads(stamp.read_text())
        if facts.get("generator") == GENERATOR_VERSION:
            return binary, facts
    if root.exists():
        shutil.rmtree(root)
    src = root / "src"
    obj = root / "obj"
    src.mkdir(parents=True)
    obj.mkdir()
    (src / "common.h").write_text(_HEADER)
    (src / "common.cpp").write_text(_COMMON)
    sources = [src / "common.cpp"]
    for unit, groups in enumerate(_plan(functions)):
        path = src / f"unit{unit:05d}.cpp"
        path.write_text(_unit_source(unit, groups))
        sources.append(path)
    started = time.perf_counter()
    workers = jobs or os.cpu_count() or 2
    with ThreadPoolExecutor(max_workers=workers) as pool:
        objects = list(pool.map(lambda source: _compile(source, obj), sources))
    compiled = time.perf_counter()
    _run(["g++", "-O0", "-g", "-Wl,--build-id", "-o", str(binary), *map(str, objects)], root)
    linked = time.perf_counter()
    shutil.rmtree(obj)
    facts = {
        "generator": GENERATOR_VERSION,
        "units": float(len(sources)),
        "compile_s": compiled - started,
        "link_s": linked - compiled,
        "debug_info_mb": _section_size(binary, ".debug_info") / 1e6,
    }
    stamp.write_text(json.dumps(facts))
    return binary, facts


def _compile(source: Path, obj: Path) -> Path:
    out = obj / source.with_suffix(".o").name
    _run(["g++", "-O0", "-g", "-c", "-o", str(out), str(source)], source.parent)
    return out


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} … failed:\n{done.stderr[-4000:]}")


def _section_size(binary: Path, name: str) -> int:
    from strobe.symbols.elf import open_elf

    with open_elf(binary) as elf:
        section = elf.get_section_by_name(name)
        return int(section["sh_size"]) if section is not None else 0


def run(work_dir: Path, functions: int) -> dict[str, float]:
    """Build (or reuse) the binary, then time cold and cached `load_index` and one pattern match.

    cold_s: load_index with an empty cache (scan, name, store); cached_s: load_index again;
    match_positions_s: FunctionIndex.matching (positions of the matches) on that fresh index; match_s:
    FunctionIndex.match (the matching FunctionInfo; the first call also decodes the raw-name and signature
    columns); materialise_s: then reading `index.functions` (every FunctionInfo built); match_loop_s: the
    `[f for f in index.functions if pattern.matches(f)]` loop callers use today, on those functions."""
    from strobe.symbols import load_index
    from strobe.symbols.patterns import _compiled, parse_pattern

    binary, facts = ensure_binary(work_dir, functions)
    cache_dir = work_dir / f"cache-{functions}"
    if cache_dir.exists():
        shutil.rmtree(cache_dir)

    started = time.perf_counter()
    cold = load_index(binary, cache_dir)
    cold_s = time.perf_counter() - started
    count = len(cold)
    del cold

    started = time.perf_counter()
    index = load_index(binary, cache_dir)
    cached_s = time.perf_counter() - started

    regex = _compiled(PATTERN)  # the regex parse_pattern matches names with
    started = time.perf_counter()
    positions = index.matching(regex)
    match_positions_s = time.perf_counter() - started
    started = time.perf_counter()
    fast = index.match(regex)
    match_s = time.perf_counter() - started

    started = time.perf_counter()
    everything = index.functions
    materialise_s = time.perf_counter() - started

    pattern = parse_pattern(PATTERN, None)
    started = time.perf_counter()
    plain = [f for f in everything if pattern.matches(f)]
    match_loop_s = time.perf_counter() - started
    if fast != plain or not fast or len(positions) != len(fast):
        raise AssertionError(f"FunctionIndex.match found {len(fast)} functions, the loop {len(plain)}")
    return {
        "functions": float(count),
        "debug_info_mb": facts["debug_info_mb"],
        "compile_s": facts["compile_s"],
        "link_s": facts["link_s"],
        "cold_s": cold_s,
        "cached_s": cached_s,
        "materialise_s": materialise_s,
        "match_positions_s": match_positions_s,
        "match_s": match_s,
        "match_loop_s": match_loop_s,
        "matched": float(len(fast)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work_dir", type=Path, help="where the generated binary is built and kept")
    parser.add_argument("--functions", type=int, default=400_000)
    args = parser.parse_args(argv)
    results = run(args.work_dir, args.functions)
    for key, value in results.items():
        print(f"{key:>26}: {value:,.3f}" if not value.is_integer() else f"{key:>26}: {value:,.0f}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    raise SystemExit(main())
