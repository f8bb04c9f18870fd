"""The web console in headless Chromium (Debian's chromium and chromium-driver), driven by Selenium:
sign in, build a grouped release from the public schema, watch the preview follow ε, release,
and read the result table from the page."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import Server, add_analyst

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
WAIT_S = 30


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
                 "--window-size=1200,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


@pytest.mark.slow
def test_sign_in_preview_release_and_read_the_table(server: Server, browser: webdriver.Chrome,
                                                    tmp_path: Path) -> None:
    # The page re-renders its tables as answers arrive: an element read mid-render is retried.
    wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    browser.get(server.url)
    browser.find_element(By.ID, "token").send_keys("bdp_wrong_token")
    browser.find_element(By.ID, "signin-button").click()
    wait.until(lambda d: "Sign-in failed" in d.find_element(By.ID, "signin-error").text)

    token = add_analyst(server.config_path, "console")
    browser.find_element(By.ID, "token").clear()
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "signin-button").click()
    wait.until(lambda d: d.find_element(By.ID, "workspace").is_displayed())
    # The group-by column with public keys and the first numeric column's bounds are prefilled.
    assert browser.find_element(By.ID, "group-by").get_attribute("value") == "shop"
    bounds = [i.get_attribute("value") for i in browser.find_elements(By.CSS_SELECTOR, "#aggregates input")]
    assert bounds[:2] == ["0", "10"]

    def half_width() -> str:
        rows = browser.find_elements(By.CSS_SELECTOR, "#preview tbody tr")
        return rows[0].find_elements(By.TAG_NAME, "td")[2].text if rows else ""

    wait.until(lambda d: half_width() != "")
    before = half_width()
    slider = browser.find_element(By.ID, "epsilon")
    browser.execute_script("arguments[0].value = 2; arguments[0].dispatchEvent(new Event('input'));", slider)
    wait.until(lambda d: half_width() not in ("", before))
    assert float(half_width()) < float(before)  # more ε, less noise

    browser.find_element(By.ID, "release-button").click()
    wait.until(lambda d: d.find_element(By.ID, "result").is_displayed())
    rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#result-table tbody tr")]
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert all("[" in c and "]" in c for r in rows for c in r[1:])  # each value with its interval
    assert "per user" in browser.find_element(By.ID, "result-explain").text
    wait.until(lambda d: "remaining ε=1," in d.find_element(By.ID, "budget-text").text)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")) == 1

    # SQL: prefilled from the schema; a refused query shows the caret, a good one its table.
    query = browser.find_element(By.ID, "sql")
    assert query.get_attribute("value") == "SELECT shop, COUNT(*) AS n FROM visits GROUP BY shop"
    query.clear()
    query.send_keys("SELECT COUNT(*) FROM read_csv('/etc/passwd')")
    browser.find_element(By.ID, "sql-button").click()
    wait.until(lambda d: "^" in d.find_element(By.ID, "sql-error").text)
    query.clear()
    query.send_keys("SELECT shop, COUNT(*) AS n FROM visits GROUP BY shop ORDER BY shop DESC")
    browser.execute_script("arguments[0].value = 0.5; arguments[0].dispatchEvent(new Event('input'));",
                           slider)
    browser.find_element(By.ID, "sql-button").click()
    wait.until(lambda d: "remaining ε=0.5," in d.find_element(By.ID, "budget-text").text)
    rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#result-table tbody tr")]
    assert [r[0] for r in rows] == ["c", "b", "a"] and all("[" in r[1] for r in rows)
    browser.save_screenshot(str(tmp_path / "console.png"))
    assert (tmp_path / "console.png").stat().st_size > 0
