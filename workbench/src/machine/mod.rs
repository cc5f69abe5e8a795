//! The machine a measurement ran on: CPU model, logical cores, the instruction-set
//! extensions the numeric kernels pick from, the load average and the kernel.
//!
//! | item | what it holds |
//! |---|---|
//! | [`load_average`] | the three numbers of `/proc/loadavg` (`"unknown"` where unreadable) |
//! | [`load_average_1min`] | its first number (NaN where unreadable) |
//! | [`peak_resident_bytes`], [`reset_peak_resident`] | a process's peak resident memory (Linux's `VmHWM`), and resetting this process's |
//! | [`Machine`] | the record benchmarks write into their `config.json`, with a one-line [`Machine::summary`] |
//! | [`CpuInfo`] | what [`CpuInfo::parse`] reads from `/proc/cpuinfo` text |
//! | [`ceiling`] | the measured peak multiply-add rates ([`measure_peak`]): compute ceilings beside measured speeds |
//! | [`allocator`] | [`keep_freed_memory`]: glibc settings that spare model code fresh pages |
//!
//! Timings taken on a shared machine mean little without the load they were measured
//! under, and the ratio of two kernels depends on which vector extensions the CPU has
//! (AVX2 vs AVX-512 vs AMX), so every benchmark records both.
//!
//! ```
//! let m = workbench::machine::Machine::detect();
//! assert!(m.cores >= 1);
//! println!("{}", m.summary());
//! ```

use serde::{Deserialize, Serialize};

pub mod allocator;
pub mod ceiling;
pub use allocator::keep_freed_memory;
pub use ceiling::{measure_kernels, measure_peak, ComputePeak, KernelPeak};

/// The instruction-set flags (as spelt in `/proc/cpuinfo`) that [`Machine`] records:
/// the ones the matrix-product and distance kernels of candle, gemm, FAISS and
/// llama.cpp choose between at run time.
pub const FEATURES: [&str; 12] = [
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
];

/// `/proc/loadavg`'s first three numbers (1, 5 and 15 minute load averages, space
/// separated), or `"unknown"` when the file cannot be read (not Linux).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| parse_loadavg(&s))
        .unwrap_or_else(|_| "unknown".into())
}

/// The 1-minute load average (the first number of [`load_average`]), NaN when unknown.
pub fn load_average_1min() -> f64 {
    first_number(&load_average())
}

/// Peak resident memory of process `pid` (this process for `None`) in bytes: the `VmHWM`
/// line of `/proc/<pid>/status`. `None` where it cannot be read (not Linux, the process
/// gone).
pub fn peak_resident_bytes(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".into(),
    };
    parse_vm_hwm(&std::fs::read_to_string(path).ok()?)
}

/// The `VmHWM` of `/proc/<pid>/status` text, in bytes.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Reset this process's peak resident memory to what it holds now (Linux: `5` written to
/// `/proc/self/clear_refs`), so that [`peak_resident_bytes`] measures one phase of a
/// process. `false` where the kernel does not allow it.
pub fn reset_peak_resident() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The first whitespace-separated field of `s` as a number, NaN when it is not one.
fn first_number(s: &str) -> f64 {
    s.split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The first three fields of `/proc/loadavg` text, or `"unknown"` when it has fewer.
fn parse_loadavg(text: &str) -> String {
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    if fields.len() == 3 {
        fields.join(" ")
    } else {
        "unknown".into()
    }
}

/// What [`CpuInfo::parse`] reads from `/proc/cpuinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuInfo {
    /// `model name` of the first processor (empty when absent).
    pub model: String,
    /// Number of `processor` entries.
    pub processors: usize,
    /// The flags of [`FEATURES`] the first processor lists, in [`FEATURES`] order.
    pub features: Vec<String>,
    /// `cpu family` of the first processor that lists it: one model name (`AMD EPYC`)
    /// covers several generations, which the family and model number tell apart.
    pub family: Option<u32>,
    /// `model` (the number, not `model name`) of the first processor that lists it.
    pub model_number: Option<u32>,
}

impl CpuInfo {
    /// Parse `/proc/cpuinfo` text (x86 layout: `key<TAB>: value` lines, one block per
    /// logical processor). Model and flags come from the first block that has them.
    pub fn parse(text: &str) -> CpuInfo {
        let mut info = CpuInfo::default();
        let mut flags: Option<Vec<&str>> = None;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "processor" => info.processors += 1,
                "model name" if info.model.is_empty() => info.model = value.to_string(),
                "cpu family" if info.family.is_none() => info.family = value.parse().ok(),
                "model" if info.model_number.is_none() => info.model_number = value.parse().ok(),
                "flags" if flags.is_none() => flags = Some(value.split_whitespace().collect()),
                _ => {}
            }
        }
        let flags = flags.unwrap_or_default();
        info.features = FEATURES
            .iter()
            .filter(|f| flags.contains(f))
            .map(|f| f.to_string())
            .collect();
        info
    }
}

