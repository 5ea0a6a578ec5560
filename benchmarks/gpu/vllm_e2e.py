#!/usr/bin/env python3
"""End-to-end serving runs of a REAL vLLM OpenAI server (dummy weights) on one lent GPU.

Why this exists: the performance model's step-time parts were calibrated with torch kernels, and its
scheduler is simulated; this harness produces the measurements that hold the whole model to a real
vLLM server (``vllm-advisor validate benchmarks/gpu/runs/...``). It follows the recipe of
``../shared/gpu-vllm`` (payload carried in chunks, model directory with exact HF shapes and a
byte-level BPE tokenizer, ``--load-format dummy``) but drives the load itself instead of through
``vllm bench serve``: one asyncio/aiohttp client sends token-id prompts (exact lengths, no
tokenise/detokenise round trip, no ~25 s client start per point) and times every request the way
``vllm bench serve`` does (TTFT at the first streamed chunk, every later gap an ITL sample, TPOT =
(E2E - TTFT) / (output tokens - 1)).

Usage (on the device, vLLM importable through PYTHONPATH):
    python3 vllm_e2e.py --plan plans/llama8b-b8192.json --run-dir /tmp/e2e --budget-s 400

A plan (JSON) names a model shape, the server's flags and a list of load points; each point has
input_len, output_len, num_prompts and either concurrency (closed loop, requests sent as fast as the
cap allows) or rate (Poisson arrivals, "inf" = all at t=0), and optional prefix_len (tokens shared
by all prompts of the point). Every point draws a fresh seed, so no earlier point's prefix cache
helps it. ``/metrics`` is sampled every --scrape-s seconds during each point and snapshotted in full
before and after it. Written under RUN_DIR/PLAN_NAME/ (then tarred by the device command):
    results.json   plan, server command, log facts, environment, per point: spec, seed, per-request
                   arrays (sent, ttft, e2e, itl, tokens), client summary, metrics deltas
    timeline.csv   the /metrics samples (gauges and counters), one row per scrape
    snapshots.prom full /metrics text before and after every point
    server.log     the server's own log (KV cache size, step stats every 10 s)
A point that would not finish inside the budget is skipped and recorded as skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

T0 = time.time()

# Exact config.json shapes of the catalog models (advisor/perf/catalog/models.yaml), no weights.
SHAPES = {
    "llama31-8b": dict(
        catalog="Llama-3.1-8B-Instruct",
        config={
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256, "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0, "max_position_embeddings": 131072, "tie_word_embeddings": False,
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "bos_token_id": 128000,
            "eos_token_id": 128001, "torch_dtype": "bfloat16", "use_cache": True,
            "initializer_range": 0.02, "transformers_version": "4.43.1",
        },
    ),
    "qwen25-14b": dict(
        catalog="Qwen2.5-14B-Instruct",
        config={
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
            "intermediate_size": 13824, "num_hidden_layers": 48, "num_attention_heads": 40,
            "num_key_value_heads": 8, "vocab_size": 152064, "rms_norm_eps": 1e-5,
            "rope_theta": 1000000.0, "max_position_embeddings": 131072, "max_window_layers": 48,
            "sliding_window": 131072, "use_sliding_window": False, "tie_word_embeddings": False,
            "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151643,
            "torch_dtype": "bfloat16", "use_cache": True, "attention_dropout": 0.0,
            "initializer_range": 0.02, "transformers_version": "4.43.1",
        },
    ),
    "qwen3-30b-a3b": dict(
        catalog="Qwen3-30B-A3B",
        config={
            "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
            "intermediate_size": 6144, "num_hidden_layers": 48, "num_attention_heads": 32,
            "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "max_position_embeddings": 131072, "num_experts": 128,
            "num_experts_per_tok": 8, "moe_intermediate_size": 768, "decoder_sparse_step": 1,
            "mlp_only_layers": [], "norm_topk_prob": True, "output_router_logits": False,
            "router_aux_loss_coef": 0.001, "tie_word_embeddings": False, "hidden_act": "silu",
            "attention_bias": False, "attention_dropout": 0.0, "max_window_layers": 48,
            "sliding_window": None, "use_sliding_window": False, "bos_token_id": 151643,
            "eos_token_id": 151645, "torch_dtype": "bfloat16", "use_cache": True,
            "initializer_range": 0.02, "transformers_version": "4.51.0",
        },
    ),
}
# Qwen2.5-7B: the 14B's config with its own sizes (28 layers, 4 KV heads, vocab and the rest alike).
SHAPES["qwen25-7b"] = dict(
    catalog="Qwen2.5-7B-Instruct",
    config={**SHAPES["qwen25-14b"]["config"], "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
            "num_attention_heads": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
            "max_window_layers": 28, "eos_token_id": 151645},
)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
            "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
            "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
            "<|repo_name|>", "<|file_sep|>"]


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


# ------------------------------------------------------------------ model directory
def _bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def regular_tokens(vocab_size: int) -> int:
    """Regular (non-special) tokens of the tokenizer: Qwen's 151,643 where the vocab allows, else
    the vocab minus 256 (Llama-3 keeps its last 256 ids for specials)."""
    return min(151643, vocab_size - 256)


def build_tokenizer(path: str, n_words: int) -> None:
    """Byte-level BPE laid out like Qwen2.5's: 256 byte tokens, then " "+lowercase words of 1-4
    letters by left-to-right merges, up to ``n_words``; then the 22 specials. The server needs it only
    to detokenise (prompts are sent as token ids)."""
    import itertools

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    b2u = _bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    g = b2u[ord(" ")]
    letters = "abcdefghijklmnopqrstuvwxyz"

    def add(a, b):
        vocab[a + b] = len(vocab)
        merges.append((a, b))

    for w in letters:
        add(g, w)
    for k in (2, 3, 4):
        for w in itertools.product(letters, repeat=k):
            if len(vocab) >= n_words:
                break
            add(g + "".join(w[:-1]), w[-1])
    regex = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
             r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None,
                               continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
                               byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "Qwen2Tokenizer", "model_max_length": 131072, "bos_token": None,
                   "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": None,
                   "add_bos_token": False, "add_prefix_space": False, "errors": "replace",
                   "clean_up_tokenization_spaces": False, "split_special_tokens": False}, f, indent=1)


def make_model(path: str, shape: str) -> None:
    cfg = SHAPES[shape]["config"]
    cfg_path = os.path.join(path, "config.json")
    if os.path.exists(cfg_path) and os.path.exists(os.path.join(path, "tokenizer.json")):
        return
    os.makedirs(path, exist_ok=True)
    build_tokenizer(path, regular_tokens(cfg["vocab_size"]))
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]}, f)
    with open(cfg_path + ".tmp", "w") as f:
        json.dump(cfg, f, indent=1)
    os.replace(cfg_path + ".tmp", cfg_path)


# ------------------------------------------------------------------ server
def http_get(url: str, timeout: float = 3.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def healthy(base: str) -> bool:
    try:
        http_get(base + "/health", 2.0)
        return True
    except Exception:
        return False


def server_env(run_dir: str) -> dict:
    env = dict(os.environ)
    env.update({
        "VLLM_USE_FLASHINFER_SAMPLER": "0",  # flashinfer is not carried; its sampler import is unguarded
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1", "VLLM_HOST_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1",
        "VLLM_CACHE_ROOT": os.path.join(run_dir, "cache", "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(run_dir, "cache", "inductor"),
        "TRITON_CACHE_DIR": os.path.join(run_dir, "cache", "triton"),
        # NVLink multicast stays off on the lent machines (device/KINDS.md: it can take a shared host's
        # GPUs out of service): NCCL's NVLS, torch's and NVSHMEM's multicast, and vLLM's symmetric-memory
        # all-reduce (which would use it), so tensor parallelism runs vLLM's custom all-reduce or NCCL
        "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
    })
    return env


def serve_command(plan: dict, model_dir: str, port: int) -> list[str]:
    s = plan["server"]
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model_dir,
           "--served-model-name", plan["served_name"], "--load-format", "dummy", "--dtype", "bfloat16",
           "--host", "127.0.0.1", "--port", str(port), "--tensor-parallel-size", str(s.get("tensor_parallel_size", 1)),
           "--max-model-len", str(s["max_model_len"]),
           "--gpu-memory-utilization", str(s["gpu_memory_utilization"]),
           "--max-num-batched-tokens", str(s["max_num_batched_tokens"]),
           "--max-num-seqs", str(s["max_num_seqs"])]
    if s.get("enable_prefix_caching") is False:
        cmd.append("--no-enable-prefix-caching")
    return cmd + list(s.get("extra_args", []))


LOG_PATTERNS = {
    "kv_cache_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "max_concurrency_at_max_len": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "model_load_gib": r"Model loading took ([\d.]+) GiB",
    "torch_compile_s": r"torch\.compile took ([\d.]+) s in total",
    "cudagraph_capture_s": r"Graph capturing finished in ([\d.]+) secs",
    "cudagraph_gib": r"Graph capturing finished in [\d.]+ secs?, took ([\d.-]+) GiB",
    "init_engine_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
    "attention_backend": r"Using (\w+) (?:attention )?backend",
    "fa_version": r"Using FlashAttention version (\d)",
    "vllm_version": r"vLLM API server version ([\w.+-]+)",
}


def parse_log(path: str) -> dict:
    try:
        txt = open(path, errors="replace").read()
    except OSError:
        return {}
    info = {}
    for k, pat in LOG_PATTERNS.items():
        m = re.findall(pat, txt)
        if m:
            v = m[-1]
            try:
                info[k] = float(v.replace(",", ""))
            except ValueError:
                info[k] = v
    info["errors"] = len(re.findall(r"\bERROR\b", txt))
    return info


def tail(path: str, n: int = 40) -> str:
    try:
        return "\n".join(open(path, errors="replace").read().splitlines()[-n:])
    except OSError:
        return ""


def start_server(plan, model_dir, port, run_dir, out_dir, deadline):
    logp = os.path.join(out_dir, "server.log")
    cmd = serve_command(plan, model_dir, port)
    log("starting:", " ".join(shlex.quote(c) for c in cmd))
    t = time.time()
    p = subprocess.Popen(cmd, stdout=open(logp, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=server_env(run_dir), start_new_session=True, cwd=run_dir)
    with open(os.path.join(run_dir, "server.pid"), "w") as f:  # the device script ends this group if we are killed
        f.write(str(p.pid))
    base = f"http://127.0.0.1:{port}"
    last = 0.0
    while time.time() < deadline:
        if healthy(base):
            return p, time.time() - t, cmd
        if p.poll() is not None:
            log("SERVER DIED during start-up:\n" + tail(logp, 60))
            return None, time.time() - t, cmd
        if time.time() - last > 30:
            last = time.time()
            lines = [ln for ln in tail(logp, 5).splitlines() if ln.strip()]
            log("  waiting for /health ...", lines[-1][:200] if lines else "")
        time.sleep(1.0)
    log("TIMED OUT waiting for /health:\n" + tail(logp, 60))
    stop_server(p)
    return None, time.time() - t, cmd


def stop_server(p):
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    except Exception:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


# ------------------------------------------------------------------ metrics
def parse_prom(text: str) -> dict:
    """Sum samples per metric name over label sets (histogram buckets and *_created left out)."""
    vals: dict[str, float] = {}
    for ln in text.splitlines():
        if not ln or ln[0] == "#":
            continue
        name = ln.split("{", 1)[0].split(" ", 1)[0]
        if not name.startswith("vllm:") or name.endswith("_bucket") or name.endswith("_created"):
            continue
        try:
            v = float(ln.rsplit(" ", 1)[1])
        except (ValueError, IndexError):
            continue
        vals[name] = vals.get(name, 0.0) + v
    return vals


class Scraper(threading.Thread):
    """Samples /metrics every ``every`` seconds into timeline.csv (a worker thread: a slow scrape
    never delays a request)."""

    def __init__(self, base: str, every: float, path: str):
        super().__init__(daemon=True)
        self.base, self.every, self.label = base, every, "idle"
        self.stop_ev = threading.Event()
        self.f = open(path, "a")
        self.cols: list[str] | None = None
        self.rows: list[tuple[str, float, dict]] = []

    def run(self):
        while not self.stop_ev.is_set():
            try:
                vals = parse_prom(http_get(self.base + "/metrics", 3.0))
                now = time.time() - T0
                self.rows.append((self.label, now, vals))
                if self.cols is None and vals:
                    self.cols = sorted(vals)
                    self.f.write(",".join(["t_s", "point"] + self.cols) + "\n")
                if self.cols:
                    self.f.write(",".join([f"{now:.2f}", self.label] + ["%.6g" % vals.get(c, float("nan")) for c in self.cols]) + "\n")
                    self.f.flush()
            except Exception as e:  # never let the scraper kill the run
                log("scraper:", repr(e)[:160])
            self.stop_ev.wait(self.every)

    def window(self, label: str) -> dict:
        """Mean/max of the gauges over the samples taken during one point."""
        rows = [v for lab, _, v in self.rows if lab == label]
        out = {"samples": len(rows)}
        for key in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                    "vllm:gpu_cache_usage_perc"):
            xs = [r[key] for r in rows if key in r]
            if xs:
                out[key] = {"mean": sum(xs) / len(xs), "max": max(xs)}
        return out


def snapshot(base: str, tag: str, path: str) -> dict:
    try:
        txt = http_get(base + "/metrics", 5.0)
    except Exception as e:
        txt = f"# scrape failed: {e!r}\n"
    with open(path, "a") as f:
        f.write(f"\n# ===== {tag} t={time.time() - T0:.2f}\n{txt}")
    return parse_prom(txt)


# ------------------------------------------------------------------ client
async def one_request(session, url, body, t_bench, rec):
    rec["sent"] = time.perf_counter() - t_bench
    st = time.perf_counter()
    last = None
    itl = []
    try:
        async with session.post(url, json=body) as resp:
            if resp.status != 200:
                rec["error"] = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                return
            async for raw in resp.content:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                msg = json.loads(data)
                if msg.get("choices"):
                    now = time.perf_counter()
                    if last is None:
                        rec["ttft"] = now - st
                    else:
                        itl.append(now - last)
                    last = now
                if msg.get("usage"):
                    rec["output_tokens"] = msg["usage"].get("completion_tokens")
                    rec["prompt_tokens"] = msg["usage"].get("prompt_tokens")
        rec["e2e"] = time.perf_counter() - st
        rec["itl"] = [round(x, 6) for x in itl]
        rec["ok"] = last is not None
    except Exception as e:
        rec["error"] = repr(e)[:200]


def make_prompts(point: dict, seed: int, n_words: int) -> list[list[int]]:
    rng = random.Random(seed)
    lo, hi = 300, n_words - 1  # regular tokens only (no specials, no single bytes that split UTF-8)
    prefix = [rng.randrange(lo, hi) for _ in range(point.get("prefix_len", 0))]
    rest = point["input_len"] - len(prefix)
    return [prefix + [rng.randrange(lo, hi) for _ in range(rest)] for _ in range(point["num_prompts"])]


async def run_point(base, served_name, point, seed, n_words, timeout_s):
    import aiohttp

    prompts = make_prompts(point, seed, n_words)
    n = len(prompts)
    rate = point.get("rate", "inf")
    rate = math.inf if rate in (None, "inf") else float(rate)
    rng = random.Random(seed + 1)
    gaps = [0.0] * n if math.isinf(rate) else [rng.expovariate(rate) for _ in range(n)]
    conc = point.get("concurrency")
    sem = asyncio.Semaphore(conc) if conc else None
    recs = [{"i": i, "ok": False} for i in range(n)]
    url = base + "/v1/completions"
    conn = aiohttp.TCPConnector(limit=0)
    tmo = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(connector=conn, timeout=tmo) as session:
        t_bench = time.perf_counter()

        async def go(i):
            body = {"model": served_name, "prompt": prompts[i], "max_tokens": point["output_len"],
                    "ignore_eos": True, "temperature": 1.0, "stream": True,
                    "stream_options": {"include_usage": True}}
            if sem is None:
                await one_request(session, url, body, t_bench, recs[i])
            else:
                async with sem:
                    await one_request(session, url, body, t_bench, recs[i])

        tasks = []
        for i in range(n):
            if gaps[i] and i:
                await asyncio.sleep(gaps[i])
            tasks.append(asyncio.create_task(go(i)))
        done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for t in pending:
            t.cancel()
        duration = time.perf_counter() - t_bench
    return recs, duration, len(pending)


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * q / 100.0
    f = math.floor(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def client_summary(recs, duration):
    ok = [r for r in recs if r.get("ok")]
    out_tok = sum(r.get("output_tokens") or 0 for r in ok)
    ttft = [r["ttft"] for r in ok]
    e2e = [r["e2e"] for r in ok]
    tpot = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ok if (r.get("output_tokens") or 0) > 1]
    itl = [x for r in ok for x in r.get("itl", [])]
    return {"completed": len(ok), "failed": len(recs) - len(ok), "duration_s": duration,
            "output_throughput_tok_s": out_tok / duration if duration else None,
            "ttft_p50_s": pct(ttft, 50), "ttft_p90_s": pct(ttft, 90), "tpot_p50_ms": (pct(tpot, 50) or 0) * 1e3,
            "itl_p50_ms": (pct(itl, 50) or 0) * 1e3, "e2e_p50_s": pct(e2e, 50)}


def est_point_s(point, calib):
    """Rough time of a point from the first c=1 measurements (to skip what would not fit)."""
    n, inp, out = point["num_prompts"], point["input_len"], point["output_len"]
    prefill = n * inp / calib["prefill_tok_s"]
    conc = point.get("concurrency") or n
    rounds = math.ceil(n / max(1, conc))
    decode = rounds * out * calib["step_s"] * (1.0 + min(conc, n) / 64.0)
    return 3.0 + prefill + decode


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", required=True)
    ap.add_argument("--run-dir", default="/tmp/e2e")
    ap.add_argument("--budget-s", type=float, default=500)
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--scrape-s", type=float, default=0.5)
    ap.add_argument("--health-timeout-s", type=float, default=360)
    args = ap.parse_args()
    deadline = T0 + args.budget_s
    plan = json.load(open(args.plan))
    name = plan["name"]
    shape = SHAPES[plan["shape"]]
    plan["served_name"] = f"{plan['shape']}-dummy"
    out_dir = os.path.join(args.run_dir, name)
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(os.path.join(args.run_dir, "cache"), exist_ok=True)
    n_words = regular_tokens(shape["config"]["vocab_size"])
    model_dir = os.path.join(args.run_dir, "models", plan["shape"])
    make_model(model_dir, plan["shape"])
    log(f"plan {name}: model dir ready")

    env = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": sys.version.split()[0]}
    for mod in ("vllm", "torch", "transformers", "triton"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception as e:
            env[mod] = f"not importable: {e!r}"[:120]
    for cmd in (["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"], ["nproc"]):
        try:
            env[cmd[0]] = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as e:
            env[cmd[0]] = repr(e)
    env.update({k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "CUDA_VISIBLE"))})

    result = {"harness": "benchmarks/gpu/vllm_e2e.py", "plan": plan, "catalog_model": shape["catalog"],
              "model_config": shape["config"], "gpu": "H200", "env": env, "points": []}
    res_path = os.path.join(out_dir, "results.json")

    def save():
        with open(res_path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(res_path + ".tmp", res_path)

    proc, start_s, cmd = start_server(plan, model_dir, args.port, args.run_dir, out_dir,
                                      min(deadline - 20, time.time() + args.health_timeout_s))
    result["server"] = {"command": cmd, "start_s": round(start_s, 1), "healthy": proc is not None}
    result["server_log"] = parse_log(os.path.join(out_dir, "server.log"))
    save()
    if proc is None:
        log("FAILED: no server")
        return 2
    log(f"server healthy after {start_s:.0f}s; log facts {json.dumps(result['server_log'])}")
    base = f"http://127.0.0.1:{args.port}"
    # warm-up (not measured): one short and one long request, so lazy compilation stays out of the points
    try:
        warm = [{"input_len": 512, "output_len": 16, "num_prompts": 2, "concurrency": 2},
                {"input_len": min(16384, plan["server"]["max_model_len"] - 64), "output_len": 8, "num_prompts": 1, "concurrency": 1}]
        for w in warm:
            recs, dur, _ = asyncio.run(run_point(base, plan["served_name"], w, 7, n_words, 120))
            log(f"warm-up {w['input_len']}: {sum(r['ok'] for r in recs)}/{len(recs)} ok in {dur:.2f}s")
    except Exception as e:
        log("warm-up failed:", repr(e))

    scraper = Scraper(base, args.scrape_s, os.path.join(out_dir, "timeline.csv"))
    scraper.start()
    snaps = os.path.join(out_dir, "snapshots.prom")
    calib = {"prefill_tok_s": plan.get("guess_prefill_tok_s", 20000.0), "step_s": plan.get("guess_step_s", 0.012)}
    seed0 = int(time.time()) % 1_000_000
    for idx, point in enumerate(plan["points"]):
        label = point["id"]
        seed = seed0 + 1000 * idx
        est = est_point_s(point, calib)
        left = deadline - time.time() - 15
        rec = {"id": label, "spec": point, "seed": seed, "est_s": round(est, 1)}
        if est > left:
            rec["skipped"] = f"needs ~{est:.0f}s, {left:.0f}s left"
            log(f"SKIP {label}: {rec['skipped']}")
            result["points"].append(rec)
            save()
            continue
        scraper.label = label
        before = snapshot(base, f"before {label}", snaps)
        t_start = time.time() - T0
        recs, duration, pending = asyncio.run(run_point(base, plan["served_name"], point, seed, n_words, max(10.0, left)))
        time.sleep(0.3)
        after = snapshot(base, f"after {label}", snaps)
        scraper.label = "idle"
        rec.update({"t_start_s": round(t_start, 2), "duration_s": duration, "cancelled": pending,
                    "requests": recs, "summary": client_summary(recs, duration),
                    "metrics_delta": {k: after[k] - before.get(k, 0.0) for k in after
                                      if k.endswith(("_total", "_count", "_sum"))},
                    "metrics_window": scraper.window(label)})
        result["points"].append(rec)
        result["server_log"] = parse_log(os.path.join(out_dir, "server.log"))
        save()
        s = rec["summary"]
        log(f"{label}: {s['completed']}/{len(recs)} ok, {duration:.1f}s (est {est:.0f}), out {s['output_throughput_tok_s'] or 0:.0f} tok/s, "
            f"TTFT p50 {s['ttft_p50_s'] or 0:.3f}s p90 {s['ttft_p90_s'] or 0:.3f}s, TPOT p50 {s['tpot_p50_ms']:.2f}ms, "
            f"ITL p50 {s['itl_p50_ms']:.2f}ms, E2E p50 {s['e2e_p50_s'] or 0:.2f}s, "
            f"preempt {rec['metrics_delta'].get('vllm:num_preemptions_total', float('nan')):.0f}")
        if point.get("concurrency") == 1 and s["completed"]:
            calib["step_s"] = max(1e-3, s["tpot_p50_ms"] / 1e3)
            if point["input_len"] >= 8000:
                calib["prefill_tok_s"] = max(2000.0, point["input_len"] / max(1e-3, s["ttft_p50_s"]))
    scraper.stop_ev.set()
    stop_server(proc)
    save()
    log(f"plan {name} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
