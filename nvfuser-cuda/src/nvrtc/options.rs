//! The target architecture and the NVRTC option list, built in this one place.

use std::fmt;

/// A real GPU architecture (compute capability), such as `sm_90`.
///
/// Kernels are compiled to machine code (CUBIN) for exactly this architecture, so the driver
/// loads them without a JIT step.
///
/// ```
/// use nvfuser_cuda::GpuArch;
/// assert_eq!(GpuArch::new(9, 0), GpuArch::SM90);
/// assert_eq!(GpuArch::SM90.to_string(), "sm_90");
/// assert_eq!(GpuArch::new(10, 0).sm(), 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuArch {
    major: u32,
    minor: u32,
}

impl GpuArch {
    /// Ampere A100 (`sm_80`).
    pub const SM80: GpuArch = GpuArch::new(8, 0);
    /// Ampere consumer parts (`sm_86`).
    pub const SM86: GpuArch = GpuArch::new(8, 6);
    /// Ada (`sm_89`).
    pub const SM89: GpuArch = GpuArch::new(8, 9);
    /// Hopper H100/H200 (`sm_90`).
    pub const SM90: GpuArch = GpuArch::new(9, 0);
    /// Blackwell B200 (`sm_100`).
    pub const SM100: GpuArch = GpuArch::new(10, 0);

    /// The architecture of compute capability `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        GpuArch { major, minor }
    }

    /// The major compute capability.
    pub const fn major(self) -> u32 {
        self.major
    }

    /// The minor compute capability.
    pub const fn minor(self) -> u32 {
        self.minor
    }

    /// `10 * major + minor`, the number NVRTC uses in `sm_XX` and in its list of
    /// supported architectures.
    pub const fn sm(self) -> u32 {
        10 * self.major + self.minor
    }
}

impl fmt::Display for GpuArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.sm())
    }
}

/// The options of one NVRTC compilation.
///
/// Always passed: `--std=c++17`, `--gpu-architecture=sm_XX` (a real architecture, so NVRTC
/// emits a CUBIN), `-default-device` (unannotated functions are device functions) and
/// `--fmad=...`. Optional: `-lineinfo` (source lines for profilers) and
/// `--maxrregcount=N`. The options are part of what identifies a compiled kernel, so they
/// are `Hash + Eq`.
///
/// ```
/// use nvfuser_cuda::{GpuArch, NvrtcOptions};
/// let opts = NvrtcOptions::new(GpuArch::SM90).line_info(true).max_registers(Some(64));
/// assert_eq!(
///     opts.to_args(),
///     [
///         "--std=c++17",
///         "--gpu-architecture=sm_90",
///         "-default-device",
///         "--fmad=false",
///         "-lineinfo",
///         "--maxrregcount=64",
///     ]
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NvrtcOptions {
    arch: GpuArch,
    fmad: bool,
    line_info: bool,
    max_registers: Option<u32>,
    extra: Vec<String>,
}

impl NvrtcOptions {
    /// The default options for `arch`: fused multiply-add off, no line info, no register
    /// cap.
    ///
    /// FMA contraction is off because it breaks the evaluator's rule that every float op
    /// rounds on its own: with `x = a * b` used twice, NVRTC may fold one use into
    /// `fma(a, b, -y)`, the unrounded product, while another use sees `x` rounded. Then
    /// `x - mean` of a one-element row is the product's rounding error instead of 0, and
    /// a variance with correction 1 over that row is ±inf instead of the reference's NaN
    /// (fuzz seed 1009234). Generated kernels are memory-bound, so the separate multiply
    /// and add cost no measurable time.
    pub fn new(arch: GpuArch) -> Self {
        NvrtcOptions {
            arch,
            fmad: false,
            line_info: false,
            max_registers: None,
            extra: Vec::new(),
        }
    }

    /// Whether NVRTC may contract multiplies and adds into FMA instructions (default off).
    pub fn fmad(mut self, on: bool) -> Self {
        self.fmad = on;
        self
    }

    /// Whether to emit source line information (`-lineinfo`) for profilers.
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Caps the registers per thread (`--maxrregcount`); `None` leaves it to NVRTC.
    pub fn max_registers(mut self, max: Option<u32>) -> Self {
        self.max_registers = max;
        self
    }

    /// Appends one raw NVRTC option, passed after all others.
    pub fn extra_option(mut self, option: impl Into<String>) -> Self {
        self.extra.push(option.into());
        self
    }

    /// The target architecture.
    pub fn arch(&self) -> GpuArch {
        self.arch
    }

    /// The option list exactly as it is passed to `nvrtcCompileProgram`.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--std=c++17".to_owned(),
            format!("--gpu-architecture={}", self.arch),
            "-default-device".to_owned(),
            format!("--fmad={}", self.fmad),
        ];
        if self.line_info {
            args.push("-lineinfo".to_owned());
        }
        if let Some(max) = self.max_registers {
            args.push(format!("--maxrregcount={max}"));
        }
        args.extend(self.extra.iter().cloned());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_args() {
        assert_eq!(
            NvrtcOptions::new(GpuArch::SM80).to_args(),
            [
                "--std=c++17",
                "--gpu-architecture=sm_80",
                "-default-device",
                "--fmad=false"
            ]
        );
    }

    #[test]
    fn extra_options_come_last() {
        let args = NvrtcOptions::new(GpuArch::SM100)
            .extra_option("-DNVF=1")
            .line_info(true)
            .to_args();
        assert_eq!(args[1], "--gpu-architecture=sm_100");
        assert_eq!(args.last().map(String::as_str), Some("-DNVF=1"));
    }
}
