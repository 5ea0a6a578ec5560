"""The case library: real reports with established causes, as typed cases.

Used three ways: to fit and validate the diagnosis ranking (``split`` / ``evaluate``), and at run
time to show a user the reports nearest to theirs.
"""

from .library import LibraryCase, load_dev_cases, load_library, url_key

__all__ = ["LibraryCase", "load_dev_cases", "load_library", "url_key"]
