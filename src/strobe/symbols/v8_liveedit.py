"""Which functions V8's live edit (Debugger.setScriptSource) gives new code, computed the way V8 11 does it.

V8 replaces a script's source by diffing the old text against the new one (lines first, with the common first
and last lines set aside; then, inside each changed run of lines under 800 UTF-16 units on both sides, the
characters), both with Myers' O(ND) algorithm in its linear-space form (src/debug/liveedit-diff.cc). It then
carries each old function's start and end positions across the diff; a function whose start or end falls inside
a changed range, or lands where no function of the new text starts and ends, is "damaged": its closures keep
their old code. Our rewrites only insert text, but an insertion can be aligned several ways (the `}` closing a
wrapper's inner arrow can be matched with the function's own `}`), so whether a function's closures get the
wrapper depends on the alignment Myers happens to pick. This module repeats V8's choice (same algorithm, same
tie-breaks, UTF-16 units) so that a function V8 will not update is reported, not assumed traced.

    changes = source_changes(old_text, new_text)
    maps(changes, (old_start, old_end), (new_start, new_end))   # True: V8 maps the old function to the new one

A function's start is V8's FunctionLiteral start (its parameter list: `(`, or the single parameter of an arrow)
and its end is just after its last character; both as UTF-16 offsets (`utf16_offset`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

CHUNK_LIMIT = 800  # V8 diffs the characters of a changed run of lines only when both sides are shorter than this
_LINE_ENDS = (0x0A, 0x2028, 0x2029)
_CR = 0x0D


@dataclass(frozen=True, slots=True)
class Change:
    """Old units [start, end) became new units [new_start, new_end)."""

    start: int
    end: int
    new_start: int
    new_end: int


Equals = Callable[[int, int], bool]


def _myers(equals: Equals, length1: int, length2: int) -> list[tuple[int, int, int, int]]:
    """V8's MyersDiffer: the changed chunks (pos1, pos2, len1, len2) of one shortest edit script."""
    size = length1 + length2 + 1
    forward = [0] * size  # index -k is stored at size - k, as V8's FurthestReaching does
    reverse = [0] * size

    def middle_snake(x0: int, y0: int, x1: int, y1: int) -> tuple[int, int, int, int] | None:
        width, height = x1 - x0, y1 - y0
        if width + height == 0:
            return None
        delta = width - height
        forward[1] = x0
        reverse[-1] = x1
        for d in range(math.ceil((width + height) / 2.0) + 1):
            for k in range(-d, d + 1, 2):
                if k == -d or (k != d and forward[k - 1] < forward[k + 1]):
                    start_x = to_x = forward[k + 1]
                else:
                    start_x = forward[k - 1]
                    to_x = start_x + 1
                to_y = y0 + (to_x - x0) - k
                start_y = to_y if (d == 0 or start_x != to_x) else to_y - 1
                while to_x < x1 and to_y < y1 and equals(to_x, to_y):
                    to_x += 1
                    to_y += 1
                forward[k] = to_x
                lane = k - delta
                if delta % 2 != 0 and -d + 1 <= lane <= d - 1 and to_x >= reverse[lane]:
                    return start_x, start_y, to_x, to_y
            for lane in range(d, -d - 1, -2):
                if lane == d or (lane != -d and reverse[lane - 1] > reverse[lane + 1]):
                    start_x = to_x = reverse[lane - 1]
                else:
                    start_x = reverse[lane + 1]
                    to_x = start_x - 1
                k = lane + delta
                to_y = y0 + (to_x - x0) - k
                start_y = to_y if (d == 0 or start_x != to_x) else to_y + 1
                while x0 < to_x and y0 < to_y and equals(to_x - 1, to_y - 1):
                    to_x -= 1
                    to_y -= 1
                reverse[lane] = to_x
                if delta % 2 == 0 and -d <= k <= d and to_x <= forward[k]:
                    return to_x, to_y, start_x, start_y
        return None

    def edit_path(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]] | None:
        points: list[tuple[int, int]] = []
        stack: list[tuple[int, int, int, int] | tuple[int, int]] = [(x0, y0, x1, y1)]
        while stack:  # V8 recurses head then tail; a stack of areas and points gives the same order
            item = stack.pop()
            if len(item) == 2:
                points.append(item)
                continue
            ax, ay, bx, by = item
            snake = middle_snake(ax, ay, bx, by)
            if snake is None:
                if (ax, ay, bx, by) == (x0, y0, x1, y1):
                    return None
                raise AssertionError("an area with no snake inside a path")  # V8 never recurses into one
            sx, sy, ex, ey = snake
            tail: tuple[int, int, int, int] | tuple[int, int] = (
                (ex, ey, bx, by) if (bx - ex) + (by - ey) > 0 else (ex, ey))
            head: tuple[int, int, int, int] | tuple[int, int] = (
                (ax, ay, sx, sy) if (sx - ax) + (sy - ay) > 0 else (sx, sy))
            stack += [tail, head]
        return points

    points = edit_path(0, 0, length1, length2)
    chunks: list[tuple[int, int, int, int]] = []
    if points is None:
        return chunks
    open_at: tuple[int, int] | None = None

    def unchanged(x: int, y: int) -> None:
        nonlocal open_at
        if open_at is not None:
            chunks.append((open_at[0], open_at[1], x - open_at[0], y - open_at[1]))
            open_at = None

    def changed(x: int, y: int) -> None:
        nonlocal open_at
        if open_at is None:
            open_at = (x, y)

    def walk(x: int, y: int, to_x: int, to_y: int) -> tuple[int, int]:
        while x < to_x and y < to_y and equals(x, y):
            unchanged(x, y)
            x += 1
            y += 1
        return x, y

    for (x, y), (to_x, to_y) in pairwise(points):
        x, y = walk(x, y, to_x, to_y)
        step = (to_x - x) - (to_y - y)
        if step == -1:
            changed(x, y)
            y += 1
        elif step == 1:
            changed(x, y)
            x += 1
        walk(x, y, to_x, to_y)
    unchanged(*points[-1])
    return chunks


