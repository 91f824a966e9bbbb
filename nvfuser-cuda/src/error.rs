//! The library's one error type, [`Error`] (`nvfuser::Error` in the facade): definition,
//! planning, compilation, device and launch errors alike.
//!
//! Every variant says what was expected and what was found. A missing library is an
//! error value here, never a panic, and a failed compilation carries the NVRTC log and the
//! whole source so that the caller can show or save both.

use std::fmt;
use std::path::PathBuf;

use nvfuser_core::DataType;

use crate::driver::DriverVersion;
use crate::nvrtc::{GpuArch, NvrtcVersion};

/// Errors of NVRTC compilation, the CUDA driver, devices, tensors and the kernel cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No `libnvrtc` could be opened, so nothing can be compiled.
    #[error(
        "NVRTC is not available: no libnvrtc could be opened (tried {} on the library search path{}). \
         Install NVRTC {}.x (for example `source scripts/nvrtc-env.sh`, or `pip install nvidia-cuda-nvrtc`) \
         and put its lib directory in LD_LIBRARY_PATH or in {}",
        dedup_join(.searched),
        .lib_dir.as_ref().map(|(dir, why)| format!("; {}={}: {why}", crate::nvrtc::LIB_DIR_VAR, dir.display())).unwrap_or_default(),
        bindings_major(),
        crate::nvrtc::LIB_DIR_VAR,
    )]
    NvrtcNotFound {
        /// The library names tried, in order (cudarc's names).
        searched: Vec<String>,
        /// `NVFUSER_NVRTC_LIB_DIR` when it was set, and why it did not help.
        lib_dir: Option<(PathBuf, String)>,
    },

    /// A `libnvrtc` was opened but lacks a function this crate calls.
    #[error(
        "the libnvrtc opened as `{loaded_as}` lacks the function `{symbol}`; \
         nvfuser needs NVRTC {}.x",
        bindings_major()
    )]
    NvrtcTooOld {
        /// The name or path the library was opened by.
        loaded_as: String,
        /// The missing function.
        symbol: &'static str,
    },

    /// An NVRTC call other than the compilation itself failed.
    #[error("NVRTC call {call} failed with {code}")]
    NvrtcCall {
        /// The NVRTC function.
        call: &'static str,
        /// The `nvrtcResult` it returned.
        code: String,
    },

    /// The requested architecture is not one this NVRTC can compile for.
    #[error(
        "NVRTC {version} cannot compile for {arch}; it supports {}",
        .supported.iter().map(|sm| format!("sm_{sm}")).collect::<Vec<_>>().join(", ")
    )]
    UnsupportedArch {
        /// The requested architecture.
        arch: GpuArch,
        /// The NVRTC version that was asked.
        version: NvrtcVersion,
        /// The architectures it supports, as `10 * major + minor`.
        supported: Vec<u32>,
    },

    /// NVRTC rejected the source (or the options); the log says why.
    #[error("{0}")]
    Compile(Box<CompileFailure>),

    /// An input that cannot be passed to NVRTC at all (for example a NUL byte).
    #[error("cannot compile kernel `{kernel}`: {what}")]
    InvalidInput {
        /// The kernel name given to the compiler.
        kernel: String,
        /// What is wrong with the input.
        what: String,
    },

    /// No `libcuda` could be opened: there is no NVIDIA driver on this machine.
    #[error(
        "no CUDA driver: libcuda could not be opened (tried {}); this machine has no NVIDIA \
         driver, so kernels can be compiled but not run here",
        dedup_join(.searched)
    )]
    NoDriver {
        /// The library names tried, in order (cudarc's names).
        searched: Vec<String>,
    },

    /// A `libcuda` was opened but lacks a function this crate calls.
    #[error(
        "the libcuda opened as `{loaded_as}` lacks the function `{symbol}`; the driver is too old"
    )]
    DriverSymbolMissing {
        /// The name the library was opened by.
        loaded_as: String,
        /// The missing function.
        symbol: &'static str,
    },

    /// The driver is older than the CUDA version the bindings are built for.
    #[error(
        "the CUDA driver supports CUDA {found}, but nvfuser is built for CUDA {}.{} or newer; \
         update the NVIDIA driver",
        .required.0, .required.1
    )]
    DriverTooOld {
        /// The CUDA version the driver supports.
        found: DriverVersion,
        /// The CUDA version the bindings need, `(major, minor)`.
        required: (u32, u32),
    },

    /// The driver loaded but sees no GPU.
    #[error("the CUDA driver (CUDA {driver}) is loaded but finds no GPU")]
    NoDevice {
        /// The CUDA version the driver supports.
        driver: DriverVersion,
    },

    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed with {code}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The `CUresult` it returned.
        code: String,
    },

    /// A GPU index that the driver does not have.
    #[error(
        "GPU {requested} was requested, but the CUDA driver sees {count} GPU(s) \
         (valid indices are 0..{count})"
    )]
    InvalidDeviceIndex {
        /// The index asked for.
        requested: usize,
        /// The number of GPUs the driver sees.
        count: u32,
    },

    /// A device allocation failed because the GPU is out of memory.
    #[error("out of GPU memory on {device}: could not allocate {requested_bytes} bytes")]
    OutOfMemory {
        /// The device, as `cuda:N (name)`.
        device: String,
        /// The size of the failed allocation.
        requested_bytes: usize,
    },

    /// This build has no CUDA: nvfuser was built without its `cuda` feature, so no CUDA
    /// library is ever loaded (no NVRTC, no driver, no GPU). What runs on the CPU
    /// reference device works as usual.
    #[error(
        "{op}: nvfuser was built without the `cuda` feature, so CUDA is not available; \
         enable the feature (it is on by default) to compile kernels or use a GPU"
    )]
    CudaDisabled {
        /// The operation that needs CUDA.
        op: &'static str,
    },

    /// An operation that needs a GPU was given the CPU reference device.
    #[error("{op} needs a GPU device, but was given the CPU reference device")]
    NotAGpu {
        /// The operation.
        op: &'static str,
    },

    /// A tensor of another element type than the one asked for.
    #[error("{op}: expected a tensor of dtype {expected}, found {found}")]
    DtypeMismatch {
        /// The operation.
        op: &'static str,
        /// The dtype the operation needs.
        expected: DataType,
        /// The dtype it was given.
        found: DataType,
    },

    /// A device-side check of a kernel failed (like PyTorch's device-side asserts): an
    /// out-of-range index of `gather`, `take_along_axis` or `index_select`, or an integer
    /// `div`, `fmod` or `remainder` by zero (see `nvfuser_core::codegen::checks`). The
    /// kernel gave the failing elements a defined value (zero) and read nothing out of
    /// bounds; the error is reported at the next download or [`crate::Device::synchronize`]
    /// after the launch (launches are asynchronous), then cleared.
    #[error("device-side check failed: {message}")]
    DeviceAssert {
        /// The op that failed (`gather`, `index_select`, `take_along_axis`, `div`,
        /// `fmod`, `remainder`; `unknown` when the kernel's check table is not known).
        op: String,
        /// The indexed dim, for index checks.
        axis: Option<usize>,
        /// The bad index, or the dividend of a division by zero.
        value: i64,
        /// The size of the indexed dim (valid indices are `0..bound`); 0 for a division.
        bound: i64,
        /// The whole message, with the expression and the device (`gather index 17 out
        /// of range 0..16 at dim 1 in T2 = gather(T0, T1, axis=1) (on cuda:0)`).
        message: String,
    },

    /// A tensor argument that does not fit the operation: a shape, an axis, a view that
    /// leaves its buffer, a misaligned pointer.
    #[error("{op}: expected {expected}, found {found}")]
    InvalidTensor {
        /// The operation.
        op: &'static str,
        /// What the operation needs.
        expected: String,
        /// What it was given.
        found: String,
    },

    /// The kernel's launch covers no element for these sizes (its loops follow an empty
    /// tensor) while output `output` has elements: running it would leave them unwritten.
    /// The executor computes such a call with the CPU reference instead.
    #[error(
        "the kernel's launch is empty for these sizes, but output {output} has {elements} elements"
    )]
    EmptyLaunch {
        /// The output's position.
        output: usize,
        /// Its element count.
        elements: usize,
    },

    /// GPU execution of generated kernels is not available in this build yet.
    #[error(
        "{what} on a GPU is not implemented yet (the kernel executor is being built); \
         run on Device::cpu() meanwhile"
    )]
    GpuExecutionUnavailable {
        /// What was asked for.
        what: String,
    },

    /// The fusion cannot run on a GPU: no scheduler takes it.
    #[error("cannot run this fusion on the GPU: {reason}")]
    UnsupportedFusion {
        /// What is not supported, in plain words.
        reason: String,
    },

    /// A broken invariant inside this library (a bug: please report it with the
    /// fusion's reproducer). Never a property of the user's fusion or arguments.
    #[error("internal error in nvfuser-rs (please report it): {reason}")]
    Internal {
        /// What broke.
        reason: String,
    },

    /// A CUDA graph capture could not start or failed ([`crate::Device::capture`]).
    #[error("CUDA graph capture: {reason}")]
    Capture {
        /// What went wrong, in plain words.
        reason: String,
    },

    /// User-given heuristic params are out of range or do not fit the call.
    #[error("invalid heuristic params: {reason}")]
    InvalidParams {
        /// Which field or fact, expected and found.
        reason: String,
    },

    /// Tensors on different devices given to one operation.
    #[error("{op}: expected tensors on {expected}, found one on {found}")]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// The device the operation runs on.
        expected: String,
        /// The device of the offending tensor.
        found: String,
    },

    /// A CUBIN compiled for another architecture than the GPU it is loaded on.
    #[error(
        "kernel `{kernel}` was compiled for {kernel_arch}, but {device} is {device_arch}; \
         compile it for {device_arch}"
    )]
    ArchMismatch {
        /// The kernel name.
        kernel: String,
        /// The architecture the CUBIN is for.
        kernel_arch: GpuArch,
        /// The device, as `cuda:N (name)`.
        device: String,
        /// The device's architecture.
        device_arch: GpuArch,
    },

    /// A loaded CUBIN has no function of the requested name.
    #[error(
        "the CUBIN of kernel `{kernel}` has no function `{function}` (is it declared \
         `extern \"C\" __global__`?)"
    )]
    FunctionNotFound {
        /// The kernel (program) name.
        kernel: String,
        /// The function looked up.
        function: String,
    },

    /// An environment variable holds a value this crate does not understand.
    #[error("environment variable {var}={value:?}: expected {expected}")]
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it may hold.
        expected: &'static str,
    },

    /// A dtype this operation does not handle yet (the dtype list is `non_exhaustive`).
    #[error("{op}: dtype {dtype} is not supported here")]
    UnsupportedDtype {
        /// The operation.
        op: &'static str,
        /// The dtype.
        dtype: DataType,
    },

    /// An error of nvfuser-core (the CPU reference evaluator's tensors, the IR).
    #[error(transparent)]
    Core(#[from] nvfuser_core::Error),

    /// A scheduling primitive refused its arguments (a hand schedule).
    #[error(transparent)]
    Schedule(#[from] nvfuser_core::sched::ScheduleError),

    /// Heuristic params could not be applied (`schedule_with`).
    #[error(transparent)]
    Scheduler(#[from] nvfuser_core::scheduler::SchedulerError),

    /// The kernel cache directory cannot be used.
    #[error("kernel cache directory {}: {what}", .path.display())]
    CacheDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        what: String,
    },
}

/// The CUDA major version of the bindings, for the messages that name the NVRTC needed.
#[cfg(feature = "cuda")]
fn bindings_major() -> String {
    crate::CUDA_BINDINGS_VERSION.0.to_string()
}

/// Without `cuda` no NVRTC is ever looked for, so the messages that use this never show.
#[cfg(not(feature = "cuda"))]
fn bindings_major() -> String {
    "(none: built without `cuda`)".to_owned()
}

impl Error {
    /// A failed driver call, from cudarc's error.
    #[cfg(feature = "cuda")]
    pub(crate) fn driver(call: &'static str, err: cudarc::driver::DriverError) -> Self {
        Error::Driver {
            call,
            code: format!("{:?}", err.0),
        }
    }

    /// An invalid tensor argument.
    pub(crate) fn tensor(
        op: &'static str,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Self {
        Error::InvalidTensor {
            op,
            expected: expected.into(),
            found: found.into(),
        }
    }
}

/// A failed NVRTC compilation: the log, and everything needed to reproduce it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileFailure {
    /// The kernel name; NVRTC's log names the program `<kernel>.cu`.
    pub kernel: String,
    /// The architecture compiled for.
    pub arch: GpuArch,
    /// The NVRTC that failed.
    pub nvrtc_version: NvrtcVersion,
    /// The `nvrtcResult` of `nvrtcCompileProgram`, e.g. `NVRTC_ERROR_COMPILATION`.
    pub status: String,
    /// The full option list passed to NVRTC.
    pub options: Vec<String>,
    /// NVRTC's program log, as NVRTC wrote it.
    pub log: String,
    /// The complete CUDA C++ source that was compiled.
    pub source_code: String,
}

