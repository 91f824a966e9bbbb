//! Finding `libnvrtc` without panicking, and asking it for its version and architectures.
//!
//! How the probe works (see also `dylib.rs`):
//!
//! 1. It tries cudarc's own list of library names (`libnvrtc.so`, ..., `libnvrtc.so.13`,
//!    ...) with `dlopen`, so the system search path decides: `LD_LIBRARY_PATH`, the
//!    `ldconfig` cache, the executable's run path. Whatever opens here is what cudarc's lazy
//!    lookup opens later, so that lookup cannot panic.
//! 2. Only if none opens and `NVFUSER_NVRTC_LIB_DIR` is set, it opens the files of that
//!    directory by absolute path (the `libnvrtc-builtins` libraries first, which NVRTC
//!    itself `dlopen`s by name during every compilation) and keeps them open. The dynamic
//!    loader then answers a later `dlopen("libnvrtc.so.13")` by name with the library
//!    already loaded under that SONAME, so step 1 succeeds and so does cudarc. Unlike
//!    `LD_LIBRARY_PATH`, which the loader reads once at process start, this variable also
//!    works when a program sets it at run time.
//! 3. It checks that every NVRTC function this crate calls is exported (cudarc panics on a
//!    missing symbol), then asks NVRTC for its version and supported architectures.
//!
//! A success is cached for the life of the process; a failure is not, so that setting the
//! variable and probing again works.
//!
//! Without the `cuda` feature nothing is loaded: [`probe`] returns
//! [`Error::CudaDisabled`].

use std::sync::OnceLock;
#[cfg(feature = "cuda")]
use std::{
    ffi::c_int,
    path::{Path, PathBuf},
};

#[cfg(feature = "cuda")]
use cudarc::nvrtc::sys;
#[cfg(feature = "cuda")]
use libloading::Library;

use crate::error::Error;
use crate::nvrtc::{GpuArch, NvrtcVersion};
#[cfg(feature = "cuda")]
use crate::{dylib, nvrtc::check};

/// The environment variable naming a directory that holds `libnvrtc.so.*` and
/// `libnvrtc-builtins.so.*`, used when the system search path has no NVRTC.
pub const LIB_DIR_VAR: &str = "NVFUSER_NVRTC_LIB_DIR";

/// Every NVRTC function this crate calls through cudarc.
#[cfg(feature = "cuda")]
const REQUIRED_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
];

/// The NVRTC library this process uses, as found by [`probe`].
#[derive(Debug)]
pub struct NvrtcLibrary {
    loaded_as: String,
    version: NvrtcVersion,
    supported_archs: Vec<u32>,
    // Kept open for the life of the process: the library found by name, and any files
    // opened by path from NVFUSER_NVRTC_LIB_DIR (their SONAMEs must stay registered).
    #[cfg(feature = "cuda")]
    _libraries: Vec<Library>,
}

impl NvrtcLibrary {
    /// The name (or, from `NVFUSER_NVRTC_LIB_DIR`, the path) the library was opened by.
    pub fn loaded_as(&self) -> &str {
        &self.loaded_as
    }

    /// The NVRTC version, as `nvrtcVersion` reports it.
    pub fn version(&self) -> NvrtcVersion {
        self.version
    }

    /// The architectures this NVRTC compiles for, as `10 * major + minor`.
    pub fn supported_archs(&self) -> &[u32] {
        &self.supported_archs
    }

    /// Whether this NVRTC compiles for `arch`.
    pub fn supports(&self, arch: GpuArch) -> bool {
        self.supported_archs.contains(&arch.sm())
    }
}

static NVRTC: OnceLock<NvrtcLibrary> = OnceLock::new();

/// Finds and opens `libnvrtc`, or says why it cannot; never panics. Without the `cuda`
/// feature: [`Error::CudaDisabled`].
///
/// ```
/// match nvfuser_cuda::nvrtc::probe() {
///     Ok(lib) => println!("NVRTC {} from {}", lib.version(), lib.loaded_as()),
///     Err(err) => println!("{err}"),
/// }
/// ```
pub fn probe() -> Result<&'static NvrtcLibrary, Error> {
    if let Some(lib) = NVRTC.get() {
        return Ok(lib);
    }
    let lib = load()?;
    Ok(NVRTC.get_or_init(|| lib))
}

