"""What was asked: the topics of a question, so the answer opens with the reply to it.

WHY: a diagnosis ranks causes by how well the evidence establishes them, not by what the person
asked. Asked "why did per-request speed halve at 40 clients?", the best-established finding may be
that the throughput formula misleads; the reply to the question is the prefill-chunk stall. The
topics below pick, from the same findings, the reasons that bear on the question (message ids of
the catalog) and put them first; nothing new is claimed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..schema import Diagnosis, Evidence, Finding, Msg

Topic = Literal["per_request_speed", "no_change_with_load", "throughput", "first_token", "capacity", "config"]

#: Words that name a topic, English and Chinese (matched case-insensitively, in question order).
PATTERNS: dict[Topic, re.Pattern[str]] = {
    "no_change_with_load": re.compile(
        r"差不多|没有(什么)?(改变|变化)|没变|不变|一样|相同|more (clients|load|concurrency).{0,40}(same|not change|no change|doesn.t change)|"
        r"(same|flat|plateau|no better|not improve|stop(s|ped)? (growing|scaling))|look like|doesn.t (change|scale|improve)",
        re.I,
    ),
    "per_request_speed": re.compile(
        r"生成速[度率]|每个请求.{0,8}速|单请求|减半|变慢|这么慢|per[- ]request|each request|per[- ]user|tokens? per second per|"
        r"(speed|tok/s).{0,30}(halve|drop|fall|slow)|slower|decode speed|\bitl\b|\btpot\b|inter[- ]token",
        re.I,
    ),
    "throughput": re.compile(r"吞吐|throughput|tokens? per second (overall|total)|总.{0,4}tok", re.I),
    "first_token": re.compile(r"\bttft\b|first[- ]token|首\s*token|首字|首个\s*token|time to first", re.I),
    "capacity": re.compile(
        r"多少(个)?(并发|请求|用户|人)|(能|可以)同时(服务|支持|跑)多少|how many (?:[\w-]+ ){0,3}(requests|users|clients|sessions|streams|conversations)|capacity|容量|kv cache|oom|out of memory|显存|"
        r"only \d+ (requests?|sequences|seqs|users|clients) (run|are running|running|at once|in parallel|at a time)|"
        r"(同时|一次)只(能)?(跑|运行|处理|有)|只有\s*\d+\s*个?(请求)?在(跑|运行)|最多(能)?同时",
        re.I,
    ),
    "config": re.compile(r"参数|配置|should i set|which (flag|setting|value)|--[a-z][a-z-]+|max[_-]num[_-]|gpu[_-]memory[_-]utilization", re.I),
}

#: For each topic: the reasons (catalog ids) that answer it, most direct first, and the causes
#: whose findings bear on it when none of those reasons was found.
ANSWERS: dict[Topic, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "per_request_speed": (
        ("reason.chunked_prefill", "reason.definition_fit", "reason.no_chunked_prefill", "reason.decode_bandwidth", "reason.tp_pcie", "reason.nccl_p2p"),
        ("chunked_prefill_interference", "decode_bandwidth", "tp_comm", "cpu_frontend", "detokenize", "spec_decode", "cuda_graph", "preemption"),
    ),
    "no_change_with_load": (
        ("reason.kv_fit", "reason.kv_fit_clients", "reason.kv_fit_clients_min", "reason.kv_fit_logged", "reason.kv_fit_logged_min", "reason.same_speed", "reason.queue_beyond_fit",
         "reason.max_num_seqs_below_clients", "reason.budget_throttles", "reason.max_num_seqs_over"),
        ("kv_capacity", "queueing", "max_num_seqs_limit", "preemption", "batched_tokens_limit"),
    ),
    "throughput": (
        ("reason.throughput_formula_running", "reason.throughput_formula", "reason.kv_fit", "reason.kv_fit_clients", "reason.kv_fit_clients_min", "reason.batched_chunks"),
        ("benchmark_methodology", "kv_capacity", "batched_tokens_limit", "queueing"),
    ),
    "first_token": (
        # clients beyond what the KV cache holds wait seconds for room: that, and the setting that shrank the
        # cache, before the prompt's own prefill (a 0.2 s floor opened the reply to a 16 s TTFT, 36 of 48 waiting)
        # a request the cache cannot hold at all, the token budget that admits them, a shared prefix prefilled again each time: also before it
        ("reason.kv_not_one", "reason.kv_fit", "reason.kv_fit_clients", "reason.kv_fit_clients_min", "reason.kv_fit_logged", "reason.kv_fit_logged_min", "reason.memory_fraction_fit",
         "reason.max_num_seqs_below_clients", "reason.budget_throttles", "reason.prefix_recomputed", "reason.prefill_compute", "reason.burst_rate", "reason.queue_beyond_fit", "reason.identical_prompts",
         "reason.attention", "reason.batched_chunks_ttft"),
        ("prefill_compute", "queueing", "prefix_cache", "chunked_prefill_interference", "attention_backend"),
    ),
    "capacity": (
        ("reason.kv_not_one", "reason.kv_fit", "reason.kv_fit_clients", "reason.kv_fit_clients_min", "reason.kv_fit_logged", "reason.kv_fit_logged_min", "reason.memory_fraction_fit", "reason.kv_too_small",
         "reason.profiling_pass", "reason.max_num_seqs_below_clients", "reason.max_num_seqs_over"),
        ("kv_capacity", "memory_config", "max_num_seqs_limit", "preemption"),
    ),
    "config": (
        ("reason.budget_throttles", "reason.batched_chunks", "reason.batched_chunks_ttft", "reason.memory_fraction_fit", "reason.max_num_seqs_below_clients", "reason.max_num_seqs_over", "reason.profiling_pass", "reason.cuda_graph_off", "reason.spec_decode"),
        ("batched_tokens_limit", "max_num_seqs_limit", "memory_config", "cuda_graph", "spec_decode", "kv_quant"),
    ),
}


def topics(question: str | None) -> list[Topic]:
    """The topics a question asks about, in the order it asks them (a question can ask two)."""
    if not question:
        return []
    hits = []
    for topic, pattern in PATTERNS.items():
        m = pattern.search(question)
        if m:
            hits.append((m.start(), topic))
    return [t for _, t in sorted(hits)]


#: A sentence that asks whether something is the cause: a yes/no form ("Is/Could ... ?" in one of its
#: clauses, "...吗？", 是不是/是否/会不会) with a causal word. "Can I fix it with X?", "Could you explain
#: why...", "Is there a reason X defaults to..." ask for advice or an explanation, not a verdict.
_SENTENCES = re.compile(r"(?:[^.!?。！？\n]|(?<=\d)\.(?=\d))+[.!?。！？]?")  # "v0.28.0" is no sentence end
_CLAUSES = re.compile(r"[^,，;；]+")
_YES_NO_EN = re.compile(r"^\s*(?:(?:so|and|but|or)\s+)?(?:is|are|was|were|does|do|did|could|would|might|may|can)\b", re.I)
_NOT_A_VERDICT = re.compile(r"^\s*(?:(?:so|and|but|or)\s+)?(?:(?:could|can|would|will|do|does|did)\s+(?:you|someone|anyone|i|we)\b|is\s+there\s+(?:a|any)\s+(?:reason|way))", re.I)
_YES_NO_ZH = re.compile(r"(吗|么|嘛)\s*[?？]?\s*$|是不是|是否|会不会|有没有可能")
#: "检查 tokenization 是否成为瓶颈" tells someone to check: a 是否 clause after a verb of checking or advising
#: asks nothing of us unless the sentence ends as a question (the motivating thread's chatbot reply,
#: pasted with it, was read as the user asking about the CPU front end).
_EMBEDDED_ZH = re.compile(r"(检查|确认|看看|看一下|查看|判断|排查|观察|留意|关注|建议|评估|验证|核实|分析|监控)[^，,。；;]{0,40}是否")
#: Words that ask whether something is at fault: "the cause", "the bottleneck", and also "a regression",
#: "broken", "slowing it down", "the problem" (a reviewer's probes of session 12: "Is the prefix cache
#: broken on this build?" and "Is this a regression in v0.28.0?" got no verdict line).
_CAUSAL = re.compile(
    r"\b(caus\w*|reasons?|because|due to|responsible|blame|culprit|bottleneck|behind|matters?|regress\w*|broken|bug(?:s|gy)?|hurt\w*"
    r"|slow\w*\s+(?:\w+\s+)?down|the\s+(?:problem|issue))\b|导致|引起|造成|原因|因为|的问题|的锅|瓶颈|引发|影响|坏了|缺陷|拖慢|有问题"
    # "is the KV cache too small?", "KV缓存是不是太小了？": a cause named with what would make it one
    r"|\btoo\s+(?:small|little|low|few)\b|\bnot\s+(?:big|large)\s+enough\b|\binsufficient\b|太小|太少|不够|不足",
    re.I,
)
_POINTING = re.compile(r"\b(this|that|it|these|those)\b|这个|这些|这|那个|它", re.I)
#: The causes as people name them in a question ("is the KV cache the bottleneck?", "是不是 context
#: decode 这一步的问题？"), beside the cue phrases of the diagnosis (which describe symptoms, not names).
CAUSE_WORDS: dict[str, re.Pattern[str]] = {
    cause: re.compile(pattern, re.I)
    for cause, pattern in {
        "kv_quant": r"fp8 kv|kv[-_ ]cache[-_ ]dtype|kv ?(cache )?量化|kv[- ]cache quantiz",
        "kv_capacity": r"kv[ -]?cache|kv 缓存|kv缓存",
        "chunked_prefill_interference": r"chunked[ -]prefill|分块预填充",
        "prefill_compute": r"\bprefill\b|预填充|context decode|prompt processing|long (context|prompt|input)|(上下文|输入|历史).{0,6}(太长|过长|很长|变长)|长上下文|长输入",
        "preemption": r"preempt|抢占",
        "queueing": r"\bqueue|排队",
        "cuda_graph": r"cuda ?graphs?|enforce[-_]eager",
        "tp_comm": r"tensor[ -]parallel|\btp\s?\d*\b|all-?reduce|\bnccl\b|张量并行|卡间通信",
        "spec_decode": r"speculative|spec(ulative)?[ -]decod|\bmtp\b|\beagle\b|draft model|投机",
        "prefix_cache": r"prefix[ -]cach|前缀缓存",
        "detokenize": r"detokeni[sz]",
        "cpu_frontend": r"tokeni[sz]er|api server|\bcpu\b|分词",
        "attention_backend": r"attention backend|flash[ -]?attn|flashinfer|flash[ -]attention|注意力后端",
        "memory_config": r"gpu[-_ ]memory[-_ ]utilization|显存配置",
        "max_num_seqs_limit": r"max[-_]num[-_]seqs",
        "batched_tokens_limit": r"max[-_]num[-_]batched[-_]tokens",
        "version_regression": r"\b(new|newer) version|\bupgrad|regression|新版本|升级",
        "disagg": r"disaggregat|pd 分离|kv transfer|\bnixl\b",
        "decode_bandwidth": r"memory bandwidth|显存带宽",
    }.items()
}


def _named(text: str) -> list[str]:
    """The causes ``text`` names, by name or by a cue phrase, in the order it names them (a cue in a
    question is not negated: "是因为 CUDA graph 没开吗？" asks about CUDA graphs)."""
    from ..diagnosis.text_cues import causes_named

    hits: dict[str, int] = {}
    for cause, pattern in CAUSE_WORDS.items():
        m = pattern.search(text)
        if m and m.start() < hits.get(cause, len(text) + 1):
            hits[cause] = m.start()
    for cause in causes_named(text, negation=False):
        hits.setdefault(cause, len(text))
    return sorted(hits, key=lambda c: hits[c])


_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def _asking_part(sentence: str) -> str | None:
    """The part of a sentence that asks yes or no, as written (from its asking clause to its end), or None."""
    clauses = list(_CLAUSES.finditer(sentence))
    end = sentence.rstrip()
    question_mark = end.endswith(("?", "？"))
    if _YES_NO_ZH.search(sentence) and (question_mark or end.endswith(("吗", "么", "嘛")) or not _EMBEDDED_ZH.search(sentence)):
        for i, clause in enumerate(clauses):
            if _YES_NO_ZH.search(clause.group()) or i == len(clauses) - 1:
                return sentence[clause.start() :].strip()
    if question_mark and len(sentence.split()) <= 3 and _NORMAL.search(sentence) and not _CJK_CHAR.search(sentence):  # "Normal?": elliptical (Chinese has its own)
        return sentence.strip()
    if question_mark:
        for clause in clauses:
            if _YES_NO_EN.search(clause.group()):
                return None if _NOT_A_VERDICT.search(clause.group()) else sentence[clause.start() :].strip()
    return None


def _asking_parts(question: str):
    """The yes/no-asking part of each sentence of ``question`` that has one, in order."""
    for sentence in _SENTENCES.findall(question):
        if asking := _asking_part(sentence):
            yield asking


@dataclass(frozen=True)
class Asked:
    """A yes/no question about causes: the causes it names and the words that ask."""

    causes: list[str]
    sentence: str


def asked_causes(question: str | None) -> Asked | None:
    """The causes a yes/no question asks about ("Is --enforce-eager the reason?", "是这个参数导致的吗？"):
    those its asking part names; when that part only points back ("this flag"), the one cause the rest
    of the question names. None when no sentence asks for a verdict."""
    from ..diagnosis.text_cues import causes_named

    if not question:
        return None
    for asking in _asking_parts(question):
        if not _CAUSAL.search(asking):
            continue
        named = _named(asking)
        if not named and _POINTING.search(asking):
            whole = causes_named(question)
            named = whole if len(whole) == 1 else []
        if named:
            return Asked(named, asking)
    return None


def supported(f: Finding, sentence: str) -> bool:
    """Something beyond the asking sentence points to the finding's cause: a figure measured,
    reported, modelled or configured, or the user's words elsewhere ("I start it with
    --enforce-eager"). The question's own words raise the cause's rank; they do not show it."""
    for e in f.evidence:
        if e.kind in ("measured", "reported", "model", "config"):
            return True
        # the quote with the asking sentence cut out still names the cause (by name or cue): said elsewhere
        if e.kind == "text" and isinstance(e.value, str) and f.cause in _named(e.value.strip("…").replace(sentence, " ")):
            return True
    return False


