"""Deployment facts stated in the user's own words, for a question that comes without a case file.

WHY: "Qwen2.5-32B, TP2 on two H800s, 63K-token prompts, 1K outputs, 40 and 100 clients" is a whole
deployment and workload, and the motivating user gave exactly that in a sentence. Without it the
performance model has nothing to compute and the answer says "the model and the GPU are not given".
This reader takes from the words only what they name unambiguously: a model or GPU that resolves in
the catalogs (one of each; two different ones, as in a comparison, give neither), a GPU count or
tensor-parallel size next to its marker, a vLLM version after the word vLLM, lengths next to
"prompt"/"input"/"输入" or "output"/"输出" (in tokens, or in Chinese characters, which the gatherer turns
into tokens; a rate is not a length), and client counts next to "concurrent"/"clients"/"并发".
The gatherer uses a value only where the flags, the case file and the attachments left the field
unknown, and the answer lists what was read so the user can correct it with the flags.

Text is data: nothing in it changes what the reader does beyond the values it yields; the scan is
bounded (``MAX_CHARS``) and every pattern is linear.
"""

from __future__ import annotations

import functools
import re

from ..perf.catalog import gpus as gpu_catalog
from ..perf.catalog import models as model_catalog
from ..schema import StatedFacts

#: The words a person types about a deployment fit in far less; a pasted log is cut here.
MAX_CHARS = 20_000
#: Client counts kept (the answer predicts one load point each).
MAX_POINTS = 3

_A = r"(?<![A-Za-z0-9_])"  # ASCII word edges: a Chinese character next to a name is an edge
_Z = r"(?![A-Za-z0-9_])"
_NUMBER_WORDS = {
    "one": 1, "single": 1, "two": 2, "dual": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "sixteen": 16,
    "一": 1, "单": 1, "两": 2, "二": 2, "双": 2, "三": 3, "四": 4, "六": 6, "八": 8,
}
_COUNT = r"(\d{1,4}|one|single|two|dual|three|four|six|eight|sixteen|[一单两二双三四六八])"


def _flexible(key: str) -> str:
    """A catalog key as a pattern: its dashes may be written as a space, an underscore or nothing."""
    return "".join(r"[-\s_]?" if ch == "-" else re.escape(ch) for ch in key)


def _alternation(keys: list[str], start: str = _A, plural: bool = False) -> re.Pattern[str]:
    ordered = sorted(set(keys), key=len, reverse=True)  # the longest name first: "A100-80GB" before "A100"
    return re.compile(start + "(" + "|".join(_flexible(k) for k in ordered) + ")" + ("s?" if plural else "") + _Z, re.IGNORECASE)


@functools.cache
def _gpu_pattern() -> re.Pattern[str]:
    exact, assumed = gpu_catalog._index()
    # a bare number ("4090") is too often a token count; "RTX 4090" is in the catalog as well
    # "two H800s", and "8xH100" where the count touches the name
    return _alternation([k for k in [*exact, *assumed] if not k.isdigit()], start=r"(?:(?<=\d[x×])|" + _A + ")", plural=True)


#: A catalog GPU named by its number alone after a count ("单张 4090", "两块 3090", "2x 4090").
#: ... or by its number and its memory ("4090 24G", "3090 24GB", "5090 32G"), or where the words make it a card
#: ("用 4090 跑", "在4090上", "4090 显卡", "on 4090 GPUs"): how Chinese forums write them (a new user's find).
_NUMBERED_GPU = re.compile(
    r"(?:(?:[张块卡]|\d\s?[x×])\s?(?:rtx\s?)?|(?<=[用在的台把])\s?|"
    + _A + r"(?=(?:3090|4090)\s?24\s?g|5090\s?32\s?g|(?:3090|4090|5090)\s?(?:显卡|卡|上|跑|gpus?\b)))(3090|4090|5090)" + _Z,
    re.IGNORECASE,
)


#: Accelerators people serve on that the GPU catalog does not hold: read so that the answer says
#: "not in the catalog" rather than "not given", and so that a second card named beside a catalog
#: one ("tested on a V100; someone else on an RTX 4090") leaves the GPU undecided.
_OTHER_GPU = re.compile(
    _A + r"((?:tesla\s?)?(?:v100|p100|p40|t4|a10g|a30|a40|l40|a5000|a4000|a16|k80)|(?:rtx\s?)?(?:2080|3080|3060|3070|4060|4070|4080|5080|5090)(?:\s?ti)?"
    r"|rtx\s?(?:pro\s?)?6000|titan\s?\w+|(?:ascend\s?)?910[bc]\d?|mi(?:210|250x?|325x|355x)|gaudi\s?\d|trn[12]|inferentia\d?)s?" + _Z,
    re.IGNORECASE,
)
#: A model name the catalog may not hold: a word with its size in billions ("falcon-40b", "Yi-34B-Chat",
#: "qwen3-vl-30B-A3B"), read for the same reason.
_OTHER_MODEL = re.compile(_A + r"([A-Za-z][A-Za-z0-9.]*(?:[-_][A-Za-z0-9.]+)*?[-_]?\d+(?:\.\d+)?[bB](?:[-_][A-Za-z0-9.]+)*)" + _Z)


#: A part of a name that is an identifier, not a model's: a run of hex digits mixing letters and
#: digits ("cmpl-9f2c1e3b": a request id read as a 3B model took the deployment's model away).
_ID_PART = re.compile(r"(?:^|[-_])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9][0-9a-f]*[0-9])[0-9a-f]{6,}(?:$|[-_])", re.IGNORECASE)


@functools.cache
def _model_pattern() -> re.Pattern[str]:
    exact, assumed = model_catalog._index()
    return _alternation([*exact, *assumed])


_MODEL_TAIL = re.compile(r"(?:[-_.][A-Za-z0-9]+){1,3}")
#: A weight format written after the model's name with a space ("Qwen2.5-72B AWQ", "Llama-3-70B (FP8)"):
#: joined to the name as its suffix, so the catalog models the checkpoint at that width. An FP8 that
#: goes on to name the KV cache ("Qwen3-32B fp8 kv cache") is the cache's, not the weights'.
_QUANT_AFTER = re.compile(
    r"\s?[(（]?\s?(awq|gptq(?:[-_ ]int[48])?|int[48]|fp8|w4a16|w8a8|nvfp4|mxfp4)" + _Z + r"(?!\s*[-_]?kv)", re.IGNORECASE
)


def _with_format(text: str, end: int, name: str) -> str:
    """``name`` with the weight format written right after it (``end``), if any."""
    fmt = _QUANT_AFTER.match(text, end)
    return f"{name}-{re.sub(r'[ _]', '-', fmt.group(1))}" if fmt else name
