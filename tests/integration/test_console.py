"""The web console in a real browser (Debian's headless Chromium, driven by its chromedriver)
against a service running a real supervisor: it lists the supervisor with its state and lag,
shows its task groups, answers Druid SQL in its query view, suspends and resumes it through the
buttons, and saves a screenshot."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import RunningService, overlord_with_tasks, task_settings
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec

BASE = "/druid/indexer/v1/supervisor"


@pytest.fixture
def engine(tmp_path: Path, jar_cache: Path) -> Iterator[tuple[RunningService, httpx.Client]]:
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]") as running:
        yield running


def text_of(driver: webdriver.Chrome, css: str) -> str:
    """The element's text, read in one step (the page redraws itself every two seconds)."""
    script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';"
    return str(driver.execute_script(script, css))


def click(driver: webdriver.Chrome, by: str, value: str) -> None:
    """Click a button, again if a redraw replaced it between finding and clicking."""
    for _ in range(10):
        try:
            driver.find_element(by, value).click()
            return
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"could not click {value}")


def run_sql(driver: webdriver.Chrome, query: str) -> None:
    """Type a query into the query view and run it by its button."""
    box = driver.find_element(By.ID, "sql")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.ID, "run").click()


def test_console_shows_and_controls_a_supervisor(
    kafka: LocalKafka, engine: Any, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    service, api = engine
    topic = f"console-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    records = [
        (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{i}"}).encode())
        for i in range(50)
    ]
    produce(kafka.bootstrap_servers, topic, records)
    spec = supervisor_spec(
        "words", topic, kafka.bootstrap_servers, ["word"], period="PT1S", taskDuration="PT10M"
    )
    assert api.post(BASE, json=spec).is_success
    wait_for(
        lambda: api.get(f"{BASE}/words/status").json()["payload"]["activeTasks"],
        300,
        "a running task",
    )

    # the list: the supervisor, RUNNING, healthy, its lag
    browser.get(f"{service.url}/console/")
    wait_for(lambda: "RUNNING" in text_of(browser, "#supervisors"), 60, "the supervisor listed")
    row = text_of(browser, "#supervisors tbody tr").split("\t")
    assert row[:5] == ["words", "words", "RUNNING", "RUNNING", "healthy"]
    lag = int(row[5].replace(",", ""))
    status = api.get(f"{BASE}/words/status").json()["payload"]
    assert lag >= 0 and status["latestOffsets"]

    # one supervisor: its tasks and its lag, then suspend and resume by the buttons
    click(browser, By.LINK_TEXT, "words")
    wait_for(lambda: text_of(browser, "#tasks"), 60, "the task table")
    task_id = status["activeTasks"][0]["id"]
    assert task_id in text_of(browser, "#tasks")
    assert text_of(browser, "#lag") != ""
    wait_for(lambda: text_of(browser, "#lag") == "0", 120, "the console's lag to reach 0")
    browser.save_screenshot(str(tmp_path / "console-supervisor.png"))
    assert (tmp_path / "console-supervisor.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the query view: the rows the task holds (nothing is published yet), then Druid's error
    browser.get(f"{service.url}/console/#/query")
    wait_for(lambda: browser.find_elements(By.ID, "sql"), 30, "the query view")
    assert api.get("/druid/coordinator/v1/metadata/datasources").json() == []
    run_sql(browser, 'SELECT COUNT(*) AS n, COUNT(DISTINCT word) AS words FROM "words"')
    wait_for(lambda: "row in" in text_of(browser, "#query-status"), 60, "the query's answer")
    assert text_of(browser, "#results").split("\n") == ["n\twords", "50\t50"]
    run_sql(browser, "SELECT nope FROM words")
    wait_for(lambda: text_of(browser, "#query-error"), 60, "the query's error")
    assert text_of(browser, "#query-error").startswith("400: "), text_of(browser, "#query-error")
    assert "nope" in text_of(browser, "#query-error")
    browser.save_screenshot(str(tmp_path / "console-query.png"))
    browser.get(f"{service.url}/console/#/supervisors/words")
    wait_for(lambda: browser.find_elements(By.ID, "suspend"), 30, "the supervisor's page again")

    click(browser, By.ID, "suspend")
    browser.switch_to.alert.accept()  # the confirmation
    wait_for(lambda: api.get(f"{BASE}/words").json()["suspended"], 30, "the suspension")
    wait_for(lambda: browser.find_elements(By.ID, "resume"), 30, "the resume button")
    wait_for(lambda: "SUSPENDED" in text_of(browser, "h1"), 30, "the suspended state shown")
    click(browser, By.ID, "resume")
    wait_for(lambda: not api.get(f"{BASE}/words").json()["suspended"], 30, "the resumption")
    wait_for(lambda: browser.find_elements(By.ID, "suspend"), 30, "the suspend button again")

    # the segments the suspension published
    wait_for(
        lambda: api.get("/druid/coordinator/v1/metadata/datasources").json() == ["words"],
        300,
        "the suspension's segments",
    )
    rules = [{"type": "loadByPeriod", "period": "P3650D"}, {"type": "dropForever"}]
    assert api.post("/druid/coordinator/v1/rules/words", json=rules).status_code == 200
    browser.get(f"{service.url}/console/#/segments")
    wait_for(lambda: "50 rows" in text_of(browser, "main"), 60, "the segments page")
    shown = text_of(browser, "main")
    assert "retention: loadByPeriod P3650D, then dropForever, then loadForever" in shown, shown
    assert "compaction: not configured" in shown
    compaction = {"dataSource": "words", "skipOffsetFromLatest": "PT0S"}
    assert api.post("/druid/coordinator/v1/config/compaction", json=compaction).is_success
    wait_for(lambda: "intervals compacted" in text_of(browser, "main"), 30, "the compaction status")
    browser.save_screenshot(str(tmp_path / "console-segments.png"))


def test_a_follower_console_names_the_leader_and_acts_there(
    kafka: LocalKafka,
    postgres: LocalPostgres,
    jar_cache: Path,
    browser: webdriver.Chrome,
    tmp_path: Path,
) -> None:
    url = postgres.create_database(f"console{uuid.uuid4().hex[:8]}")
    leader = RunningService(task_settings(tmp_path, jar_cache, metadata_url=url, lease_s=3.0))
    follower = RunningService(task_settings(tmp_path, jar_cache, metadata_url=url, lease_s=3.0))
    leader.settings.port, follower.settings.port = leader.port, follower.port
    with leader, follower, httpx.Client(base_url=leader.url, timeout=30) as api:
        spec = {**words_spec("words", "words-topic", kafka.bootstrap_servers), "suspended": True}
        assert api.post(BASE, json=spec).is_success

        # the follower's console reads as the leader's does, and says who leads
        browser.get(f"{follower.url}/console/#/supervisors/words")
        wait_for(lambda: "SUSPENDED" in text_of(browser, "h1"), 60, "the supervisor shown")
        banner = wait_for(lambda: text_of(browser, "#leader"), 30, "the leader banner")
        assert banner == f"This overlord follows; the leader is {leader.url}."
        # an action goes to the leader's console (a browser would not follow the redirect)
        click(browser, By.ID, "resume")  # (no confirmation: resuming is harmless)
        wait_for(
            lambda: browser.current_url == f"{leader.url}/console/#/supervisors/words",
            30,
            "the leader's console",
        )
        wait_for(lambda: "SUSPENDED" in text_of(browser, "h1"), 60, "the supervisor there")
        assert text_of(browser, "#leader") == ""  # the leader's own console has no banner
        assert api.get(f"{BASE}/words").json()["suspended"]  # nothing was done on the way


@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_the_console_logs_in(settings: Any, browser: webdriver.Chrome) -> None:
    from pydantic import SecretStr

    settings.auth = "basic"
    settings.admin_password = SecretStr("admin-pass-1")
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30, auth=("admin", "admin-pass-1")) as api,
    ):
        assert api.post(BASE, json=words_spec("wiki", "wiki", "127.0.0.1:9")).is_success
        browser.get(f"{service.url}/console/")
        wait_for(lambda: browser.find_elements(By.ID, "login"), 30, "the login form")
        browser.find_element(By.ID, "login-user").send_keys("admin")
        browser.find_element(By.ID, "login-password").send_keys("wrong")
        click(browser, By.ID, "login-submit")
        wait_for(lambda: "not accepted" in text_of(browser, "main"), 30, "the refusal")
        browser.find_element(By.ID, "login-user").clear()
        browser.find_element(By.ID, "login-user").send_keys("admin")
        browser.find_element(By.ID, "login-password").clear()
        browser.find_element(By.ID, "login-password").send_keys("admin-pass-1")
        click(browser, By.ID, "login-submit")
        wait_for(lambda: "wiki" in text_of(browser, "#supervisors"), 30, "the supervisors")
        assert browser.find_element(By.ID, "logout").is_displayed()
        click(browser, By.ID, "logout")
        wait_for(lambda: browser.find_elements(By.ID, "login"), 30, "the login form again")