#: "What decode speed should I expect?", "How fast will it run?", "大概能跑多少 tok/s？": a question for the
#: figures themselves, answered with what the performance model expects (a reviewer's find: it opened
#: with the ranking's first cause).
_FIGURES_ASKED = re.compile(
    r"\bwhat\b[^.?!。？]{0,50}\b(?:should|can|could|would|will|do|might)\s+(?:i|we|you|it)\s+(?:expect|get|see|achieve|reach)\b"
    r"|\bhow\s+(?:fast|quick(?:ly)?|many\s+tok(?:en)?s?\s*(?:/\s*s|per\s+sec\w*))\b"
    r"|\bwhat(?:'s|\s+is|\s+are)?\s+(?:the\s+|a\s+)?(?:expected|realistic|achievable|reasonable)\s+(?:decode\s+|output\s+)?(?:speed|throughput|ttft|tpot|latency|tok/s|tokens?\s+per\s+second|performance)"
    r"|(?:应该|大概|大约|预计|估计|理论上|能|可以)\s*(?:能)?\s*(?:跑|达到|有|到)?\s*(?:多少|多快)|多少\s*(?:tok(?:en)?s?\s*/\s*(?:s|秒)|token\s*每秒)|(?:预期|期望)(?:的)?(?:速度|吞吐|性能|首)",
    re.I,
)