_TP = re.compile(_A + r"(?:tp|tensor[-_ ]parallel(?:[-_ ]size)?)\s*(?:=|:|：)?\s*(\d{1,3})" + _Z, re.IGNORECASE)
_GPUS_GENERIC = re.compile(
    _A + _COUNT + r"\s*(?:x\s*|×\s*)?(?:gpus|gpu|cards|张卡|块卡|张显卡|块显卡|卡)" + _Z + r"|" + _COUNT + r"\s*(?:张|块)\s*(?:gpu|显卡|卡)",
    re.IGNORECASE,
)
_BEFORE_GPU = re.compile(_COUNT + r"\s*(?:x|×|\*|张|块|片|卡|个)?\s*(?:nvidia\s+|英伟达\s*)?$", re.IGNORECASE)
_AFTER_GPU = re.compile(r"^s?\s*(?:x|×|\*)\s*(\d{1,4})" + _Z, re.IGNORECASE)
#: A vLLM release as written, whole ("0.8.5", "v0.10.1", "0.6.3.post1", "0.18.0rc1", "0.10.1.dev3"): a
#: release is 0.x or, later, 1.x/2.x.
#: A sentence may end on it ("... on one L40S, vLLM 0.8.5."): only a dot before a digit continues it.
_BUILD_END = r"(?:\.post\d+|\.?rc\d+|\.dev\d+)?)(?!\d|\.\d)"  # a release's build tag and its end (the group closes here)
_RELEASE = r"v?([0-2]\.\d{1,3}(?:\.\d{1,3}){0,2}" + _BUILD_END
#: "vLLM 0.6.3", "vllm==0.8.5", "vLLM v0.10.1", "vLLM 0.18.0rc1" ("vLLM 51.4 tok/s" is a rate)
_VERSION = re.compile(
    _A + r"vllm(?:/vllm-openai:|-openai:)?\s*(?:==|version|版本|v)?\s*[:：=]?\s*" + _RELEASE
    + r"(?!\s*(?:tok(?:en)?s?\s*/|tokens?\s+per\b|t/s|x\b|×|倍|%|ms\b|s\b|秒))" + _Z,
    re.IGNORECASE,
)

#: A number and its scale, whole ("95.23", never "95.2" of it) and not a rate or a time ("95 tok/s",
#: "20 minutes", "80 token/s").
_TOKENS = (
    # "5,000" with its thousands separators as one number (its "000" alone was read, as 0 tokens)
    # a number glued to a letter ("H100", "in1024", "c16") is part of a name, not a length
    # a full stop after the number ends a sentence ("output 512."), a dot and a digit continue it
    r"(?<![\d.,\-~～A-Za-z])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\d|\.\d|,\d)\s*([kK万千])?"
    r"(?!\s*(?:tok(?:en)?s?\s*/|tokens?\s+per\b|t/s|个?\s*token\s*/|minutes?|mins?\b|seconds?|secs?\b|ms\b|s\b|%|分钟|秒))"
    r"(?!\s*(?:-|–|~|～|to\s|到|至)\s*\d)"  # a range ("8k-16k tokens") names no one length: neither end is read
)
#: "63K prompts" names a length only with its scale: "500 prompts" is a count of requests.
_SCALED = r"(?<![\d.])(\d+(?:\.\d+)?)\s*([kK万千])"
#: "5 万字", "3000 多字", "2000 个汉字", "3000 字符", "2000 Chinese characters": a length counted in
#: characters, not tokens (Chinese users often measure text so); not 字节 (bytes), 字母, 字段
_CHAR_UNIT = r"(?:多|余|来)?\s*(?:个|個)?\s*(?:汉字|漢字|中文字符?|字符|字元|字(?![节節母段])|chinese\s+char(?:acter)?s?\b)"


#: "1k in 512 out", "2K in / 2K out", "1024 in, 512 out": the pair as benchmark write-ups give it
_IN_OUT_GAP = r"\s*in\s*(?:[,/;&]|and)?\s*"
_PAIR_NUMBER = r"\d[\d.,]*\s*[kK]?"
_IN_PAIR = _A + _TOKENS + r"(?=" + _IN_OUT_GAP + _PAIR_NUMBER + r"\s*out\b)"
_OUT_PAIR = r"(?<![\d.])" + _PAIR_NUMBER + _IN_OUT_GAP + _TOKENS + r"\s*out\b"


def _length_pattern(nouns: str, scaled_nouns: str, token_kind: str, keyword: str, zh_keyword: str, zh_after: str, pair: str) -> re.Pattern[str]:
    """A token length next to its words: "63K-token prompts", "63K prompts", "1000 input tokens",
    "prompt length 2000", "ISL 1024", "1k in 512 out", "输入 63K", "63K 的输入" (one pattern each for
    prompts and outputs)."""
    return re.compile(
        _A + _TOKENS + r"[-\s]*tokens?[-\s]+(?:of\s+)?" + nouns + _Z
        + r"|" + _A + _SCALED + r"[-\s]+" + scaled_nouns + _Z
        + r"|" + _A + _TOKENS + r"[-\s]*" + token_kind + r"[-\s]+tokens?" + _Z
        + r"|" + _A + _TOKENS + r"\s+" + token_kind + r"(?=\s*(?:[,;/)]|\.(?!\d)|and\b|$))"  # "1000 input, 200 output"
        + r"|" + _A + keyword + r"s?(?:[-\s]+(?:length|len|size))?\s*(?:of|is|are|was|were|=|:|：|~|≈)?\s*(?:about|around|roughly|~|≈)?\s*" + _TOKENS + r"(?:[-\s]*tokens?)?" + _Z
        + r"|" + pair
        + r"|" + zh_keyword + r"(?:长度)?\s*(?:为|是|约|大约|大概|差不多|[:：=~])?\s*(?:约|大约|大概)?\s*" + _TOKENS
        + r"|" + _TOKENS + r"(?=\s*(?:tokens?|token\s*的|" + _CHAR_UNIT + r")?\s*(?:的)?" + zh_after + ")",
        re.IGNORECASE,
    )


