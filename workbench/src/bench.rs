//! Benchmark machinery shared by the `bench_*` binaries: timing statistics, the
//! process's CPU time, and the Python peers they are measured against.
//!
//! | item | what it does |
//! |---|---|
//! | [`BenchRun`] | a benchmark's result folder, with the [`Machine`] in its `config.json` |
//! | [`median`], [`percentile`], [`median_p95`] | order statistics of timings (rule below) |
//! | [`process_cpu_seconds`] | user + system CPU seconds of this process so far |
//! | [`PythonPeers`] | runs `scripts/python/<script>` with the peers venv's Python, returns its [`PeerOutput`] |
//! | [`PeerOutput::json`] | the last JSON line a peer printed, decoded into a type |
//! | `set_omp_threads`, `omp_threads` (feature `faiss`) | FAISS' OpenMP thread count, through libgomp |
//!
//!
//! ## Percentile rule
//!
//! [`percentile`]`(v, p)` sorts `v` and interpolates linearly between the two closest
//! ranks: with `n` values `x₀ ≤ … ≤ xₙ₋₁` and `h = (n − 1)·p/100`, it returns
//! `x⌊h⌋ + (h − ⌊h⌋)·(x⌊h⌋+1 − x⌊h⌋)` — numpy's default (`method="linear"`,
//! Hyndman & Fan type 7), the same as [`crate::evaluate::quantile`] on sorted input.
//! The median is `percentile(v, 50)`: the middle value, or the mean of the two middle
//! values for an even count. An empty slice, a NaN among the values or `p` outside
//! `0..=100` gives NaN, so a bad timing shows in the table instead of being dropped.

use crate::machine::Machine;
use crate::results::{Experiment, ResultDir};
use crate::{paths, Error, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running benchmark: its result folder, begun with the machine recorded, and that
/// machine. Benchmarks always re-run (timings are not reproducible outputs), so a fresh
/// earlier result is replaced, never skipped.
#[derive(Debug)]
pub struct BenchRun {
    /// The result folder being written; `finish` it with the summary.
    pub exp: Experiment,
    /// What [`Machine::detect`] found before the run began.
    pub machine: Machine,
}

impl BenchRun {
    /// Detect the machine, then begin `data/results/<name>/` with
    /// [`config_with_machine`] as its `config.json`.
    pub fn start(name: &str, config: &impl Serialize, summary_file: &str) -> Result<BenchRun> {
        let root = paths::project_root()?;
        Self::start_at(paths::results_dir(&root, name), name, config, summary_file)
    }

    /// [`BenchRun::start`] with an explicit result folder.
    pub fn start_at(
        dir: PathBuf,
        name: &str,
        config: &impl Serialize,
        summary_file: &str,
    ) -> Result<BenchRun> {
        let machine = Machine::detect();
        let out = ResultDir::at(dir.clone(), name, &config_with_machine(config, &machine)?)?;
        let Some(exp) = Experiment::start_in(out, true, summary_file)? else {
            return Err(Error::bad_input(
                dir,
                "the result folder was skipped although benchmarks always re-run",
            ));
        };
        Ok(BenchRun { exp, machine })
    }
}

/// `config` (which must serialise to a JSON object) with the entry `"machine"` added.
/// An error when `config` is not an object or already has a `machine` entry.
pub fn config_with_machine(
    config: &impl Serialize,
    machine: &Machine,
) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(config)?;
    let Some(obj) = v.as_object_mut() else {
        return Err(Error::param(
            "config",
            format!("a benchmark configuration must be a JSON object, got {v}"),
        ));
    };
    if obj.contains_key("machine") {
        return Err(Error::param(
            "config",
            "has its own `machine` entry; the benchmark records the detected machine there",
        ));
    }
    obj.insert("machine".into(), serde_json::to_value(machine)?);
    Ok(v)
}

/// The `p`-th percentile (`0..=100`) of `v` by linear interpolation between the closest
/// ranks (see the [module docs](self#percentile-rule)). NaN when `v` is empty, holds a
/// NaN, or `p` is outside `0..=100`.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    sorted(v).map_or(f64::NAN, |s| percentile_sorted(&s, p))
}

/// The median of `v` (`percentile(v, 50)`): NaN when `v` is empty or holds a NaN.
pub fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

/// The median and the 95th percentile of `v` (one sort).
pub fn median_p95(v: &[f64]) -> (f64, f64) {
    match sorted(v) {
        Some(s) => (percentile_sorted(&s, 50.0), percentile_sorted(&s, 95.0)),
        None => (f64::NAN, f64::NAN),
    }
}