def asked_figures(question: str | None) -> bool:
    """The question asks what speed, TTFT or throughput to expect (not why, not whether it is normal)."""
    return bool(question) and any(_FIGURES_ASKED.search(sentence) for sentence in _SENTENCES.findall(question))


def expected_verdict(diagnosis: Diagnosis) -> Msg | None:
    """The model's figures for the deployment as the reply: at the load the question gives, else for one request alone."""
    from ..schema.message import msg, q, q_time

    e = diagnosis.expected
    if e is None:
        return None
    single = q(e.single_tok_s, "tok/s")
    release = (msg("verdict.expect_release", current=q(e.single_tok_s_measured_release, "tok/s"), release=e.measured_release)
               if e.single_tok_s_measured_release and e.measured_release else "")
    if e.load and e.request_tok_s and e.ttft_ms and e.output_tok_s and e.running and e.tpot_ms and e.single_ttft_ms:
        return msg(
            "verdict.expect_load", load=e.load, decode=q(e.request_tok_s, "tok/s"), tpot=q(e.tpot_ms, "ms"), ttft=q_time(e.ttft_ms, "ms"),
            throughput=q(e.output_tok_s, "tok/s"), running=q(e.running, "requests"), single=single, release_part=release,
            single_ttft=q_time(e.single_ttft_ms, "ms"),
        )
    ttft = msg("verdict.expect_single_ttft", ttft=q_time(e.single_ttft_ms, "ms"), input=q(e.input_len, "tokens")) if e.single_ttft_ms and e.input_len else ""
    return msg("verdict.expect_single", single=single, release_part=release, ttft_part=ttft)