_INPUT = _length_pattern(r"(?:long\s+)?(?:prompts?|inputs?|context|documents?|docs|requests?)", r"(?:long\s+)?(?:prompts?|inputs?|context|documents?|docs)", r"(?:input|prompt)", r"(?<!system )(?:prompt|input|isl)", r"(?:输入|提示词|上下文)", r"(?:输入|上下文|提示词)", _IN_PAIR)
_OUTPUT = _length_pattern(r"(?:outputs?|generations?|completions?|responses?)", r"(?:outputs?|completions?|responses?)", r"(?:output|generated|completion)", r"(?:output|max_tokens|osl)", r"(?:输出|生成)", r"(?:输出)", _OUT_PAIR)
_CONCURRENCY = re.compile(
    _A + r"(\d{1,5})\s*(?:concurrent|parallel|simultaneous)(?:\s+(?:requests|clients|users|connections))?" + _Z
    + r"|" + _A + r"(\d{1,5})\s*(?:clients|users)" + _Z
    + r"|" + _A + r"(?<![=:])(?<![=:] )(?<!tp )(?<!size )(?<!tp)(\d{1,5})(?=\s*(?:and|or|,|/|vs\.?)\s*\d{1,5}\s*(?:concurrent|parallel|clients|users)" + _Z + ")"
    + r"|" + _A + r"concurren(?:cy|t[_ ]requests|t[_ ]users)\s*(?:set to|of|=|:|is|level)?\s*(\d{1,5})" + _Z
    + r"|" + _A + r"(\d{1,5})\s*requests?\s+(?:at (?:the same time|once)|simultaneously|concurrently|in parallel)" + _Z
    # ... not the rate that follows "单并发" ("单并发 45 tok/s" is one client at 45 tok/s)
    + r"|(?<!单)并发\s*(?:数|度|量)?\s*(?:都|也)?\s*(?:为|是|到|达到|设为|设成|开到|调到|调成|提到|[:：=])?\s*(\d{1,5})(?![\d.]|\s*(?:[kK万千]|tok|t/s|字/秒|ms\b|毫秒))(?:\s*(?:[~～/、-]|和|或|与)\s*(\d{1,5}))?"
    + r"|(?<![\dA-Za-z.])(\d{1,5})(?=\s*(?:个|路)?\s*并发)",
    re.IGNORECASE,
)


#: A figure measured on a running server: a rate or a latency ("20 tok/s", "TTFT 15 s", "每秒 30 个 token").
_FIGURE = re.compile(
    r"\d\s*(?:多|余)?\s*(?:tok(?:en)?s?\s*/\s*s|t/s|tokens?\s+per\s+second|req(?:uests?)?\s*/\s*s|ms\b|seconds?\b|secs?\b|毫秒|秒)|(?:ttft|tpot|itl|latency|first[-\s]+token|延迟|耗时|首\s*(?:token|字))\D{0,12}\d",
    re.IGNORECASE,
)


def _count(word: str) -> int | None:
    word = word.lower()
    value = int(word) if word.isdigit() else _NUMBER_WORDS.get(word)
    return value if value and value <= 4096 else None


_CHARACTERS = re.compile(r"\s*" + _CHAR_UNIT, re.IGNORECASE)
#: "2000 characters", "2000 words", "2000 字节" (bytes): not tokens, and no one ratio turns them into them
_OTHER_CHARACTERS = re.compile(r"\s*(?:(?:char(?:acter)?s?|letters?|words?|bytes?)\b|字节|字節)", re.IGNORECASE)
#: a rate, not a length: "35 字/秒", "30 字每秒", "20 tokens/s" after the number, "每秒输出 30 字" before it
_RATE_AFTER = re.compile(r"\s*(?:" + _CHAR_UNIT + r"|tok(?:en)?s?)?\s*(?:/\s*(?:秒|s\b|sec)|每\s*秒|一秒)", re.IGNORECASE)
_RATE_BEFORE = re.compile(r"(?:每\s*秒|一秒|每\s*s)\s*$", re.IGNORECASE)


def _unit(text: str, m: re.Match) -> str:
    """What the length ``m`` read counts, by the words around its number: "rate" (字/秒, 每秒输出 30 字:
    not a length), "chinese" (字, 字符, Chinese characters), "other" (characters or words of no named
    script: left unread) or "tokens"."""
    end = max((m.end(i) for i in range(1, (m.re.groups or 0) + 1) if m.group(i) is not None), default=m.end())
    if _RATE_AFTER.match(text, end) or _RATE_BEFORE.search(text[max(0, m.start() - 8) : m.start()]):
        return "rate"
    return "chinese" if _CHARACTERS.match(text, end) else "other" if _OTHER_CHARACTERS.match(text, end) else "tokens"


#: The words a number written right after them belongs to ("输入 3000", "output 256", "并发 64"): such a
#: number is that word's, never the length or client count of a word after it ("输入 3000 输出 300 并发
#: 64" once read 3000 as the output and 300 as a client count).
_OWNER = re.compile(
    r"(输入|提示词|上下文|输出|生成|并发|prompts?|inputs?|outputs?|max_tokens|concurren(?:cy|t))"
    r"(?:数|度|量|长度|[-\s]*(?:length|len|size))?\s*(?:为|是|约|大约|大概|差不多|到|设为|设成|of|is|[:：=~≈])?\s*(?:约|大约|大概|about|around|~|≈)?\s*$",
    re.IGNORECASE,
)
_OWNER_KIND = {"输入": "input", "提示词": "input", "上下文": "input", "prompt": "input", "input": "input",
               "输出": "output", "生成": "output", "output": "output", "max_tokens": "output", "并发": "concurrency", "concurren": "concurrency"}


