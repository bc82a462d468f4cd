"""The HTML timeline of a session stored by the real writer: one offline file whose embedded data round-trips
(a '</script>' in the program's output included), drawn by headless Chromium without a script error, with a flame
chart per thread whose slices are where the layout says, a crash marker, and a tooltip for a hovered call."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from strobe.export.exporting import ExportResult, export_session, open_store
from tests.export import browser
from tests.export.checks import assert_offline, html_data
from tests.export.dataset import MAIN, PID, SCRIPT_LINE, WORKER, Stored, store


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Stored, ExportResult]:
    stored = store(tmp_path / "home")
    with contextlib.closing(open_store(stored.db)) as conn:
        result = export_session(conn, stored.session_id, "html", tmp_path / "t.html", home=stored.home)
    return stored, result


def test_one_offline_file_with_the_data_embedded_safely(exported: tuple[Stored, ExportResult]) -> None:
    stored, result = exported
    assert result.format == "html" and result.threads == 2 and not result.truncated
    assert_offline(result.path)
    text = result.path.read_text()
    assert text.count("</script>") == 2  # the page's own two elements; the program's text cannot close one
    data = html_data(result.path)
    threads = {tuple(t[:2]): t[2] for t in data["threads"]}
    assert threads == {(PID, MAIN): "demo", (PID, WORKER): "worker"}
    outputs = [item for item in data["items"] if item[0] == 1]
    assert [(o[3], o[4]) for o in outputs] == [("stdout", SCRIPT_LINE), ("stderr", "oops\n")]
    calls = sorted((data["names"][c[4]], c[2], c[3], c[6]) for c in data["items"] if c[0] == 0)
    assert calls == [("app.compute", 2000.0, 2000.0, None), ("app.compute", 2200.0, 3800.0, "no exit recorded: "
                      "the process crashed"), ("app.helper", 2500.0, 500.0, None),
                     ("app.main", 1000.0, 5000.0, "no exit recorded: the process crashed"),
                     ("app.stuck", 2300.0, 3700.0, "no exit recorded: the process crashed"),
                     ("native_add", 4100.0, 100.0, None)]
    (crash,) = [item for item in data["items"] if item[0] == 2]
    assert crash[4] == "crash" and crash[6]["signal"] == "SIGSEGV"
    assert data["session"]["id"] == stored.session_id and data["endUs"] == 6000.0


def test_chromium_draws_every_track_without_errors(exported: tuple[Stored, ExportResult], tmp_path: Path) -> None:
    _, result = exported
    shown = browser.render(result.path, tmp_path / "chromium")
    assert shown.errors == "" and not browser.uncaught(shown.console), (shown.errors, shown.console[-2000:])
    assert shown.status["data-state"] == "drawn", shown.status
    # One process: its output & crashes track, two thread tracks, two counter tracks (counter, cfg.limit).
    assert shown.status["data-tracks"] == "5" and shown.status["data-thread-tracks"] == "2"
    assert shown.status["data-calls"] == "6"
    assert shown.status["text"] == "drawn 5 tracks (2 threads), 6 calls"


def test_the_tooltip_of_a_hovered_call(exported: tuple[Stored, ExportResult], tmp_path: Path) -> None:
    _, result = exported
    shown = browser.render(result.path, tmp_path / "chromium", fragment="#probe=app.helper")
    assert shown.status["data-probe"] == "app.helper" and shown.errors == ""
    tooltip = shown.dom.split('<div id="tooltip"', 1)[1].split("</div>", 1)[0]
    assert "display: block" in tooltip
    assert "duration: 500.000 µs" in tooltip and "demo (100)" in tooltip
    assert '"returnValue": 2' in tooltip and '"arguments": [\n  1\n ]' in tooltip


def test_the_screenshot_shows_slices_where_the_layout_puts_them(
    exported: tuple[Stored, ExportResult], tmp_path: Path
) -> None:
    _, result = exported
    shown = browser.render(result.path, tmp_path / "chromium")
    canvas, tracks, palette = browser.layout(shown.status)
    image = browser.read_png(browser.screenshot(result.path, tmp_path / "chromium"))
    assert (image.width, image.height) == browser.WINDOW
    left, top, right = canvas["left"] + canvas["labelWidth"], canvas["top"], canvas["left"] + canvas["width"]
    span = right - left
    colors = {browser.hex_color(c) for c in palette}
    by_name = {(t["kind"], t.get("tid")): t for t in tracks}
    main, worker = by_name[("thread", MAIN)], by_name[("thread", WORKER)]

    def row(track: dict[str, int], depth: int, frm: float, to: float) -> tuple[int, int, int, int]:
        """The pixels of a depth's row between two fractions of the time axis (0..6120 µs drawn)."""
        y = top + track["y"] + 2 + depth * canvas["row"]
        return left + int(frm * span) + 2, y + 3, left + int(to * span) - 2, y + canvas["row"] - 5

    end = 6000 * 1.02
    main_color = browser.slice_color("app.main", palette)
    x0, y0, x1, y1 = row(main, 0, 1100 / end, 5900 / end)  # app.main spans 1000..6000 µs at depth 0
    assert image.count(x0, y0, x1, y1, {main_color}) >= 0.8 * (x1 - x0) * (y1 - y0)
    x0, y0, x1, y1 = row(main, 2, 2550 / end, 2950 / end)  # app.helper at depth 2
    assert image.count(x0, y0, x1, y1, {browser.slice_color("app.helper", palette)}) >= 0.6 * (x1 - x0) * (y1 - y0)
    x0, y0, x1, y1 = row(worker, 1, 2400 / end, 5900 / end)  # app.stuck at depth 1 on the worker
    assert image.count(x0, y0, x1, y1, {browser.slice_color("app.stuck", palette)}) >= 0.8 * (x1 - x0) * (y1 - y0)
    x0, y0, x1, y1 = row(main, 2, 4300 / end, 5900 / end)  # nothing at depth 2 after 3 ms: background
    assert image.count(x0, y0, x1, y1, colors) == 0
    events = by_name[("events", None)]
    crash_x = left + int(6000 / end * span)
    assert image.count(crash_x - 6, top + events["y"], crash_x + 7, top + events["y"] + events["h"],
                       {browser.hex_color("#d7191c")}) >= 20
