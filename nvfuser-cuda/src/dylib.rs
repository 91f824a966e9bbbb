//! Finding CUDA's shared libraries by the names cudarc uses, without cudarc's panic.
//!
//! cudarc looks a library up lazily, on the first call into it, by trying a fixed list of
//! file names with `dlopen`; when none opens it panics. Its own `is_culib_present()` and
//! `get_lib_name_candidates()` would answer the question without panicking, but they exist
//! only while cudarc is built with dynamic loading: a downstream build that turns on cudarc's
//! `dynamic-linking` (candle does) removes them, and this crate would stop compiling. So the
//! probes here try the same names themselves, through `libloading`. A unit test checks that
//! the list below is exactly cudarc's, so the probe and cudarc cannot drift apart: when the
//! probe opens a name, cudarc's lookup opens the same name and does not panic.
//!
//! Catching cudarc's panic with `std::panic::catch_unwind` was rejected: it prints the panic
//! through the global panic hook (noise in every test run, and swapping the hook races with
//! other threads), and it aborts the process in a `panic = "abort"` build.

use libloading::Library;
use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::path::Path;

use crate::CUDA_BINDINGS_VERSION;

/// The file names cudarc tries for library `lib`, in cudarc's order.
pub(crate) fn candidate_names(lib: &str) -> Vec<String> {
    let (p, s) = (DLL_PREFIX, DLL_SUFFIX);
    let (major, minor) = CUDA_BINDINGS_VERSION;
    let width = usize::BITS;
    vec![
        format!("{p}{lib}{s}"),
        format!("{p}{lib}{width}{s}"),
        format!("{p}{lib}{width}_{major}{s}"),
        format!("{p}{lib}{width}_{major}{minor}{s}"),
        format!("{p}{lib}{width}_{major}{minor}_0{s}"),
        format!("{p}{lib}{width}_{major}0_{minor}{s}"),
        format!("{p}{lib}{width}_10{s}"),
        format!("{p}{lib}{width}_11{s}"),
        format!("{p}{lib}{width}_12{s}"),
        format!("{p}{lib}{width}_{major}0_0{s}"),
        format!("{p}{lib}{width}_9{s}"),
        format!("{p}{lib}{s}.{major}"),
        format!("{p}{lib}{s}.12"),
        format!("{p}{lib}{s}.11"),
        format!("{p}{lib}{s}.10"),
        format!("{p}{lib}{s}.9"),
        format!("{p}{lib}{s}.1"),
    ]
}

/// A library opened by one of the candidate names, and the name that worked.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) library: Library,
    pub(crate) name: String,
}

/// Opens the first of `names` that the dynamic loader finds, as cudarc would.
pub(crate) fn open_first(names: &[String]) -> Option<Opened> {
    names.iter().find_map(|name| {
        // SAFETY: opening a CUDA library runs its initialisers, which only set up the
        // library's own state; this is exactly what cudarc does on its first call.
        let library = unsafe { Library::new(name.as_str()) }.ok()?;
        Some(Opened {
            library,
            name: name.clone(),
        })
    })
}

/// Opens the library file at `path`, returning the loader's message on failure.
pub(crate) fn open_path(path: &Path) -> Result<Library, String> {
    // SAFETY: as in `open_first`; the caller names a CUDA library file.
    unsafe { Library::new(path) }.map_err(|e| e.to_string())
}

/// Returns the first of `symbols` that `library` does not export, if any.
///
/// cudarc resolves each function on first use and panics on a missing one, so every
/// function this crate calls through cudarc is checked here first.
pub(crate) fn first_missing_symbol(
    library: &Library,
    symbols: &[&'static str],
) -> Option<&'static str> {
    symbols.iter().copied().find(|symbol| {
        // SAFETY: the symbol is only looked up, never called or dereferenced here.
        unsafe { library.get::<*const ()>(symbol.as_bytes()) }.is_err()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe must try exactly cudarc's names in cudarc's order; this also checks that
    /// `CUDA_BINDINGS_VERSION` matches the CUDA version feature in Cargo.toml, since
    /// cudarc's list embeds that version.
    #[test]
    fn candidate_names_match_cudarc() {
        for lib in ["nvrtc", "cuda", "nvcuda"] {
            assert_eq!(candidate_names(lib), cudarc::get_lib_name_candidates(lib));
        }
    }

    #[test]
    fn a_missing_library_is_none_not_a_panic() {
        let names = candidate_names("nvfuser_no_such_library");
        assert!(open_first(&names).is_none());
        assert!(open_path(Path::new("/nonexistent/libnvfuser_nothing.so")).is_err());
    }
}