#: A chain of numbers each followed by its length or count word, in number-first order ("48 并发 8k 输入",
#: "8k 输入 128 输出"): there each number is the word's after it. A chain right after such a word is the
#: keyword-first order seen from its second word ("并发 64 输入 3000 输出 300") and is not one.
_NUMBER_FIRST_PAIR = r"(\d+(?:[.,]\d+)*)\s*[kK万千]?\s*(?:tokens?)?\s*(?:个|的)?\s*(输入|提示词|输出|生成|并发)"
_NUMBER_FIRST = re.compile(r"(?:" + _NUMBER_FIRST_PAIR + r"\s*[,，、]?\s*){2,}", re.IGNORECASE)
_PAIR = re.compile(_NUMBER_FIRST_PAIR, re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def _number_first(text: str) -> dict[int, str]:
    """Start of each number in a number-first chain -> the kind of the word after it."""
    out = {}
    for chain in _NUMBER_FIRST.finditer(text):
        if _OWNER.search(text[max(0, chain.start() - 24) : chain.start()]):
            continue  # the chain's first number is the word's before it ("输入大约 3000 输出 300 并发 64"): keyword-first
        for pair in _PAIR.finditer(text, chain.start(), chain.end()):
            out[pair.start(1)] = _kind(pair.group(2))
    return out


def _kind(word: str) -> str | None:
    word = word.lower().rstrip("s")
    return _OWNER_KIND.get(word) or _OWNER_KIND.get(word[:10])


def _owner(text: str, start: int) -> str | None:
    """Which kind of word ("input", "output", "concurrency") the number at ``start`` is written right after;
    in a number-first chain ("48 并发 8k 输入"), the word after it (a new user's find: 8k was read as a
    client count)."""
    chained = _number_first(text).get(start)
    if chained is not None:
        return chained
    m = _OWNER.search(text[max(0, start - 24) : start])
    return None if m is None else _kind(m.group(1))


def _number_start(m: re.Match[str]) -> int:
    return next(m.start(i) for i in range(1, (m.re.groups or 0) + 1) if m.group(i) is not None)


_WINDOW = re.compile(r"上下文|context", re.IGNORECASE)
_WINDOW_AFTER = re.compile(r"[-\s]*(?:tokens?[-\s]*)?(?:的\s*)?(?:上下文|context)", re.IGNORECASE)


def _lengths(pattern: re.Pattern[str], text: str, kind: str) -> dict[str, int | None]:
    """The one length each unit ("tokens", "chinese") names next to ``pattern``'s words (None for a unit
    named with two different lengths), from one scan of the text; a number another word owns is skipped."""
    found: dict[str, list[int | None]] = {}
    windows: dict[str, list[int | None]] = {}
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        pos = m.end()
        if _owner(text, _number_start(m)) not in (None, kind):
            # "input 1k output 512": "1k output" is the input's number; "output 512" is read next
            pos = m.end(next(i for i in range(1, (m.re.groups or 0) + 1) if m.group(i) is not None))
            continue
        into = windows if _WINDOW.search(m.group(0)) or _WINDOW_AFTER.match(text, m.end()) else found
        into.setdefault(_unit(text, m), []).append(_tokens(*_pair(m)))
    # "32K 上下文，输入两万": a context is the window a prompt may fill; a prompt length said beside it is the prompt's
    return {unit: _one(found.get(unit) or windows[unit]) for unit in {*found, *windows}}


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the named cards blanked ("两张4090 输入 3000": 4090 is a card, not a prompt length)."""
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


#: Chinese numerals written as a count or a length ("并发五十", "输出两千"): turned into digits where
#: they follow those words, before anything is read.
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_ZH_NUMERAL = re.compile(r"(并发|输入|输出|生成|上下文)(\s*(?:数|长度)?\s*(?:为|是|约|大约|大概|到|[:：=])?\s*)([零一二两三四五六七八九十百千万]{1,8})(?![零一二两三四五六七八九十百千万])")


def _zh_numeral(word: str) -> int | None:
    """"五十" -> 50, "两千" -> 2000, "十五" -> 15, and a last digit after a hundred, thousand or ten
    thousand counts one unit lower, as people say it: "两千五" -> 2500, "一万二" -> 12000, unless a
    零 comes before it ("一百零五" -> 105). Two digits in a row ("五五") are no number."""
    total, digit, unit, zero = 0, None, 0, False
    for ch in word:
        if ch == "零":  # "一百零五": the digit after it is the ones
            zero = True
            continue
        if ch in _ZH_DIGITS:
            if digit is not None:
                return None
            digit = _ZH_DIGITS[ch]
        else:
            unit = _ZH_UNITS[ch]
            if unit == 10000:
                total = (total + (digit or 0)) * unit
            else:
                total += (1 if digit is None else digit) * unit
            digit = None
    if digit is not None:
        total += digit * (unit // 10 if unit >= 100 and not zero else 1)
    return total if unit or len(word) == 1 else None


def _arabic(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        value = _zh_numeral(m.group(3))
        return m.group(0) if value is None else f"{m.group(1)}{m.group(2)}{value}"

    return _ZH_NUMERAL.sub(one, text)


def _tokens(number: str, scale: str | None) -> int | None:
    value = float(number.replace(",", "")) * {None: 1, "": 1, "k": 1000, "K": 1000, "千": 1000, "万": 10000}[scale]
    # fewer than 16 tokens is a list index or a step ("prompt 1"), not a length
    return int(round(value)) if 16 <= value <= 10_000_000 else None


def _one(values: list) -> object | None:
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    return distinct[0] if len(distinct) == 1 else None


def _model(text: str) -> str | None:
    """The model named, as written (so "-AWQ" stays in the name), when the words name one: a catalog
    entry, or one name with a size in billions that the catalog lacks (the answer then says so)."""
    written: dict[str, str] = {}  # catalog entry -> the longest way the words wrote it
    spans = []
    for m in _model_pattern().finditer(text):
        if any(a <= m.start(1) < b for a, b in spans):  # "Llama-70B" inside "DeepSeek-R1-Distill-Llama-70B"
            continue
        name, spec = m.group(1), None
        tail = _MODEL_TAIL.match(text, m.end())
        spans.append((m.start(), (tail or m).end()))
        if tail:  # "Qwen2.5-32B-Instruct-AWQ": the longer name first, so a quantised checkpoint says so
            name = text[m.start() : tail.end()]
        name = _with_format(text, (tail or m).end(), name)
        if name != m.group(1):
            spec = model_catalog.find_model(name)
            if spec is None:  # "DeepSeek-R1-Distill-Qwen-7B" is another model than DeepSeek-R1: as written
                written.setdefault(name.lower(), name)
                continue
        spec = spec or model_catalog.find_model(name)
        if spec is not None and len(name) > len(written.get(spec.name, "")):
            written[spec.name] = name
    for m in _OTHER_MODEL.finditer(text):
        if any(a <= m.start(1) < b for a, b in spans) or _ID_PART.search(m.group(1)):
            continue
        name = _with_format(text, m.end(1), m.group(1))
        spec = model_catalog.find_model(name)
        key = spec.name if spec is not None else m.group(1).lower()
        written.setdefault(key, name)
    return next(iter(written.values())) if len(written) == 1 else None


#: vLLM settings whose value the words may give, and how a value is read: token counts take "K" as
#: 1,024 (a "128K" context is 131,072 tokens), a fraction is a number, a data type a word.
_FLAG_KINDS = {
    "max_num_seqs": "count", "max_num_batched_tokens": "tokens", "max_model_len": "tokens",
    "gpu_memory_utilization": "fraction", "kv_cache_dtype": "dtype", "block_size": "count",
    "pipeline_parallel_size": "count", "data_parallel_size": "count", "cpu_offload_gb": "amount", "quantization": "method",
}
_FLAG_VALUE = re.compile(
    r"(?<![A-Za-z0-9_])-{0,2}(" + "|".join(name.replace("_", "[-_]") for name in _FLAG_KINDS) + r")(?![A-Za-z0-9_])"
    r"\s*(?:=|:|：|设成|设为|设置为|设置成|设的是|设的|为|是|set to|of|at)?\s*(?:=\s*)?"
    r"(\d+(?:\.\d+)?\s*[kK]?|fp8(?:_e4m3|_e5m2)?|auto|bfloat16|float16|bf16|fp16|gptq_marlin|awq_marlin|gptq|awq|bitsandbytes|compressed-tensors|gguf)(?![A-Za-z0-9_]|\.[A-Za-z0-9_])",
    re.IGNORECASE,
)
#: A value the words propose rather than run ("should I set max_num_seqs to 256?", "改成 512 会不会更快",
#: "raised max-model-len from 32K to 128K"): words of change or doubt just before the setting.
_PROPOSED = re.compile(r"\b(should|would|could|if|try|trying|chang\w*|rais\w+|increas\w+|decreas\w+|lower\w*|bump\w*|from)\b|如果|要不要|是否|会不会|建议|改|调|换|提高|降低|增加|减少|从"
                       r"|或者|能不能|能否|可不可以|是不是|加上|试试|试一下|打算|考虑", re.IGNORECASE)


#: Words before a card that make it another deployment's (a colleague's, the old box, a comparison).
_COMPARED = re.compile(r"colleague|friend|other|old|previous|compared|versus|\bvs\.?|同事|朋友|别人|之前|以前|原来|对比|相比|比", re.IGNORECASE)


def _proposed(text: str, start: int, reach: int = 24) -> bool:
    """Words of change or doubt just before ``start`` in its own sentence: "Would TP=2 on two H100s be
    better...?" proposes a deployment, it does not describe the one that runs (a reviewer's find: the
    option asked about was modelled as the user's)."""
    before = re.split(r"[.?!。？！\n]", text[max(0, start - reach) : start])[-1]
    return bool(_PROPOSED.search(before))


def _flags(text: str) -> dict[str, int | float | str]:
    """The vLLM settings ``text`` gives one value each, as the server runs them (not as proposed)."""
    found: dict[str, list] = {}
    for m in _FLAG_VALUE.finditer(text):
        if _proposed(text, m.start(), reach=16):
            continue
        name, raw = m.group(1).lower().replace("-", "_"), m.group(2).strip()
        kind = _FLAG_KINDS[name]
        value: int | float | str | None = None
        if kind == "method":  # --quantization: the method's name as vLLM spells it
            value = raw.lower() if not re.fullmatch(r"[\d.\skK]+|auto|bfloat16|float16|bf16|fp16", raw, re.I) else None
        elif kind == "dtype":
            value = {"bf16": "bfloat16", "fp16": "float16"}.get(raw.lower(), raw.lower()) if name == "kv_cache_dtype" else None
        elif re.fullmatch(r"\d+(\.\d+)?", raw) or (kind == "tokens" and raw[-1] in "kK"):
            number = float(raw[:-1]) * 1024 if raw[-1] in "kK" else float(raw)
            if kind == "fraction":
                value = number if 0 < number <= 1 else None
            elif kind == "amount":  # GB: any positive figure
                value = number if number > 0 else None
            elif number.is_integer() and number >= 1:
                value = int(number)
        found.setdefault(name, []).append(value)
    return {name: one for name, values in found.items() if (one := _one(values)) is not None and None not in values}


#: The weights' format as words name it, and vLLM's name for it. 8-bit and FP8 words are left out:
#: they as often describe the KV cache ("fp8 kv", "int8 kv cache") as the weights.
_WEIGHT_FORMATS = (
    ("awq", r"awq"), ("gptq", r"gptq"), ("nvfp4", r"nvfp4"), ("mxfp4", r"mxfp4"),
    ("bitsandbytes", r"bnb|bitsandbytes|nf4"), ("w4a16", r"int4|w4a16|4[- ]?bit|4位|四位"),
)
_WEIGHT_FORMAT = re.compile(_A + "(" + "|".join(f"(?P<{name}>{pattern})" for name, pattern in _WEIGHT_FORMATS) + ")" + _Z + r"(?!\s*[-_]?kv)", re.IGNORECASE)


def _quantization(text: str) -> str | None:
    """The one weight format the words name (GPTQ and "4bit" together are GPTQ; AWQ beside GPTQ, as
    in a comparison, is neither)."""
    named = {next(name for name, _ in _WEIGHT_FORMATS if m.group(name)) for m in _WEIGHT_FORMAT.finditer(text)}
    if len(named) > 1:
        named.discard("w4a16")  # "GPTQ 4bit": the 4-bit is the GPTQ checkpoint's width
    return named.pop() if len(named) == 1 else None


#: A per-request speed: a number with a tokens-per-second unit ("8 token/s", "11 tok/s", "每秒 30 个 token"
#: is left out: its number comes after), not after a word of throughput or of the whole server.
_SPEED = re.compile(r"(?<![\d.,])(\d{1,5}(?:\.\d+)?)\s*(?:tok(?:en)?s?\s*/\s*(?:s|sec|秒)\b|t/s\b|tokens?\s+per\s+second|token\s*每秒|个?\s*token\s*/\s*秒)", re.IGNORECASE)


#: A rate written number-last in Chinese ("每秒大概 35 个 token", "每秒输出 30 个 token"): read as "35 token/s"
_EVERY_SECOND = re.compile(r"每\s*秒(?:钟)?\s*(?:输出|生成|能出|能跑|只有|才|大概|大约|约|有|能有)*\s*(?P<n>\d+(?:\.\d+)?)\s*(?:多)?\s*个?\s*(?:token|tokens|tok|tokn|toks)\b", re.IGNORECASE)
#: A rate in Chinese characters ("每秒 30 个字", "30 字/秒"): not tokens; the gatherer turns it into tokens with
#: the model's tokenizer family, as it does lengths in characters (diagnosis/char_lengths.py)
_CHAR_RATE = re.compile(
    r"每\s*秒(?:钟)?\s*(?:输出|生成|能出|只有|才|大概|大约|约|有)*\s*(?P<a>\d+(?:\.\d+)?)\s*(?:多)?\s*个?\s*(?:汉字|中文字?|字)(?![节符数])"
    r"|(?<![\d.])(?P<b>\d+(?:\.\d+)?)\s*个?\s*(?:汉字|字)\s*(?:/\s*秒|每\s*秒|/\s*s\b)",
    re.IGNORECASE,
)


def _request_speed(text: str) -> float | None:
    """The one per-request speed the words state (two different ones, or one after a throughput word: none)."""
    values = [float(m.group(1)) for m in _SPEED.finditer(text) if not _AGGREGATE.search(text[max(0, m.start() - 16) : m.start()])]
    speed = _one(values)
    return speed if speed is not None and 0 < speed <= 100_000 else None  # "0 tok/s" is a stall, not a speed


#: Words that make a speed stated at many clients each request's ("8 users, each gets 20 tok/s", "每个请求 20 token/s").
#: The words must stand by the speed ("per request" also describes lengths: "1000 input tokens per request").
_RATE = r"\d[\d.]*\s*(?:tok(?:en)?s?\s*/\s*(?:s|sec|秒)|t/s|tokens?\s+per\s+second)"
_PER = r"per[- ](?:request|user|client|stream|sequence)"
_ZH_EACH = r"每(?:个|一个|路|条)?(?:请求|用户|并发|客户端|流)"
PER_REQUEST = re.compile(
    r"(?:\beach\s+(?:request|user|client|stream|sequence|one|of them)?\s*(?:gets?|got|sees?|decodes?|generates?|only|runs?)\b|\b" + _PER + r"\b"
    r"|" + _ZH_EACH + r")[^.;,。；，\n]{0,24}?" + _RATE
    + r"|" + _RATE + r"\s*(?:each|" + _PER + r")\b",
    re.IGNORECASE,
)

#: Words that a speed is the whole server's: output throughput ("吞吐 900 token/s", "total throughput",
#: "900 tok/s in total"); the prompt's or the prefill's rate is neither this nor a request's.
#: Only words that name the server's total ("总是", "总之", "overall the speed" are not; a reviewer's find:
#: "每个请求总是只有 20 token/s" was read as a total throughput).
_THROUGHPUT_WORD = r"(?:吞吐|throughput|\baggregate\b|\btotal\b|总(?:吞吐|输出|速度|计|共)|合计|一共|in\s+total)"
_THROUGHPUT = re.compile(_THROUGHPUT_WORD, re.IGNORECASE)
#: Words before a figure that make it no one request's: the server's total, "overall"/"combined", or the prompt's
_AGGREGATE = re.compile(_THROUGHPUT_WORD + r"|\boverall\b|\bcombined\b|整体吞吐|prefill|prompt|预填充|输入", re.IGNORECASE)
_THROUGHPUT_AFTER = re.compile(r"\s*(?:in\s+total|total|aggregate|总共|合计|总吞吐)", re.IGNORECASE)
#: Words in a figure's clause that make it each request's, whatever else the clause says
_EACH = re.compile(r"\beach\b|\b" + _PER + r"\b|" + _ZH_EACH + r"|每路", re.IGNORECASE)
#: vLLM bench's "Total Token throughput" and words like it count prompt tokens with the output
_COUNTS_INPUT = re.compile(r"total\s+tokens?\s+throughput|input\s*\+\s*output|\bin\s*\+\s*out\b|prompt\s*\+\s*(?:output|generation)|输入\s*[+加]\s*输出|总\s*token\s*吞吐", re.IGNORECASE)
_PREFILL_WORD = re.compile(r"prefill|prompt|预填充|输入|input", re.IGNORECASE)
#: A speed said of one request alone ("a single request gets 60 tok/s", "单个请求 60 token/s", "单并发
#: 45 tok/s", "batch size 1"): only where no client count above one comes before it in its sentence
#: ("并发 32 时，单个请求只有 20 token/s" is each request's at 32).
_SINGLE = re.compile(
    # ... not a rate ("1 request/s", "one request every 100 ms") nor "the GPU alone"
    r"\b(?:single|one|1)[-\s]+(?:request|user|client|stream|sequence|concurrent\s+(?:request|user|client))\b(?!s)(?!\s*(?:/|per\b|every\b|a\s+second))"
    r"|\b(?:request|user|client|stream|sequence)s?\s+alone\b|\bby itself\b"
    r"|\bbatch[-_ ]?size\s*(?:of|=|:)?\s*1\b(?!\.\d)|\bbs\s*=\s*1\b|\bconcurrency\s*(?:of|=|:)?\s*1\b(?![.\d])|\bc\s*=\s*1\b(?![.\d])"
    r"|单(?:个|条|路)?(?:请求|用户|并发|路|流)|一个请求|1\s*个请求|并发\s*(?:数|度)?\s*(?:为|是|=|:|：)?\s*1(?![\d.])|1\s*(?:个|路)?\s*并发",
    re.IGNORECASE,
)
#: A sentence ends at these; a clause (of a sentence) also at commas.
_SENTENCE_END = re.compile(r"[。！？!?;；\n]|\.(?!\d)")
_CLAUSE_END = re.compile(r"[，,、]|\b(?:but|while|whereas)\b|但是|但", re.IGNORECASE)  # "... alone 80 tok/s but at 64 each gets 20": two clauses


def _sentence_start(text: str, at: int) -> int:
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, at)]
    return ends[-1] if ends else 0


