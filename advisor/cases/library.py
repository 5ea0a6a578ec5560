"""Loading the case library (packaged files plus, where present, the developer cases in shared/)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..diagnosis.inputs import detect_language
from ..errors import InputFileError
from ..probe.casefile import load_case
from ..schema import CaseFile, CaseReport

Part = Literal["fit", "validation"]


def url_key(url: str) -> str:
    """The URL form that exclusion hashes and duplicate checks use: lower-cased, no fragment,
    no trailing slash (shared/cases/excluded-url-sha256.txt's rule)."""
    key = url.strip().lower().split("#", 1)[0]
    while key.endswith("/"):
        key = key[:-1]
    return key


def url_sha256(url: str) -> str:
    return hashlib.sha256(url_key(url).encode()).hexdigest()


_GITHUB_THREAD = re.compile(r"^https?://(?:www\.)?github\.com/([^/]+/[^/]+)/(?:issues|pull|pulls)/(\d+)(?:/.*)?$")


def url_aliases(url: str) -> list[str]:
    """Other addresses of the same thread: GitHub numbers issues and pull requests in one sequence,
    so .../issues/N and .../pull/N (and www., http://, a /files or /commits tail) are one thread.
    The exclusion check hashes every alias: a report kept aside stays out under any of its names."""
    key = url_key(url)
    m = _GITHUB_THREAD.match(key)
    if not m:
        return [key]
    repo, number = m.groups()
    return [key, *(f"{scheme}://{host}github.com/{repo}/{kind}/{number}" for scheme in ("https", "http") for host in ("", "www.") for kind in ("issues", "pull", "pulls"))]


def thread_key(url: str) -> str:
    """One key per thread (duplicate checks): a GitHub issue or pull request by repository and number."""
    m = _GITHUB_THREAD.match(url_key(url))
    return f"github.com/{m.group(1)}#{m.group(2)}" if m else url_key(url).split("://", 1)[-1].removeprefix("www.")


@dataclass(frozen=True)
class LibraryCase:
    """One labelled case. ``case`` carries no ``report`` (the label lives beside it), so whatever
    reads ``case`` as a user's input cannot see the answer."""

    id: str
    case: CaseFile
    report: CaseReport
    origin: Literal["library", "dev"]
    path: Path

    @property
    def part(self) -> Part:
        """The fixed split (knowledge/cases/README.md): dev cases fit; library cases by a hash of the id."""
        if self.origin == "dev":
            return "fit"
        return "validation" if int(hashlib.sha256(self.id.encode()).hexdigest()[:8], 16) % 10 < 3 else "fit"

    @property
    def language(self) -> str:
        return self.report.language


def _split_label(case: CaseFile) -> tuple[CaseFile, CaseReport | None]:
    return case.model_copy(update={"report": None}), case.report


def load_library(directory: Path | None = None) -> list[LibraryCase]:
    """Every packaged case (``knowledge/cases/*.yaml``); a file without ``report:`` is an error."""
    from vllm_advisor_knowledge.case_files import CASES_DIR

    folder = directory or CASES_DIR
    out = []
    for path in sorted(folder.glob("*.yaml")):
        case, report = _split_label(load_case(path))
        if report is None:
            raise InputFileError("a case-library file needs a report: block (what the thread established)", source=str(path))
        out.append(LibraryCase(report.id, case, report, "library", path))
    return out


def load_dev_cases(dev_dir: Path) -> list[LibraryCase]:
    """The developer cases of shared/cases/dev, labelled by its expected.json; [] when absent."""
    expected_path = dev_dir / "expected.json"
    if not expected_path.is_file():
        return []
    expected = json.loads(expected_path.read_text())
    out = []
    for case_id, label in sorted(expected.items()):
        path = dev_dir / f"{case_id}.yaml"
        if not path.is_file():
            continue
        case, _ = _split_label(load_case(path))
        language = detect_language(case.question)
        report = CaseReport(
            id=case_id,
            url=label["url"],
            language=language,
            causes=label["causes"],
            root_cause=label.get("root_cause", ""),
            fix=label.get("fix"),
            confidence=label.get("confidence", "medium"),
        )
        out.append(LibraryCase(case_id, case, report, "dev", path))
    return out
