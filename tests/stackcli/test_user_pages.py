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


TEST_PATH = re.compile(r"(?<![\w./-])(tests/[\w/.-]+\.py)(?:::(\w+))?")
TEST_NAME = re.compile(r"`(test_\w+)`")


def missing_tests(text: str, suite: dict[str, str]) -> list[str]:
    """The test files (``tests/<file>.py``, with a ``::test_name``) and backquoted test names ``text`` names that
    ``suite`` (path -> source) does not have."""
    missing = []
    for match in TEST_PATH.finditer(text):
        path, name = match.groups()
        if path not in suite or (name and not re.search(rf"^\s*def {name}\(", suite[path], re.M)):
            missing.append(match.group(0))
    every_source = "\n".join(suite.values())
    missing += [name for name in TEST_NAME.findall(text) if not re.search(rf"^\s*def {name}\(", every_source, re.M)]
    return missing


def test_every_test_the_docs_name_exists() -> None:
    """The proofs stay references: a renamed or deleted test file or test named by a page fails here."""
    suite = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}: {name}" for page in pages for name in missing_tests(page.read_text(), suite)]
    assert not found, "tests the docs name that the suite does not have:\n" + "\n".join(found)


def test_the_reference_check_finds_a_missing_file_test_and_name() -> None:
    suite = {"tests/a/test_x.py": "def test_one() -> None:\n    pass\n"}
    text = (
        "`tests/a/test_x.py`, `tests/a/test_x.py::test_one` and `test_one` exist; "
        "`tests/a/test_y.py`, `tests/a/test_x.py::test_two` and `test_three` do not.\n"
    )
    assert missing_tests(text, suite) == ["tests/a/test_y.py", "tests/a/test_x.py::test_two", "test_three"]