def parallel_choice_verdict(question: str | None, diagnosis: Diagnosis) -> Msg | None:
    """For "TP or replicas?": the what-if of one replica per GPU, as the model predicts it at this load."""
    from ..diagnosis.report_facts import PARALLEL_CHOICE
    from ..schema.message import msg

    if not question or not PARALLEL_CHOICE.search(question):
        return None
    modelled = [r for f in diagnosis.findings for r in f.recommendations if r.predicted_effect is not None and r.predicted_effect.id == "effect.model"]
    for r in modelled:
        if any(w.startswith("dp=") for w in r.whatif) and "tp=1" in r.whatif:
            kind = "keep_tp" if r.predicted_worse else "replicas_better" if r.predicted_better else "replicas_trade"
            return msg(f"verdict.{kind}", effect=r.predicted_effect, flag=r.flag or "")
    # one GPU now, a second one asked about: both ways of using it, as modelled (engine._parallel_options)
    tp = next((r for r in modelled if r.whatif == ["tp=2"]), None)
    dp = next((r for r in modelled if r.whatif == ["dp=2"]), None)
    if tp is not None and dp is None and any(r.change.id == "rec.tp_two_of_two" for f in diagnosis.findings for r in f.recommendations):
        # two GPUs modelled as two replicas: TP2 set beside them
        which = "verdict.replicas_keep" if tp.predicted_worse else "verdict.replicas_tp2_better" if tp.predicted_better else "verdict.replicas_tp2_trade"
        return msg("verdict.replicas_or_tp2", effect=tp.predicted_effect, which=msg(which))
    if tp is None or dp is None:
        return None
    a, b = tp.predicted_throughput, dp.predicted_throughput
    which = msg("verdict.two_gpus_tp") if a and b and a > 1.05 * b else msg("verdict.two_gpus_dp") if a and b and b > 1.05 * a else msg("verdict.two_gpus_even")
    return msg("verdict.two_gpus", tp=tp.predicted_effect, dp=dp.predicted_effect, which=which)


#: "How many users can I serve?", "能同时服务多少人？": a question for the count itself.
_HOW_MANY = re.compile(
    r"\bhow many\b(?:\s+[\w-]+){0,4}?\s+(?:requests|users|clients|sessions|streams|conversations|people|seqs|sequences)\b"
    r"|多少(?:个)?(?:并发|请求|用户|人|路)|(?:能|可以)?同时(?:服务|支持|跑|处理)多少|最多(?:能)?(?:同时)?(?:服务|支持|跑|处理)",
    re.I,
)


def capacity_verdict(question: str | None, diagnosis: Diagnosis) -> Msg | None:
    """For "how many users can I serve?": the requests the KV cache holds at once and their speed then (modelled)."""
    from ..schema.message import msg, q

    e = diagnosis.expected
    if e is None or not question or not _HOW_MANY.search(question) or not e.kv_cache_tokens:
        return None
    if e.fits is None:  # no request length: the count at three lengths
        if len(e.fits_by_length) != 3:
            return None
        (la, a), (lb, b), (lc, c) = e.fits_by_length
        return msg("verdict.capacity_lengths", kv=q(e.kv_cache_tokens, "tokens"), per_token=q(e.kv_kib_per_token, "KiB"),
                   a=q(a, "requests"), la=q(la, "tokens"), b=q(b, "requests"), lb=q(lb, "tokens"), c=q(c, "requests"), lc=q(lc, "tokens"))
    if any(r.id == "reason.kv_fit" for f in leading(diagnosis) for r in f.reasons):
        return None  # the leading finding says it, with the clients that wait
    speed = msg("verdict.capacity_speed", batch=e.full_batch, speed=q(e.full_batch_tok_s, "tok/s"), total=q(round(e.full_batch * e.full_batch_tok_s), "tok/s")) if e.full_batch and e.full_batch_tok_s else ""
    return msg("verdict.capacity", fits=q(e.fits, "requests"), tokens=q(e.request_tokens, "tokens"), kv=q(e.kv_cache_tokens, "tokens"), per_token=q(e.kv_kib_per_token, "KiB"), speed=speed)


def question_verdict(question: str | None, diagnosis: Diagnosis) -> tuple[str | None, Msg | None]:
    """(the cause asked about, the verdict) for a yes/no question about a cause; for "is this
    normal?" or "did I set something up wrong?", (None, the verdict on the leading finding's kind);
    else (None, None): what both the short and the full answer open with."""
    asked = asked_causes(question)
    if (w := diagnosis.weights_exceed) is not None:  # what runs is not what the words describe: that first
        from ..schema.message import msg, q

        stated = msg("verdict.weights_exceed_stated", stated=q(w.stated_tok_s, "tok/s")) if w.stated_tok_s and w.stated_tok_s > w.ceiling_tok_s else ""
        return None, msg("verdict.weights_exceed", weights=q(w.weights_gib, "GiB"), gpu=q(w.gpu_gib, "GiB"), ceiling=q(w.ceiling_tok_s, "tok/s"), stated=stated)
    if asked is not None and asked.causes[0] == "kv_capacity" and not diagnosis.disagreement and (room := capacity_verdict(question, diagnosis)) is not None:
        return None, room  # "KV缓存是不是太小了？能支持多少并发？": how many it holds answers both (a Chinese user's find)
    said = verdict(asked, diagnosis)
    if said is None and (said := parallel_choice_verdict(question, diagnosis)) is not None:
        return None, said
    if said is None and not diagnosis.disagreement and (said := capacity_verdict(question, diagnosis)) is not None:
        return None, said
    stated = diagnosis.stated_speed is not None or diagnosis.stated_throughput is not None or diagnosis.stated_load_speed is not None
    if said is None and not stated and asked_figures(question):
        said = expected_verdict(diagnosis)
        if said is not None:
            return None, said
    if said is None and "first_token" in topics(question) and (said := ttft_verdict(diagnosis)) is not None:
        # "why is TTFT so high?" with a benchmark file: its figure beside the model's first, then whether the
        # rest of what was measured is what the model predicts
        return None, _joined([said, agreement_verdict(diagnosis)])
    if said is None and (kind := asked_expectation(question)) is not None:
        said = expectation_verdict(kind, diagnosis)
        return None, said if said is not None else agreement_verdict(diagnosis)
    if said is None and stated and question and not computed_lead(diagnosis):
        # "60 tok/s, why so slow?", "怎么优化": the speed stated beside the model's answers first, as for
        # "is it normal?" (a new user's find: only "normal?" got the figure, "why?" a generic paragraph)
        said = expectation_verdict("why", diagnosis)
        if said is not None:
            return None, said
    if said is None:
        return None, agreement_verdict(diagnosis)
    return asked.causes[0], said


