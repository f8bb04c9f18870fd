"""The web console in headless Chromium (Debian's chromium and chromium-driver), driven by Selenium,
at 1280 px and at 390 px (a phone), light and dark: sign in, build and release from the public
schema with the cost shown before the click, SQL, results plotted with their intervals, budget
and history, the reusable holdout and synthetic data, sessions that end and a service that goes
away. axe-core checks every view; screenshots go to build/screenshots/console (or
$BAYESDP_SCREENSHOTS)."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from serve_helpers import Server, add_analyst, serve

from bayesdp.privacy import Guarantee
from bayesdp.privacy.filters import filter_for
from bayesdp.serve.config import load_config
from bayesdp.serve.state import State

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
ROOT = Path(__file__).parents[2]
# .ci/run installs axe-core here (npm, not committed) and says so in BAYESDP_AXE.
AXE = Path(os.environ.get("BAYESDP_AXE") or ROOT / "build/axe/node_modules/axe-core/axe.min.js")
SHOTS = Path(os.environ.get("BAYESDP_SCREENSHOTS") or ROOT / "build/screenshots/console")
WAIT_S = 30
WIDE, PHONE = (1280, 900), (390, 844)

CONFIG = """
state = "state"
rate_per_minute = 6000
timing = { pad = false }

[datasets.visits]
source = "visits.csv"
privacy_unit = "user"
unit_name = "person"
unit_plural = "people"
description = "Shop visits"
max_groups_per_unit = 4
max_rows_per_group = 2
budget = { epsilon = 6.0, delta = 1e-6 }
[datasets.visits.columns]
shop = { domain = ["a", "b", "c"], description = "the shop visited" }
day = { domain = ["mon", "tue"], description = "day of the visit" }
spend = { bounds = [0, 10], description = "amount spent, in dollars" }
flag = { bounds = [0, 1] }

[datasets.small]
source = "visits.csv"
privacy_unit = "user"
budget = { epsilon = 1.0, delta = 1e-6 }
[datasets.small.columns]
shop = { domain = ["a", "b", "c"] }
spend = { bounds = [0, 10] }

[datasets.people]
source = "people.csv"
privacy_unit = false
budget = { epsilon = 3.0, delta = 1e-6, accounting = "zcdp" }
synthetic = { epsilon = 1.0, delta = 1e-7, rows = 200 }
[datasets.people.columns]
shop = { domain = ["a", "b", "c"] }
spend = { bounds = [0, 10] }

