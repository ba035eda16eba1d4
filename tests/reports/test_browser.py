"""The HTML report in a real, headless Chromium from file://: no console error, every chart
drawn, no request leaving the machine. Skips (saying why) only where Chromium is missing."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer

if TYPE_CHECKING:
    from pathlib import Path


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium; apt-get install -y chromium)")
    return path


@dataclass(frozen=True)
class Opened:
    """What a page showed in Chromium: console errors, requests that left the machine, charts."""

    errors: list[str]
    remote: list[str]
    charts: int
    drawn: int


def open_offline(report: Path, *, sort_table: str, screenshot: Path | None = None) -> Opened:
    """Open ``report`` from file:// in headless Chromium, wait for plotly, click the first header
    of the sortable table ``#sort_table``; skips (saying why) where Chromium or playwright is missing."""
    executable = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (a dev dependency) is not installed")
    errors: list[str] = []
    remote: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1300, "height": 2000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request",
            lambda r: None if r.url.startswith(("file:", "data:", "about:", "blob:")) else remote.append(r.url),
        )
        page.goto(report.as_uri())
        page.wait_for_function("document.querySelectorAll('[data-chart] .main-svg').length > 0")
        charts = page.evaluate("document.querySelectorAll('[data-chart]').length")
        drawn = page.evaluate("document.querySelectorAll('[data-chart] .main-svg').length")
        page.locator(f"#{sort_table} th").first.click()  # sortable tables sort
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    return Opened(errors=errors, remote=remote, charts=charts, drawn=drawn)


@pytest.mark.e2e
def test_report_renders_offline_in_chromium(tmp_path: Path) -> None:
    doc = analyze(load_run([SAMPLES / "captures" / "straggler"]))
    report = tmp_path / "report.html"
    report.write_text(renderer("html").render(doc), encoding="utf-8")
    opened = open_offline(report, sort_table="steps", screenshot=tmp_path / "report.png")
    assert opened.errors == []
    assert opened.remote == []
    assert opened.charts >= 5
    assert opened.drawn >= opened.charts  # plotly drew an SVG in every chart
    assert (tmp_path / "report.png").stat().st_size > 10_000


def _page_facts(report: Path, *, width: int) -> dict[str, object]:
    """What Chromium shows of ``report`` at ``width`` pixels, once plotly has drawn: console
    errors, each chart's traces and the traces it drew, and each table's box beside its card's."""
    executable = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (a dev dependency) is not installed")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": width, "height": 1200})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri())
        page.wait_for_function(
            "Array.from(document.querySelectorAll('[data-chart]')).every(el => el.querySelector('.main-svg'))"
        )
        charts = page.evaluate(
            """Array.from(document.querySelectorAll('[data-chart]')).map(el => ({
                key: el.dataset.chart, traces: (el.data || []).length,
                drawn: el.querySelectorAll('.main-svg g.trace, .main-svg .hm').length}))"""
        )
        tables = page.evaluate(
            """Array.from(document.querySelectorAll('section table')).map(t => {
                const card = t.closest('section'), wrap = t.closest('.scroll');
                const style = getComputedStyle(card), box = card.getBoundingClientRect();
                return {card: card.id, right: t.getBoundingClientRect().right,
                        inner: box.right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth),
                        card_over: card.scrollWidth > card.clientWidth,
                        scrolls: !!wrap && getComputedStyle(wrap).overflowX === 'auto'
                                 && wrap.clientWidth <= card.clientWidth};
            })"""
        )
        advice = page.evaluate(
            """Array.from(document.querySelectorAll('.recs li')).map(li => ({
                color: getComputedStyle(li).color, body: getComputedStyle(document.body).color,
                link: !!li.closest('a'), cursor: getComputedStyle(li).cursor}))"""
        )
        browser.close()
    return {"errors": errors, "charts": charts, "tables": tables, "advice": advice}


@pytest.mark.e2e
@pytest.mark.parametrize("capture", ["straggler", "cuda-h200-memory"])
def test_every_chart_draws_its_traces_with_the_partial_bundle(tmp_path: Path, capture: str) -> None:
    report = tmp_path / "report.html"
    report.write_text(renderer("html").render(analyze(load_run([SAMPLES / "captures" / capture]))), encoding="utf-8")
    assert report.stat().st_size < 1_500_000
    facts = _page_facts(report, width=1300)
    assert facts["errors"] == []
    charts = facts["charts"]
    assert isinstance(charts, list)
    assert len(charts) >= 5
    for chart in charts:
        assert chart["traces"] >= 1, chart
        assert chart["drawn"] >= chart["traces"], chart  # every trace drawn (a heatmap as its image)


@pytest.mark.e2e
@pytest.mark.parametrize("capture", ["straggler", "cuda-h200-memory"])
def test_tables_stay_inside_their_cards(tmp_path: Path, capture: str) -> None:
    report = tmp_path / "report.html"
    report.write_text(renderer("html").render(analyze(load_run([SAMPLES / "captures" / capture]))), encoding="utf-8")
    facts = _page_facts(report, width=1300)
    wide = facts["tables"]
    assert isinstance(wide, list)
    assert wide
    outside = [t for t in wide if t["right"] > t["inner"] + 1]
    assert outside == []  # at a laptop's width every table fits its card
    narrow = _page_facts(report, width=640)["tables"]
    assert isinstance(narrow, list)
    assert [t for t in narrow if t["card_over"]] == []  # no card overflows
    assert [t for t in narrow if t["right"] > t["inner"] + 1 and not t["scrolls"]] == []  # a wide table scrolls
    # advice reads as text, not as links (issue 46, item 8: it was link blue, and no link)
    advice = facts["advice"]
    assert isinstance(advice, list) and advice
    assert all(a["color"] == a["body"] and not a["link"] and a["cursor"] != "pointer" for a in advice), advice[:2]
