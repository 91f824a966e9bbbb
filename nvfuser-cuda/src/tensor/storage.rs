//! The buffers behind tensors: aligned host bytes for the CPU device, cudarc allocations
//! for a GPU (with the `cuda` feature only).
//!
//! Both hold the elements as raw little-endian bytes (see `element.rs`), so one gather
//! routine serves both and a view means the same thing on either device. Buffers are
//! shared through `Arc`: a view clones the `Arc`, never the data.
//!
//! Host buffers start at a 256-byte boundary, the alignment `cuMemAlloc` guarantees, so
//! a tensor's [`data_alignment`](super::Tensor::data_alignment) (which later decides
//! vectorization) reads the same on the CPU reference device as on a GPU.
//!
//! A GPU buffer is any `CudaSlice<T>`: this crate allocates `CudaSlice<u8>`, and
//! [`Tensor::from_cuda_slice`](super::Tensor::from_cuda_slice) accepts the typed slices
//! other crates (candle) own, without copying. The element type `T` of the slice only
//! matters for its byte length; the tensor's dtype says how the bytes are read.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, RwLock, RwLockReadGuard};

#[cfg(feature = "cuda")]
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};

use crate::error::Error;

/// The alignment in bytes of every buffer this crate allocates, host or device.
pub const BUFFER_ALIGNMENT: usize = 256;

/// Bytes on the host, starting at a [`BUFFER_ALIGNMENT`] boundary. Behind a lock: the
/// CPU device writes an in-place output (`add_output_alias`) into an input's buffer
/// while other views of it may be read.
pub(crate) struct HostBuffer {
    /// Over-allocated by up to `BUFFER_ALIGNMENT - 1` bytes; never resized, so the heap
    /// block (and with it the alignment of `start`) never moves.
    raw: RwLock<Vec<u8>>,
    start: usize,
    len: usize,
    /// The address of byte `start` (fixed: the block never moves).
    address: u64,
}

impl HostBuffer {
    /// `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> Result<Self, Error> {
        let total = len.checked_add(BUFFER_ALIGNMENT - 1).ok_or_else(|| {
            Error::tensor(
                "host allocation",
                "a byte size that fits in memory",
                format!("{len} bytes"),
            )
        })?;
        let mut raw = Vec::new();
        raw.try_reserve_exact(total).map_err(|e| {
            Error::tensor(
                "host allocation",
                format!("{len} bytes of host memory"),
                format!("an allocation failure: {e}"),
            )
        })?;
        raw.resize(total, 0);
        let base = raw.as_ptr() as usize;
        let start = (BUFFER_ALIGNMENT - base % BUFFER_ALIGNMENT) % BUFFER_ALIGNMENT;
        Ok(HostBuffer {
            raw: RwLock::new(raw),
            start,
            len,
            address: (base + start) as u64,
        })
    }

    /// A copy of `bytes`.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let buffer = Self::zeroed(bytes.len())?;
        buffer.write(0, bytes)?;
        Ok(buffer)
    }

    /// The bytes, read-locked (a poisoned lock still holds whole bytes: writes are plain
    /// copies).
    fn read(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        self.raw.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Copies `bytes` to `start..start + bytes.len()`.
    pub(crate) fn write(&self, start: usize, bytes: &[u8]) -> Result<(), Error> {
        let range = start..start.saturating_add(bytes.len());
        if range.end > self.len || start > range.end {
            return Err(Error::tensor(
                "write",
                format!("a byte range inside the {}-byte buffer", self.len),
                format!("{range:?}"),
            ));
        }
        let mut raw = self.raw.write().unwrap_or_else(|p| p.into_inner());
        raw[self.start + range.start..self.start + range.end].copy_from_slice(bytes);
        Ok(())
    }

    /// Writes element `i` (`size` bytes of `bytes` at `i * size`) at byte
    /// `positions[i] * size`, under one lock; every position is checked first.
    pub(crate) fn write_elements(
        &self,
        size: usize,
        positions: &[usize],
        bytes: &[u8],
    ) -> Result<(), Error> {
        let fits = |p: &usize| {
            p.checked_add(1)
                .and_then(|e| e.checked_mul(size))
                .is_some_and(|e| e <= self.len)
        };
        if bytes.len() != positions.len() * size || !positions.iter().all(fits) {
            return Err(Error::tensor(
                "write",
                format!(
                    "{} elements inside the {}-byte buffer",
                    positions.len(),
                    self.len
                ),
                "an element outside it".to_string(),
            ));
        }
        let mut raw = self.raw.write().unwrap_or_else(|p| p.into_inner());
        for (i, &p) in positions.iter().enumerate() {
            let at = self.start + p * size;
            raw[at..at + size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
        }
        Ok(())
    }

    pub(crate) fn address(&self) -> u64 {
        self.address
    }
}

impl fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostBuffer({} bytes)", self.len)
    }
}