def _clause(text: str, at: int) -> tuple[int, int]:
    """The clause around position ``at``: from the last comma or sentence end before it to the next."""
    start = max(_sentence_start(text, at), *(m.end() for m in _CLAUSE_END.finditer(text, 0, at)), 0)
    after = [m.start() for m in (_SENTENCE_END.search(text, at), _CLAUSE_END.search(text, at)) if m is not None]
    return start, min(after) if after else len(text)


def _speed_roles(text: str, loads: list[tuple[int, int]]) -> tuple[float | None, float | None, bool, float | None]:
    """(one request alone's speed, the whole server's output rate, whether that rate counts prompt
    tokens too, each request's speed where the words say "each") the words state: each one figure (two
    different ones: none). ``loads``: (position, clients) of each client count read in ``text``."""
    single, throughput, counts_input, each_request = [], [], False, []
    for m in _SPEED.finditer(text):
        value = float(m.group(1))
        if not 0 < value <= 100_000:
            continue
        clause = _clause(text, m.start())
        # the throughput word anywhere before the figure in its own clause ("throughput at 64 users: 2000 tok/s"),
        # or right after it; a prompt's rate is neither ("prompt+output" names what a total counts, not a prefill)
        before = text[clause[0] : m.start()]
        each = _EACH.search(text, clause[0], clause[1])
        if not each and (_THROUGHPUT.search(before) or _THROUGHPUT_AFTER.match(text, m.end())):
            if not _PREFILL_WORD.search(_COUNTS_INPUT.sub(" ", before[-32:])):
                throughput.append(value)
                counts_input = counts_input or bool(_COUNTS_INPUT.search(text, clause[0], clause[1]))
            continue
        if each:
            each_request.append(value)
            continue
        if _AGGREGATE.search(text[max(0, m.start() - 16) : m.start()]):
            continue
        marked = _SINGLE.search(text, clause[0], clause[1])
        # a client count before the figure in its sentence makes it each request's at that load; one after it does not
        if marked and not any(_sentence_start(text, m.start()) <= at < m.start() and clients > 1 for at, clients in loads):
            single.append(value)
    return _one(single), _one(throughput), counts_input, _one(each_request)


