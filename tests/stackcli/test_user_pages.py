"""The user's pages say what the product does; which test proves what lives in the contributors' pages
(docs/contributing/proofs.md). A user page (the README, and every page of the site outside the navigation's
"Contributing" section) names no test file: the one place a test may appear is a shell snippet's ``# run-by:``
marker, which the snippet check (tests/stackcli/test_snippets.py) holds to the test that runs it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTRIBUTING = "Contributing"
TEST_REFERENCE = re.compile(r"(?<![\w.-])tests/|\btest_\w+\.py\b|\bconftest\.py\b")
RUN_BY = re.compile(r"^\s*# run-by: tests/\S+\.py\s*$")


def nav_pages(entries: list[object], *, inside: str | None = None) -> dict[str, str | None]:
    """Each page of a navigation list, with the top-level section it is under (None: a top-level page)."""
    found: dict[str, str | None] = {}
    for entry in entries:
        title, value = next(iter(entry.items())) if isinstance(entry, dict) else (None, entry)
        section = inside if inside is not None else (title if isinstance(value, list) else None)
        if isinstance(value, list):
            found |= nav_pages(value, inside=section)
        else:
            found[str(value)] = section
    return found


def user_pages() -> list[Path]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    site = [ROOT / "docs" / page for page, section in nav_pages(nav).items() if section != CONTRIBUTING]
    return [ROOT / "README.md", *sorted(p for p in site if p.suffix == ".md")]


def test_references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line naming a test file, but a shell snippet's ``# run-by:`` marker."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if TEST_REFERENCE.search(line) and not RUN_BY.match(line)
    ]


test_references.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def test_no_user_page_names_a_test_file() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line[:140]}"
        for page in user_pages()
        for number, line in test_references(page.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "user pages say what the product does; move which test shows it to docs/contributing/proofs.md:\n"
        + "\n".join(found)
    )


def test_the_user_pages_are_the_site_outside_contributing_and_the_readme() -> None:
    pages = {str(p.relative_to(ROOT)) for p in user_pages()}
    assert {"README.md", "docs/index.md", "docs/deploy/your-cluster.md", "docs/reference/cli.md"} <= pages
    assert not pages & {"docs/contributing/testing.md", "docs/contributing/proofs.md", "docs/architecture.md"}


def test_the_check_finds_a_proof_sentence_and_spares_a_run_by_marker() -> None:
    page = (
        "Served on a real Triton (`tests/system/realtriton/test_gateway.py`).\n"
        "`test_drain.py` shows it.\n"
        "```bash\n# run-by: tests/stackcli/test_first_stack.py\n.venv/bin/tritonft synth --stack mine\n```\n"
        "A word ending in it (attests/, contests/) and a test's name without `.py` are not references.\n"
    )
    assert [number for number, _ in test_references(page)] == [1, 2]