def utf16(text: str) -> array[int]:
    """The UTF-16 code units V8 compares."""
    units = array("H")
    units.frombytes(text.encode("utf-16-le", "surrogatepass"))
    return units


def utf16_offset(text: str, offset: int) -> int:
    """The UTF-16 offset of character `offset` of `text`."""
    return offset + sum(1 for char in text[:offset] if ord(char) > 0xFFFF)


def _line_starts(units: array[int]) -> list[int]:
    """Where each line starts, then the length: V8's line ends (\\n, a \\r not before \\n, U+2028, U+2029)."""
    starts = [0]
    last = len(units) - 1
    for index, unit in enumerate(units):
        if unit in _LINE_ENDS or (unit == _CR and (index == last or units[index + 1] != 0x0A)):
            starts.append(index + 1)
    starts.append(len(units))
    return starts


def _same_unit(a: array[int], b: array[int]) -> Equals:
    return lambda i, j: a[i] == b[j]


def source_changes(old: str, new: str) -> list[Change]:
    """The changed ranges V8 finds between two script sources (LiveEdit::CompareStrings)."""
    a, b = utf16(old), utf16(new)
    starts_a, starts_b = _line_starts(a), _line_starts(b)
    lines_a, lines_b = len(starts_a) - 1, len(starts_b) - 1

    def same_line(i: int, j: int) -> bool:
        return a[starts_a[i]:starts_a[i + 1]] == b[starts_b[j]:starts_b[j + 1]]

    prefix = 0
    while prefix < min(lines_a, lines_b) and same_line(prefix, prefix):
        prefix += 1
    suffix = 0
    while suffix < min(lines_a - prefix, lines_b - prefix) and same_line(lines_a - suffix - 1, lines_b - suffix - 1):
        suffix += 1
    changes: list[Change] = []
    lines = _myers(lambda i, j: same_line(i + prefix, j + prefix), lines_a - prefix - suffix,
                   lines_b - prefix - suffix)
    for line1, line2, count1, count2 in lines:
        start1, start2 = starts_a[line1 + prefix], starts_b[line2 + prefix]
        end1, end2 = starts_a[line1 + prefix + count1], starts_b[line2 + prefix + count2]
        if end1 - start1 < CHUNK_LIMIT and end2 - start2 < CHUNK_LIMIT:
            part_a, part_b = a[start1:end1], b[start2:end2]
            for pos1, pos2, len1, len2 in _myers(_same_unit(part_a, part_b), len(part_a), len(part_b)):
                changes.append(Change(start1 + pos1, start1 + pos1 + len1, start2 + pos2, start2 + pos2 + len2))
        else:
            changes.append(Change(start1, end1, start2, end2))
    return changes


def carried(changes: list[Change], position: int) -> int | None:
    """Where V8 carries an old function boundary: None when it falls inside a changed range."""
    delta = 0
    for change in changes:
        if change.start < position <= change.end:
            return None
        if change.end < position:
            delta += (change.new_end - change.new_start) - (change.end - change.start)
    return position + delta


def maps(changes: list[Change], old: tuple[int, int], new: tuple[int, int]) -> bool:
    """Whether V8 takes the function at `old` (start, end) to be the one at `new`, so that its closures run the
    new text's code."""
    return carried(changes, old[0]) == new[0] and carried(changes, old[1]) == new[1]