#: A time to first token the words state ("TTFT of 16 s", "TTFT at 48 clients is 16 s", "首 token 要等 20 多秒",
#: "首字延迟 2-3 秒"): the latency word, then within a short stretch of its sentence the figure and a time unit.
_TTFT = re.compile(
    r"(?:\bttft\b|time[-\s]+to[-\s]+first[-\s]+token|\bfirst[-\s]+token(?:\s+(?:latency|time))?|首\s*(?:个\s*)?(?:token|字|包|词)(?:\s*(?:延迟|时延|时间|耗时|响应))?)"
    r"(?P<gap>[^。！？!?;；\n]{0,40}?)(?<![\d.])"
    r"(?P<n>\d+(?:\.\d+)?)(?:\s*(?:-|~|～|到|至)\s*(?P<hi>\d+(?:\.\d+)?))?\s*(?:多|余|来|几)?\s*"
    r"(?P<unit>ms|毫秒|milliseconds?|s|secs?|seconds?|秒)(?![A-Za-z])",
    re.IGNORECASE,
)
#: Between the latency word and its figure: another latency or a percentile's name makes the figure not
#: the typical first token's ("TTFT is fine but TPOT 80 ms", "TTFT p99 20 s")
_TTFT_OTHER = re.compile(r"tpot|itl|e2e|end[-\s]to[-\s]end|decode|tok|p9\d|max|最大|尾|解码|生成", re.IGNORECASE)
_TTFT_TAIL_BEFORE = re.compile(r"(?:p9\d(?:\.\d+)?|\bmax(?:imum)?|worst(?:[- ]case)?|最长|最大|最慢)\s*$", re.IGNORECASE)
_TTFT_GOAL = re.compile(r"\b(?:slo|sla|target|goal|requirement|budget|under|below|within|less than|at most)\b|要求|目标|期望|希望|需要|不超过|控制在|低于|小于", re.IGNORECASE)
_TTFT_GOAL_AFTER = re.compile(r"\s*(?:以内|以下|之内)")
_RESPECTIVELY = re.compile(r"\s*(?:分别|各自)|[^。.]{0,30}\brespectively\b", re.IGNORECASE)
#: "TTFT went from 200 ms to 15 s": the figure it came to
_TTFT_TO = re.compile(r"\s*(?:to|->|→|=>|(?:降|升|涨|增加|减少|缩短|变|提高|下降)?(?:到|至|为)|变成)\s*(?:about\s+|约)?(\d+(?:\.\d+)?)\s*(?:多|余)?\s*(ms|毫秒|milliseconds?|s|secs?|seconds?|秒)(?![A-Za-z])", re.IGNORECASE)