def ttft_verdict(diagnosis: Diagnosis) -> Msg | None:
    """The time to first token a benchmark file measured (its slowest load point) beside the model's
    prediction at that load: about it, under it or above it (agreement.AGREE_WITHIN) (a new user's find:
    "why is TTFT so high?" on a file whose median was 350 ms got a cause and never the figure). None
    where no file gives one or its load was not modelled: the reasons then quote it beside what explains it."""
    from ..diagnosis.agreement import AGREE_WITHIN
    from ..schema.message import msg, q, q_time

    t = diagnosis.measured_ttft
    if t is None or not t.predicted_median_ms:  # the figure alone: the reasons quote it with what explains it
        return None
    ratio = t.median_ms / t.predicted_median_ms
    side = "over" if ratio > 1.0 + AGREE_WITHIN else "under" if ratio < 1.0 - AGREE_WITHIN else "near"
    args = dict(median=q_time(t.median_ms, "ms"), predicted=q_time(t.predicted_median_ms, "ms"), ratio=q(round(ratio, 1), "x"))
    if t.stated and side == "over" and computed_lead(diagnosis):
        return None  # the leading finding explains the wait with this deployment's figures (36 of 48 clients wait for KV room)
    if t.stated:  # the user's figure: at the load they give, or beside one prompt alone's where that load was not modelled
        if t.alone:
            at = msg("verdict.ttft_stated_at", load=t.load) if t.load else ""
            tell = msg("verdict.ttft_stated_tell_output" if t.load else "verdict.ttft_stated_tell_clients")
            return msg(f"verdict.ttft_stated_{side}_alone", **args, at=at, tell=tell, input=q(t.input_len, "tokens"))
        return msg(f"verdict.ttft_stated_{side}_model", **args, load=t.load)
    return msg(f"verdict.ttft_{side}_model", **args, load=t.load, p99=msg("verdict.ttft_p99", p99=q_time(t.p99_ms, "ms")) if t.p99_ms else "")


def agreement_verdict(diagnosis: Diagnosis) -> Msg | None:
    """"The measurements are what the model predicts for these settings" when they agree
    (diagnosis/agreement.py) and no finding is likely: a server whose settings hold nothing back
    gets that, with the figures side by side, before the weak candidates; "far slower than it
    predicts" when a measured point is (the figures, then what the model leaves out)."""
    from ..schema.message import msg, q

    if computed_lead(diagnosis):
        return None
    d = diagnosis.disagreement
    if d is not None:
        tpot = msg("verdict.far_tpot", measured=q(d.measured_tpot_ms, "ms"), predicted=q(d.predicted_tpot_ms, "ms")) if d.measured_tpot_ms and d.predicted_tpot_ms else ""
        rate = msg("verdict.far_rate", measured=q(d.measured_tok_s, "tok/s"), predicted=q(d.predicted_tok_s, "tok/s")) if d.measured_tok_s and d.predicted_tok_s else ""
        return msg("verdict.far_slower", load=d.load, rate=rate, tpot=tpot)
    a = diagnosis.agreement
    if a is None or (diagnosis.findings and diagnosis.findings[0].confidence >= 0.5):
        return None

    args = dict(load=a.load, measured=q(a.measured_tok_s, "tok/s"), predicted=q(a.predicted_tok_s, "tok/s"))
    top = diagnosis.findings[0] if diagnosis.findings else None
    if top is not None and CAUSE_KIND.get(top.cause) == "setting" and any(e.kind == "config" for e in top.evidence):
        # the model reproduces the figures because it models the setting that slows them (--enforce-eager)
        return msg("verdict.matches_model_setting", **args, cause=msg(f"title.{top.cause}"))
    if a.measured_tpot_ms and a.predicted_tpot_ms:
        return msg("verdict.matches_model_tpot", **args, tpot_measured=q(a.measured_tpot_ms, "ms"), tpot_predicted=q(a.predicted_tpot_ms, "ms"))
    return msg("verdict.matches_model", **args)


#: "Is this normal / expected?", "这正常吗？", "符合预期吗" — and "Is my configuration wrong?", "是我哪里没配好吗？",
#: "配置有问题吗": a reviewer's find (session 14): 8 of 25 English and 5 of 25 Chinese reports asked one of these
#: and got no yes or no.
_NORMAL = re.compile(
    r"\b(?:normal|expected|to be expected|as expected|typical)\b|正常|符合预期|预期之内|应该的"
    # "Is vLLM slower than it should be?", "是不是 vLLM 有问题？": whether the speed is what the hardware gives (reviewers' finds)
    r"|\bslower than (?:it )?(?:should|ought)|\bsomething (?:is )?wrong with (?:vllm|the (?:server|gpu|engine))|\b(?:vllm|the gpu|my gpu) (?:is )?(?:broken|faulty|defective)"
    r"|(?:vllm|引擎|框架|显卡|GPU)\s*(?:本身)?\s*(?:有|出了?)\s*(?:问题|bug)|(?:显卡|GPU)\s*(?:坏了|有毛病)",
    re.I,
)
_SETUP = re.compile(
    r"\b(?:(?:mis)?config\w*|set\s*up|setup|settings?|parameters?|flags?)\b[^.?!]{0,30}\b(?:wrong|incorrect|right|correct|off|missing|bad)\b"
    r"|\b(?:wrong|incorrect|bad|missing)\b[^.?!]{0,20}\b(?:config\w*|set\s*up|setup|settings?|parameters?|flags?)\b"
    r"|\bmisconfigur\w*|\bdid\s+i\s+(?:miss|forget|set)\b"
    r"|(?:配置|设置|参数|配)[^。？?]{0,8}(?:不对|错|有问题|不当|不合理|没配好|不正确)|没配好|配错|哪里没配|漏了什么参数",
    re.I,
)
#: What kind of finding each cause is, for those questions: a setting the user can change, what this
#: hardware and load do, a fault of the release, or how it was measured.
CAUSE_KIND: dict[str, str] = {
    **dict.fromkeys(("max_num_seqs_limit", "batched_tokens_limit", "memory_config", "cuda_graph", "attention_backend", "kv_quant"), "setting"),
    **dict.fromkeys(("kv_capacity", "queueing", "chunked_prefill_interference", "prefill_compute", "decode_bandwidth", "tp_comm"), "inherent"),
    "version_regression": "release",
    "benchmark_methodology": "measurement",
}  # the rest (prefix cache, speculative decoding, the CPU front end...) depend on the workload or the build: no verdict


