"""Report how many bad-config cases the schema generated (the count changes when a knob is added)."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from components.settings.rules import MODEL_RULES, PLAN_RULES, STACK_RULES
    from tests.components.settings.bad_configs import all_cases

    passed = [r for r in terminalreporter.stats.get("passed", []) if "test_bad_config_is_refused" in r.nodeid]
    if passed:
        terminalreporter.write_line(
            f"settings: {len(all_cases())} bad-config cases generated from the schema ({len(passed)} passed); "
            f"{len(STACK_RULES) + len(MODEL_RULES) + len(PLAN_RULES)} cross-field rules, each with its own test"
        )
