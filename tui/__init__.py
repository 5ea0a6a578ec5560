"""vllm-advisor's terminal chat (Textual): ``vllm-advisor chat``.

Imports ``vllm_advisor``; the core never imports this package at import time (the ``chat`` command
loads it when run), so the advisor works without Textual installed.
"""

__all__ = ["ChatApp"]


def __getattr__(name: str):
    if name == "ChatApp":
        from .app import ChatApp

        return ChatApp
    raise AttributeError(name)