def asked_expectation(question: str | None) -> str | None:
    """'normal' when a yes/no sentence asks whether what was seen is normal or expected, 'setup' when
    it asks whether the user's own setup is wrong, else None."""
    if not question:
        return None
    for asking in _asking_parts(question):
        if _SETUP.search(asking):
            return "setup"
        if _NORMAL.search(asking):
            return "normal"
    return None


#: A stated per-request speed under this share of the model's single-request speed is not what the
#: hardware does; between it and SPEED_NEAR it is neither said to be nor not to be (the model's decode
#: steps are within ~10% on real vLLM, a user's figure may count the first token or the queue).
SPEED_FAR_BELOW = 0.5
SPEED_NEAR = 1.3
#: A stated single-request speed this far above the hardware's peak (weights and KV over the full bandwidth)
#: is not one request's speed here (a reviewer's find: 400 tok/s per request of a 70B on four H100s was taken as is).
ABOVE_CEILING = 1.1


#: Verdicts that say what was seen is what this hardware does (or better): a cause resting on words alone
#: is then not stated beside them as the reason (compose_short)
_HEALTHY_SUFFIXES = ("_at_model", "_near_ceiling", "_at_load", "near_ceiling_load", "ttft_under_model", "ttft_near_model", "throughput_at", "throughput_at_why")


def says_healthy(verdict: Msg | None) -> bool:
    """The verdict (or each part of a pair) says the figures are about what this hardware gives, or more."""
    if verdict is None:
        return False
    if verdict.id == "verdict.pair":
        return all(says_healthy(part) for part in (verdict.args.get("first"), verdict.args.get("second")) if isinstance(part, Msg))
    return verdict.id.endswith(_HEALTHY_SUFFIXES)


def throughput_verdict(kind: str, diagnosis: Diagnosis) -> Msg | None:
    """The whole server's output rate the words state at one load beside the model's there ("并发 32 时吞吐
    900 token/s"): far below (half, as for a benchmark file: agreement.FAR_SLOWER), below by more than the
    model's usual error (agreement.AGREE_WITHIN), about, near the hardware's peak, or beyond it; None where
    none was stated. A throughput, unlike one request's speed, carries no doubt over the first token's wait."""
    from ..diagnosis.agreement import AGREE_WITHIN, FAR_SLOWER
    from ..schema.message import msg, q

    t = diagnosis.stated_throughput
    if t is None:
        return None
    share = t.stated_tok_s / t.modelled_tok_s
    args = dict(stated=q(t.stated_tok_s, "tok/s"), modelled=q(t.modelled_tok_s, "tok/s"), load=t.load, pct=f"{round(100 * share)}%",
                what=msg("verdict.throughput_total" if t.counts_input else "verdict.throughput_output"))
    if share < 1.0 / FAR_SLOWER:
        return msg("verdict.throughput_below", **args)
    if share < 1.0 - AGREE_WITHIN:  # more than the model's usual error, less than a fault that halves it
        return msg("verdict.throughput_under", **args)
    if share <= SPEED_NEAR:
        return msg("verdict.throughput_at" if kind == "normal" else "verdict.throughput_at_why", **args)
    if t.ceiling_tok_s and t.stated_tok_s > ABOVE_CEILING * t.ceiling_tok_s:
        return msg("verdict.throughput_above_ceiling", **args, ceiling=q(t.ceiling_tok_s, "tok/s"))
    if t.ceiling_tok_s:
        return msg("verdict.throughput_near_ceiling", **args, ceiling=q(t.ceiling_tok_s, "tok/s"))
    return None


def expectation_verdict(kind: str, diagnosis: Diagnosis) -> Msg | None:
    """The reply to "is this normal?" (``kind`` "normal") or "is my setup wrong?" ("setup"): a stated speed
    (one request's, the whole server's at a load, or both) beside the model's first, else the leading
    finding's kind (``_finding_verdict``). Where both speeds were stated each is compared without a yes
    or no of its own ("why"): one may be what the hardware does and the other not."""
    stated = [x for x in (diagnosis.stated_speed, diagnosis.stated_load_speed, diagnosis.stated_throughput) if x is not None]
    several = "why" if len(stated) > 1 else kind
    parts = [_speed_verdict(several, diagnosis.stated_speed), _speed_verdict(several, diagnosis.stated_load_speed), throughput_verdict(several, diagnosis)]
    return _joined(parts) or _finding_verdict(kind, diagnosis)


def _joined(parts: list[Msg | None]) -> Msg | None:
    """The verdicts given, one after the other ("verdict.pair", folded from the left); None where none was."""
    from ..schema.message import msg

    given = [p for p in parts if p is not None]
    said = given[0] if given else None
    for part in given[1:]:
        said = msg("verdict.pair", first=said, second=part)
    return said