/// A device allocation of any element type, seen as bytes.
#[cfg(feature = "cuda")]
pub(crate) trait CudaBuffer: Send + Sync + 'static {
    /// The allocation's size in bytes.
    fn num_bytes(&self) -> usize;
    /// The device address of byte 0.
    fn address(&self) -> u64;
    /// Copies bytes `start..start + out.len()` into `out`, ordered on the allocation's
    /// own stream (after the work that produced it), and waits for the copy.
    fn download(&self, start: usize, out: &mut [u8]) -> Result<(), Error>;
    /// The stream the allocation is ordered on (where it is freed).
    fn stream(&self) -> &Arc<CudaStream>;
}

#[cfg(feature = "cuda")]
impl<T: DeviceRepr + 'static> CudaBuffer for CudaSlice<T> {
    fn num_bytes(&self) -> usize {
        CudaSlice::num_bytes(self)
    }

    fn address(&self) -> u64 {
        // Taking the pointer on the slice's own stream orders nothing new; the guard
        // only records a read event when cudarc tracks several streams.
        let (ptr, _guard) = self.device_ptr(CudaSlice::stream(self));
        ptr
    }

    fn stream(&self) -> &Arc<CudaStream> {
        CudaSlice::stream(self)
    }

    fn download(&self, start: usize, out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() {
            return Ok(());
        }
        let end = start
            .checked_add(out.len())
            .filter(|&e| e <= self.num_bytes());
        let Some(end) = end else {
            return Err(Error::tensor(
                "download",
                format!("a byte range inside the {}-byte buffer", self.num_bytes()),
                format!("{start}..{}", start.saturating_add(out.len())),
            ));
        };
        let stream = CudaSlice::stream(self);
        // SAFETY: every bit pattern is a valid `u8`, and the byte view covers exactly the
        // allocation's `num_bytes()` bytes.
        let bytes = unsafe { self.transmute::<u8>(self.num_bytes()) };
        let view = bytes.and_then(|b| b.try_slice(start..end)).ok_or_else(|| {
            Error::tensor(
                "download",
                format!("a byte range inside the {}-byte buffer", self.num_bytes()),
                format!("{start}..{end}"),
            )
        })?;
        stream
            .memcpy_dtoh(&view, out)
            .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
        stream
            .synchronize()
            .map_err(|e| Error::driver("cuStreamSynchronize", e))
    }
}

/// Where a tensor's elements live.
#[derive(Clone)]
pub(crate) enum Storage {
    /// The CPU reference device.
    Host(Arc<HostBuffer>),
    /// A GPU allocation, with its base address read once when it was wrapped.
    #[cfg(feature = "cuda")]
    Cuda {
        buffer: Arc<dyn CudaBuffer>,
        address: u64,
    },
}

impl Storage {
    /// True when both are the same buffer.
    pub(crate) fn same(&self, other: &Storage) -> bool {
        match (self, other) {
            (Storage::Host(a), Storage::Host(b)) => Arc::ptr_eq(a, b),
            #[cfg(feature = "cuda")]
            (Storage::Cuda { buffer: a, .. }, Storage::Cuda { buffer: b, .. }) => Arc::ptr_eq(a, b),
            #[cfg(feature = "cuda")]
            _ => false,
        }
    }

    pub(crate) fn host(buffer: HostBuffer) -> Self {
        Storage::Host(Arc::new(buffer))
    }