[holdouts.model]
train = "train.csv"
holdout = "holdout.csv"
threshold = 0.04
sigma = 0.01
budget = 5
"""


# The largest ε of a one-count release (Laplace: ρ = ε²/2) people's zCDP budget admits: √(2ρ) for
# the largest ρ whose (ε, δ) fits ε=3, δ=1e-6 (`ZcdpFilter`).
PEOPLE_LARGEST = math.sqrt(2 * filter_for("zcdp", Guarantee(3.0, delta=1e-6)).rho)


# The contrast ratio (WCAG 2.x) of an element's colour property against the card's background.
CONTRAST = """
const rgb = (c) => c.match(/[0-9.]+/g).slice(0, 3).map(Number).map((v) => v / 255)
  .map((v) => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
const lum = (c) => { const [r, g, b] = rgb(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
const mark = getComputedStyle(document.querySelector(arguments[0]))[arguments[1]];
const card = getComputedStyle(document.querySelector('.card')).backgroundColor;
const [a, b] = [lum(mark), lum(card)].sort((x, y) => y - x);
return (a + 0.05) / (b + 0.05);
"""


# Whether every text of a plot of two groups (one with a very long key) lies inside the plot.
KEYS_FIT = """
const f = plotEstimate('x', {value: [1, 2], low: [0, 1], high: [2, 3]},
                       ['a key far longer than any plot could show beside its bar', 'b'], 'mean', '95%');
document.getElementById('result-plot').append(f);
const svg = f.querySelector('svg'), box = svg.getBoundingClientRect();
const inside = [...svg.querySelectorAll('text')].every((t) => {
  const r = t.getBoundingClientRect(); return r.left >= box.left - 1 && r.right <= box.right + 1; });
const titled = svg.querySelector('title') !== null;
f.remove();
return [inside, titled];
"""


def write_console_service(root: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 4000
    visits = pd.DataFrame({"user": rng.integers(0, 1500, n), "shop": rng.choice(["a", "b", "c"], n),
                           "day": rng.choice(["mon", "tue"], n), "spend": rng.uniform(0, 12, n),
                           "flag": rng.integers(0, 2, n)})
    visits.to_csv(root / "visits.csv", index=False)
    people = visits.drop_duplicates("user")[["shop", "spend"]]
    people.to_csv(root / "people.csv", index=False)
    people.iloc[: len(people) // 2].to_csv(root / "train.csv", index=False)
    people.iloc[len(people) // 2:].to_csv(root / "holdout.csv", index=False)
    (root / "service.toml").write_text(CONFIG)
    return root / "service.toml"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = serve(write_console_service(tmp_path_factory.mktemp("console")))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def axe_source() -> str | None:
    if AXE.is_file():
        return AXE.read_text(encoding="utf-8")
    if os.environ.get("CI") or os.environ.get("BAYESDP_AXE"):
        pytest.fail(f"axe-core is missing at {AXE}: `bash .ci/run` installs it with npm")
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    tmp = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}", "--window-size=1280,900"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(tmp / "downloads"),
                                              "download.prompt_for_download": False})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.downloads = tmp / "downloads"
    yield driver
    driver.quit()


class Page:
    """The console in one browser: waits, sizes, colour schemes, axe and screenshots."""

    def __init__(self, driver: Any, server: Server, axe: str | None) -> None:
        self.d, self.server, self.axe = driver, server, axe
        self.wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
        self.size(*WIDE)
        self.scheme("light")

    def until(self, check: Callable[[], Any]) -> Any:
        try:
            return self.wait.until(lambda _: check())
        except TimeoutException:  # say what the page showed
            shown = {c: self.text(c) for c in (
                "#builder-problems", "#builder-cost", "#release-error", "#sql-cost", "#sql-problems",
                "#sql-error", "#budget-pill", "#budget-warning", "#signin-error")}
            raise AssertionError(f"the page did not get there: {shown}") from None

    def size(self, width: int, height: int) -> None:
        # A phone is emulated as a phone: without a viewport tag it would lay out at 980 px.
        self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})

    def scheme(self, value: str) -> None:
        self.d.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": value}]})

    def js(self, script: str, *args: Any) -> Any:
        return self.d.execute_script(script, *args)

    def el(self, css: str) -> Any:
        return self.d.find_element(By.CSS_SELECTOR, css)

    def els(self, css: str) -> list[Any]:
        return self.d.find_elements(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        return str(self.js("const e = document.querySelector(arguments[0]);"
                           "return e ? e.textContent : ''", css))

    def rows(self, css: str) -> list[list[str]]:
        return [[c.text for c in r.find_elements(By.CSS_SELECTOR, "td, th")]
                for r in self.els(css + " tbody tr")]

    def shown(self, css: str) -> bool:
        return bool(self.js("const e = document.querySelector(arguments[0]);"
                            "return !!e && e.getClientRects().length > 0", css))

    def set(self, css: str, value: Any) -> None:
        self.js("const e = document.querySelector(arguments[0]); e.value = arguments[1];"
                "e.dispatchEvent(new Event('input', {bubbles: true}));"
                "e.dispatchEvent(new Event('change', {bubbles: true}))", css, str(value))

    def sign_in(self, token: str) -> None:
        self.d.get(self.server.url)
        # Signed in from an earlier test (the token kept for the tab): sign out first.
        self.until(lambda: self.shown("#token") or self.shown("#signout"))
        if self.shown("#signout"):
            self.el("#signout").click()
        self.el("#token").send_keys(token)
        self.el("#signin-button").click()
        self.until(lambda: self.shown("#workspace") and self.ready("builder"))

    def ready(self, which: str) -> bool:
        """The cost of what the builder (or SQL box) would release is shown."""
        return "spends" in self.text("#builder-cost" if which == "builder" else "#sql-cost")

    def dataset(self, name: str) -> None:
        self.set("#dataset", name)
        self.until(lambda: name + ":" in self.text("#budget-pill") and self.ready("builder"))

    def release(self) -> None:
        before = self.js("return S.doc && S.doc.id")
        self.until(lambda: self.el("#release-button").is_enabled())
        self.el("#release-button").click()
        self.until(lambda: self.js("return S.doc && S.doc.id") not in (None, before))
        self.until(lambda: self.js("return S.history.some((r) => r.id === S.doc.id)"))

    def release_confirmed(self) -> None:
        """Release what the builder shows, confirming the spend when asked."""
        before = self.js("return S.history.length")
        self.until(lambda: self.el("#release-button").is_enabled())
        self.el("#release-button").click()
        if self.shown("#confirm"):
            self.el("#confirm-yes").click()
        self.until(lambda: self.js("return S.history.length") > before)

    def check_axe(self, view: str) -> None:
        """No critical or serious axe-core violation in the page as it is now."""
        if self.axe is None:
            return
        self.js(self.axe)
        found = self.d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {resultTypes: ['violations']}).then((r) => done(r.violations.map((v) => "
            "({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}))))")
        bad = [v for v in found if v["impact"] in ("critical", "serious")]
        assert not bad, f"{view}: {json.dumps(bad, indent=1)}"

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.d.save_screenshot(str(SHOTS / f"{name}.png"))
        assert (SHOTS / f"{name}.png").stat().st_size > 0

    def errors(self) -> list[str]:
        """Uncaught script errors logged since the last call."""
        return [e["message"] for e in self.d.get_log("browser") if "Uncaught" in e["message"]]


@pytest.fixture
def page(browser: Any, console: Server, axe_source: str | None) -> Iterator[Page]:
    p = Page(browser, console, axe_source)
    p.errors()
    yield p
    assert p.errors() == []


def test_sign_in_layout_and_accessibility_at_1280_and_390(page: Page) -> None:
    page.d.get(page.server.url)
    page.check_axe("sign-in")
    page.shot("signin-1280")
    page.sign_in(add_analyst(page.server.config_path, "layout"))
    # Focus moves into the workspace (not back to the body) after signing in.
    assert page.js("return document.activeElement.id") == "workspace-title"
    # The schema shows each column's type and the curator's description; the unit is named.
    schema = page.rows("#schema")
    assert ["spend", "number", "0 to 10", "amount spent, in dollars"] in schema
    assert ["shop", "category", "a, b, c", "the shop visited"] in schema
    assert "one person" in page.text("#dataset-description")
    assert "per person" in page.text("#builder-cost") and "per user" not in page.text("#builder-cost")
    page.release()
    assert page.js("return document.activeElement.id") == "result-title"
    assert page.js("return document.getElementById('result').getBoundingClientRect().top") < 200  # in view
    assert "Released" in page.text("#status")

    def plot_width() -> float:
        return float(page.js("return document.querySelector('#result-plot svg')"
                             ".getBoundingClientRect().width"))

    assert plot_width() > 800  # drawn for the width of the page, not of the card while it was hidden
    for scheme in ("light", "dark"):
        page.scheme(scheme)
        for width, height in (WIDE, PHONE):
            page.size(width, height)
            # The plots are redrawn for the width they have.
            page.until(lambda w=width: 0.6 * w < plot_width() <= w - 30)
            # Laid out at the device's width (a viewport tag), and nothing wider than the screen.
            assert page.js("return window.innerWidth") == width
            assert page.js("return document.documentElement.scrollWidth") <= width
            assert page.js("return parseFloat(getComputedStyle(document.body).fontSize)") >= 14
            page.js("window.scrollTo(0, 0)")
            # The plot's marks stand out from the card (WCAG 1.4.11: at least 3:1).
            for mark, prop in (("svg .bar", "stroke"), ("svg .whisker", "stroke"), ("svg .dot", "stroke")):
                assert page.js(CONTRAST, mark, prop) >= 3, (mark, scheme)
            page.check_axe(f"workspace {width} px {scheme}")
            # Long keys are shortened to fit beside the plot (the whole key in their title).
            assert page.js(KEYS_FIT) == [True, True]
            page.shot(f"workspace-{width}-{scheme}")
            page.js("document.getElementById('result').scrollIntoView()")
            page.shot(f"result-{width}-{scheme}")
    page.scheme("light")
    page.size(*WIDE)


def test_builder_filters_groups_quantile_label_and_the_preview(page: Page) -> None:
    page.sign_in(add_analyst(page.server.config_path, "builder"))
    # Two group-by columns, a filter, a quantile at 0.9, a label.
    page.el("#group-by input[value=day]").click()
    page.el("#add-filter").click()
    page.set("#filters .filter select", "flag")
    page.set("#filters .filter select:nth-of-type(2)", "=")
    page.set("#filters .filter .value", "1")
    page.el("#add-aggregate").click()
    last = "#aggregates .aggregate:last-child"
    page.set(last + " .kind", "quantile")
    page.set(last + " .q", "0.9")
    page.set("#label", "spending <b>of</b> flagged <img src=x>")
    page.until(lambda: len(page.rows("#preview")) == 3 and page.ready("builder"))
    # The ε slider spans what remains; numbers are written for people, and counted as people.
    first = page.js("return document.querySelector('#aggregates .kind').selectedOptions[0].text")
    assert first == "number of people"
    assert page.el("#epsilon-range").get_attribute("max") == "6"
    assert page.js("return [num(10906.3), num(389.0, 'count'), num(3249, 'count_units'), num(0.012345)]") == [
        "10,910", "389", "3,249", "0.01235"]
    preview = page.rows("#preview")
    # A quantile's error is in quantile levels: shown as such, not in dollars.
    assert preview[2][0] == "q90_spend" and "percentiles" in preview[2][2]
    assert preview[0][2].startswith("±") and "." not in preview[0][2]  # a count's error in whole people
    cost = page.text("#builder-cost")
    assert "spends ε=0.5 per person" in cost and "% of what remains" in cost

    # Bad input stops the preview (no stale figures) and the release, and says what to fix.
    page.set(last + " .lo", "")
    page.until(lambda: "must both be given" in page.text("#builder-problems"))
    assert page.rows("#preview") == [] and not page.el("#release-button").is_enabled()
    page.set(last + " .lo", "0")
    page.set("#group-size", "0")
    page.until(lambda: "group size" in page.text("#builder-problems"))
    assert not page.el("#release-button").is_enabled()
    page.set("#group-size", "1000")
    # ε is typed freely; more than what remains is refused before the click.
    page.set("#epsilon", "7")
    page.until(lambda: "would refuse it: it would exceed the budget" in page.text("#builder-cost"))
    assert not page.el("#release-button").is_enabled()
    page.set("#epsilon", "0.5")
    page.until(lambda: page.ready("builder") and page.el("#release-button").is_enabled())

    page.release()
    assert page.text("#result-title") == "Result: spending <b>of</b> flagged <img src=x>"  # text, not markup
    assert page.els("#result b, #result img, #history b, #history img") == []
    assert "by shop, day where" in page.text("#result-meta") and '"flag" = 1' in page.text("#result-meta")
    table = page.rows("#result-table")
    assert [r[0] for r in table] == ["a", "a", "b", "b", "c", "c"]
    assert [r[1] for r in table][:2] == ["mon", "tue"]
    # Counts are whole numbers, every value with its interval in words.
    assert all(r[2].replace(",", "").lstrip("-").isdigit() for r in table)
    assert all(" to " in r[3] and " to " in r[5] for r in table)
    # Every aggregate is plotted with its interval, values and keys, and has an accessible name.
    figures = page.els("#result-plot figure")
    assert len(figures) == 3
    for f in figures:
        svg = f.find_element(By.TAG_NAME, "svg")
        assert svg.get_attribute("role") == "img" and "interval" in svg.get_attribute("aria-label")
        assert len(svg.find_elements(By.CSS_SELECTOR, "circle")) == 6
        assert len(svg.find_elements(By.CSS_SELECTOR, "line.whisker")) == 18
        labels = [t.text for t in svg.find_elements(By.TAG_NAME, "text")]
        assert "a · mon" in labels and "undefined" not in labels
    # The explanation is folded; downloads hold the release.
    assert not page.el("#result-explain").is_displayed()
    page.el("#download-csv").click()
    page.el("#download-json").click()
    rid = page.js("return S.doc.id")
    page.until(lambda: all((page.d.downloads / f"{rid}.{ext}").is_file() for ext in ("json", "csv")))
    assert json.loads((page.d.downloads / f"{rid}.json").read_text())["id"] == rid
    assert (page.d.downloads / f"{rid}.csv").read_text().startswith("shop,day,people,people_low")

    # History: time, label, query; reopening shows the result again.
    page.set("#label", "")
    page.release()  # a second one, unlabelled
    history = page.rows("#history")
    assert len(history) == 2 and history[1][1] == "spending <b>of</b> flagged <img src=x>"
    assert "quantile 0.9 of spend by shop, day where" in history[1][2]
    assert history[1][0][:3].isalpha() and ":" in history[1][0]
    page.els("#history tbody tr")[1].find_element(By.TAG_NAME, "button").click()
    page.until(lambda: page.text("#result-title") == "Result: spending <b>of</b> flagged <img src=x>")
    assert "remaining ε=5," in page.text("#budget-text")
    assert len(page.els("#spend-chart rect.bar")) == 2
    # The reopened release's report opens in a new tab.
    page.el("#report-button").click()
    page.until(lambda: len(page.d.window_handles) == 2)
    console_tab = page.d.current_window_handle
    page.d.switch_to.window(next(h for h in page.d.window_handles if h != console_tab))
    page.until(lambda: "Private release" in page.d.title)
    page.d.close()
    page.d.switch_to.window(console_tab)


def test_sql_shows_its_cost_and_confirms_a_large_spend(page: Page) -> None:
    page.sign_in(add_analyst(page.server.config_path, "sql"))
    assert page.el("#sql").get_attribute("value") == "SELECT shop, COUNT(*) AS n FROM visits GROUP BY shop"
    page.until(lambda: page.ready("sql"))
    assert "spends ε=0.5 per person" in page.text("#sql-cost") and len(page.rows("#sql-preview")) == 1
    # Refused SQL says so before the click, pointing at the text.
    page.set("#sql", "SELECT COUNT(*) FROM read_csv('/etc/passwd')")
    page.until(lambda: "^" in page.text("#sql-problems"))
    assert not page.el("#sql-button").is_enabled()
    assert page.js("return document.getElementById('sql').selectionEnd") > 0
    page.set("#sql", "SELECT shop, COUNT(*) AS n FROM visits GROUP BY shop ORDER BY shop DESC")
    page.set("#sql-epsilon", "4")  # 4 of 6: large
    page.until(lambda: "spends ε=4 per person" in page.text("#sql-cost"))
    page.until(lambda: page.el("#sql-button").is_enabled())
    page.el("#sql-button").click()
    page.until(lambda: page.shown("#confirm"))
    assert "67% of what remains" in page.text("#confirm-text")
    assert page.js("return document.activeElement.id") == "confirm-yes"
    page.check_axe("confirmation")
    page.shot("confirm-1280")
    page.el("#confirm-no").click()
    assert not page.shown("#confirm") and page.js("return S.history.length") == 0
    page.el("#sql-button").click()
    page.until(lambda: page.shown("#confirm"))
    page.el("#confirm-yes").click()
    page.until(lambda: "remaining ε=2," in page.text("#budget-text"))
    assert [r[0] for r in page.rows("#result-table")] == ["c", "b", "a"]
    assert "ORDER BY shop DESC" in page.rows("#history")[0][2]


def test_exhausted_budget_disables_release_and_says_so(page: Page) -> None:
    page.sign_in(add_analyst(page.server.config_path, "spender"))
    page.dataset("small")
    page.set("#epsilon", "0.9")
    page.until(lambda: "90% of what remains" in page.text("#builder-cost"))
    page.el("#release-button").click()
    page.el("#confirm-yes").click()
    page.until(lambda: "10% of your budget on small" in page.text("#budget-warning"))
    page.set("#epsilon", "0.1")
    page.until(lambda: page.el("#release-button").is_enabled())
    page.el("#release-button").click()
    assert "100% of what remains" in page.text("#confirm-text")
    page.el("#confirm-yes").click()
    page.until(lambda: "exhausted" in page.text("#budget-warning"))
    assert page.shown("#budget-warning")
    assert not page.el("#release-button").is_enabled() and not page.el("#sql-button").is_enabled()
    assert page.js("return document.querySelector('#budgets meter').getAttribute('aria-label')").startswith(
        "Budget left on visits")
    page.check_axe("exhausted")
    page.shot("exhausted-1280")
    # A refusal of the service (here: too much for what remains) is in words, without the raw spec.
    page.js("release('release-button', 'release-error', {dataset: 'small', spec: "
            "{epsilon: 1, aggregates: {n: {kind: 'count'}}}})")
    page.until(lambda: "Not enough budget" in page.text("#release-error"))
    assert not page.el("#release-error details pre").is_displayed()  # the service's words are folded
    assert "req_" not in page.el("#release-error").text


def test_under_zcdp_the_filter_not_epsilon_decides_the_release_button(page: Page) -> None:
    """People's budget (ε=3) is kept by the zCDP filter, where Laplace noise of ε costs ρ = ε²/2:
    ε=0.8 is far below ε=3 yet refused, and ε=0.5 takes most of what remains."""
    page.sign_in(add_analyst(page.server.config_path, "zcdp"))
    page.dataset("people")
    page.set("#epsilon", "0.8")
    page.until(lambda: "would refuse it: it would exceed the budget" in page.text("#builder-cost"))
    assert page.ready("builder") and not page.el("#release-button").is_enabled()
    page.set("#epsilon", "0.5")
    page.until(lambda: page.ready("builder") and page.el("#release-button").is_enabled())
    cost = page.text("#builder-cost")
    share = round(100 * page.js("return S.cost.builder.uses"))
    assert share >= 50 and f"That is {share}% of what remains, by the zCDP / Rényi filter." in cost
    page.el("#release-button").click()
    page.until(lambda: page.shown("#confirm"))
    assert f"{share}% of what remains" in page.text("#confirm-text")
    page.check_axe("zCDP confirmation")
    page.el("#confirm-no").click()
    assert page.js("return S.history.length") == 0


def test_under_zcdp_the_slider_ends_at_the_largest_epsilon_the_filter_admits(page: Page) -> None:
    """People's budget (ε=3) is kept by the zCDP filter, where ε does not add up: the slider ends
    where the filter stops admitting the builder's spec, not at the remaining ε."""
    page.sign_in(add_analyst(page.server.config_path, "zcdp-slider"))
    page.dataset("people")
    page.until(lambda: page.js("return S.cost.builder.dataset") == "people")  # its own preview
    top = float(page.el("#epsilon-range").get_attribute("max"))
    assert top == pytest.approx(PEOPLE_LARGEST, rel=1e-9)
    page.set("#epsilon", str(top))
    page.until(lambda: page.ready("builder") and page.el("#release-button").is_enabled())
    page.set("#epsilon", str(top * 1.01))
    page.until(lambda: "would refuse it" in page.text("#builder-cost"))
    assert not page.el("#release-button").is_enabled()


def test_under_zcdp_the_filter_decides_the_synthetic_spend(page: Page) -> None:
    """The synthetic data's button and confirmation follow what the zCDP filter makes of their
    spend, not their ε against the remaining ε (which is not additive under it)."""
    page.sign_in(add_analyst(page.server.config_path, "zcdp-synthetic"))
    page.dataset("people")
    # 0.92 of the largest ε uses 85% of the budget (ρ = ε²/2), and the synthetic data's spend
    # (about 10% of it) more than half of what then remains.
    page.set("#epsilon", str(PEOPLE_LARGEST * 0.92))
    page.until(lambda: page.ready("builder") and "would refuse" not in page.text("#builder-cost"))
    page.release_confirmed()
    used = page.js("return S.budget.people.used")
    assert 0.8 < used < 0.9
    assert page.el("#synthetic-button").is_enabled()
    page.el("#synthetic-button").click()
    page.until(lambda: page.shown("#confirm"))
    shown = page.text("#confirm-text")
    page.el("#confirm-yes").click()
    page.until(lambda: page.shown("#synthetic-download"))
    page.until(lambda: page.js("return S.budget.people.used") > used)
    share = (page.js("return S.budget.people.used") - used) / (1 - used)  # what the spend took
    assert share >= 0.5 and f"{round(100 * share)}% of what remains" in shown
    # Asked again, the synthetic data are the ones released: nothing to spend, nothing to confirm.
    page.el("#synthetic-button").click()
    assert not page.shown("#confirm")

    # Nearly all of a budget spent: the filter refuses the synthetic data's spend, so the button
    # is disabled, though the remaining ε is far from 0.
    page.sign_in(add_analyst(page.server.config_path, "zcdp-spent"))
    page.dataset("people")
    page.set("#epsilon", str(PEOPLE_LARGEST * 0.999))
    page.until(lambda: page.ready("builder") and "would refuse" not in page.text("#builder-cost"))
    page.release_confirmed()
    assert page.js("return S.budget.people.remaining.epsilon") > 0.1
    page.until(lambda: not page.el("#synthetic-button").is_enabled())
    refused = page.d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "api('POST', '/v1/synthetic/people', {}, 'people').then(() => done('released'), (e) => done(e.code))")
    assert refused == "budget_exceeded"
    page.check_axe("synthetic data refused under zCDP")


def test_holdout_and_synthetic_data(page: Page) -> None:
    page.sign_in(add_analyst(page.server.config_path, "modeller"))
    page.set("#holdout-queries", "spend > 5\nshop = 'a'")
    page.el("#holdout-button").click()
    page.until(lambda: len(page.rows("#holdout-answers")) == 2)
    answers = page.rows("#holdout-answers")
    assert answers[0][0] == "spend > 5" and 0 <= float(answers[0][1]) <= 1
    assert "overflows left" in page.text("#holdout-text")
    assert "of at most ε=" in page.text("#holdout-text")
    assert "once all 5 overflows are used" in page.text("#holdout-text")
    assert not page.shown("#synthetic-card")  # visits offers none
    page.dataset("people")
    assert "200 synthetic rows" in page.text("#synthetic-text") and not page.shown("#synthetic-download")
    page.el("#synthetic-button").click()
    page.until(lambda: page.shown("#synthetic-download"))
    # Its spend is on the chart of what was spent, though it is not a release. People's budget is
    # kept by the zCDP filter: what is spent is the filter's total, not the spend's own ε = 1.
    page.until(lambda: len(page.els("#spend-chart rect.bar")) == 1)
    spent = page.js("return S.budget.people.spent.epsilon")
    assert 0 < spent < 0.95  # ρ of the spend at the budget's δ = 1e-6: ε ≈ 0.904
    chart = page.el("#spend-chart svg").get_attribute("aria-label")
    assert chart == ("On people, 1 spend of ε 1; spent under the zCDP / Rényi filter: ε "
                     + page.js("return num(arguments[0])", spent) + " of 3")
    text = page.text("#budget-text")
    assert "The zCDP / Rényi filter (Feldman & Zrnic 2021, Thm 3.1) bounds the total" in text
    assert "ε does not add up" in text and "in 1 spend;" in text
    left = page.js("return document.querySelectorAll('#budgets meter')[2].getAttribute('aria-label')")
    assert left == f"Budget left on people: {round(100 - 100 * page.js('return S.budget.people.used'))}% " \
                   "(by the zCDP / Rényi filter)"
    page.el("#synthetic-download").click()
    page.until(lambda: (page.d.downloads / "people-synthetic.csv").is_file())
    assert len((page.d.downloads / "people-synthetic.csv").read_text().splitlines()) == 201
    page.size(*PHONE)
    page.check_axe("holdout and synthetic 390 px")
    page.shot("tools-390")
    page.size(*WIDE)


def test_sign_out_revocation_and_a_stale_token(page: Page) -> None:
    page.sign_in(add_analyst(page.server.config_path, "leaver"))
    page.el("#signout").click()
    assert page.shown("#signin") and not page.shown("#workspace")
    assert page.js("return sessionStorage.getItem('bdp-token')") is None

    # A revoked token: the next action ends the session (no raw header text), the token is cleared.
    page.sign_in(add_analyst(page.server.config_path, "revoked"))
    state = State(load_config(page.server.config_path))
    try:
        state.revoke("revoked")
    finally:
        state.close()
    page.set("#epsilon", "0.4")
    page.until(lambda: page.shown("#signin"))
    assert "session has ended" in page.text("#signin-notice")
    assert "Bearer" not in page.d.find_element(By.TAG_NAME, "body").text
    assert page.js("return sessionStorage.getItem('bdp-token')") is None

    # A stored token the service no longer knows (a reset service): no "Sign-in failed" greeting.
    page.js("sessionStorage.setItem('bdp-token', 'bdp_gone')")
    page.d.get(page.server.url)
    page.until(lambda: page.shown("#signin") and not page.js("return sessionStorage.getItem('bdp-token')"))
    assert page.text("#signin-error") == ""
    page.el("#token").send_keys("bdp_wrong_token")
    page.el("#signin-button").click()
    page.until(lambda: "not accepted" in page.text("#signin-error"))


def test_a_service_that_goes_away(browser: Any, tmp_path: Path, axe_source: str | None) -> None:
    server = serve(write_console_service(tmp_path))
    try:
        page = Page(browser, server, axe_source)
        page.errors()
        page.sign_in(add_analyst(server.config_path, "stranded"))
        page.release()
        page.until(lambda: page.ready("builder") and page.el("#release-button").is_enabled())
    finally:
        server.stop()
    page.el("#release-button").click()
    page.until(lambda: page.shown("#offline"))
    assert "cannot be reached" in page.text("#release-error") and "Failed to fetch" not in page.text("body")
    page.el("#report-button").click()
    page.until(lambda: "cannot be reached" in page.text("#result-error"))
    page.set("#dataset", "small")  # no other dataset's budget is kept
    page.until(lambda: page.text("#budget-pill") == "Budget unknown")
    assert not page.el("#release-button").is_enabled()
    page.el("#retry").click()  # still gone: it says so again, without a script error
    page.until(lambda: page.shown("#offline") and page.text("#budget-pill") == "Budget unknown")
    page.check_axe("offline")
    page.shot("offline-1280")
    time.sleep(0.2)
    assert page.errors() == []
