"""The repository's docs stand alone (issue 42 item 4): nothing a user receives cites the team's
internal design document, and every `docs/design.md §N` cited names a section that page has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN_PAGE = ROOT / "docs" / "design.md"

# What a user of the repository receives, and so must not cite what they cannot open.
SHIPPED = ("mirrorlag", "docs", "config", "deploy", "README.md")

# Files exempt from the rule (none: the check's rewrite, issue 42, cites docs/design.md too).
NOT_YET: frozenset[str] = frozenset()

# "DESIGN §3" (a line break may fall between them), "DESIGN.md", "../shared"
INTERNAL = re.compile(r"DESIGN\s*§|DESIGN\.md|\.\./shared")
# "docs/design.md §3", and a range "docs/design.md §2–§4"
CITATION = re.compile(r"docs/design\.md\s+§(\d+)(?:\s*[–-]\s*§(\d+))?")
SECTION = re.compile(r"^## (\d+)\. ", re.MULTILINE)
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".pytest_cache"}


def _text_files(top: Path):
    paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
    for path in paths:
        rel = path.relative_to(ROOT)
        if SKIPPED_DIRS.intersection(rel.parts):
            continue
        try:
            yield rel.as_posix(), path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # not text: nothing to cite


def _where(text: str, match: re.Match) -> int:
    return text.count("\n", 0, match.start()) + 1


def test_nothing_shipped_cites_the_internal_design_document() -> None:
    cited = []
    for top in SHIPPED:
        for rel, text in _text_files(ROOT / top):
            if rel in NOT_YET:
                continue
            cited += [f"{rel}:{_where(text, m)}: {m.group(0)!r}" for m in INTERNAL.finditer(text)]
    assert not cited, "cite docs/design.md §N (or a user doc) instead:\n" + "\n".join(cited)


def test_the_files_not_yet_rewritten_exist() -> None:
    # Once one is gone or renamed, its exemption should go too.
    assert all((ROOT / rel).is_file() for rel in NOT_YET)


def test_every_cited_section_of_the_design_page_exists() -> None:
    sections = {int(n) for n in SECTION.findall(DESIGN_PAGE.read_text(encoding="utf-8"))}
    assert sections, "docs/design.md has no '## N. Title' sections"
    missing = []
    found = 0
    for rel, text in _text_files(ROOT):
        for m in CITATION.finditer(text):
            found += 1
            first, last = int(m.group(1)), int(m.group(2) or m.group(1))
            if last < first or not all(n in sections for n in range(first, last + 1)):
                missing.append(f"{rel}:{_where(text, m)}: {m.group(0)!r}")
    assert found, "no citation of docs/design.md found: is the pattern right?"
    assert not missing, f"sections of docs/design.md: {sorted(sections)}; cited but absent:\n" + "\n".join(missing)
