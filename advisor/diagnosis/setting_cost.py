"""What the user's own settings cost, by the performance model.

An expert's first move on a slow deployment is to undo what was changed and see what it buys. Each
engine argument below that the user set away from vLLM's default (for their version) is put back to
the default in a what-if at the heaviest load point the report measured or asked about; when the
model predicts the default much faster there (throughput, time to first token or time per output
token), the setting is evidence for its cause at the establishing level, with both figures. A setting
the model predicts no gain from adds nothing, whatever the words say about it.
"""

from __future__ import annotations

import math

from ..errors import AdvisorError
from ..schema import BenchmarkRun, Evidence, Recommendation
from ..schema.message import msg, q, q_time
from .agreement import measured_with_predictions
from .board import Board
from .inputs import DiagnosisInputs, diagnosis_prompts, simulation_cost
from .report_facts import flash_attention_gpu, portable_attention_set

#: Engine argument -> the cause it belongs to (FORMAT.md's ids).
SETTING_CAUSE = {
    "max_num_batched_tokens": "batched_tokens_limit",
    "max_num_seqs": "max_num_seqs_limit",
    "enable_prefix_caching": "prefix_cache",
    "gpu_memory_utilization": "memory_config",
    "kv_cache_dtype": "kv_quant",
    "enforce_eager": "cuda_graph",
    "enable_chunked_prefill": "chunked_prefill_interference",
}
#: Settings put back together: vLLM without chunked prefill needs a budget of max_model_len or more, so a
#: user who turned it off raised the budget too; turning it back on brings vLLM's budget back with it (and
#: that budget alone is not costed while chunked prefill is off: it cannot go below a whole prompt).
COUPLED = {"enable_chunked_prefill": ("max_num_batched_tokens",)}
#: Settings whose cause's own change already says to undo them ("drop --enforce-eager", causes.py).
ADVISED_ELSEWHERE = ("enforce_eager",)
#: A predicted gain at the default that establishes the setting as a cause: x1.25 throughput, or the
#: first token or each output token 1.25 times sooner. Smaller gains are within what the model's
#: error on real vLLM leaves open (benchmarks/RESULTS.md, "Held to real vLLM": 3-9% medians).
ESTABLISHING_GAIN = 1.25
#: The board's establishing weight (ranker.ESTABLISHING) at that gain, growing with the log of the gain
#: (x1.8 -> 3.7, x4 -> 5.3) up to MAX_WEIGHT: a setting whose default the model predicts four times
#: faster outranks the mechanism it drives (the chunk stalls of a prefix recomputed by every request).
ESTABLISHING = 3.0
MAX_WEIGHT = 6.0
#: Request-steps (inputs.SIM_BUDGET's unit, ~1.2 us each on the 2-core EPYC) all the what-ifs of one
#: answer may simulate: about 0.35 s, so `ask` stays under a second. A load point past it (512 clients
#: of 1K+1K tokens costs 0.5 M per setting) is left uncosted; the settings' other rules still apply.
SETTING_BUDGET = 300_000

#: The what-if figures (perf.whatif.COMPARED's labels) a default may gain on, with their message ids.
FIGURES = {"TTFT p50": "figure.ttft_p50", "TPOT mean": "figure.tpot_ms", "output throughput": "figure.output_throughput_tok_s"}


def detect_setting_costs(inputs: DiagnosisInputs, board: Board) -> None:
    from ..perf.predict import LoadPoint, load_point_of

    engine = inputs.engine
    if engine is None or inputs.modelled_args is None or not inputs.input_len or not inputs.output_len:
        return
    runs = [r for r in inputs.predicted if r.offered_concurrency]
    if not runs:
        return
    run = max(runs, key=lambda r: r.offered_concurrency)
    held = load_point_of(run)
    point = LoadPoint(concurrency=run.offered_concurrency, request_rate=held.request_rate if held else None)
    cost = simulation_cost(diagnosis_prompts(point), inputs.input_len, inputs.output_len)
    spent = 0.0
    for setting, cause in SETTING_CAUSE.items():
        if getattr(inputs.engine_args, setting) is None or engine.config.source_of(setting) != "user":
            continue
        if setting == "max_num_batched_tokens" and engine.config.enable_chunked_prefill is False:
            continue  # costed with chunked prefill (COUPLED)
        default, default_value = _default_engine(inputs, setting, calibrated=run.calibrated)
        if default is None:
            continue
        if spent + cost > SETTING_BUDGET:
            return
        spent += cost
        default_run = _predict(inputs, default, point)
        gain = _best_gain(run, default_run) if default_run is not None else None
        if gain is None or gain[0] < ESTABLISHING_GAIN:
            continue
        ratio, figure, unit, before, after = gain
        raw, resets = _value(default_value), _resets(inputs, setting)
        # a default this release's table only assumes (gpu_memory_utilization 0.92 from 0.26 on) says so
        shown = msg("detail.default_assumed", value=raw) if default.config.source_of(setting) == "assumed" else raw
        board.add(
            cause,
            min(MAX_WEIGHT, ESTABLISHING + 2.0 * math.log(ratio / ESTABLISHING_GAIN)),
            Evidence(kind="model", origin="model", load=run.load_label, label=msg("ev.default_gain", figure=msg(figure), name=setting, value=shown), value=round(ratio, 2), unit="x"),
            reason=msg("reason.setting_cost", name=setting, yours=_value(getattr(engine.config, setting)), default=shown, figure=msg(figure),
                       before=q_time(round(before, 1), unit), after=q_time(round(after, 1), unit), load=run.load_label),
            recommendation=None if setting in ADVISED_ELSEWHERE else Recommendation(
                change=msg("rec.setting_default", name=setting, value=shown), flag=" ".join(filter(None, (_flag(k, getattr(default.config, k)) for k in resets))) or None,
                whatif=[f"{k}={_value(getattr(default.config, k))}" for k in resets],
            ),
        )
        if setting == "enable_prefix_caching" and inputs.shared_prefix_len:
            board.get(cause).reasons.insert(0, _prefix_recomputed(inputs))  # the mechanism opens, the figures follow