/// A sorted copy of `v`, or `None` when it holds a NaN.
fn sorted(v: &[f64]) -> Option<Vec<f64>> {
    if v.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some(s)
}

fn percentile_sorted(s: &[f64], p: f64) -> f64 {
    if s.is_empty() || !(0.0..=100.0).contains(&p) {
        return f64::NAN;
    }
    let h = (s.len() - 1) as f64 * (p / 100.0);
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    if frac == 0.0 {
        // An exact rank: no interpolation (0 × ∞ would be NaN next to an infinite value).
        return s[lo];
    }
    s[lo] + frac * (s[lo + 1] - s[lo])
}

/// CPU seconds (user + system, all threads) this process has used so far, to the
/// nanosecond: `CLOCK_PROCESS_CPUTIME_ID`, the clock of Python's `time.process_time` and of
/// Java's process CPU time. Where that clock fails, `/proc/self/stat` (1/100 s ticks, as long
/// as a whole pass of a fast search); NaN where neither can be read (not Linux).
pub fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for clock_gettime to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0 {
        return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
    }
    std::fs::read_to_string("/proc/self/stat").map_or(f64::NAN, |s| cpu_seconds_from_stat(&s))
}

/// `utime + stime` of `/proc/<pid>/stat` text in seconds. Both count clock ticks of
/// 1/100 s (Linux' fixed `USER_HZ`). The fields are counted after the `)` that closes
/// the command name, which may itself hold spaces and parentheses.
fn cpu_seconds_from_stat(stat: &str) -> f64 {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return f64::NAN;
    };
    // After the name: state is field 3, utime field 14, stime field 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (tick(11) + tick(12)) / 100.0
}

// libgomp, linked by faiss-sys for FAISS' OpenMP loops (the faiss crate does not
// expose the thread count).
#[cfg(feature = "faiss")]
extern "C" {
    fn omp_set_num_threads(n: std::os::raw::c_int);
    fn omp_get_max_threads() -> std::os::raw::c_int;
}

/// Set the OpenMP threads FAISS' parallel loops use from now on (libgomp's
/// `omp_set_num_threads`; 0 counts as 1); returns the count OpenMP then reports. BLAS threads (used
/// by IVF training) are not affected. Call it while no FAISS operation runs.
#[cfg(feature = "faiss")]
pub fn set_omp_threads(n: usize) -> usize {
    let n = std::os::raw::c_int::try_from(n.max(1)).unwrap_or(std::os::raw::c_int::MAX);
    // SAFETY: plain libgomp calls without pointers; the caller runs no FAISS call concurrently.
    unsafe { omp_set_num_threads(n) };
    omp_threads()
}

/// The OpenMP threads FAISS' parallel loops use (libgomp's `omp_get_max_threads`).
#[cfg(feature = "faiss")]
pub fn omp_threads() -> usize {
    // SAFETY: a read-only libgomp query.
    unsafe { omp_get_max_threads() as usize }
}

/// The Python peers of the benchmarks: scripts in `scripts/python/`, run with the
/// Python of the peers venv (made by `bash scripts/bench`, see `ensure_peers` in
/// `scripts/lib.sh`).
#[derive(Debug, Clone)]
pub struct PythonPeers {
    python: PathBuf,
    scripts: PathBuf,
}

/// What a peer script printed (it exited with success).
#[derive(Debug, Clone)]
pub struct PeerOutput {
    /// The script's file name, e.g. `bench_bm25s.py`.
    pub script: String,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

/// How a missing or failing peer is fixed; appended to the errors that need it.
const FIX: &str = "make the peers venv with `bash scripts/bench` (it sets up $PEERS_VENV), \
                   or point PEERS_PYTHON (or the binary's --python) at a Python with the packages \
                   of scripts/python/requirements-peers.txt";

impl PythonPeers {
    /// The project's peers: `<root>/scripts/python/`, run by `python` when given (a
    /// `--python` flag), else by [`PythonPeers::default_python`].
    pub fn new(root: &Path, python: Option<PathBuf>) -> Self {
        Self::at(
            python.unwrap_or_else(Self::default_python),
            root.join("scripts").join("python"),
        )
    }

    /// Peers in an explicit folder, run by an explicit interpreter.
    pub fn at(python: impl Into<PathBuf>, scripts: impl Into<PathBuf>) -> Self {
        PythonPeers {
            python: python.into(),
            scripts: scripts.into(),
        }
    }

