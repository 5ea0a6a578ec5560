"""Helpers that run real services (Prometheus, ...) for tests; each skips when its program is missing."""