def detect_backend_cost(inputs: DiagnosisInputs, board: Board) -> None:
    """What a portable attention backend the user set costs, measured: the model's figures are those
    of vLLM's own FLASH_ATTN, so at a load point both measured and predicted (with the shipped
    efficiencies, not calibrated to this measurement) the measured shortfall beyond the model's error
    is the setting's price, evidence at the level of a setting the model costs."""
    backend = portable_attention_set(inputs)
    if backend is None:
        return
    pairs = [(m, p) for m, p in measured_with_predictions(inputs) if m.offered_concurrency]
    if not pairs:
        return
    measured, predicted = max(pairs, key=lambda mp: mp[0].offered_concurrency)
    gain = _best_gain(measured, predicted)
    if gain is None or gain[0] < ESTABLISHING_GAIN:
        return
    ratio, figure, unit, before, after = gain
    weight = min(MAX_WEIGHT, ESTABLISHING + 2.0 * math.log(ratio / ESTABLISHING_GAIN))
    evidence = Evidence(kind="model", origin="model", load=measured.load_label, label=msg("ev.backend_gap", figure=msg(figure)), value=round(ratio, 2), unit="x")
    gpu = flash_attention_gpu(inputs)
    reason = msg("reason.backend_cost", backend=backend, gpu=gpu.name, figure=msg(figure), measured=q_time(round(before, 1), unit), model=q_time(round(after, 1), unit),
                 load=measured.load_label)
    board.add("attention_backend", weight, evidence, recommendation=Recommendation(change=msg("rec.attention_backend_default"), flag="--attention-backend FLASH_ATTN"))
    reasons = board.get("attention_backend").reasons  # the setting and what it measurably costs, first; it says what the setting alone said
    reasons[:] = [reason, *[r for r in reasons if r.id != "reason.attention_portable"]]


def _prefix_recomputed(inputs: DiagnosisInputs):
    """The mechanism behind prefix caching's cost, in words: the shared tokens prefilled again by every request."""
    shared, whole = inputs.shared_prefix_len, inputs.input_len
    return msg("reason.prefix_recomputed", shared=q(shared, "tokens"), input=q(whole, "tokens"), share=q(round(100 * shared / whole), "%"))


def _default_engine(inputs: DiagnosisInputs, setting: str, *, calibrated: bool):
    """(the engine model with ``setting`` at vLLM's default, that default), or (None, None) when the
    default is the user's own value or the model cannot build it (or fit it; sized for the prompt alone
    where no output length is known: physics._memory_fraction_fit). ``calibrated``: the user's prediction
    used the efficiencies fitted to their measurements (inputs.calibration), so the default's does too."""
    from ..perf.predict import build_engine_model

    try:
        default = build_engine_model(
            inputs.deployment, inputs.modelled_args.model_copy(update=dict.fromkeys(_resets(inputs, setting))), needed_model_len=inputs.input_len + (inputs.output_len or 0),
            derived=inputs.modelled_derived,
            memory_params=inputs.memory_params,
        )
    except AdvisorError:
        return None, None
    value = getattr(default.config, setting)
    if value == getattr(inputs.engine.config, setting) or not default.memory.fits:
        return None, None
    # the same kernel efficiencies as the user's prediction
    default.step.eff = inputs.calibration.efficiency if calibrated else inputs.engine.step.eff
    return default, value


def _resets(inputs: DiagnosisInputs, setting: str) -> list[str]:
    """The settings a what-if puts back to vLLM's defaults for ``setting``: it, and those set with it (COUPLED)."""
    return [setting, *[k for k in COUPLED.get(setting, ()) if getattr(inputs.engine_args, k) is not None]]


def _predict(inputs: DiagnosisInputs, engine, point) -> BenchmarkRun | None:
    from ..perf.predict import predict_load_point

    try:
        run, _ = predict_load_point(
            engine, point, input_len=inputs.input_len, output_len=inputs.output_len, shared_prefix_len=inputs.shared_prefix_len or 0, num_prompts=diagnosis_prompts(point)
        )
    except AdvisorError:
        return None
    return run


def _best_gain(before: BenchmarkRun, after: BenchmarkRun):
    """(ratio, figure id, unit, before, after) of the figure the default improves most, or None."""
    from ..perf.whatif import COMPARED

    best = None
    for label, get, unit, higher in COMPARED:
        if label not in FIGURES:
            continue
        b, a = get(before), get(after)
        if not b or not a:
            continue
        ratio = a / b if higher else b / a
        if best is None or ratio > best[0]:
            best = (ratio, FIGURES[label], unit, b, a)
    return best


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _flag(setting: str, value) -> str | None:
    """The flag that sets the default; None for a default that is the absence of a flag (--enforce-eager)."""
    from ..probe.engine_flags import lookup_field

    name = lookup_field(setting).flag  # vLLM's canonical spelling, from the flag table
    if isinstance(value, bool):
        return name if value else None
    return f"{name} {_value(value)}"