    /// The peers venv's Python: `$PEERS_PYTHON` when set, else `bin/python` of the
    /// first of `$PEERS_VENV`, `$WORKBENCH_PEERS_VENV`, `$WORKBENCH_HOME/peers-venv`
    /// and `~/.cache/rag-workbench/peers-venv` that is set (the same order as
    /// `scripts/lib.sh`).
    pub fn default_python() -> PathBuf {
        python_from_env(|k| std::env::var_os(k))
    }

    /// The interpreter the peers run with.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The path of a peer script.
    pub fn script_path(&self, script: &str) -> PathBuf {
        self.scripts.join(script)
    }

    fn error(&self, script: &str, message: impl Into<String>) -> Error {
        Error::Peer {
            script: self.script_path(script),
            message: message.into(),
        }
    }

    /// A command that runs `script` with the peers' Python (for peers that talk over
    /// stdin/stdout while running). Errors, naming the script and the fix, when the
    /// interpreter or the script does not exist.
    pub fn command(&self, script: &str) -> Result<Command> {
        if !self.python.is_file() {
            return Err(self.error(
                script,
                format!("no Python at {}: {FIX}", self.python.display()),
            ));
        }
        let path = self.script_path(script);
        if !path.is_file() {
            return Err(self.error(script, "no such script"));
        }
        let mut c = Command::new(&self.python);
        c.arg(path);
        Ok(c)
    }

    /// Run `script` with `args` to completion, capturing its output. A peer that cannot
    /// start or exits with failure is an error naming the script, with its stderr.
    pub fn run<I, S>(&self, script: &str, args: I) -> Result<PeerOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with_env(script, args, std::iter::empty::<(&str, &str)>())
    }

    /// [`PythonPeers::run`] with the environment variables `env` set for the script (on
    /// top of this process's environment).
    pub fn run_with_env<I, S, E, K, V>(&self, script: &str, args: I, env: E) -> Result<PeerOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
        E: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let out = self
            .command(script)?
            .args(args)
            .envs(env)
            .output()
            .map_err(|e| {
                self.error(
                    script,
                    format!("cannot start {}: {e}; {FIX}", self.python.display()),
                )
            })?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(self.error(
                script,
                format!(
                    "exited with {} under {}; its stderr:\n{}",
                    out.status,
                    self.python.display(),
                    stderr.trim_end()
                ),
            ));
        }
        Ok(PeerOutput {
            script: script.to_string(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        })
    }
}

impl PeerOutput {
    /// The last stdout line that starts with `{` (peers print their result as one JSON
    /// line, possibly after progress lines).
    pub fn json_line(&self) -> Result<&str> {
        self.stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('{'))
            .ok_or_else(|| Error::Peer {
                script: PathBuf::from(&self.script),
                message: format!(
                    "printed no JSON line; stdout was {:?}",
                    tail(&self.stdout, 400)
                ),
            })
    }

    /// [`PeerOutput::json_line`] decoded into `T`; an error names the script and the
    /// field serde rejected.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        let line = self.json_line()?;
        serde_json::from_str(line).map_err(|e| Error::Peer {
            script: PathBuf::from(&self.script),
            message: format!(
                "unexpected JSON ({e}): {}",
                line.chars().take(400).collect::<String>()
            ),
        })
    }
}