def _ms(value: str, unit: str) -> float:
    return float(value) * (1.0 if unit.lower().startswith(("ms", "毫", "milli")) else 1000.0)


def _stated_ttft(text: str, loads: list[tuple[int, int]]) -> tuple[float | None, int | None]:
    """(the time to first token the words state, in ms; the client count it was seen at): one figure
    (two different ones: none); the client count is the one in its sentence before it, 1 where its clause
    says one request alone, else the words' only client count."""
    found = []  # (ms, client count or None)
    for m in _TTFT.finditer(text):
        if _TTFT_TAIL_BEFORE.search(text[max(0, m.start() - 12) : m.start()]):
            continue  # "p99 TTFT is 20 s", "max TTFT": a tail, not the typical first token
        if _TTFT_GOAL.search(m.group("gap")) or _TTFT_GOAL_AFTER.match(text, m.end()):
            continue  # "TTFT SLO is 2 s", "首 token 时间的目标是 2 秒", "要求 1 秒以内": a target, not what was seen
        if _TTFT_OTHER.search(m.group("gap")) or _RESPECTIVELY.search(m.group("gap")) or _RESPECTIVELY.match(text, m.end()):
            continue  # "分别是 1 秒和 8 秒", "1 s and 8 s respectively": which goes with which load is not this reader's to guess
        later = _TTFT_TO.match(text, m.end())
        value = _ms(later.group(1), later.group(2)) if later else (_ms(m.group("n"), m.group("unit")) + _ms(m.group("hi"), m.group("unit"))) / 2 if m.group("hi") else _ms(m.group("n"), m.group("unit"))
        if not 0 < value <= 3_600_000:
            continue
        clause = _clause(text, m.start())
        near = [c for at, c in loads if clause[0] <= at < clause[1]] or [c for at, c in loads if _sentence_start(text, m.start()) <= at < m.start()]
        if len(set(near)) > 1:
            continue
        found.append((round(value, 1), near[-1] if near else 1 if _SINGLE.search(text, clause[0], clause[1]) else None))
    if len(found) > 1 and all(c is not None for _, c in found) and len({c for _, c in found}) == len(found):
        return max(found, key=lambda pair: pair[1])  # "alone 800 ms, at 32 clients 12 s": the heaviest load's, the one asked about
    ttft = _one([ms for ms, _ in found])
    if ttft is None:
        return None, None
    said = {c for ms, c in found if c is not None}
    every = {c for _, c in loads}
    at = next(iter(said)) if len(said) == 1 else next(iter(every)) if not said and len(every) == 1 else None
    return ttft, at


#: A prefix every prompt shares, with its length: "a 7.5k shared system prompt", "shared prefix of 2000 tokens",
#: "所有请求共用一个 7.5k 的系统提示词", "共享前缀 4k".
_NUM = r"(\d+(?:\.\d+)?)\s*([kK千]?)"
_SHARED_PREFIX = re.compile(
    _A + _NUM + r"[-\s]*(?:tokens?[-\s]+)?(?:shared|common|identical|same)\s+(?:system[-\s]+)?(?:prompt|prefix)"
    + r"|(?:shared|common)\s+(?:system[-\s]+)?(?:prompt|prefix)\s*(?:of|is|was|:|=|~)?\s*(?:about\s+|~)?" + _NUM + r"[-\s]*tokens?"
    + r"|(?:共用|共享|公用|相同)的?\s*(?:同)?(?:一个|一段)?\s*" + _NUM + r"\s*(?:个)?\s*(?:tokens?)?\s*(?:的)?\s*(?:系统提示词?|前缀|system\s*prompt)"
    + r"|(?:共享前缀|公共前缀|相同前缀)\s*(?:长度)?\s*(?:为|是|约|有|[:：=])?\s*" + _NUM,
    re.IGNORECASE,
)


def _shared_prefix(text: str) -> int | None:
    """The length of the prefix the words say every prompt shares (two different ones: none)."""
    return _one([_tokens(*_pair(m)) for m in _SHARED_PREFIX.finditer(text)])