def _speed_verdict(kind: str, speed) -> Msg | None:
    """A per-request speed the words state (``speed``: a StatedSpeed, one request alone's or each
    request's at a load) beside the model's (``expectation_verdict``'s kinds); None where none was
    stated or it falls between the bounds that say either."""
    from ..diagnosis.agreement import AGREE_WITHIN
    from ..schema.message import msg, q

    plain = "normal" if kind == "why" else kind  # "why so slow?" and "is it normal?" get the same "not what this hardware does"
    if speed is not None and speed.load:  # at the stated load: the model's per-request speed there
        args = dict(stated=q(speed.stated_tok_s, "tok/s"), modelled=q(speed.modelled_tok_s, "tok/s"), load=speed.load,
                    with_wait=q(speed.modelled_output_tok_s, "tok/s"), pct=f"{round(100 * speed.stated_tok_s / speed.modelled_tok_s)}%")
        lower = min(speed.modelled_tok_s, speed.modelled_output_tok_s or speed.modelled_tok_s)  # with the first token's wait or without
        if speed.stated_tok_s < SPEED_FAR_BELOW * lower:
            return msg(f"verdict.{plain}_below_load", **args)
        if speed.stated_tok_s < (1.0 - AGREE_WITHIN) * lower:  # below by more than the model's usual error (as a throughput)
            return msg("verdict.under_load", **args)
        if speed.stated_tok_s <= SPEED_NEAR * speed.modelled_tok_s:
            return msg(f"verdict.{kind}_at_load", **args)
        if speed.ceiling_tok_s and speed.stated_tok_s > ABOVE_CEILING * speed.ceiling_tok_s:  # not each request's at that load
            return msg("verdict.above_ceiling_load", **args, ceiling=q(speed.ceiling_tok_s, "tok/s"))
        if speed.ceiling_tok_s:  # above the model's typical efficiency, under the peak: a fast server
            return msg("verdict.near_ceiling_load", **args, ceiling=q(speed.ceiling_tok_s, "tok/s"))
    elif speed is not None:  # the user's own figure beside what the GPU allows one request: physics first
        share = speed.stated_tok_s / speed.modelled_tok_s
        args = dict(stated=q(speed.stated_tok_s, "tok/s"), modelled=q(speed.modelled_tok_s, "tok/s"), pct=f"{round(100 * share)}%")
        if share < SPEED_FAR_BELOW:
            return msg(f"verdict.{plain}_below_model", **args)
        recent = speed.stated_tok_s / speed.release_tok_s if speed.release_tok_s else None
        if recent is not None and recent < SPEED_FAR_BELOW:  # healthy on an older release, not on the one measured
            return msg(f"verdict.{plain}_below_release", **args, current=q(speed.release_tok_s, "tok/s"), release=speed.release, pct_recent=f"{round(100 * recent)}%")
        if share <= SPEED_NEAR:
            return msg(f"verdict.{kind}_at_model", **args)
        ceiling = speed.ceiling_tok_s
        if ceiling and speed.stated_tok_s > ABOVE_CEILING * ceiling:  # not one request's speed on this GPU
            return msg(f"verdict.{plain}_above_ceiling", **args, ceiling=q(ceiling, "tok/s"))
        if ceiling:  # above the model's typical efficiency, under the hardware's peak: a fast, healthy server
            return msg(f"verdict.{kind}_near_ceiling", **args, ceiling=q(ceiling, "tok/s"))
    return None


def _finding_verdict(kind: str, diagnosis: Diagnosis) -> Msg | None:
    """The leading finding's kind (a setting, what the hardware does, the release, the measurement),
    hedged under one half of confidence (the fitted ranking's) unless figures computed for this
    deployment carry it; "why" (a stated speed with any other question: "why so slow?") gets none."""
    from ..schema.message import msg

    if not diagnosis.findings or kind == "why":  # "why?" is answered by the figures, not by a yes or no on a cause
        return None

    top = diagnosis.findings[0]
    if top.cause not in CAUSE_KIND:
        return None
    sure = top.confidence >= 0.5 or computed(top)
    return msg(f"verdict.{kind}_{CAUSE_KIND[top.cause]}" + ("" if sure else "_weak"),
               cause=msg(f"cause.{top.cause}"), pct=f"{round(100 * top.confidence)}%")


#: Reasons about the benchmark's own prompts that answer "is X broken?" whatever the ranking (engine._workload_reasons).
WORKLOAD_VERDICTS = {"reason.random_prompts": "verdict.prefix_random", "reason.random_prompts_hits": "verdict.prefix_random_hits"}


def verdict(asked: Asked | None, diagnosis: Diagnosis) -> Msg | None:
    """Yes, in part, not shown yet, or probably not, for the first cause the question asks about,
    from the ranked findings: the asker's question answered before the reasons."""
    if asked is None or not diagnosis.findings:
        return None
    from ..schema.message import msg

    cause = asked.causes[0]
    top = diagnosis.findings[0]
    found = next((f for f in diagnosis.findings if f.cause == cause), None)
    name, top_name = msg(f"cause.{cause}"), msg(f"cause.{top.cause}")
    pct = f"{round(100 * found.confidence)}%" if found is not None else ""
    workload = {r.id for r in found.reasons} & set(WORKLOAD_VERDICTS) if found is not None else set()
    if workload:  # the benchmark's own prompts answer it (random prompts share no prefix): a no, not a ranking
        return msg(WORKLOAD_VERDICTS[workload.pop()])
    if found is not None and not supported(found, asked.sentence) and found.confidence >= 0.2:
        if top.cause != cause and computed(top):  # the deployment's own figures point elsewhere
            return msg("verdict.unshown_other", cause=name, top=top_name, decide=msg(f"decide.{cause}"))
        return msg("verdict.unshown", cause=name, decide=msg(f"decide.{cause}"))
    if found is not None and found in leading(diagnosis):
        if computed(found):
            return msg("verdict.likely_computed", cause=name)
        # first, but under one half: the likeliest of weak candidates, not a yes
        return msg("verdict.likely" if found.confidence >= 0.5 else "verdict.possibly", cause=name, pct=pct)
    if found is not None and (found.confidence >= 0.5 or computed(found)):
        return msg("verdict.partly", cause=name, pct=pct, top=top_name)
    if found is not None:
        return msg("verdict.unlikely", cause=name, pct=pct, top=top_name)
    return msg("verdict.unlikely_absent", cause=name, top=top_name)