/// The machine a benchmark ran on. Serialised into result configurations; shown
/// above result tables by [`Machine::summary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name from `/proc/cpuinfo` (`"unknown"` when unreadable).
    pub cpu_model: String,
    /// Logical cores this process may use (`std::thread::available_parallelism`,
    /// which follows CPU affinity and cgroup quotas).
    pub cores: usize,
    /// Logical processors `/proc/cpuinfo` lists (0 when unreadable).
    pub cpuinfo_processors: usize,
    /// The flags of [`FEATURES`] the CPU has, in that order.
    pub features: Vec<String>,
    /// `cpu family` of `/proc/cpuinfo` (absent when unreadable, and in records made before
    /// it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_family: Option<u32>,
    /// `model` (the number) of `/proc/cpuinfo`, as `cpu_family`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model_number: Option<u32>,
    /// [`load_average`] when [`Machine::detect`] ran.
    pub load_before: String,
    /// Kernel release (`/proc/sys/kernel/osrelease`), `"unknown"` when unreadable.
    pub kernel: String,
    /// `PRETTY_NAME` of `/etc/os-release`, `"unknown"` when unreadable.
    pub os: String,
}

impl Machine {
    /// Read the machine's description now (a handful of small `/proc` files; no
    /// measurement). Files that cannot be read leave `"unknown"` / 0 in their fields.
    pub fn detect() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .map(|t| CpuInfo::parse(&t))
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty());
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| os_pretty_name(&t));
        Machine {
            cpu_model: if cpu.model.is_empty() {
                "unknown".into()
            } else {
                cpu.model
            },
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpuinfo_processors: cpu.processors,
            features: cpu.features,
            cpu_family: cpu.family,
            cpu_model_number: cpu.model_number,
            load_before: load_average(),
            kernel: kernel.unwrap_or_else(|| "unknown".into()),
            os: os.unwrap_or_else(|| "unknown".into()),
        }
    }

    /// One line for the top of a result table, e.g.
    /// `Intel Xeon Processor · 2 cores · avx avx2 fma f16c avx512f avx512bw avx512_vnni avx512_bf16 avx_vnni amx · load 0.41 0.11 0.03`.
    /// `(R)`/`(TM)` marks are dropped from the model; the three AMX flags read `amx`
    /// when all are present; `2 of 8 cores` when fewer cores are usable than
    /// `/proc/cpuinfo` lists.
    pub fn summary(&self) -> String {
        format!(
            "{} · {} · load {}",
            self.cpu(),
            self.instruction_sets(),
            self.load_before
        )
    }

    /// The CPU model and the usable cores, as [`Machine::summary`] starts:
    /// `Intel Xeon Processor · 2 cores`.
    pub fn cpu(&self) -> String {
        let model = self
            .cpu_model
            .replace("(R)", "")
            .replace("(TM)", "")
            .replace("(tm)", "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let noun = if self.cores == 1 { "core" } else { "cores" };
        let cores = if self.cpuinfo_processors > self.cores {
            format!("{} of {} {noun}", self.cores, self.cpuinfo_processors)
        } else {
            format!("{} {noun}", self.cores)
        };
        format!("{model} · {cores}")
    }

    /// The instruction sets of [`FEATURES`] the CPU has, as [`Machine::summary`] shows them
    /// (`amx` for the three AMX flags together; `no AVX` when none).
    pub fn instruction_sets(&self) -> String {
        let amx = ["amx_tile", "amx_int8", "amx_bf16"];
        let all_amx = amx.iter().all(|a| self.features.iter().any(|f| f == a));
        let mut features: Vec<&str> = Vec::new();
        for f in &self.features {
            if all_amx && amx.contains(&f.as_str()) {
                if !features.contains(&"amx") {
                    features.push("amx");
                }
            } else {
                features.push(f);
            }
        }
        if features.is_empty() {
            "no AVX".to_string()
        } else {
            features.join(" ")
        }
    }
}

