"""The diagnosis on the 12 real slow-serving reports in ../shared/cases/dev: no per-case code.

The bar (issue 5): the first finding is an expected cause for at least 9 of 12 cases, and the top
three findings cover at least 80% of all expected causes. A constant guess scores 2/12 and 17%.
"""

from __future__ import annotations

import json

import pytest

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather


@pytest.fixture(scope="module")
def results(shared_dir):
    expected = json.loads((shared_dir / "cases/dev/expected.json").read_text())
    out = {}
    for name, exp in expected.items():
        d = diagnose(gather(profile=shared_dir / "cases/dev" / f"{name}.yaml"))
        out[name] = (d, exp["causes"])
    return out


def test_first_finding_and_top_three_coverage(results):
    first = sum(1 for d, exp in results.values() if d.findings and d.findings[0].cause in exp)
    covered = sum(len(set(d.causes[:3]) & set(exp)) for d, exp in results.values())
    total = sum(len(exp) for _, exp in results.values())
    assert len(results) == 12
    assert first >= 9, {n: (d.causes[:3], exp) for n, (d, exp) in results.items()}
    assert covered / total >= 0.8


def test_every_finding_carries_evidence_and_a_change(results):
    for name, (d, _) in results.items():
        for f in d.findings[:3]:
            assert f.evidence, (name, f.cause)
            assert f.recommendations, (name, f.cause)
            assert 0 < f.confidence <= 1


def test_findings_come_from_evidence_not_a_constant(results):
    """Different reports get different leading causes."""
    leaders = {d.findings[0].cause for d, _ in results.values()}
    assert len(leaders) >= 8


def test_missing_data_names_the_deciding_measurement(results):
    d, _ = results["vllm-3096-ttft-queue-rate"]
    assert any("probe watch" in m.command for m in d.missing)
    # the version decides a regression, the token budget or memory defaults: not a queue (session 8's review)
    assert not any("vllm --version" in m.command for m in d.missing)
    d, _ = results["vllm-10517-max-model-len-kv-blocks"]
    assert any("vllm --version" in m.command for m in d.missing)
