//! The CUDA driver probe: is there a driver, is it new enough, and how many GPUs it sees.
//!
//! Like the NVRTC probe, it first opens `libcuda` itself by cudarc's names (see `dylib.rs`)
//! and checks the functions it calls, so a machine without a driver gets
//! [`Error::NoDriver`] instead of cudarc's panic. Only then does it call into the
//! driver through cudarc: `cuDriverGetVersion`, `cuInit` and `cuDeviceGetCount`.
//!
//! Without the `cuda` feature there is no driver to load: [`probe`] returns
//! [`Error::CudaDisabled`], and nothing below it is compiled.

#[cfg(feature = "cuda")]
use std::ffi::c_int;
use std::fmt;
use std::sync::OnceLock;

#[cfg(feature = "cuda")]
use cudarc::driver::sys;

use crate::error::Error;
#[cfg(feature = "cuda")]
use crate::{dylib, CUDA_BINDINGS_VERSION};

/// The CUDA version a driver supports, from `cuDriverGetVersion` (e.g. 13.0 for 13000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DriverVersion {
    /// The CUDA major version.
    pub major: u32,
    /// The CUDA minor version.
    pub minor: u32,
}

impl DriverVersion {
    /// Decodes the driver's integer encoding, `1000 * major + 10 * minor`.
    pub fn from_encoded(version: u32) -> Self {
        DriverVersion {
            major: version / 1000,
            minor: (version % 1000) / 10,
        }
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What the driver probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverInfo {
    /// The name `libcuda` was opened by.
    pub loaded_as: String,
    /// The CUDA version the driver supports.
    pub version: DriverVersion,
    /// The number of GPUs the driver sees (at least one).
    pub device_count: u32,
}

/// Every driver function this module calls through cudarc.
#[cfg(feature = "cuda")]
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuDriverGetVersion",
    "cuInit",
    "cuDeviceGetCount",
    "cuGetErrorName",
    "cuGetErrorString",
];

/// The name cudarc's bindings look `cuEventElapsedTime` up by: the `_v2` that CUDA 13
/// made the only one, or the original name, which the 12.x bindings use (a 12.x driver
/// before 12.8 has no `_v2`).
#[cfg(feature = "cuda")]
const EVENT_ELAPSED_TIME: &str = if sys::CUDA_VERSION >= 13000 {
    "cuEventElapsedTime_v2"
} else {
    "cuEventElapsedTime"
};

/// Every driver function that cudarc calls for this crate's device work: opening a
/// context, reading attributes, allocating, copying, events, modules, launches,
/// function attributes (registers, in profiles) and memory info.
/// [`check_device_symbols`] checks them once before the first device is opened, because
/// cudarc resolves each lazily and panics on a missing one. A unit test checks that
/// every `cu*` function the crate names in a `Error::driver` call is listed.
#[cfg(feature = "cuda")]
const DEVICE_SYMBOLS: &[&str] = &[
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventDestroy_v2",
    "cuEventSynchronize",
    EVENT_ELAPSED_TIME,
    "cuMemAlloc_v2",
    "cuMemAllocAsync",
    "cuMemFree_v2",
    "cuMemFreeAsync",
    "cuMemsetD8Async",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
    "cuLaunchCooperativeKernel",
    "cuMemGetInfo_v2",
    "cuStreamCreate",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphGetNodes",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
];

static DRIVER: OnceLock<DriverInfo> = OnceLock::new();
#[cfg(feature = "cuda")]
static DEVICE_SYMBOLS_CHECKED: OnceLock<()> = OnceLock::new();

/// Checks that the loaded driver exports every function the device layer calls through
/// cudarc ([`probe`] first). Never panics; the answer is cached once it is yes.
#[cfg(feature = "cuda")]
pub(crate) fn check_device_symbols() -> Result<(), Error> {
    let info = probe()?;
    if DEVICE_SYMBOLS_CHECKED.get().is_some() {
        return Ok(());
    }
    // The library is already loaded (the probe keeps it); opening it by the same name
    // only takes another reference.
    let Some(opened) = dylib::open_first(std::slice::from_ref(&info.loaded_as)) else {
        return Err(Error::NoDriver {
            searched: vec![info.loaded_as.clone()],
        });
    };
    if let Some(symbol) = dylib::first_missing_symbol(&opened.library, DEVICE_SYMBOLS) {
        return Err(Error::DriverSymbolMissing {
            loaded_as: opened.name,
            symbol,
        });
    }
    // Keep it loaded, as `load` does.
    std::mem::forget(opened.library);
    DEVICE_SYMBOLS_CHECKED.get_or_init(|| ());
    Ok(())
}

/// Finds the CUDA driver and at least one GPU, or says why not; never panics. Without
/// the `cuda` feature: [`Error::CudaDisabled`].
///
/// ```
/// match nvfuser_cuda::driver::probe() {
///     Ok(info) => println!("CUDA {} driver, {} GPU(s)", info.version, info.device_count),
///     Err(err) => println!("{err}"), // e.g. "no CUDA driver: libcuda could not be opened ..."
/// }
/// ```
pub fn probe() -> Result<&'static DriverInfo, Error> {
    if let Some(info) = DRIVER.get() {
        return Ok(info);
    }
    let info = load()?;
    Ok(DRIVER.get_or_init(|| info))
}

