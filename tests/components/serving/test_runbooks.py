"""Every alert a stack renders carries a ``runbook_url`` that resolves to a real section of docs/operate/runbooks.md
(GitHub's heading anchors), and every stack that alerts renders some."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.settings.alerting import RUNBOOKS
from tests.components.serving.test_monitoring_rules import MONITORED, REPO, of_kind, rendered
from tests.plans import StackPlans


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("stack", sorted(MONITORED))
def test_every_alert_has_a_runbook_section(stack: str, stack_plan: StackPlans) -> None:
    alerts = [
        rule
        for doc in of_kind(rendered(stack_plan(stack)), "PrometheusRule")
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    assert alerts
    for rule in alerts:
        url = rule["annotations"].get("runbook_url")
        assert url, f"{rule['alert']} has no runbook_url"
        path, _, anchor = url.partition("#")
        page = REPO / path
        assert page.is_file() and page == REPO / RUNBOOKS, url
        assert anchor == rule["alert"].lower() and anchor in anchors(page), f"{url}: no such section"


def test_the_runbooks_cover_the_dead_mans_switch() -> None:
    assert "watchdog" in anchors(REPO / RUNBOOKS)