    /// The host buffer; `None` for a GPU allocation.
    pub(crate) fn as_host(&self) -> Option<&HostBuffer> {
        match self {
            Storage::Host(b) => Some(b),
            #[cfg(feature = "cuda")]
            Storage::Cuda { .. } => None,
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn cuda(buffer: Arc<dyn CudaBuffer>) -> Self {
        let address = buffer.address();
        Storage::Cuda { buffer, address }
    }

    pub(crate) fn num_bytes(&self) -> usize {
        match self {
            Storage::Host(b) => b.len,
            #[cfg(feature = "cuda")]
            Storage::Cuda { buffer, .. } => buffer.num_bytes(),
        }
    }

    /// The address of byte 0 (a host address or a device address).
    pub(crate) fn address(&self) -> u64 {
        match self {
            Storage::Host(b) => b.address(),
            #[cfg(feature = "cuda")]
            Storage::Cuda { address, .. } => *address,
        }
    }

    /// The stream a GPU buffer is ordered on; `None` on the host.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        match self {
            Storage::Host(_) => None,
            Storage::Cuda { buffer, .. } => Some(buffer.stream()),
        }
    }

    /// Bytes `start..start + len`, borrowed on the host, downloaded from a GPU (after
    /// waiting for the work queued before it on the buffer's stream, kernels included).
    pub(crate) fn read_bytes(&self, start: usize, len: usize) -> Result<Bytes<'_>, Error> {
        match self {
            Storage::Host(b) => {
                let range = start..start.saturating_add(len);
                if range.end > b.len || start > range.end {
                    return Err(Error::tensor(
                        "read",
                        format!("a byte range inside the {}-byte buffer", b.len),
                        format!("{range:?}"),
                    ));
                }
                let range = b.start + range.start..b.start + range.end;
                Ok(Bytes::Host {
                    guard: b.read(),
                    range,
                })
            }
            #[cfg(feature = "cuda")]
            Storage::Cuda { buffer, .. } => {
                let mut out = try_bytes("read", len)?;
                out.resize(len, 0);
                buffer.download(start, &mut out)?;
                Ok(Bytes::Owned(out))
            }
        }
    }
}

/// Bytes read from a storage: host memory (read-locked while borrowed) or downloaded.
pub(crate) enum Bytes<'a> {
    Host {
        guard: RwLockReadGuard<'a, Vec<u8>>,
        range: Range<usize>,
    },
    #[cfg(feature = "cuda")]
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Host { guard, range } => &guard[range.clone()],
            #[cfg(feature = "cuda")]
            Bytes::Owned(v) => v,
        }
    }
}

/// An empty byte vector with room for `len` bytes, reserved fallibly: a failure is an
/// error naming the size instead of an allocation abort.
pub(crate) fn try_bytes(op: &'static str, len: usize) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|e| {
        Error::tensor(
            op,
            format!("{len} bytes of host memory"),
            format!("an allocation failure: {e}"),
        )
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffers_are_aligned_and_zeroed() {
        for len in [0, 1, 7, 256, 1000] {
            let b = HostBuffer::zeroed(len).unwrap();
            assert_eq!(b.address() % BUFFER_ALIGNMENT as u64, 0, "len {len}");
            let s = Storage::host(b);
            let bytes = s.read_bytes(0, len).unwrap();
            assert_eq!(bytes.len(), len);
            assert!(bytes.iter().all(|&x| x == 0));
        }
        let s = Storage::host(HostBuffer::from_bytes(&[1, 2, 3]).unwrap());
        assert_eq!(&*s.read_bytes(0, 3).unwrap(), &[1, 2, 3]);
        let b = s.as_host().unwrap();
        b.write(1, &[9, 8]).unwrap();
        assert_eq!(&*s.read_bytes(0, 3).unwrap(), &[1, 9, 8]);
        assert!(b.write(2, &[1, 2]).is_err());
        assert!(b.write(usize::MAX, &[1]).is_err());
    }

    #[test]
    fn an_impossible_host_allocation_is_an_error() {
        assert!(HostBuffer::zeroed(usize::MAX).is_err());
        assert!(HostBuffer::zeroed(usize::MAX / 2).is_err());
    }

    #[test]
    fn reads_outside_a_host_buffer_are_errors() {
        let s = Storage::host(HostBuffer::from_bytes(&[1, 2, 3, 4]).unwrap());
        assert_eq!(&*s.read_bytes(1, 2).unwrap(), &[2, 3]);
        assert!(s.read_bytes(3, 2).is_err());
        assert!(s.read_bytes(usize::MAX, 2).is_err());
    }
}
