//! An owned NVRTC program: creation, compilation, log and CUBIN, destroyed on drop.
//!
//! This wraps cudarc's raw `sys` functions rather than its `safe` layer, because the safe
//! layer returns PTX only (no CUBIN) and unwraps internally (a NUL byte in the source, a
//! failed log query), which would be panics on user input.

use std::ffi::{c_char, c_int, CString};
use std::ptr;

use cudarc::nvrtc::sys;

use crate::error::Error;
use crate::nvrtc::check;

/// A created NVRTC program. Only built after `probe()` succeeded, so every call below goes
/// to a loaded library that exports the function.
pub(crate) struct Program {
    raw: sys::nvrtcProgram,
    // NVRTC may keep pointers to the source and the name until the program is destroyed.
    _source: CString,
    _name: CString,
}

impl Program {
    /// Creates a program from `source`, named `name` in NVRTC's log.
    pub(crate) fn create(source: CString, name: CString) -> Result<Self, Error> {
        let mut raw: sys::nvrtcProgram = ptr::null_mut();
        // SAFETY: the out-pointer is valid; source and name are NUL-terminated and outlive
        // the program (they are moved into it); no headers are passed (count 0, null arrays).
        check("nvrtcCreateProgram", unsafe {
            sys::nvrtcCreateProgram(
                &mut raw,
                source.as_ptr(),
                name.as_ptr(),
                0,
                ptr::null(),
                ptr::null(),
            )
        })?;
        Ok(Program {
            raw,
            _source: source,
            _name: name,
        })
    }

    /// Compiles with `options`; returns NVRTC's status (success or the failure code).
    pub(crate) fn compile(&self, options: &[CString]) -> sys::nvrtcResult {
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let count = c_int::try_from(pointers.len()).unwrap_or(c_int::MAX);
        // SAFETY: `self.raw` is a live program; `pointers` holds `count` pointers to
        // NUL-terminated strings that outlive the call.
        unsafe { sys::nvrtcCompileProgram(self.raw, count, pointers.as_ptr()) }
    }

    /// NVRTC's log of the last compilation (warnings on success, errors on failure).
    pub(crate) fn log(&self) -> Result<String, Error> {
        let mut size = 0usize;
        // SAFETY: `self.raw` is a live program; `size` is valid for writes.
        check("nvrtcGetProgramLogSize", unsafe {
            sys::nvrtcGetProgramLogSize(self.raw, &mut size)
        })?;
        if size == 0 {
            return Ok(String::new());
        }
        let mut buffer = vec![0u8; size];
        // SAFETY: `buffer` has the `size` bytes (NUL included) that NVRTC writes.
        check("nvrtcGetProgramLog", unsafe {
            sys::nvrtcGetProgramLog(self.raw, buffer.as_mut_ptr().cast::<c_char>())
        })?;
        let text_len = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
        buffer.truncate(text_len);
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    /// The CUBIN of a successful compilation for a real architecture.
    pub(crate) fn cubin(&self) -> Result<Vec<u8>, Error> {
        let mut size = 0usize;
        // SAFETY: `self.raw` is a live, compiled program; `size` is valid for writes.
        check("nvrtcGetCUBINSize", unsafe {
            sys::nvrtcGetCUBINSize(self.raw, &mut size)
        })?;
        let mut cubin = vec![0u8; size];
        if size > 0 {
            // SAFETY: `cubin` has the `size` bytes that NVRTC writes.
            check("nvrtcGetCUBIN", unsafe {
                sys::nvrtcGetCUBIN(self.raw, cubin.as_mut_ptr().cast::<c_char>())
            })?;
        }
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `self.raw` was created by nvrtcCreateProgram and is destroyed only here.
        // A failure to free cannot be reported from drop; NVRTC then leaks the program.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.raw) };
    }
}
