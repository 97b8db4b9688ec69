"""A real browser for the tests of the pages: Debian's Chromium, headless, driven by Playwright (its own
browser download is never used: .ci/run installs Debian's chromium). Where either is missing, `WHY_NOT` says
why and the tests skip with it.

`tab` opens a page in a browser context of its own (a viewport, UTC, a fresh sessionStorage) and fails the
test on anything that went wrong in it: a script error, a console error (a refused Content-Security-Policy
is one), a dialog (alert() would mean a value ran as code).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil

import pytest

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
DESKTOP, PHONE = (1280, 800), (360, 740)


def _why_not() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does), or set CHROMIUM"
    return None


WHY_NOT = _why_not()
needs_browser = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


@pytest.fixture(scope="module", name="browser")
async def browser_fixture():
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield chromium
        await chromium.close()


@contextlib.asynccontextmanager
async def tab(browser, size: tuple[int, int] = DESKTOP, allowed: tuple[str, ...] = ()):
    """A page; `allowed`: console errors expected (the browser logs a 401 it was answered, say)."""
    context = await browser.new_context(viewport={"width": size[0], "height": size[1]}, timezone_id="UTC")
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("console", lambda m: m.type == "error" and not any(a in m.text for a in allowed)
            and problems.append(f"console error: {m.text}"))

    def dialog(d) -> None:
        problems.append(f"a dialog opened: {d.message!r}")
        asyncio.ensure_future(d.dismiss())

    page.on("dialog", dialog)
    try:
        yield page
    finally:
        await context.close()
    assert problems == []


async def load(page, url: str) -> None:
    """Open the page and wait until its module has drawn what the API answered (body[data-ready])."""
    await page.goto(url)
    await page.wait_for_selector("body[data-ready]", state="attached", timeout=15_000)


async def follow(page, action) -> None:
    """Await `action` (a click, a key: a coroutine not yet started), which leads to another page, and wait
    until that page is ready."""
    async with page.expect_navigation():
        await action
    await page.wait_for_selector("body[data-ready]", state="attached", timeout=15_000)


async def cells(page, table: str) -> list[list[str]]:
    """The text of each cell of a table's body, row by row."""
    return await page.eval_on_selector_all(
        f"{table} tbody tr", "rows => rows.map(r => [...r.children].map(c => c.textContent.trim()))")


# Checks every page must pass (WCAG 2.1 AA where it can be measured from the page itself).
ACCESSIBLE = """() => {
  const found = [];
  if (document.documentElement.lang !== "en") found.push("html has no lang");
  const levels = [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")].map(h => Number(h.tagName[1]));
  if (levels.filter(l => l === 1).length !== 1 || levels[0] !== 1) found.push(`headings ${levels}`);
  levels.forEach((l, i) => { if (i && l > levels[i - 1] + 1) found.push(`heading h${l} after h${levels[i - 1]}`); });
  for (const input of document.querySelectorAll("input, select, textarea")) {
    if (!input.labels.length && !input.getAttribute("aria-label")) found.push(`no label: ${input.outerHTML}`);
  }
  for (const th of document.querySelectorAll("thead th")) {
    if (th.getAttribute("scope") !== "col") found.push(`header without scope: ${th.textContent}`);
  }
  const rgba = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => [r, g, b].map(v => v / 255)
    .map(v => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (e) => {
    for (; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  for (const e of document.querySelectorAll("body *")) {
    const own = [...e.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!own || !e.getClientRects().length || getComputedStyle(e).visibility === "hidden") continue;
    const [a, b] = [luminance(rgba(getComputedStyle(e).color)), luminance(background(e))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) found.push(`contrast ${ratio.toFixed(2)}: ${e.tagName} ${e.textContent.trim().slice(0, 40)}`);
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    found.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  return found;
}"""

FOCUS = """() => {
  const e = document.activeElement, style = getComputedStyle(e);
  return {tag: e.tagName, text: e.textContent.trim().slice(0, 40), outline: style.outlineStyle,
          width: parseFloat(style.outlineWidth), inView: e.getBoundingClientRect().left >= 0};
}"""


async def check_accessible(page, tabs: int = 10) -> None:
    """The checks above, then the keyboard: the skip link first, and each of the next `tabs` stops of Tab
    shows its focus ring."""
    assert await page.evaluate(ACCESSIBLE) == [], page.url
    stops = await page.evaluate("""() => [...document.querySelectorAll('a[href], button, input, [tabindex="0"]')]
                                          .filter(e => e.getClientRects().length).length""")
    await page.focus("a.skip")
    for i in range(min(tabs, stops - 1) + 1):
        if i:
            await page.keyboard.press("Tab")
        focus = await page.evaluate(FOCUS)
        assert focus["tag"] != "BODY", f"{page.url}: Tab reached nothing"
        assert focus["outline"] != "none" and focus["width"] >= 2 and focus["inView"], (page.url, focus)
