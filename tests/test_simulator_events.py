"""The event-driven simulator against the step-by-step reference, figure by figure.

``mode="events"`` jumps over stretches of steps whose batches differ only in context length;
``mode="steps"`` runs vLLM's scheduler one step at a time and is the reference. Over the matrix in
``sim_matrix.py`` (dense, MoE and MLA models; 1K to 128K-token prompts; 1 to 512 clients; closed
loops and Poisson streams; a shared prefix; an fp8 KV cache; KV pools tight enough to preempt; a
sliding window; a partial-prefill cap; unchunked prefill) every figure a user reads must agree
within 1%: TTFT, TPOT, ITL and end-to-end percentiles, throughput, preemptions, the time-weighted
running / waiting / KV means, the step count. In practice they agree to ~1e-12 (float rounding).
"""

from __future__ import annotations

import pytest

from sim_matrix import CASES, compare

TOLERANCE = 0.01


def _check(case):
    diffs = compare(case)
    bad = {k: v for k, v in diffs.items() if not v[2] <= TOLERANCE}
    assert not bad, f"{case.name}: figures off by more than 1%: {bad}"
    # Exact counts, not just within 1%.
    for key in ("completed", "steps", "preemptions", "itl_ms.count"):
        if key in diffs:
            assert diffs[key][0] == diffs[key][1], (case.name, key, diffs[key])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_events_match_steps(case):
    """The whole matrix runs by default: the reference is kept small enough (3 s in all)."""
    _check(case)


def test_matrix_covers_what_it_claims():
    tags = {t for c in CASES for t in c.tags}
    assert {"dense", "moe", "mla", "long", "128k", "short", "closed", "poisson", "prefix", "fp8kv", "tight", "preempt", "sliding", "intake", "eager"} <= tags
    conc = [c.concurrency for c in CASES if c.concurrency]
    assert min(conc) == 1 and max(conc) == 512


def test_events_fold_steps_and_preemptions_happen():
    """The fast path must actually fold steps (else the test above compares the reference with
    itself), and the tight cases must really preempt."""
    from vllm_advisor.perf.simulator import simulate

    case = next(c for c in CASES if c.name == "dense-63k-c40-kv-bound")
    em = case.engine()
    ref = simulate(em.limits, em.step, case.workload(), mode="steps")
    fast = simulate(em.limits, em.step, case.workload(), mode="events")
    assert len(fast.steps) * 5 < len(ref.steps)
    assert sum(s.count for s in fast.steps) == len(ref.steps)
    assert ref.total_preemptions > 0 and fast.total_preemptions == ref.total_preemptions
    assert any(s.count > 1 and s.prefill_tokens for s in fast.steps)  # mixed steps are folded too


def test_weighted_itl_summary_equals_numpy_on_the_expanded_gaps():
    """The ITL distribution is summarised from (gap, multiplicity) pairs; expanded, numpy must give
    the same count, mean, std, min, max and linear percentiles."""
    import numpy as np

    from vllm_advisor.perf.simulator import simulate
    from vllm_advisor.perf.summary import itl_gaps, weighted_distribution
    from vllm_advisor.schema import Distribution

    case = next(c for c in CASES if c.name == "dense-63k-c40-kv-bound")
    em = case.engine()
    result = simulate(em.limits, em.step, case.workload())
    values, weights = itl_gaps(result.finished(), result)
    assert weights.max() > 1  # stretches shared by several requests
    fast = weighted_distribution(values, weights, "s")
    slow = Distribution.from_samples(np.repeat(values, weights), "s")
    assert fast.count == slow.count
    for field in ("mean", "median", "std", "min", "max"):
        assert getattr(fast, field) == pytest.approx(getattr(slow, field), rel=1e-12), field
    assert fast.percentiles.keys() == slow.percentiles.keys()
    for key, value in slow.percentiles.items():
        assert fast.percentiles[key] == pytest.approx(value, rel=1e-12), key


def test_events_match_steps_on_random_configurations():
    """40 seeded random combinations of the scheduler's knobs (see ``sim_matrix.random_cases``)."""
    from sim_matrix import random_cases

    for case in random_cases(seed=17, count=40):
        _check(case)
