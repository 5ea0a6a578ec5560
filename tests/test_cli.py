"""The command line: every command's help, JSON output, one-line errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from vllm_advisor.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def all_commands(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,)
        if isinstance(cmd, click.Group):
            yield from all_commands(cmd, prefix + (name,))


@pytest.mark.parametrize("path", [(), *all_commands(cli)], ids=lambda p: " ".join(p) or "vllm-advisor")
def test_every_command_has_help(path):
    result = run(*path, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_every_reporting_command_takes_json():
    interactive = {("chat",)}  # a full-screen app, not a report
    reporting = [p for p in all_commands(cli) if not isinstance(_command(p), click.Group) and p not in interactive]
    missing = [" ".join(p) for p in reporting if "--json" not in run(*p, "--help").output]
    assert missing == []


def test_top_level_help_lists_the_commands_own_summaries_without_importing_them():
    """`vllm-advisor --help` writes the commands' list from main.COMMANDS: the same lines click writes
    from each command's own help, with none of the commands' modules loaded to write them."""
    import inspect

    from vllm_advisor.cli.main import COMMANDS, LazyCommands

    for name, (_module, _attr, summary) in COMMANDS.items():
        own = inspect.cleandoc(cli.commands[name].help or "").split("\n\n")[0]
        assert summary == " ".join(own.split()), name
    for width in (60, 80, 200):
        ctx = click.Context(cli, terminal_width=width)
        ours, clicks = ctx.make_formatter(), ctx.make_formatter()
        cli.format_commands(ctx, ours)
        click.Group.format_commands(cli, ctx, clicks)
        assert ours.getvalue() == clicks.getvalue()
    group = type(cli)(name="vllm-advisor")
    group.commands = LazyCommands(COMMANDS)
    text = CliRunner().invoke(group, ["--help"]).output
    assert all(f"  {name} " in text for name in COMMANDS)
    assert dict.__len__(group.commands) == 0  # listed without importing a command


def _command(path):
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def test_probe_load_json_on_a_real_file(fixtures_dir):
    path = fixtures_dir / "vllm-cpu-real/results/compiled/bench_in6000_out64_c8_n32_seed105.json"
    result = run("probe", "load", str(path), "--json")
    assert result.exit_code == 0
    runs = json.loads(result.output)
    assert runs[0]["offered_concurrency"] == 8
    assert runs[0]["ttft_ms"]["mean"] == pytest.approx(921.58, rel=1e-3)


def test_probe_load_table_shows_checks(fixtures_dir):
    path = fixtures_dir / "vllm-cpu-real/results/compiled/bench_in6000_out64_c8_n32_seed105.json"
    result = run("probe", "load", str(path), "--detail")
    assert result.exit_code == 0
    assert "c=8" in result.output and "reproduced from per-request data" in result.output


def _subprocess(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vllm_advisor.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize(
    "content,code",
    [(b"", 3), (b"{\"duration\": 1, ", 3), (b"\x00\x01\x02binary" * 50, 3), (b'{"hello": "world"}', 3)],
    ids=["empty", "truncated", "binary", "unknown-shape"],
)
def test_bad_bench_files_give_one_line_and_exit_3(tmp_path, content, code):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    proc = _subprocess("probe", "load", str(path))
    assert proc.returncode == code
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.json" in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_question_with_bytes_that_are_not_utf8_is_answered():
    """A question cut mid-character (``head -c``) reaches Python as lone surrogates; the answer, the
    log and --json used to fail on them with exit 70. The stray bytes are read as U+FFFD."""
    question = "为什么100并发和40并发差不多？".encode()[:-2]  # the last character cut in half
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_advisor.cli", "ask", "--json", b"why is it slow \xff " + question],
        capture_output=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    answer = json.loads(proc.stdout)
    assert answer["findings"] and "\ufffd" not in answer["answer"]


def test_refused_endpoint_exits_4_with_one_line():
    proc = _subprocess("probe", "metrics", "http://127.0.0.1:9/metrics", "--retries", "0", "--timeout", "1")
    assert proc.returncode == 4
    assert len(proc.stderr.strip().splitlines()) == 1 and "refused" in proc.stderr


def test_usage_errors_exit_2():
    proc = _subprocess("estimate", "--model", "Qwen2.5-7B", "--gpu", "H100")
    assert proc.returncode == 2
    assert "--input-len" in proc.stderr and "Traceback" not in proc.stderr
    assert _subprocess("probe", "no-such-command").returncode == 2
    # zero or below is not "not given" (a reviewer's find: --tp 0 predicted TP 1, --input-len 0 took the profile's)
    for flag, value in (("--tp", "0"), ("--num-gpus", "-1"), ("--input-len", "0")):
        args = ["estimate", "--model", "Qwen2.5-7B", "--gpu", "H100", "--input-len", "100", "--output-len", "10", "--concurrency", "1", flag, value]
        proc = _subprocess(*args)
        assert proc.returncode == 2 and flag in proc.stderr, (flag, proc.stderr)


class _MetricsServer:
    """A real HTTP server answering /metrics with real vLLM dumps, one after another."""

    def __init__(self, bodies: list[str]):
        self.bodies = bodies
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = outer.bodies[min(outer.hits, len(outer.bodies) - 1)].encode()
                outer.hits += 1
                try:  # the headers too: the watch's last scrape may be cut off at any write
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the watch's last scrape, cut off when its duration ends

            def log_message(self, *args):
                pass

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client gone mid-answer is no error here
                pass  # (the default prints a traceback, which once landed in the command's captured output)

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_watch_saves_snapshots_that_probe_metrics_reads(tmp_path, fixtures_dir):
    dumps = [fixtures_dir / "vllm-cpu-real/metrics" / n for n in ("E_00_before_bench_in6000_c8.txt", "E_01_during_bench_in6000_c8_kv-pressure.txt", "E_02_after_bench_in6000_c8.txt")]
    server = _MetricsServer([p.read_text() for p in dumps])
    out = tmp_path / "watch.jsonl"
    try:
        # 3 s for >= 3 scrapes: parsing a real dump takes ~0.2 s, more on a loaded 2-core machine
        result = run("probe", "watch", server.url, "--duration", "3", "--interval", "0.25", "-o", str(out), "--json")
    finally:
        server.close()
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # stdout alone: a server thread's traceback would go to stderr
    assert data["output"] == str(out)
    lines = out.read_text().strip().splitlines()
    assert len(lines) >= 3
    again = run("probe", "metrics", str(out), "--json")
    summary = json.loads(again.output)["summary"]
    engine = summary["engines"][0]
    assert engine["preemptions"] == 31
    assert engine["requests_waiting"]["max"] == 7


def test_probe_log_and_serve_cmd_json(fixtures_dir):
    log = run("probe", "log", str(fixtures_dir / "real-logs/guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"), "--json")
    info = json.loads(log.output)
    assert info["kv_cache_tokens"] == 1_479_680 and info["max_concurrency"] == pytest.approx(90.31)
    cmd = run("probe", "serve-cmd", "vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --max-model-len 65536 --kv-cache-dtype fp8", "--json")
    parsed = json.loads(cmd.output)
    assert parsed["engine_args"]["tensor_parallel_size"] == 2
    assert parsed["engine_args"]["max_model_len"] == 65536
    assert parsed["deployment"]["num_gpus"] == 2


def test_estimate_commands_on_the_seed_profile():
    mem = json.loads(run("estimate", "memory", "--profile", str(SEED), "--vllm-version", "0.8.5", "--json").output)
    assert mem["memory"]["kv_bytes_per_token"] == 131072
    assert 4.5 < mem["memory"]["max_concurrency"] < 6.5
    predicted = json.loads(run("estimate", "--profile", str(SEED), "--vllm-version", "0.8.5", "--concurrency", "1", "--num-prompts", "2", "--no-calibrate", "--json").output)
    assert predicted["predicted"][0]["format"] == "model"
    assert predicted["predicted"][0]["calibrated"] is False
    assert predicted["calibration"]["calibrated"] is False
    assert predicted["predicted"][0]["request_output_tok_s"]["mean"] == pytest.approx(40, rel=0.25)
    assert [m["offered_concurrency"] for m in predicted["measured"]] == [1, 40, 100]
    whatif = json.loads(run("estimate", "--what-if", "kv_cache_dtype=fp8", "--profile", str(SEED), "--vllm-version", "0.8.5", "--concurrency", "40", "--num-prompts", "60", "--no-calibrate", "--json").output)["what_if"]
    assert whatif["memory_after"]["kv_cache_tokens"] == pytest.approx(2 * whatif["memory_before"]["kv_cache_tokens"], rel=0.01)
    running = next(d for d in whatif["points"][0]["deltas"] if d["figure"].startswith("requests running"))
    assert running["after"] > 1.6 * running["before"]
    step = json.loads(run("estimate", "step", "--model", "Qwen2.5-32B", "--gpu", "H800", "--tp", "2", "--decode", "4@63000", "--prefill", "2048@40000", "--json").output)
    parts = sum(step[k] for k in ("gemm_ms", "attn_decode_ms", "attn_prefill_ms", "comm_ms", "lm_head_ms", "overhead_ms"))
    assert step["total_ms"] == pytest.approx(parts)


def test_estimate_calibrates_to_the_profile_and_flags_unreachable_figures():
    data = json.loads(run("estimate", "--profile", str(SEED), "--vllm-version", "0.8.5", "--json").output)
    cal = data["calibration"]
    assert cal["calibrated"] is True and all(r["calibrated"] for r in data["predicted"])
    assert cal["rms_log_error_after"] <= cal["rms_log_error_before"]
    # 40 clients x 22 tok/s = 880 tok/s is beyond two H800s for unique 63K prompts: the fit cannot reach it.
    thr = next(r for r in cal["unreachable"] if r["load"] == "c=40" and r["figure"] == "output_throughput_tok_s")
    assert thr["ratio"] < 0.3
    # With those set aside, the single-request figure is fitted closely.
    single = next(r for r in cal["residuals"] if r["load"] == "c=1")
    assert single["ratio"] == pytest.approx(1.0, abs=0.05)


def test_unknown_model_or_gpu_is_one_line_with_suggestions():
    proc = _subprocess("estimate", "memory", "--model", "Qwen2.5-33B", "--gpu", "H800")
    assert proc.returncode != 0 and proc.returncode != 70
    assert len(proc.stderr.strip().splitlines()) == 1 and "Qwen2.5-32B" in proc.stderr
