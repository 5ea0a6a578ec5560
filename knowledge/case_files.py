"""Where the case library's files live: ``knowledge/cases/*.yaml`` inside the package.

The knowledge layer only knows the files; reading them as typed cases is the advisor's job
(``vllm_advisor.cases``), since the case schema is the advisor's.
"""

from __future__ import annotations

from pathlib import Path

CASES_DIR = Path(__file__).resolve().parent / "cases"

