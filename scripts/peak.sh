# Peak memory of a run. Source it first thing in a script, with the script's arguments:
#   source "$(dirname "$0")/peak.sh" "$@"
# The script then runs again under GNU time, which reports the largest resident set of any
# process the run started (cargo, rustc, a model, a notebook kernel). When the run ends, the
# peak goes into the note of the `total` line the run wrote to data/results/script-times.tsv
# (scripts/lib.sh's steps_summary names that line in "$WORKBENCH_PEAK_FILE.total").
if [ -z "${WORKBENCH_PEAK_FILE:-}" ]; then
  if [ -x /usr/bin/time ] && /usr/bin/time -f '%M' -o /dev/null true 2>/dev/null; then
    export WORKBENCH_PEAK_FILE
    WORKBENCH_PEAK_FILE="$(mktemp)"
    trap 'rm -f "$WORKBENCH_PEAK_FILE" "$WORKBENCH_PEAK_FILE.total" "$WORKBENCH_PEAK_FILE.pid"' EXIT
    /usr/bin/time -f '%M' -o "$WORKBENCH_PEAK_FILE" bash "$(realpath "$0")" "$@" &
    _peak_time=$!
    # A TERM or HUP for this process goes on to the run (GNU time passes only its own exit
    # on; Ctrl-C reaches the run directly).
    trap '_peak_run="$(cat "$WORKBENCH_PEAK_FILE.pid" 2>/dev/null || true)"; [ -n "$_peak_run" ] && kill -TERM "$_peak_run" 2>/dev/null' TERM HUP
    _peak_rc=0
    while :; do
      wait "$_peak_time" && _peak_rc=0 || _peak_rc=$?
      kill -0 "$_peak_time" 2>/dev/null || break
    done
    _peak_kb="$(tail -n 1 "$WORKBENCH_PEAK_FILE" 2>/dev/null || true)"
    if [[ "$_peak_kb" =~ ^[0-9]+$ ]]; then
      _peak_mb=$(((_peak_kb + 512) / 1024))
      echo "peak memory of this run (largest process): ${_peak_mb} MB"
      _peak_log="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/data/results/script-times.tsv"
      if [ -s "$WORKBENCH_PEAK_FILE.total" ] && [ -f "$_peak_log" ]; then
        # Under a lock: another run may be appending its own lines.
        if ! { command -v flock >/dev/null && flock "$_peak_log" python3 - "$_peak_log" "$_peak_mb" "$WORKBENCH_PEAK_FILE.total" ||
               { ! command -v flock >/dev/null && python3 - "$_peak_log" "$_peak_mb" "$WORKBENCH_PEAK_FILE.total"; }; } <<'PY'
import sys
path, mb, total = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name, when = open(total).read().rstrip("\n").split("\t")
lines = open(path).read().split("\n")
peak = f"peak memory {mb / 1024:.1f} GB" if mb >= 1024 else f"peak memory {mb} MB"
for i in range(len(lines) - 1, -1, -1):
    f = lines[i].split("\t")
    if len(f) >= 8 and f[0] == name and f[1] == "total" and f[3] == when:
        f[7] = peak + ("; " + f[7] if f[7] else "")
        lines[i] = "\t".join(f)
        break
else:
    sys.exit(f"no total line of `{name}` ended {when} in {path}")
open(path, "w").write("\n".join(lines))
PY
        then
          echo "warning: the peak memory was not written to $_peak_log"
        fi
      fi
    else
      echo "peak memory of this run: not measured (GNU time wrote no figure)"
    fi
    exit "$_peak_rc"
  else
    echo "peak memory of this run: not measured (no GNU time at /usr/bin/time; Debian package \`time\`)"
    export WORKBENCH_PEAK_FILE=none
  fi
elif [ "$WORKBENCH_PEAK_FILE" != none ]; then
  echo "$$" >"$WORKBENCH_PEAK_FILE.pid"
fi