@dataclass
class Reply:
    """The direct reply: a verdict when the question asks whether something is the cause, the
    reasons that answer the question, the findings they come from and their key figures."""

    topics: list[Topic]
    reasons: list[Msg]
    findings: list[Finding]
    figures: list[Evidence]
    verdict: Msg | None = None
    #: the cause a yes/no question asked about (when a verdict was given)
    asked: str | None = None


KEY_FIGURES = 3
#: A finding's confidence is calibrated (RESULTS.md's reliability table): at one half or more it is
#: more likely than not one of the causes, and only then is it said to be contributing.
LIKELY = 0.5


def leading(diagnosis: Diagnosis) -> list[Finding]:
    """The first finding and those the evidence cannot separate from it (ranker.UNDECIDED_MARGIN)."""
    from ..diagnosis.ranker import UNDECIDED_MARGIN

    if not diagnosis.findings:
        return []
    top = diagnosis.findings[0].confidence
    return [f for i, f in enumerate(diagnosis.findings) if i == 0 or top - f.confidence < UNDECIDED_MARGIN]


def computed_lead(diagnosis: Diagnosis) -> bool:
    """The first finding is likely (LIKELY) and rests on figures computed for this deployment: it
    explains what was seen, so it opens (before a stated speed's comparison, a topic's weaker
    finding, or the model-agreement verdict)."""
    return bool(diagnosis.findings) and diagnosis.findings[0].confidence >= LIKELY and computed(diagnosis.findings[0])


def computed(f: Finding) -> bool:
    """The finding rests on figures the performance model or a measurement computed for this
    deployment (not on words alone): its mechanism answers "why" with the user's own numbers."""
    return any(e.kind in ("model", "measured") and e.value is not None for e in f.evidence)


def _same_figure(a: Evidence, b: Evidence) -> bool:
    """One figure given twice (the setting in the serve command and the server log's "True")."""
    def norm(v):
        return v.strip().lower() if isinstance(v, str) else v

    return (norm(a.value), a.unit) == (norm(b.value), b.unit)


def direct_reply(question: str | None, diagnosis: Diagnosis) -> Reply:
    """Pick from the findings what answers ``question``; the top finding when the question names
    no topic (or none of its reasons was found).

    WHY only from the leading findings, or one computed for this deployment: a topic is a
    question's words, not evidence. On the library's fitting part, picking any finding whose cause
    suits the topic opened 159 of 454 answers with a finding the ranker put lower (right in 28 of
    them; the first finding, out of fold, in 117). A finding on figures the model or a measurement
    computed for this deployment (the prefill-chunk stall of the motivating case, a server log's
    waiting requests) still answers its question first."""
    asked = topics(question)
    reasons: list[Msg] = []
    used: list[Finding] = []
    lead = leading(diagnosis)
    eligible = [f for f in diagnosis.findings if f in lead or computed(f)]
    per_topic = 2 if len(asked) == 1 else 1  # two questions in one: the most direct reason of each
    # with none of a topic's own reasons found, an unlikely finding of the topic does not open before a
    # likely first one computed for this deployment (a pasted stats log: 256 running at the default cap,
    # 0.78, opened "likeliest cause (4%): queueing" for "why is throughput low?")
    standing = [f for f in eligible if f.confidence >= LIKELY] if computed_lead(diagnosis) else eligible
    for topic in asked:
        wanted, causes = ANSWERS[topic]
        found = [(wanted.index(r.id), f, r) for f in eligible for r in f.reasons if r.id in wanted]
        found.sort(key=lambda t: t[0])
        picked = found[:per_topic]
        if topic == "per_request_speed":  # which definition the user's figure fits: always said
            picked += [x for x in found if x[2].id == "reason.definition_fit" and x not in picked][:1]
        if not picked:
            f = next((f for f in standing if f.cause in causes and f.reasons), None)
            picked = [(0, f, f.reasons[0])] if f is not None else []
        if not picked:  # a finding on the topic that rests on its figures alone
            f = next((f for f in standing if f.cause in causes), None)
            if f is not None and f not in used:
                used.append(f)
        for _, f, r in picked:
            if r not in reasons:
                reasons.append(r)
            if f not in used:
                used.append(f)
    if not used and diagnosis.findings:
        top = diagnosis.findings[0]
        reasons, used = list(top.reasons[:2]), [top]
    elif diagnosis.findings and diagnosis.findings[0] not in used and diagnosis.findings[0].reasons and computed(diagnosis.findings[0]):
        # the first finding, computed for this deployment, joins the reply when the question's topic
        # picked a lower one (a real H200 run at 32 clients opened with queueing at 5% while the
        # prefill-chunk stall it ranked first, 83%, stood only in "also contributing"): after the
        # topic's reasons, or first where the topic's findings have no reason to give (titles only)
        top = diagnosis.findings[0]
        if any(r in f.reasons for f in used for r in reasons):
            reasons.append(top.reasons[0])
            used.append(top)
        else:
            reasons.insert(0, top.reasons[0])
            used.insert(0, top)
    figures: list[Evidence] = []
    for f in used:
        for e in f.evidence:
            if e.value is None or e.kind in ("text", "source") or any(_same_figure(e, x) for x in figures):
                continue
            figures.append(e)
    cause, said = question_verdict(question, diagnosis)
    return Reply(topics=asked, reasons=reasons, findings=used, figures=figures[:KEY_FIGURES], verdict=said, asked=cause)