def read_stated_facts(text: str | None) -> StatedFacts:
    """The deployment facts ``text`` names unambiguously (empty when it names none)."""
    text = (text or "")[:MAX_CHARS]
    if not text.strip():
        return StatedFacts()
    gpus, counts, spans = {}, [], []  # catalog entry (or an uncatalogued card) -> how the words wrote it
    named, keys, counted = [], {}, set()
    for m in [*_gpu_pattern().finditer(text), *_NUMBERED_GPU.finditer(text)]:
        try:
            spec = gpu_catalog.get_gpu(m.group(1))
        except gpu_catalog.UnknownCatalogEntry:
            continue
        # "A100" is assumed to be the 80 GB SXM card: kept as written, so the engine model says so
        gpus.setdefault(spec.name, m.group(1) if getattr(spec, "note", None) else spec.name)
        spans.append(m.span(1))
        named.append(m)
        keys[m] = spec.name
    for m in _OTHER_GPU.finditer(text):
        if not any(a <= m.start(1) < b for a, b in spans):  # "RTX 6000" inside a catalog name read above
            keys[m] = " ".join(m.group(1).upper().split())
            gpus.setdefault(keys[m], " ".join(m.group(1).split()))
            named.append(m)
    for m in named:  # the count next to each card named: "two H800s", "8xH100", "H100 x 8", "两张 A800"
        before = _BEFORE_GPU.search(text[max(0, m.start() - 16) : m.start()])
        after = _AFTER_GPU.match(text[m.end() : m.end() + 12])
        if _proposed(text, m.start()):
            continue
        counts.append(_count(before.group(1)) if before else _count(after.group(1)) if after else None)
        if (before or after) and not _COMPARED.search(text[max(0, m.start() - 12) : m.start()]):
            counted.add(keys[m])
    masked = _masked(text, [m.span(1) for m in named])  # "2 x 4090 GPUs": the card's number is not a count
    counts += [_count(next(g for g in m.groups() if g)) for m in _GPUS_GENERIC.finditer(masked)]
    # "draft TP=1", "draft_tensor_parallel_size": the drafter's parallelism, not the deployment's
    tp = _one([int(m.group(1)) for m in _TP.finditer(text)
               if 1 <= int(m.group(1)) <= 512 and "draft" not in text[max(0, m.start() - 8) : m.start()].lower() and not _proposed(text, m.start())])
    num_gpus = _one(counts)
    if num_gpus is None and tp is not None and not any(counts):
        num_gpus = tp
    said = _EVERY_SECOND.sub(r"\g<n> token/s", _arabic(masked))
    # a setting's value is not a client count ("max-num-seqs 256, 40 users" listed 256 beside 40: a new user's find)
    settings = [m.span(2) for m in _FLAG_VALUE.finditer(said)]
    loads = [(m.start(i), int(g)) for m in _CONCURRENCY.finditer(said) for i, g in enumerate(m.groups(), start=1)
             if g and _owner(said, m.start(i)) in (None, "concurrency") and not any(a <= m.start(i) < b for a, b in settings)]
    concurrency = sorted({clients for _, clients in loads} - {0})
    single_tok_s, throughput_tok_s, counts_input, each_tok_s = _speed_roles(said, loads)
    inputs, outputs = _lengths(_INPUT, said, "input"), _lengths(_OUTPUT, said, "output")
    ttft_ms, ttft_clients = _stated_ttft(said, loads)
    return StatedFacts(
        model=_model(text),
        # one card, or of several the one named with its count ("单张 L20 ... 同事 H100 能到 80 多": the
        # other is a comparison, a reviewer's find that left the deployment without a GPU)
        gpu=next(iter(gpus.values())) if len(gpus) == 1 else gpus[next(iter(counted))] if len(counted) == 1 else None,
        num_gpus=num_gpus,
        tensor_parallel_size=tp,
        vllm_version=_version(text),
        input_len=inputs.get("tokens"),
        output_len=outputs.get("tokens"),
        input_chars=inputs.get("chinese"),
        output_chars=outputs.get("chinese"),
        concurrency=_spread([c for c in concurrency if c <= 100_000], MAX_POINTS) if len(concurrency) <= 2 * MAX_POINTS else [],
        reports_figures=bool(_FIGURE.search(text)),
        flags=_flags(text),
        quantization=_quantization(text),
        # "alone 80 tok/s, but at 64 each gets 20": the figure the words say is each request's, beside one alone's
        request_tok_s=_request_speed(_EVERY_SECOND.sub(r"\g<n> token/s", text)) or (each_tok_s if single_tok_s else None),
        single_tok_s=single_tok_s,
        throughput_tok_s=throughput_tok_s,
        throughput_counts_input=counts_input and throughput_tok_s is not None,
        per_request=bool(PER_REQUEST.search(text) or PER_REQUEST.search(_EVERY_SECOND.sub(r"\g<n> token/s", text))),
        chars_per_s=_one([float(m.group("a") or m.group("b")) for m in _CHAR_RATE.finditer(text)]),
        chars_single=bool(_SINGLE.search(text)) and not any(c > 1 for c in concurrency),
        shared_prefix_len=_shared_prefix(said),
        ttft_ms=ttft_ms,
        ttft_clients=ttft_clients,
    )


#: "upgrading vLLM from v0.24.0 to v0.25.0", "vllm 0.8.5 -> 0.9.2", "升级到 0.10.1": the release run now is
#: the one upgraded to (a reviewer's find: the first release named was read as the user's).
_UPGRADE = re.compile(
    _A + r"vllm" + _Z + r"[^。.\n]{0,40}?(?:from\s+)?" + _RELEASE + r"\s*(?:to|->|→|=>|升级到|升到|到)\s*" + _RELEASE
    + r"|(?:upgrad\w*|updat\w*|moved?|switch\w*)\s+(?:vllm\s+)?to\s+(?:vllm\s+)?" + _RELEASE + r"|(?:升级|更新)(?:vllm)?\s*(?:到|至)\s*(?:vllm\s*)?" + _RELEASE,
    re.IGNORECASE,
)


#: a release written with a "v" ("on v0.19.0"): in these reports nearly always vLLM's own
_V_RELEASE = re.compile(_A + r"v(0\.\d{1,3}\.\d{1,3}(?:\.\d{1,3})?" + _BUILD_END, re.IGNORECASE)


def _version(text: str) -> str | None:
    """The vLLM release the words say runs: the one upgraded to, else the one release named after
    "vLLM", unless the words compare it with another "v0.x.y" ("16% on vLLM v0.18.0, but on v0.19.0
    half of it": which one runs is not said)."""
    upgraded = [m.group(2) or m.group(3) or m.group(4) for m in _UPGRADE.finditer(text)]
    if (found := _one(upgraded)) is not None:
        return found
    named = _one([m.group(1) for m in _VERSION.finditer(text)])
    if named is not None and any(v != named for v in (m.group(1) for m in _V_RELEASE.finditer(text))):
        return None
    return named


def _spread(values: list[int], n: int) -> list[int]:
    """At most ``n`` of the sorted ``values``: the lowest, the highest and evenly between. A sweep of
    1, 8, 32, 64 and 128 clients keeps 1, 32 and 128; the first three would never reach the load
    where the speed falls."""
    if len(values) <= n:
        return values
    return [values[int(i * (len(values) - 1) / (n - 1) + 0.5)] for i in range(n)]


def _pair(m: re.Match[str]) -> tuple[str, str | None]:
    """The (number, scale) of whichever alternative matched: groups come in pairs."""
    groups = m.groups()
    for i in range(0, len(groups), 2):
        if groups[i] is not None:
            return groups[i], groups[i + 1]
    raise ValueError("no number in the match")
