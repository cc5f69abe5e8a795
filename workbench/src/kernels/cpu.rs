//! What the CPU can run: the crate's one CPU-feature detection, the capability tokens the
//! kernels take, and the switches that turn a fast path off for comparisons.
//!
//! [`features`] detects once per process (cached) what the kernels check: AVX2, FMA, F16C,
//! AVX-512 F/BW/VL/VNNI/BF16, AVX-VNNI, and, asked for separately, AMX (tile, int8,
//! bf16). A token such as [`Avx512`] can only be had from [`Features`] (its one field is
//! private to this file), so holding one proves the CPU has the feature: a kernel that
//! needs AVX-512 takes an `Avx512` and can call its `#[target_feature]` code soundly.
//!
//! AMX needs more than the CPU bit: on Linux a process must ask the kernel for the tile
//! data (`arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`), made once, the first time an AMX
//! token is asked for ([`Features::amx_int8`], [`Features::amx_bf16`]), never before.

use std::sync::OnceLock;

/// Whether the environment variable `var` switches a fast path off (set, not empty, not
/// `0`): the `WORKBENCH_LLM_NO_*` switches, for comparisons.
pub fn switched_off(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The CPU features the kernels check, detected once ([`features`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    avx2: bool,
    fma: bool,
    f16c: bool,
    avx512f: bool,
    avx512bw: bool,
    avx512vl: bool,
    avx512vnni: bool,
    avx512bf16: bool,
    avxvnni: bool,
}

/// This CPU's features, detected on the first call and cached.
pub fn features() -> &'static Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    FEATURES.get_or_init(Features::detect)
}

macro_rules! token {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name(());
    };
}

token! {
    /// Proof that the CPU has AVX2.
    Avx2
}
token! {
    /// Proof that the CPU has AVX2 and FMA.
    Avx2Fma
}
token! {
    /// Proof that the CPU has AVX-512 F.
    Avx512
}
token! {
    /// Proof that the CPU has AVX-512 F and BW and F16C.
    Avx512BwF16c
}
token! {
    /// Proof that the CPU has AVX-512 F and VNNI.
    Avx512Vnni
}
token! {
    /// Proof that the CPU has AVX-512 F and BF16.
    Avx512Bf16
}
token! {
    /// Proof that the CPU has AVX-VNNI (the VEX encoding, 256 bits).
    AvxVnni
}
token! {
    /// Proof that the CPU has AMX tiles and AMX-INT8, and that this process may use tile
    /// data.
    AmxInt8
}
token! {
    /// Proof that the CPU has AMX tiles and AMX-BF16, and that this process may use tile
    /// data.
    AmxBf16
}

token! {
    /// Proof that the CPU has AMX tiles and that this process may use tile data (from
    /// either AMX token).
    AmxTiles
}

impl From<AmxInt8> for AmxTiles {
    fn from(_: AmxInt8) -> AmxTiles {
        AmxTiles(())
    }
}

impl From<AmxBf16> for AmxTiles {
    fn from(_: AmxBf16) -> AmxTiles {
        AmxTiles(())
    }
}

impl Avx512BwF16c {
    /// AVX-512 BW implies AVX-512 F.
    pub fn avx512(self) -> Avx512 {
        Avx512(())
    }
}

