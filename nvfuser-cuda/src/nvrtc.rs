//! NVRTC: CUDA C++ source to CUBIN, on any machine that has `libnvrtc` (no GPU needed).
//!
//! [`probe`] finds the library without panicking (see `probe.rs` for how), [`NvrtcOptions`]
//! builds the one option list, and [`compile`] returns the CUBIN for one real architecture
//! together with the NVRTC version that made it, or a [`Error`] that carries NVRTC's log
//! and the source. The CUBIN is fetched with `nvrtcGetCUBIN` through cudarc's raw bindings
//! (cudarc's safe layer returns PTX only); cudarc's `Ptx::from_binary` accepts it for
//! `CudaContext::load_module`, and since it is machine code for the exact architecture the
//! driver does not JIT it.
//!
//! NVRTC compiles separate programs on several threads at once, so [`compile`] may be
//! called concurrently.
//!
//! Without the `cuda` feature no NVRTC is loaded: [`probe`], and with it [`compile`],
//! returns [`Error::CudaDisabled`]. The options, architectures and versions are plain
//! data and stay (offline planning names an architecture).

mod options;
mod probe;
#[cfg(feature = "cuda")]
mod program;

use std::ffi::CString;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[cfg(feature = "cuda")]
use cudarc::nvrtc::sys;

use crate::error::{program_name, CompileFailure, Error};
pub use options::{GpuArch, NvrtcOptions};
pub use probe::{probe, NvrtcLibrary, LIB_DIR_VAR};
#[cfg(feature = "cuda")]
use program::Program;

/// An NVRTC version, as `nvrtcVersion` reports it (major and minor only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NvrtcVersion {
    /// The CUDA major version, e.g. 13.
    pub major: u32,
    /// The CUDA minor version, e.g. 0.
    pub minor: u32,
}

impl fmt::Display for NvrtcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The version of the NVRTC this process uses; an error if there is none.
pub fn nvrtc_version() -> Result<NvrtcVersion, Error> {
    probe().map(NvrtcLibrary::version)
}

/// The NVRTC compilations started in this process.
static COMPILE_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many NVRTC compilations (`nvrtcCompileProgram` calls) this process has started,
/// failed ones included. Tests use it to show that a warm disk cache compiles nothing.
pub fn compile_calls() -> u64 {
    COMPILE_CALLS.load(Ordering::Relaxed)
}

/// A kernel compiled by NVRTC to machine code for one architecture.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompiledKernel {
    /// The kernel name the source was compiled under.
    pub name: String,
    /// The architecture the CUBIN is for.
    pub arch: GpuArch,
    /// The CUBIN (an ELF image of machine code), ready for `cuModuleLoadData`.
    pub cubin: Vec<u8>,
    /// The NVRTC that compiled it (part of any cache key).
    pub nvrtc_version: NvrtcVersion,
    /// The full option list passed to NVRTC (part of any cache key).
    pub options: Vec<String>,
    /// NVRTC's log: empty, or warnings.
    pub log: String,
    /// Wall time of program creation and compilation.
    pub compile_time: Duration,
}

impl fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledKernel")
            .field("name", &self.name)
            .field("arch", &self.arch)
            .field("cubin_bytes", &self.cubin.len())
            .field("nvrtc_version", &self.nvrtc_version)
            .field("options", &self.options)
            .field("log", &self.log)
            .field("compile_time", &self.compile_time)
            .finish()
    }
}

/// Compiles `source` to a CUBIN for `arch` with the default [`NvrtcOptions`].
///
/// `name` is the kernel's name for logs and errors; NVRTC's log calls the program
/// `<name>.cu`. The source must be self-contained (NVRTC gets no include path).
pub fn compile(source: &str, name: &str, arch: GpuArch) -> Result<CompiledKernel, Error> {
    compile_with_options(source, name, &NvrtcOptions::new(arch))
}

/// Compiles `source` to a CUBIN with the given options.
///
/// Errors: [`Error::NvrtcNotFound`] without NVRTC ([`Error::CudaDisabled`] in a build
/// without the `cuda` feature), [`Error::UnsupportedArch`] for an
/// architecture this NVRTC does not know, [`Error::InvalidInput`] for NUL bytes or an
/// empty name, and [`Error::Compile`] with NVRTC's log when NVRTC rejects the source.
pub fn compile_with_options(
    source: &str,
    name: &str,
    options: &NvrtcOptions,
) -> Result<CompiledKernel, Error> {
    let library = probe()?;
    let arch = options.arch();
    let nvrtc_version = library.version();
    if !library.supports(arch) {
        return Err(Error::UnsupportedArch {
            arch,
            version: nvrtc_version,
            supported: library.supported_archs().to_vec(),
        });
    }
    let invalid = |what: String| Error::InvalidInput {
        kernel: name.to_owned(),
        what,
    };
    if name.is_empty() {
        return Err(invalid("the kernel name is empty".to_owned()));
    }
    let c_name = CString::new(program_name(name)).map_err(|e| {
        invalid(format!(
            "the kernel name has a NUL byte at byte {}",
            e.nul_position()
        ))
    })?;
    let c_source = CString::new(source).map_err(|e| {
        invalid(format!(
            "the source has a NUL byte at byte {}",
            e.nul_position()
        ))
    })?;
    let args = options.to_args();
    let c_args = args
        .iter()
        .map(|arg| {
            CString::new(arg.as_str())
                .map_err(|_| invalid(format!("the NVRTC option {arg:?} has a NUL byte")))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let start = Instant::now();
    COMPILE_CALLS.fetch_add(1, Ordering::Relaxed);
    let Outcome { log, cubin } = run_program(c_source, c_name, &c_args)?;
    let cubin = match cubin {
        Ok(cubin) => cubin,
        Err(status) => {
            return Err(Error::Compile(Box::new(CompileFailure {
                kernel: name.to_owned(),
                arch,
                nvrtc_version,
                status,
                options: args,
                log,
                source_code: source.to_owned(),
            })))
        }
    };
    let compile_time = start.elapsed();
    if cubin.is_empty() {
        return Err(Error::NvrtcCall {
            call: "nvrtcGetCUBIN",
            code: format!("an empty CUBIN for {arch}"),
        });
    }
    Ok(CompiledKernel {
        name: name.to_owned(),
        arch,
        cubin,
        nvrtc_version,
        options: args,
        log,
        compile_time,
    })
}

/// What NVRTC made of one program: its log, and the CUBIN, or the name of the status
/// that a failed compilation returned.
struct Outcome {
    log: String,
    cubin: Result<Vec<u8>, String>,
}

/// Creates, compiles and destroys one program.
#[cfg(feature = "cuda")]
fn run_program(source: CString, name: CString, options: &[CString]) -> Result<Outcome, Error> {
    let program = Program::create(source, name)?;
    let status = program.compile(options);
    let log = program.log()?;
    let cubin = if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(program.cubin()?)
    } else {
        Err(format!("{status:?}"))
    };
    Ok(Outcome { log, cubin })
}

/// Never reached: without `cuda` the probe fails first.
#[cfg(not(feature = "cuda"))]
fn run_program(_: CString, _: CString, _: &[CString]) -> Result<Outcome, Error> {
    Err(Error::CudaDisabled {
        op: "nvrtc::compile",
    })
}

/// Turns an NVRTC status into `Ok` or [`Error::NvrtcCall`] naming the call.
#[cfg(feature = "cuda")]
pub(crate) fn check(call: &'static str, status: sys::nvrtcResult) -> Result<(), Error> {
    if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::NvrtcCall {
            call,
            code: format!("{status:?}"),
        })
    }
}
