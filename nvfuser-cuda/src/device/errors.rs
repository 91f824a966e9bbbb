//! The device's error buffer: where kernels with device-side checks report a failure
//! (see `nvfuser_core::codegen::checks`).
//!
//! One zero-initialized buffer of [`ERROR_WORDS`] words per GPU, allocated on the first
//! launch of a checked kernel and passed to every checked kernel (through the kernel's
//! `KernelAbi`, after its work buffers). Launches stay asynchronous: nothing waits for
//! the flag at launch. A launch of a checked kernel marks the buffer *pending*; the
//! next wait the program makes anyway (a download, [`crate::Device::synchronize`])
//! then reads it back, in stream order after the kernels, and a set flag becomes a
//! [`Error::DeviceAssert`] naming the op, the expression, the bad value and the
//! bound; the buffer is zeroed again once reported. While nothing checked was launched,
//! downloads read nothing extra.
//!
//! The check tables of the kernels launched (by fingerprint, the high half of the code
//! a failing thread writes) are kept to decode the error; they are a few strings per
//! distinct kernel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use nvfuser_core::codegen::checks::{self, DeviceCheck, ERROR_WORDS};

use crate::Error;

/// Error state of one GPU.
#[derive(Default)]
pub(crate) struct ErrorState {
    /// The buffer, once a checked kernel was launched.
    buffer: Mutex<Option<CudaSlice<u64>>>,
    /// A checked kernel was launched since the buffer was last read.
    pending: AtomicBool,
    /// Check tables by fingerprint.
    tables: Mutex<HashMap<u32, Arc<Vec<DeviceCheck>>>>,
}

/// Tables kept at most (distinct checked kernels); past it the oldest are forgotten and
/// their errors are reported with raw codes.
const MAX_TABLES: usize = 4096;

impl ErrorState {
    /// The address of the error buffer for a launch of a kernel with these checks
    /// (allocating and zeroing it on `stream` the first time); marks the buffer pending.
    pub(crate) fn buffer_for(
        &self,
        stream: &Arc<CudaStream>,
        table: &[DeviceCheck],
    ) -> Result<u64, Error> {
        let fp = checks::fingerprint(table);
        {
            let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
            if !tables.contains_key(&fp) {
                if tables.len() >= MAX_TABLES {
                    tables.clear();
                }
                tables.insert(fp, Arc::new(table.to_vec()));
            }
        }
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        if buffer.is_none() {
            let b = stream
                .alloc_zeros::<u64>(ERROR_WORDS)
                .map_err(|e| Error::driver("cuMemAllocAsync (error buffer)", e))?;
            *buffer = Some(b);
        }
        let b = buffer.as_ref().expect("allocated above");
        let (ptr, _guard) = b.device_ptr(stream);
        self.pending.store(true, Ordering::Release);
        Ok(ptr)
    }

    /// Allocates the buffer now if it was not yet (before a capture, so that no
    /// allocation happens inside it).
    pub(crate) fn ensure(&self, stream: &Arc<CudaStream>) -> Result<(), Error> {
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        if buffer.is_none() {
            let b = stream
                .alloc_zeros::<u64>(ERROR_WORDS)
                .map_err(|e| Error::driver("cuMemAllocAsync (error buffer)", e))?;
            *buffer = Some(b);
        }
        Ok(())
    }

    /// Marks the buffer as possibly set (a graph replay may have run checked kernels).
    pub(crate) fn mark_pending(&self) {
        self.pending.store(true, Ordering::Release);
    }

    /// Reads the buffer back if a checked kernel was launched since the last read
    /// (waiting for the work queued on `stream`); a set flag is returned as a
    /// [`Error::DeviceAssert`] and cleared.
    pub(crate) fn take(&self, stream: &Arc<CudaStream>, device: &str) -> Result<(), Error> {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(b) = buffer.as_mut() else {
            return Ok(());
        };
        let mut words = [0u64; ERROR_WORDS];
        stream
            .memcpy_dtoh(b, &mut words[..])
            .map_err(|e| Error::driver("cuMemcpyDtoHAsync (error buffer)", e))?;
        stream
            .synchronize()
            .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        if words[0] == 0 {
            return Ok(());
        }
        stream
            .memset_zeros(b)
            .map_err(|e| Error::driver("cuMemsetD8Async (error buffer)", e))?;
        drop(buffer);
        let tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        let table = |fp: u32| tables.get(&fp).map(|t| &t[..]);
        Err(device_assert(words, table, device))
    }
}

/// The error for a set error buffer.
pub(crate) fn device_assert<'a>(
    words: [u64; ERROR_WORDS],
    table: impl FnOnce(u32) -> Option<&'a [DeviceCheck]>,
    device: &str,
) -> Error {
    let a = checks::decode(words, table).unwrap_or_else(|| checks::DeviceAssert {
        op: "unknown".into(),
        expr: None,
        axis: None,
        value: 0,
        bound: 0,
        code: 0,
    });
    Error::DeviceAssert {
        message: format!("{a} (on {device})"),
        op: a.op,
        axis: a.axis,
        value: a.value,
        bound: a.bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfuser_core::codegen::checks::{code, fingerprint, CheckKind};

    #[test]
    fn set_words_become_a_typed_error_naming_the_op() {
        let table = vec![DeviceCheck {
            op: "index_select".into(),
            kind: CheckKind::Index { axis: 0 },
            expr: "T2 = index_select(T0, T1, axis=0)".into(),
        }];
        let fp = fingerprint(&table);
        let e = device_assert([code(fp, 0), 17, 16, 0], |_| Some(&table[..]), "cuda:0");
        match &e {
            Error::DeviceAssert {
                op,
                axis,
                value,
                bound,
                ..
            } => {
                assert_eq!(
                    (op.as_str(), *axis, *value, *bound),
                    ("index_select", Some(0), 17, 16)
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "device-side check failed: index_select index 17 out of range 0..16 at dim 0 in T2 = index_select(T0, T1, axis=0) (on cuda:0)"
        );
    }
}