/// [`PythonPeers::default_python`] with the environment read through `var`.
fn python_from_env(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    if let Some(p) = var("PEERS_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = var("PEERS_VENV")
        .or_else(|| var("WORKBENCH_PEERS_VENV"))
        .map(PathBuf::from)
        .or_else(|| var("WORKBENCH_HOME").map(|h| PathBuf::from(h).join("peers-venv")))
        .unwrap_or_else(|| {
            PathBuf::from(var("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/rag-workbench/peers-venv")
        });
    venv.join("bin").join("python")
}

/// The last `n` characters of `s`.
fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_gets_the_machine_entry() {
        let m = Machine::detect();
        let v = config_with_machine(&serde_json::json!({"k": 10}), &m).unwrap();
        assert_eq!(v["k"], 10);
        assert_eq!(
            serde_json::from_value::<Machine>(v["machine"].clone()).unwrap(),
            m
        );
        let e = config_with_machine(&[1, 2], &m).unwrap_err().to_string();
        assert!(e.contains("must be a JSON object"), "{e}");
        let e = config_with_machine(&serde_json::json!({"machine": "mine"}), &m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("own `machine` entry"), "{e}");
    }

    #[test]
    fn bench_run_writes_the_machine_into_config_json_and_always_reruns() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bench-x");
        let config = serde_json::json!({"repeats": 3});
        for round in 0..2 {
            let run = BenchRun::start_at(dir.clone(), "bench-x", &config, "bench.md").unwrap();
            std::fs::write(run.exp.out.path("bench.md"), format!("round {round}\n")).unwrap();
            let written: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(run.exp.out.path("config.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(written["repeats"], 3);
            assert_eq!(written["machine"]["cores"], run.machine.cores);
            run.exp.finish(serde_json::json!({})).unwrap();
            // The second round is not skipped although its result is fresh.
            assert_eq!(
                std::fs::read_to_string(dir.join("bench.md")).unwrap(),
                format!("round {round}\n")
            );
        }
    }

    #[test]
    fn percentile_interpolates_between_closest_ranks() {
        let v = [4.0, 1.0, 3.0, 2.0]; // sorted 1 2 3 4; h = 3p/100
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 4.0);
        assert_eq!(percentile(&v, 50.0), 2.5); // h = 1.5
        assert!((percentile(&v, 95.0) - 3.85).abs() < 1e-12); // h = 2.85
        assert!((percentile(&v, 10.0) - 1.3).abs() < 1e-12); // h = 0.3
        assert_eq!(percentile(&[7.0], 95.0), 7.0);
        // numpy.percentile(range(1, 21), 95) == 19.05
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        assert!((percentile(&twenty, 95.0) - 19.05).abs() < 1e-12);
    }

    #[test]
    fn percentile_agrees_with_evaluate_quantile() {
        let v = [0.3, 9.1, 2.2, 5.5, 5.5, 1.0, 7.25];
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        for p in [0.0, 10.0, 25.0, 50.0, 90.0, 95.0, 100.0] {
            assert_eq!(
                percentile(&v, p),
                crate::evaluate::quantile(&s, p / 100.0),
                "{p}"
            );
        }
    }

    #[test]
    fn median_odd_even_and_unsorted() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[10.0, 1.0, 3.0, 2.0]), 2.5);
        // An infinite timing (a zero-length interval) does not turn the median into NaN.
        assert_eq!(median(&[-1.0, f64::INFINITY, 0.0]), 0.0);
        assert_eq!(percentile(&[1.0, f64::INFINITY], 50.0), f64::INFINITY);
    }

    #[test]
    fn empty_nan_and_out_of_range_give_nan() {
        assert!(median(&[]).is_nan());
        assert!(median(&[1.0, f64::NAN, 2.0]).is_nan());
        assert!(percentile(&[1.0, 2.0], 101.0).is_nan());
        assert!(percentile(&[1.0, 2.0], -1.0).is_nan());
        assert!(percentile(&[1.0, 2.0], f64::NAN).is_nan());
        let (m, p) = median_p95(&[]);
        assert!(m.is_nan() && p.is_nan());
        let (m, p) = median_p95(&[1.0, f64::NAN]);
        assert!(m.is_nan() && p.is_nan());
    }

    #[test]
    fn median_p95_is_percentile_50_and_95() {
        let v: Vec<f64> = (0..37).map(|i| ((i * 17) % 37) as f64 * 0.5).collect();
        assert_eq!(median_p95(&v), (percentile(&v, 50.0), percentile(&v, 95.0)));
        assert_eq!(median_p95(&v).0, 9.0);
    }

    #[test]
    fn cpu_seconds_counted_after_the_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let stat = "4242 (my (odd) prog) R 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 1 0\n";
        assert_eq!(cpu_seconds_from_stat(stat), 3.25);
        assert!(cpu_seconds_from_stat("garbage").is_nan());
        assert!(cpu_seconds_from_stat("1 (x) R 1 2").is_nan());
    }

    #[test]
    fn process_cpu_seconds_grows_with_work() {
        if !Path::new("/proc/self/stat").exists() {
            assert!(process_cpu_seconds().is_nan());
            return;
        }
        let t0 = process_cpu_seconds();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 60 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let t1 = process_cpu_seconds();
        assert!(t0.is_finite() && t1 > t0, "{t0} -> {t1}");
    }

    #[test]
    fn cpu_clock_counts_this_process_work_finely() {
        let c0 = process_cpu_seconds();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let used = process_cpu_seconds() - c0;
        // Busy for 30 ms of wall time on one thread: some CPU time even on a loaded machine,
        // and not much more than 30 ms.
        assert!(used > 0.0 && used < 0.2, "{used}");
        let a = process_cpu_seconds();
        let b = process_cpu_seconds();
        assert!(b >= a && b - a < 0.005, "{a} {b}");
    }

    #[cfg(feature = "faiss")]
    #[test]
    fn omp_threads_follow_set_omp_threads() {
        let before = omp_threads();
        assert_eq!(set_omp_threads(1), 1);
        assert_eq!(omp_threads(), 1);
        assert_eq!(set_omp_threads(3), 3);
        assert_eq!(set_omp_threads(0), 1, "0 means 1");
        set_omp_threads(before);
    }

    /// Peers written as shell scripts, run by `/bin/sh` in place of Python.
    fn sh_peers(scripts: &[(&str, &str)]) -> (tempfile::TempDir, PythonPeers) {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in scripts {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        let peers = PythonPeers::at("/bin/sh", dir.path());
        (dir, peers)
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Out {
        qps: f64,
        args: Vec<String>,
    }

    #[test]
    fn run_passes_args_and_decodes_the_last_json_line() {
        let (_d, peers) = sh_peers(&[(
            "peer.py",
            "echo 'loading...'\necho '{\"qps\": 1.0, \"args\": []}'\n\
             printf '{\"qps\": 2.5, \"args\": [\"%s\", \"%s\"]}\\n' \"$1\" \"$2\"\necho done >&2\n",
        )]);
        let out = peers.run("peer.py", ["--k", "10"]).unwrap();
        assert_eq!(out.stderr, "done\n");
        let parsed: Out = out.json().unwrap();
        assert_eq!(
            parsed,
            Out {
                qps: 2.5,
                args: vec!["--k".into(), "10".into()]
            }
        );
        let v: serde_json::Value = out.json().unwrap();
        assert_eq!(v["qps"], 2.5);
    }

    #[test]
    fn failing_peer_error_names_script_status_and_stderr() {
        let (d, peers) = sh_peers(&[("bad.py", "echo 'ModuleNotFoundError: bm25s' >&2\nexit 3\n")]);
        let e = peers.run("bad.py", ["x"]).unwrap_err().to_string();
        assert!(
            e.contains(&d.path().join("bad.py").display().to_string()),
            "{e}"
        );
        assert!(e.contains("exit status: 3"), "{e}");
        assert!(e.contains("ModuleNotFoundError: bm25s"), "{e}");
    }

    #[test]
    fn missing_python_or_script_is_an_error_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.py"), "echo '{}'\n").unwrap();
        let peers = PythonPeers::at(dir.path().join("no-venv/bin/python"), dir.path());
        let e = peers
            .run("p.py", Vec::<String>::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.py"), "{e}");
        assert!(e.contains("no-venv/bin/python"), "{e}");
        assert!(e.contains("bash scripts/bench"), "{e}");
        let (_d, peers) = sh_peers(&[]);
        let e = peers.command("absent.py").unwrap_err().to_string();
        assert!(
            e.contains("absent.py") && e.contains("no such script"),
            "{e}"
        );
    }

    #[test]
    fn output_without_json_or_of_the_wrong_shape_is_an_error() {
        let (_d, peers) = sh_peers(&[
            ("quiet.py", "echo 'no json here'\n"),
            ("shape.py", "echo '{\"qps\": \"fast\"}'\n"),
        ]);
        let out = peers.run("quiet.py", Vec::<String>::new()).unwrap();
        let e = out.json::<serde_json::Value>().unwrap_err().to_string();
        assert!(e.contains("quiet.py") && e.contains("no JSON line"), "{e}");
        let out = peers.run("shape.py", Vec::<String>::new()).unwrap();
        let e = out.json::<Out>().unwrap_err().to_string();
        assert!(
            e.contains("shape.py") && e.contains("unexpected JSON"),
            "{e}"
        );
    }

    #[test]
    fn default_python_follows_the_environment_like_lib_sh() {
        let env = |pairs: &[(&str, &str)]| {
            let m: std::collections::HashMap<String, std::ffi::OsString> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            python_from_env(move |k| m.get(k).cloned())
        };
        assert_eq!(
            env(&[("HOME", "/h")]),
            Path::new("/h/.cache/rag-workbench/peers-venv/bin/python")
        );
        let mut vars = vec![("HOME", "/h"), ("WORKBENCH_HOME", "/wh")];
        assert_eq!(env(&vars), Path::new("/wh/peers-venv/bin/python"));
        vars.push(("WORKBENCH_PEERS_VENV", "/wpv"));
        assert_eq!(env(&vars), Path::new("/wpv/bin/python"));
        vars.push(("PEERS_VENV", "/pv"));
        assert_eq!(env(&vars), Path::new("/pv/bin/python"));
        vars.push(("PEERS_PYTHON", ""));
        assert_eq!(env(&vars), Path::new("/pv/bin/python"), "empty is unset");
        vars.push(("PEERS_PYTHON", "/usr/bin/python3"));
        assert_eq!(env(&vars), Path::new("/usr/bin/python3"));
    }
}
