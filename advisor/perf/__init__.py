"""Performance model of a vLLM deployment: memory, step time and scheduling, from data catalogs.

The numbers it works from (model shapes, GPU datasheets) live in :mod:`vllm_advisor.perf.catalog`
as YAML with a source URL per entry, so a wrong figure is fixed in data, not in code.
"""