/// Without `cuda` there is no NVRTC to load.
#[cfg(not(feature = "cuda"))]
fn load() -> Result<NvrtcLibrary, Error> {
    Err(Error::CudaDisabled { op: "nvrtc::probe" })
}

#[cfg(feature = "cuda")]
fn load() -> Result<NvrtcLibrary, Error> {
    let names = dylib::candidate_names("nvrtc");
    let mut libraries = Vec::new();
    let (opened, loaded_as) = match dylib::open_first(&names) {
        Some(opened) => {
            let name = opened.name.clone();
            (opened, name)
        }
        None => {
            let Some(dir) = std::env::var_os(LIB_DIR_VAR).filter(|d| !d.is_empty()) else {
                return Err(Error::NvrtcNotFound {
                    searched: names,
                    lib_dir: None,
                });
            };
            let dir = PathBuf::from(dir);
            let (preloaded, path) =
                preload_from_dir(&dir, &names).map_err(|why| Error::NvrtcNotFound {
                    searched: names.clone(),
                    lib_dir: Some((dir.clone(), why)),
                })?;
            libraries.extend(preloaded);
            let Some(opened) = dylib::open_first(&names) else {
                return Err(Error::NvrtcNotFound {
                    searched: names,
                    lib_dir: Some((
                        dir,
                        format!(
                            "opened {}, but its SONAME is none of the names above, so cudarc \
                             would not find it",
                            path.display()
                        ),
                    )),
                });
            };
            (opened, path.display().to_string())
        }
    };
    if let Some(symbol) = dylib::first_missing_symbol(&opened.library, REQUIRED_SYMBOLS) {
        return Err(Error::NvrtcTooOld { loaded_as, symbol });
    }
    libraries.push(opened.library);
    let version = query_version()?;
    let supported_archs = query_supported_archs()?;
    Ok(NvrtcLibrary {
        loaded_as,
        version,
        supported_archs,
        _libraries: libraries,
    })
}

/// Opens the NVRTC builtins and then NVRTC itself from `dir` by absolute path. Returns the
/// open libraries and the path of NVRTC, or why that failed.
#[cfg(feature = "cuda")]
fn preload_from_dir(dir: &Path, names: &[String]) -> Result<(Vec<Library>, PathBuf), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read it: {e}"))?;
    let mut builtins: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("nvrtc-builtins") && !n.contains(".alt."))
        })
        .collect();
    builtins.sort();
    let mut libraries = Vec::new();
    for path in &builtins {
        let library = dylib::open_path(path).map_err(|e| format!("cannot open it: {e}"))?;
        libraries.push(library);
    }
    let Some(path) = names.iter().map(|n| dir.join(n)).find(|p| p.is_file()) else {
        return Err("no file there has one of the names above".to_owned());
    };
    libraries.push(dylib::open_path(&path).map_err(|e| format!("cannot open it: {e}"))?);
    Ok((libraries, path))
}

#[cfg(feature = "cuda")]
fn query_version() -> Result<NvrtcVersion, Error> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: libnvrtc is loaded and exports nvrtcVersion (checked by the caller); the two
    // out-pointers are valid for writes.
    check("nvrtcVersion", unsafe {
        sys::nvrtcVersion(&mut major, &mut minor)
    })?;
    Ok(NvrtcVersion {
        major: u32::try_from(major).unwrap_or(0),
        minor: u32::try_from(minor).unwrap_or(0),
    })
}

#[cfg(feature = "cuda")]
fn query_supported_archs() -> Result<Vec<u32>, Error> {
    let mut count: c_int = 0;
    // SAFETY: as in `query_version`; `count` is valid for writes.
    check("nvrtcGetNumSupportedArchs", unsafe {
        sys::nvrtcGetNumSupportedArchs(&mut count)
    })?;
    let mut archs: Vec<c_int> = vec![0; usize::try_from(count).unwrap_or(0)];
    if !archs.is_empty() {
        // SAFETY: `archs` has room for the `count` entries NVRTC writes.
        check("nvrtcGetSupportedArchs", unsafe {
            sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
        })?;
    }
    Ok(archs
        .into_iter()
        .filter_map(|a| u32::try_from(a).ok())
        .collect())
}
