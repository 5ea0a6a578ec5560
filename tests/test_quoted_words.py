"""The user's words quoted as evidence: cut between words in English, at clause ends in Chinese."""

from vllm_advisor.diagnosis.text_cues import _context


def test_a_chinese_quote_is_whole_clauses():
    """A reviewer found "…志显示服务端…" (a cut through 日志): the quote starts and ends at clause marks."""
    text = "用 evalscope perf 压测，同一台机器上的日志显示服务端并没有被请求填满。发帖人读代码后发现客户端在两次请求之间空等约 0.9 秒，这是什么原因？"
    i = text.index("填满")
    quote = _context(text, i, i + 2)
    assert quote == "…同一台机器上的日志显示服务端并没有被请求填满。…"


def test_an_english_quote_is_cut_between_words():
    text = "The benchmark shows TTFT 12 s at 64 clients while the GPU is idle half the time, why?"
    i = text.index("idle")
    quote = _context(text, i, i + 4)
    assert quote.startswith("…at ") and quote.endswith("why?")
