"""The tuning memo: one Markdown file (with plots beside it) that a team can act on.

The memo puts everything the advisor found in one place: what was measured next to what the model
predicts at the same load points, the ranked findings with their evidence and sources, the changes
with their predicted effects and exact commands, and how to verify them.
"""

from .writer import MemoResult, write_memo

__all__ = ["MemoResult", "write_memo"]
