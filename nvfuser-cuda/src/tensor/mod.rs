//! [`Tensor`]: a strided view (dtype, sizes, strides, offset) over a shared buffer on a
//! [`Device`].
//!
//! A tensor is what fusions take and return. Its buffer is host memory on the CPU
//! reference device and a cudarc allocation on a GPU, held through an `Arc`, so the views
//! ([`permute`](Tensor::permute), [`slice`](Tensor::slice), [`expand`](Tensor::expand),
//! [`unsqueeze`](Tensor::unsqueeze)) copy nothing: they only change sizes, strides and
//! offset, which is exactly the information the executor's input descriptors
//! (contiguity, stride order, broadcast and expanded dims, alignment) are derived from.
//!
//! Strides and offset count elements. Every constructor checks that the view stays inside
//! its buffer, and every view of a valid tensor is again inside it, so reading a tensor
//! never addresses memory it does not own. Buffers from other crates (candle) come in
//! through `Tensor::from_cuda_slice` (with the `cuda` feature) without a copy.
//!
//! Submodules: `layout` (index arithmetic), `element` (Rust types ↔ dtypes and bytes),
//! `storage` (host and device buffers), `create` (uploads, zeros, allocations), `host`
//! (conversions to and from the CPU reference evaluator's `HostTensor`).

mod create;
mod element;
mod host;
mod layout;
pub(crate) mod storage;

use std::fmt;
#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use cudarc::driver::{CudaSlice, DeviceRepr};
use nvfuser_core::DataType;

pub use element::Element;
pub use layout::contiguous_strides;
pub use storage::BUFFER_ALIGNMENT;

use crate::device::Device;
use crate::error::Error;
use create::byte_size;
use layout::Layout;
#[cfg(feature = "cuda")]
use storage::CudaBuffer;
use storage::Storage;

/// A strided view of elements of one dtype on a [`Device`]. Cheap to clone (the buffer
/// is shared).
///
/// ```
/// use nvfuser_cuda::Device;
/// let cpu = Device::cpu();
/// let x = cpu.tensor_from_slice(&[0i32, 1, 2, 3, 4, 5], [2, 3]).unwrap();
/// let col = x.slice(1, 1, 2, 1).unwrap();          // x[:, 1:2]
/// assert_eq!(col.sizes(), &[2, 1]);
/// assert_eq!(col.to_vec::<i32>().unwrap(), [1, 4]);
/// let wide = col.expand(&[2, 4]).unwrap();         // stride 0, no copy
/// assert_eq!(wide.strides(), &[3, 0]);
/// assert_eq!(wide.to_vec::<i32>().unwrap(), [1, 1, 1, 1, 4, 4, 4, 4]);
/// assert!(x.to_vec::<f32>().is_err());            // wrong type: an error, not a cast
/// ```
#[derive(Clone)]
pub struct Tensor {
    dtype: DataType,
    layout: Layout,
    storage: Storage,
    device: Device,
}

/// The largest alignment [`Tensor::data_alignment`] reports.
const MAX_REPORTED_ALIGNMENT: u64 = BUFFER_ALIGNMENT as u64;