impl Features {
    #[cfg(target_arch = "x86_64")]
    fn detect() -> Features {
        Features {
            avx2: is_x86_feature_detected!("avx2"),
            fma: is_x86_feature_detected!("fma"),
            f16c: is_x86_feature_detected!("f16c"),
            avx512f: is_x86_feature_detected!("avx512f"),
            avx512bw: is_x86_feature_detected!("avx512bw"),
            avx512vl: is_x86_feature_detected!("avx512vl"),
            avx512vnni: is_x86_feature_detected!("avx512vnni"),
            avx512bf16: is_x86_feature_detected!("avx512bf16"),
            avxvnni: is_x86_feature_detected!("avxvnni"),
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn detect() -> Features {
        Features {
            avx2: false,
            fma: false,
            f16c: false,
            avx512f: false,
            avx512bw: false,
            avx512vl: false,
            avx512vnni: false,
            avx512bf16: false,
            avxvnni: false,
        }
    }

    /// AVX2.
    pub fn avx2(&self) -> Option<Avx2> {
        self.avx2.then_some(Avx2(()))
    }

    /// AVX2 and FMA.
    pub fn avx2_fma(&self) -> Option<Avx2Fma> {
        (self.avx2 && self.fma).then_some(Avx2Fma(()))
    }

    /// AVX-512 F.
    pub fn avx512(&self) -> Option<Avx512> {
        self.avx512f.then_some(Avx512(()))
    }

    /// AVX-512 F and BW, and F16C.
    pub fn avx512bw_f16c(&self) -> Option<Avx512BwF16c> {
        (self.avx512f && self.avx512bw && self.f16c).then_some(Avx512BwF16c(()))
    }

    /// AVX-512 F and VNNI.
    pub fn avx512vnni(&self) -> Option<Avx512Vnni> {
        (self.avx512f && self.avx512vnni).then_some(Avx512Vnni(()))
    }

    /// AVX-512 F and BF16.
    pub fn avx512bf16(&self) -> Option<Avx512Bf16> {
        (self.avx512f && self.avx512bf16).then_some(Avx512Bf16(()))
    }

    /// AVX-VNNI.
    pub fn avxvnni(&self) -> Option<AvxVnni> {
        self.avxvnni.then_some(AvxVnni(()))
    }

    /// AMX-INT8 with tile data permitted (the first AMX question asks the kernel for it).
    pub fn amx_int8(&self) -> Option<AmxInt8> {
        (amx_features() & AMX_INT8 != 0).then_some(AmxInt8(()))
    }

    /// AMX-BF16 with tile data permitted (as [`Features::amx_int8`]).
    pub fn amx_bf16(&self) -> Option<AmxBf16> {
        (amx_features() & AMX_BF16 != 0).then_some(AmxBf16(()))
    }

    /// AVX-512 VL (detected for reports; no kernel needs it alone).
    pub fn has_avx512vl(&self) -> bool {
        self.avx512vl
    }

    /// The names of the features found, AMX included (which asks for tile data).
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            ("avx2", self.avx2),
            ("fma", self.fma),
            ("f16c", self.f16c),
            ("avx512f", self.avx512f),
            ("avx512bw", self.avx512bw),
            ("avx512vl", self.avx512vl),
            ("avx512vnni", self.avx512vnni),
            ("avx512bf16", self.avx512bf16),
            ("avxvnni", self.avxvnni),
            ("amx-int8", self.amx_int8().is_some()),
            ("amx-bf16", self.amx_bf16().is_some()),
        ];
        all.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect()
    }
}

/// CPUID leaf 7 EDX bits (the std macro's names for them are not stable yet).
const AMX_BF16: u32 = 1 << 22;
const AMX_TILE: u32 = 1 << 24;
const AMX_INT8: u32 = 1 << 25;

/// The AMX bits of CPUID leaf 7 EDX when the CPU has AMX tiles and the tile-data request
/// succeeded, else 0.
fn amx_features() -> u32 {
    static FEATURES: OnceLock<u32> = OnceLock::new();
    *FEATURES.get_or_init(amx_request)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn amx_request() -> u32 {
    // SAFETY: CPUID is present on every x86-64 CPU; leaf 7 is read only when the CPU
    // reports it (a leaf above the maximum returns another leaf's data).
    #[allow(unused_unsafe)]
    let max_leaf = unsafe { std::arch::x86_64::__get_cpuid_max(0) }.0;
    if max_leaf < 7 {
        return 0;
    }
    #[allow(unused_unsafe)]
    // SAFETY: as above; leaf 7 exists.
    let edx = unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.edx;
    if edx & AMX_TILE == 0 {
        return 0;
    }
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a plain system call with integer arguments.
    let granted = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    };
    if granted {
        edx & (AMX_TILE | AMX_INT8 | AMX_BF16)
    } else {
        0
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn amx_request() -> u32 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_the_detected_features() {
        let f = features();
        assert_eq!(f, features(), "detected once");
        // A wider token implies the narrower one it contains.
        if f.avx512bw_f16c().is_some() || f.avx512vnni().is_some() || f.avx512bf16().is_some() {
            assert!(f.avx512().is_some());
        }
        if f.avx2_fma().is_some() {
            assert!(f.avx2().is_some());
        }
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(f.avx512().is_some(), is_x86_feature_detected!("avx512f"));
            assert_eq!(f.avx2().is_some(), is_x86_feature_detected!("avx2"));
        }
        let names = f.names();
        assert_eq!(names.contains(&"avx512f"), f.avx512().is_some());
        assert_eq!(names.contains(&"amx-bf16"), f.amx_bf16().is_some());
        eprintln!("CPU features: {}", names.join(" "));
    }
}