/// `PRETTY_NAME` of `/etc/os-release` text, quotes removed.
fn os_pretty_name(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status = "Name:\tx\nVmPeak:\t  900 kB\nVmHWM:\t    1234 kB\nVmRSS:\t  1000 kB\n";
        assert_eq!(super::parse_vm_hwm(status), Some(1234 * 1024));
        assert_eq!(super::parse_vm_hwm("VmRSS:\t 1 kB\n"), None);
    }

    use super::*;

    /// Two logical processors of a Sapphire Rapids guest (flags shortened; the order
    /// differs from [`FEATURES`], as it does in real files).
    const CPUINFO: &str = "processor\t: 0\n\
        vendor_id\t: GenuineIntel\n\
        cpu family\t: 6\n\
        model\t\t: 143\n\
        model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n\
        flags\t\t: fpu sse2 fma avx f16c avx2 avx512f avx512bw avx_vnni avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8\n\
        \n\
        processor\t: 1\n\
        vendor_id\t: GenuineIntel\n\
        model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n\
        flags\t\t: fpu sse2 fma avx f16c avx2 avx512f avx512bw avx_vnni avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8\n";

    fn machine(features: &[&str], cores: usize, processors: usize) -> Machine {
        Machine {
            cpu_model: "Intel(R) Xeon(R) Processor".into(),
            cores,
            cpuinfo_processors: processors,
            features: features.iter().map(|f| f.to_string()).collect(),
            cpu_family: None,
            cpu_model_number: None,
            load_before: "0.41 0.11 0.03".into(),
            kernel: "6.1.0".into(),
            os: "Debian GNU/Linux 12 (bookworm)".into(),
        }
    }

    #[test]
    fn cpuinfo_gives_model_processor_count_and_features_in_canonical_order() {
        let c = CpuInfo::parse(CPUINFO);
        assert_eq!(c.model, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz");
        assert_eq!(c.processors, 2);
        assert_eq!((c.family, c.model_number), (Some(6), Some(143)));
        // The fixture has every flag of FEATURES, listed in another order.
        assert_eq!(c.features, FEATURES);
    }

    #[test]
    fn cpuinfo_flags_match_whole_words_only() {
        // `avx512_bf16` and `avx512vl` must not count as `avx512f` or `avx`; `fma4` is
        // not `fma`.
        let c = CpuInfo::parse("processor : 0\nflags : sse2 avx512_bf16 avx512vl fma4 avx2\n");
        assert_eq!(c.features, ["avx2", "avx512_bf16"]);
        assert_eq!(c.model, "");
        assert_eq!((c.family, c.model_number), (None, None));
    }

    #[test]
    fn cpuinfo_without_flags_or_processors_is_empty_not_an_error() {
        let c = CpuInfo::parse("Processor\t: AArch64 Processor rev 4\nFeatures : neon\n");
        assert_eq!(c, CpuInfo::default());
    }

    #[test]
    fn loadavg_keeps_three_numbers() {
        assert_eq!(
            parse_loadavg("0.41 0.11 0.03 2/301 12345\n"),
            "0.41 0.11 0.03"
        );
        assert_eq!(parse_loadavg("0.41\n"), "unknown");
        assert_eq!(parse_loadavg(""), "unknown");
    }

    #[test]
    fn first_number_of_a_load_line() {
        assert_eq!(first_number("0.41 0.11 0.03"), 0.41);
        assert!(first_number("unknown").is_nan());
        assert!(first_number("").is_nan());
    }

    #[test]
    fn load_average_reads_proc_loadavg_here() {
        let l = load_average();
        if std::path::Path::new("/proc/loadavg").exists() {
            let nums: Vec<f64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            assert_eq!(nums.len(), 3, "{l}");
            assert!(load_average_1min() >= 0.0);
        } else {
            assert_eq!(l, "unknown");
        }
    }

    #[test]
    fn os_release_pretty_name_without_quotes() {
        let t = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
        assert_eq!(
            os_pretty_name(t).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(os_pretty_name("ID=debian\n"), None);
    }

    #[test]
    fn summary_collapses_amx_and_drops_trademarks() {
        let m = machine(
            &[
                "avx2",
                "fma",
                "avx512f",
                "avx512_vnni",
                "amx_tile",
                "amx_int8",
                "amx_bf16",
            ],
            2,
            2,
        );
        assert_eq!(
            m.summary(),
            "Intel Xeon Processor · 2 cores · avx2 fma avx512f avx512_vnni amx · load 0.41 0.11 0.03"
        );
    }

    #[test]
    fn summary_lists_partial_amx_and_restricted_cores() {
        let m = machine(&["avx2", "amx_tile"], 2, 8);
        assert_eq!(
            m.summary(),
            "Intel Xeon Processor · 2 of 8 cores · avx2 amx_tile · load 0.41 0.11 0.03"
        );
        let none = machine(&[], 1, 0);
        assert!(
            none.summary().contains("· 1 core · no AVX ·"),
            "{}",
            none.summary()
        );
    }

    #[test]
    fn detect_describes_this_machine_and_round_trips_through_json() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(m.features.iter().all(|f| FEATURES.contains(&f.as_str())));
        if let Ok(t) = std::fs::read_to_string("/proc/cpuinfo") {
            assert_eq!(m.cpuinfo_processors, CpuInfo::parse(&t).processors);
        }
        let back: Machine = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