impl Tensor {
    /// A tensor over a cudarc allocation that another library owns (candle, or your own
    /// cudarc code), without a copy. `sizes`, `strides` and `offset` are in elements of
    /// `dtype`; the slice's own element type `T` only fixes its length in bytes.
    ///
    /// The view is checked against the buffer: one stride per size, an element count and
    /// extent that fit in `usize`, every addressed byte inside the slice, and a base
    /// address aligned to the dtype. Any violation is a [`Error::InvalidTensor`] that
    /// names the numbers. The slice's GPU must be usable as a [`Device`] (it is, since the
    /// slice exists).
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn from_cuda_slice<T: DeviceRepr + 'static>(
        slice: impl Into<Arc<CudaSlice<T>>>,
        dtype: DataType,
        sizes: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Tensor, Error> {
        const OP: &str = "Tensor::from_cuda_slice";
        let slice: Arc<CudaSlice<T>> = slice.into();
        let layout = Layout::strided(OP, sizes, strides, offset)?;
        let element_size = dtype.size_bytes();
        let needed = layout
            .required_elements(OP)
            .and_then(|n| byte_size(OP, n, dtype))?;
        let available = slice.num_bytes();
        if needed > available {
            return Err(Error::tensor(
                OP,
                format!(
                    "a view inside the {available}-byte buffer ({} elements of {dtype})",
                    available / element_size
                ),
                format!(
                    "sizes {sizes:?}, strides {strides:?} and offset {offset}, which need \
                     {needed} bytes"
                ),
            ));
        }
        let device = Device::cuda(slice.ordinal())?;
        let buffer: Arc<dyn CudaBuffer> = slice;
        let storage = Storage::cuda(buffer);
        if !storage.address().is_multiple_of(element_size as u64) {
            return Err(Error::tensor(
                OP,
                format!("a buffer address aligned to {element_size} bytes for {dtype}"),
                format!("address {:#x}", storage.address()),
            ));
        }
        Ok(Tensor {
            dtype,
            layout,
            storage,
            device,
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The size of each dim.
    pub fn sizes(&self) -> &[usize] {
        self.layout.sizes()
    }

    /// The stride of each dim, in elements (0 for an expanded dim).
    pub fn strides(&self) -> &[usize] {
        self.layout.strides()
    }

    /// The position of the first element in the buffer, in elements.
    pub fn offset(&self) -> usize {
        self.layout.offset()
    }

    /// The number of dims (0 for a scalar tensor).
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// The number of elements (1 for a 0-d tensor, 0 for an empty one).
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether the elements are dense in row-major order (size-1 dims may have any
    /// stride; expanded dims make a tensor non-contiguous; an empty tensor is contiguous).
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// The alignment of the first element's address in bytes: the largest power of two
    /// that divides it, reported up to [`BUFFER_ALIGNMENT`] (256). Vectorized kernels
    /// need it: a 16-byte vector load needs 16.
    pub fn data_alignment(&self) -> usize {
        let byte_offset =
            (self.layout.offset() as u64).wrapping_mul(self.dtype.size_bytes() as u64);
        let address = self.storage.address().wrapping_add(byte_offset);
        let alignment = if address == 0 {
            MAX_REPORTED_ALIGNMENT
        } else {
            (1u64 << address.trailing_zeros()).min(MAX_REPORTED_ALIGNMENT)
        };
        // At most 256, so it fits.
        alignment as usize
    }

    /// The device address of the first element, for passing to a kernel; `None` on the
    /// CPU device.
    pub fn cuda_address(&self) -> Option<u64> {
        match &self.storage {
            // The offset of a view inside its buffer fits in the buffer's byte size.
            #[cfg(feature = "cuda")]
            Storage::Cuda { address, .. } => Some(address.wrapping_add(
                (self.layout.offset() as u64).wrapping_mul(self.dtype.size_bytes() as u64),
            )),
            Storage::Host(_) => None,
        }
    }

    /// The stream the GPU buffer is ordered on (this crate's device stream for buffers
    /// it allocated; the owner's stream for [`Tensor::from_cuda_slice`]); `None` on the
    /// CPU device.
    #[cfg(feature = "cuda")]
    pub(crate) fn buffer_stream(&self) -> Option<&Arc<cudarc::driver::CudaStream>> {
        self.storage.cuda_stream()
    }

    /// True when `self` and `other` are views of one buffer (writing through one is
    /// seen through the other wherever their elements overlap).
    pub fn shares_buffer(&self, other: &Tensor) -> bool {
        self.storage.same(&other.storage)
    }

    /// The size in bytes of the buffer the view points into (not of the view).
    pub fn buffer_bytes(&self) -> usize {
        self.storage.num_bytes()
    }

    /// The elements in row-major order, downloaded from a GPU if needed. Works for any
    /// view (permuted, sliced, expanded): the addressed elements are gathered.
    ///
    /// On a GPU the download is ordered after everything queued on the buffer's stream
    /// (kernel launches return before their kernels finish) and waits for it, so the
    /// values are those the queued kernels wrote; an error of such a kernel (an illegal
    /// address, say) surfaces here as a driver error.
    ///
    /// Errors: [`Error::DtypeMismatch`] when `T` is not the tensor's dtype (no
    /// conversion happens); driver errors from the download;
    /// [`Error::DeviceAssert`] when a device-side check of a kernel launched on the
    /// device before failed (reported once, by the first download or synchronize after
    /// it, whichever tensor it reads).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        if T::DTYPE != self.dtype {
            return Err(Error::DtypeMismatch {
                op: "Tensor::to_vec",
                expected: T::DTYPE,
                found: self.dtype,
            });
        }
        Ok(T::decode(&self.contiguous_bytes()?))
    }

    /// Overwrites this contiguous tensor's elements with `values`, in place: the
    /// buffer and its address stay, so a captured graph ([`Device::capture`]) that reads
    /// this tensor sees the new values on its next replay. The copy is queued on the
    /// buffer's stream, after the work queued before it (`values` is read before this
    /// returns).
    ///
    /// On the CPU device the values are stored into the host buffer (every view of it
    /// sees them).
    ///
    /// Errors: [`Error::DtypeMismatch`]; [`Error::InvalidTensor`] for a view that is not
    /// contiguous or a length that is not the tensor's element count; driver errors.
    pub fn write_from_slice<T: Element>(&self, values: &[T]) -> Result<(), Error> {
        const OP: &str = "Tensor::write_from_slice";
        if T::DTYPE != self.dtype {
            return Err(Error::DtypeMismatch {
                op: OP,
                expected: self.dtype,
                found: T::DTYPE,
            });
        }
        if !self.is_contiguous() || values.len() != self.numel() {
            return Err(Error::tensor(
                OP,
                format!("a contiguous tensor and {} values", self.numel()),
                format!(
                    "{} values for a {} view",
                    values.len(),
                    if self.is_contiguous() {
                        "contiguous"
                    } else {
                        "strided"
                    }
                ),
            ));
        }
        #[cfg(feature = "cuda")]
        if let Storage::Cuda { buffer, address } = &self.storage {
            return self.write_on_gpu(&**buffer, *address, values);
        }
        // The CPU device: the values stored into the host buffer every view sees.
        let host = self.device.tensor_from_slice(values, self.sizes())?;
        self.store_host_tensor(&host.to_host_tensor()?)
    }

    /// [`Tensor::write_from_slice`] (checked there) into the GPU buffer at `address`.
    #[cfg(feature = "cuda")]
    fn write_on_gpu<T: Element>(
        &self,
        buffer: &dyn CudaBuffer,
        address: u64,
        values: &[T],
    ) -> Result<(), Error> {
        const OP: &str = "Tensor::write_from_slice";
        let mut bytes = create::try_bytes(OP, byte_size(OP, values.len(), T::DTYPE)?)?;
        T::encode(values, &mut bytes);
        let start = self.offset() * self.dtype.size_bytes();
        if start
            .checked_add(bytes.len())
            .is_none_or(|e| e > buffer.num_bytes())
        {
            return Err(Error::tensor(
                OP,
                format!("a byte range inside the {}-byte buffer", buffer.num_bytes()),
                format!("{start}..{}", start.saturating_add(bytes.len())),
            ));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let stream = buffer.stream();
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        // SAFETY: the byte range was checked against the buffer above; the copy is
        // queued on the buffer's stream, and a copy from pageable host memory has read
        // `bytes` when the call returns.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                address + start as u64,
                &bytes[..],
                stream.cu_stream(),
            )
        }
        .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))
    }

    /// A contiguous copy of this tensor on `device` (also when it is already there).
    pub fn to_device(&self, device: &Device) -> Result<Tensor, Error> {
        let bytes = self.contiguous_bytes()?;
        let layout = Layout::contiguous("Tensor::to_device", self.sizes())?;
        device.tensor_from_bytes(self.dtype, layout, &bytes)
    }

    /// Reorders dims without copying: dim `i` of the result is dim `dims[i]` of `self`
    /// (negative values count from the end).
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor, Error> {
        Ok(self.with_layout(self.layout.permute(dims)?))
    }

    /// A strided slice of one axis without copying, with Python's rules: `start` and
    /// `stop` count from the end when negative and are clamped to the dim (`i64::MAX`
    /// means "to the end"); `step` is at least 1.
    pub fn slice(&self, axis: i64, start: i64, stop: i64, step: i64) -> Result<Tensor, Error> {
        Ok(self.with_layout(self.layout.slice(axis, start, stop, step)?))
    }

    /// A view of the same buffer with explicit sizes, strides and offset (in elements,
    /// like PyTorch's `as_strided`), without copying. Errors when the view would
    /// address an element past the end of the buffer.
    pub fn as_strided(
        &self,
        sizes: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Tensor, Error> {
        const OP: &str = "Tensor::as_strided";
        let layout = Layout::strided(OP, sizes, strides, offset)?;
        let need = byte_size(OP, layout.required_elements(OP)?, self.dtype)?;
        if need > self.buffer_bytes() {
            return Err(Error::tensor(
                OP,
                format!("a view inside the buffer of {} bytes", self.buffer_bytes()),
                format!(
                    "sizes {sizes:?}, strides {strides:?} and offset {offset} need {need} bytes"
                ),
            ));
        }
        Ok(self.with_layout(layout))
    }

    /// Broadcasts size-1 dims to `sizes` with stride 0, without copying. `sizes` may add
    /// new leading dims; `-1` keeps a dim as it is.
    pub fn expand(&self, sizes: &[i64]) -> Result<Tensor, Error> {
        Ok(self.with_layout(self.layout.expand(sizes)?))
    }

    /// Inserts a size-1 dim at `axis` (`-1` appends), without copying.
    pub fn unsqueeze(&self, axis: i64) -> Result<Tensor, Error> {
        Ok(self.with_layout(self.layout.unsqueeze(axis)?))
    }

    fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor {
            dtype: self.dtype,
            layout,
            storage: self.storage.clone(),
            device: self.device.clone(),
        }
    }

    /// The addressed elements' bytes in row-major order: one read (or download) of the
    /// span the view covers, then a gather when the view is not contiguous.
    fn contiguous_bytes(&self) -> Result<Vec<u8>, Error> {
        const OP: &str = "Tensor::to_vec";
        let size = self.dtype.size_bytes();
        let Some((first, last)) = self.layout.span(OP)? else {
            return Ok(Vec::new());
        };
        let start = byte_size(OP, first, self.dtype)?;
        let len = byte_size(OP, last - first + 1, self.dtype)?;
        let bytes = self.storage.read_bytes(start, len)?;
        // The download waited for the kernels queued before it: a device-side check
        // one of them failed is reported now (see `device::errors`).
        #[cfg(feature = "cuda")]
        if matches!(self.storage, Storage::Cuda { .. }) {
            self.device.check_device_errors()?;
        }
        if self.layout.is_contiguous() {
            // A contiguous view's span is exactly its elements.
            return Ok(bytes.to_vec());
        }
        // An expanded view may address far more elements than its storage holds.
        let mut out = create::try_bytes(OP, byte_size(OP, self.numel(), self.dtype)?)?;
        // Every offset lies in first..=last (the span), so the ranges are inside `bytes`.
        self.layout.for_each_offset(|element| {
            let at = (element - first) * size;
            out.extend_from_slice(&bytes[at..at + size]);
        });
        Ok(out)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({}{:?}, strides {:?}, offset {}, on {})",
            self.dtype,
            self.sizes(),
            self.strides(),
            self.offset(),
            self.device
        )
    }
}