/// Without `cuda` there is no driver to load.
#[cfg(not(feature = "cuda"))]
fn load() -> Result<DriverInfo, Error> {
    Err(Error::CudaDisabled {
        op: "driver::probe",
    })
}

#[cfg(feature = "cuda")]
fn load() -> Result<DriverInfo, Error> {
    let names: Vec<String> = ["cuda", "nvcuda"]
        .iter()
        .flat_map(|lib| dylib::candidate_names(lib))
        .collect();
    let Some(opened) = dylib::open_first(&names) else {
        return Err(Error::NoDriver { searched: names });
    };
    if let Some(symbol) = dylib::first_missing_symbol(&opened.library, REQUIRED_SYMBOLS) {
        return Err(Error::DriverSymbolMissing {
            loaded_as: opened.name,
            symbol,
        });
    }
    // Keep libcuda loaded for the life of the process (cudarc opens it by the same name
    // next and never closes it), rather than unloading it between the probe and cudarc.
    std::mem::forget(opened.library);
    let loaded_as = opened.name;

    let mut encoded: c_int = 0;
    // SAFETY: libcuda is loaded and exports the function (checked above); the out-pointer
    // is valid. cuDriverGetVersion may be called before cuInit.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut encoded)
    })?;
    let version = DriverVersion::from_encoded(u32::try_from(encoded).unwrap_or(0));
    let required = CUDA_BINDINGS_VERSION;
    if (version.major, version.minor) < required {
        return Err(Error::DriverTooOld {
            found: version,
            required,
        });
    }

    // SAFETY: as above; flags must be 0.
    let init = unsafe { sys::cuInit(0) };
    if init == sys::CUresult::CUDA_ERROR_NO_DEVICE {
        return Err(Error::NoDevice { driver: version });
    }
    check("cuInit", init)?;

    let mut count: c_int = 0;
    // SAFETY: as above, after a successful cuInit.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    let device_count = u32::try_from(count).unwrap_or(0);
    if device_count == 0 {
        return Err(Error::NoDevice { driver: version });
    }
    Ok(DriverInfo {
        loaded_as,
        version,
        device_count,
    })
}

#[cfg(feature = "cuda")]
fn check(call: &'static str, status: sys::CUresult) -> Result<(), Error> {
    if status == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver {
            call,
            code: format!("{status:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every driver call the crate reports by name (`Error::driver("cuX", ..)`,
    /// `call: "cuX"`) is among the checked symbols, possibly under its versioned name
    /// (`cuMemGetInfo` is looked up as `cuMemGetInfo_v2`).
    #[test]
    #[cfg(feature = "cuda")]
    fn every_named_driver_call_is_checked() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.clone()];
        let mut named = std::collections::BTreeSet::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).unwrap() {
                    files.push(entry.unwrap().path());
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, _) in text.match_indices("\"cu") {
                let rest = &text[i + 1..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let is_call = name.len() > 3
                    && name.as_bytes()[2].is_ascii_uppercase()
                    && rest[name.len()..].starts_with('"');
                if is_call {
                    named.insert(name);
                }
            }
        }
        assert!(named.contains("cuLaunchKernel"), "{named:?}");
        let known = |n: &str| {
            REQUIRED_SYMBOLS.contains(&n)
                || DEVICE_SYMBOLS
                    .iter()
                    .any(|s| *s == n || s.strip_suffix("_v2") == Some(n))
                // `EVENT_ELAPSED_TIME` names both spellings; the bindings' one is listed.
                || n.strip_suffix("_v2") == Some("cuEventElapsedTime")
        };
        let missing: Vec<&String> = named.iter().filter(|n| !known(n)).collect();
        assert!(missing.is_empty(), "not in DEVICE_SYMBOLS: {missing:?}");
    }

    #[test]
    fn driver_versions_decode() {
        assert_eq!(
            DriverVersion::from_encoded(13000),
            DriverVersion {
                major: 13,
                minor: 0
            }
        );
        assert_eq!(DriverVersion::from_encoded(12090).to_string(), "12.9");
    }
}