impl CompileFailure {
    /// The program name NVRTC uses for this kernel in its log (`<kernel>.cu`).
    pub fn program_name(&self) -> String {
        program_name(&self.kernel)
    }

    /// The 1-based source lines that NVRTC's log points at, in log order, without repeats.
    pub fn referenced_lines(&self) -> Vec<usize> {
        let prefix = format!("{}(", self.program_name());
        let mut lines = Vec::new();
        for log_line in self.log.lines() {
            let Some(rest) = log_line.trim_start().strip_prefix(&prefix) else {
                continue;
            };
            let digits: &str = rest.split(')').next().unwrap_or("");
            if let Ok(n) = digits.parse::<usize>() {
                if !lines.contains(&n) {
                    lines.push(n);
                }
            }
        }
        lines
    }
}

/// How many source lines an error message quotes at most.
const MAX_QUOTED_LINES: usize = 8;

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "NVRTC {} failed to compile kernel `{}` for {} ({})",
            self.nvrtc_version, self.kernel, self.arch, self.status
        )?;
        writeln!(f, "options: {}", self.options.join(" "))?;
        writeln!(f, "NVRTC log:")?;
        for line in self.log.trim_end().lines() {
            writeln!(f, "  {line}")?;
        }
        let source_lines: Vec<&str> = self.source_code.lines().collect();
        let quoted: Vec<usize> = self
            .referenced_lines()
            .into_iter()
            .filter(|n| (1..=source_lines.len()).contains(n))
            .take(MAX_QUOTED_LINES)
            .collect();
        if !quoted.is_empty() {
            // Each named line with the line before it, since NVRTC often points at the line
            // after the mistake (a missing `;` is reported at the next token).
            writeln!(
                f,
                "source lines named in the log (marked >), with the line before:"
            )?;
            let mut shown: Vec<usize> = Vec::new();
            for &n in &quoted {
                for m in [n - 1, n] {
                    if m >= 1 && !shown.contains(&m) {
                        shown.push(m);
                    }
                }
            }
            shown.sort_unstable();
            for m in shown {
                let mark = if quoted.contains(&m) { '>' } else { ' ' };
                writeln!(f, "{mark} {m:>5} | {}", source_lines[m - 1])?;
            }
        }
        write!(
            f,
            "(the full source, {} lines, is in CompileFailure::source_code)",
            source_lines.len()
        )
    }
}

