"""Which newly wrapped functions of a running program V8's live edit leaves with their old code.

A module the program loaded runs `old` (its original text, or the rewrite of an earlier plan); the preload gives
it `new` (the current rewrite) through Debugger.setScriptSource. V8 then gives a function's closures the new
code only when it finds the function again in the new text (symbols/v8_liveedit.py) and the scopes around it
kept their variables. A function is left as it was when:

- it is an arrow with an expression body (`x => x * 2`): its wrapper's closing `))` is inserted exactly where it
  ends, and V8 carries an end across an insertion there to before it, so it never finds the function again;
- a function around it is wrapped in one text and not in the other: that function's body moved into (or out of)
  the wrapper's arrow, which changes the scope the inner one's closures were made in;
- V8's diff aligns the inserted text across one of its boundaries.

    misses = unmapped(original_text, old_result_or_None, new_result, added_functions)   # {function: why}
"""

from __future__ import annotations

from collections.abc import Iterable

from strobe.symbols.js_index import JsFunction
from strobe.symbols.js_transform import WrapResult
from strobe.symbols.v8_liveedit import maps, source_changes, utf16_offset

EXPRESSION_BODY = ("an arrow with an expression body (`x => x * 2`) cannot be given new code in a running program: "
                   "V8 finds a function again by where it ends, and its wrapper adds text there")
MISALIGNED = "V8's live edit does not find it again in the rewritten text (its diff aligns the wrapper across it)"


def _contains(outer: JsFunction, inner: JsFunction) -> bool:
    return outer is not inner and outer.body_start <= inner.params_start and inner.body_end <= outer.body_end \
        and (outer.body_start, outer.body_end) != (inner.body_start, inner.body_end)


def _span(text: str, result: WrapResult | None, function: JsFunction) -> tuple[int, int]:
    start, end = (function.params_start, function.body_end) if result is None else result.span(function)
    return utf16_offset(text, start), utf16_offset(text, end)


def unmapped(original: str, old: WrapResult | None, new: WrapResult,
             functions: Iterable[JsFunction]) -> dict[JsFunction, str]:
    """The `functions` (wrapped in `new`) whose closures keep their code when a script running `old` (None: the
    original text) is given `new`, each with why."""
    old_text = original if old is None else old.source
    changes = source_changes(old_text, new.source)
    old_wrapped = {(f.body_start, f.body_end) for f in (old.functions if old is not None else ())}
    new_wrapped = {(f.body_start, f.body_end) for f in new.functions}
    moved = [f for f in (*(old.functions if old is not None else ()), *new.functions)
             if ((f.body_start, f.body_end) in old_wrapped) != ((f.body_start, f.body_end) in new_wrapped)]
    misses: dict[JsFunction, str] = {}
    for function in functions:
        around = next((f for f in moved if _contains(f, function)), None)
        if function.expression_body:
            misses[function] = EXPRESSION_BODY
        elif around is not None:
            misses[function] = (f"it is inside {around.name}, whose code changes too: V8 keeps the closures of it "
                                "made before in the scope they were made in")
        elif not maps(changes, _span(old_text, old, function), _span(new.source, new, function)):
            misses[function] = MISALIGNED
    return misses
