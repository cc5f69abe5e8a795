"""Time to first result: how long a notebook's kernel takes to answer its first cells.

    bash scripts/notebook_first_result [--cold] NAME...   (sets up the kernel, then runs this)

For each notebook, in the order given, a `rust` kernel is started in notebooks/ and the
notebook's code cells are executed from the top through the first code cell after its
`:dep` lines (the first cell that computes with the library); the kernel is then shut down.
One line per notebook is appended to data/results/notebook-first-result.tsv:

    notebook, run, dep_seconds, first_seconds, library_compiled, status,
    finished (UTC), CPU, load (/proc/loadavg), commit

`dep_seconds` and `first_seconds` run from the kernel's start to the end of the `:dep` cell
and of the first computing cell. `run` is `cold` for the first notebook after `--cold`
emptied the kernels' shared compiled-dependency folder ($WORKBENCH_EVCXR_HOME/target), else
`warm`. `library_compiled` says whether a workbench library file in that folder was written
while the notebook ran (`yes`: this kernel compiled the library). `status` is `ok` or the
first line of the error the cells printed. `bash scripts/record_times` copies the lines into
data/notebook-first-result.tsv, from which the README's table is generated.
"""
import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

from jupyter_client.manager import KernelManager

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOG = ROOT / "data/results/notebook-first-result.tsv"


def code_cells(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    out = []
    for c in nb["cells"]:
        if c.get("cell_type") == "code":
            s = c.get("source", "")
            out.append("".join(s) if isinstance(s, list) else s)
    return out


def cells_to_first_result(cells):
    """The cells up to the `:dep` cell and up to the first computing cell after it."""
    deps = [i for i, c in enumerate(cells) if any(l.startswith(":dep ") for l in c.splitlines())]
    if not deps:
        raise SystemExit("no :dep cell")
    last_dep = deps[-1]
    if last_dep + 1 >= len(cells):
        raise SystemExit("no code cell after the :dep cell")
    return last_dep, last_dep + 1


def library_files(target):
    deps = target / os.environ.get("WORKBENCH_EVCXR_TRIPLE", "x86_64-unknown-linux-gnu") / "debug/deps"
    if not deps.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in deps.glob("libworkbench-*.rlib")}


def run(name, timeout):
    cells = code_cells(name)
    dep, first = cells_to_first_result(cells)
    km = KernelManager(kernel_name="rust")
    t0 = time.monotonic()
    km.start_kernel(cwd=str(ROOT / "notebooks"))
    kc = km.client()
    kc.start_channels()
    errors = []

    def hook(msg):
        t = msg["header"]["msg_type"]
        c = msg["content"]
        if t == "error":
            errors.append(f"{c.get('ename', '')}: {c.get('evalue', '')}")
        elif t == "stream" and c.get("name") == "stderr" and c.get("text", "").strip():
            errors.append(c["text"])

    times = {}
    try:
        kc.wait_for_ready(timeout=120)
        for i in range(first + 1):
            try:
                reply = kc.execute_interactive(cells[i], timeout=timeout, output_hook=hook)
            except TimeoutError:
                errors.append(f"no answer within the timeout ({timeout} s)")
                break
            if reply["content"].get("status") != "ok" and not errors:
                errors.append(reply["content"].get("ename", "error"))
            if i == dep:
                times["dep"] = time.monotonic() - t0
            if errors:
                break
        times["first"] = time.monotonic() - t0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    status = "ok" if not errors else "error: " + " ".join(errors[0].split())[:150]
    # A notebook stopped before its `:dep` cell ended: both times are when it stopped.
    return times.get("dep", times["first"]), times["first"], status


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cold", action="store_true",
                   help="empty $WORKBENCH_EVCXR_HOME/target first (the first notebook then compiles everything)")
    # Generous: a cold compile of every dependency happens inside the first cell.
    p.add_argument("--timeout", type=int, default=4 * 3600, help="seconds per cell")
    p.add_argument("notebooks", nargs="+", help="names, e.g. 00_tour")
    a = p.parse_args(argv)
    home = os.environ.get("WORKBENCH_EVCXR_HOME")
    if not home:
        raise SystemExit("WORKBENCH_EVCXR_HOME is not set (run through bash scripts/notebook_first_result)")
    target = pathlib.Path(home) / "target"
    if a.cold and target.exists():
        shutil.rmtree(target)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    LOG.parent.mkdir(parents=True, exist_ok=True)
    failed = 0
    for k, name in enumerate(a.notebooks):
        before = library_files(target)
        dep_s, first_s, status = run(name, a.timeout)
        after = library_files(target)
        compiled = "yes" if any(before.get(f) != m for f, m in after.items()) else "no"
        kind = "cold" if a.cold and k == 0 else "warm"
        load = " ".join(open("/proc/loadavg").read().split()[:3])
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = [name, kind, f"{dep_s:.1f}", f"{first_s:.1f}", compiled, status, when, cpu, load, commit]
        with open(LOG, "a") as f:
            f.write("\t".join(line) + "\n")
        print(f"{name}: {kind}, :dep cell done at {dep_s:.1f} s, first result at {first_s:.1f} s, "
              f"library compiled: {compiled}, {status} (load {load})", flush=True)
        failed += status != "ok"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