/// Joins library names with ", ", leaving out repeats (cudarc's list has some).
fn dedup_join(names: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::with_capacity(names.len());
    for name in names {
        if !seen.contains(&name.as_str()) {
            seen.push(name);
        }
    }
    seen.join(", ")
}

/// The program name given to NVRTC for a kernel; it appears in NVRTC's log.
pub(crate) fn program_name(kernel: &str) -> String {
    format!("{kernel}.cu")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(log: &str, source: &str) -> CompileFailure {
        CompileFailure {
            kernel: "k".into(),
            arch: GpuArch::SM80,
            nvrtc_version: NvrtcVersion {
                major: 13,
                minor: 0,
            },
            status: "NVRTC_ERROR_COMPILATION".into(),
            options: vec!["--std=c++17".into()],
            log: log.into(),
            source_code: source.into(),
        }
    }

    #[test]
    fn the_message_quotes_the_lines_the_log_names() {
        let f = failure(
            "k.cu(2): error: expected a \";\"\nk.cu(2): error: again\nk.cu(9): error: past the end\n\n1 error detected",
            "line one\nline two\nline three",
        );
        assert_eq!(f.referenced_lines(), vec![2, 9]);
        let text = f.to_string();
        assert!(text.contains("kernel `k` for sm_80"), "{text}");
        assert!(text.contains("k.cu(2): error: expected a \";\""), "{text}");
        assert!(text.contains(">     2 | line two"), "{text}");
        assert!(text.contains("      1 | line one"), "{text}");
        assert!(!text.contains("| line three"), "{text}");
        assert!(text.contains("3 lines"), "{text}");
    }

    #[test]
    fn not_found_names_the_fix() {
        let err = Error::NvrtcNotFound {
            searched: vec!["libnvrtc.so".into(), "libnvrtc.so.13".into()],
            lib_dir: Some(("/x".into(), "not a directory".into())),
        };
        let text = err.to_string();
        assert!(text.contains("libnvrtc.so, libnvrtc.so.13"), "{text}");
        assert!(
            text.contains("NVFUSER_NVRTC_LIB_DIR=/x: not a directory"),
            "{text}"
        );
        assert!(text.contains("scripts/nvrtc-env.sh"), "{text}");
    }
}
