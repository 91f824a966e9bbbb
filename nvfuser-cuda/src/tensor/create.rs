//! Creating tensors: host data uploaded to a device, zeros, and the device allocations
//! behind them.
//!
//! Device allocations go through the device's stream (`cuMemAllocAsync` where the GPU
//! supports memory pools); an allocation failure for lack of memory is
//! [`Error::OutOfMemory`] with the size asked for, not a bare driver code.

#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use cudarc::driver::sys::CUresult;
use nvfuser_core::DataType;

use super::layout::Layout;
pub(crate) use super::storage::try_bytes;
#[cfg(feature = "cuda")]
use super::storage::CudaBuffer;
use super::storage::{HostBuffer, Storage};
use super::{Element, Tensor};
#[cfg(feature = "cuda")]
use crate::device::CudaDevice;
use crate::device::Device;
use crate::error::Error;

impl Device {
    /// A new contiguous tensor of `shape` holding `values` (row-major), copied to this
    /// device.
    ///
    /// Errors: [`Error::InvalidTensor`] when `values.len()` is not the product of
    /// `shape`; [`Error::OutOfMemory`] or [`Error::Driver`] from the GPU.
    pub fn tensor_from_slice<T: Element>(
        &self,
        values: &[T],
        shape: impl AsRef<[usize]>,
    ) -> Result<Tensor, Error> {
        const OP: &str = "Device::tensor_from_slice";
        let shape = shape.as_ref();
        let layout = Layout::contiguous(OP, shape)?;
        if layout.numel() != values.len() {
            return Err(Error::tensor(
                OP,
                format!("{} values for shape {shape:?}", layout.numel()),
                format!("{} values", values.len()),
            ));
        }
        // Reserved fallibly, so `encode` does not allocate (an abort on failure).
        let mut bytes = try_bytes(OP, byte_size(OP, values.len(), T::DTYPE)?)?;
        T::encode(values, &mut bytes);
        self.tensor_from_bytes(T::DTYPE, layout, &bytes)
    }

    /// A new contiguous tensor of `shape` filled with zeros (`false` for bool).
    pub fn zeros(&self, dtype: DataType, shape: impl AsRef<[usize]>) -> Result<Tensor, Error> {
        const OP: &str = "Device::zeros";
        let layout = Layout::contiguous(OP, shape.as_ref())?;
        let num_bytes = byte_size(OP, layout.numel(), dtype)?;
        let storage = self.new_storage(Fill::Zeros(num_bytes))?;
        Ok(Tensor {
            dtype,
            layout,
            storage,
            device: self.clone(),
        })
    }

    /// A new contiguous tensor of `shape` whose elements are **not initialized** (on the
    /// CPU device: zeros), for a kernel to fill: the launcher allocates outputs with it
    /// when the kernel writes every element (see `launch`). Reading it before a kernel
    /// wrote it gives arbitrary values (never undefined behavior: elements are decoded
    /// from plain bytes).
    pub fn uninit(&self, dtype: DataType, shape: &[usize]) -> Result<Tensor, Error> {
        const OP: &str = "Device::uninit";
        let layout = Layout::contiguous(OP, shape)?;
        let num_bytes = byte_size(OP, layout.numel(), dtype)?;
        let storage = self.new_storage(Fill::Uninit(num_bytes))?;
        Ok(Tensor {
            dtype,
            layout,
            storage,
            device: self.clone(),
        })
    }

    /// A tensor with `layout` over a new buffer holding exactly `bytes`.
    pub(super) fn tensor_from_bytes(
        &self,
        dtype: DataType,
        layout: Layout,
        bytes: &[u8],
    ) -> Result<Tensor, Error> {
        let storage = self.new_storage(Fill::Bytes(bytes))?;
        Ok(Tensor {
            dtype,
            layout,
            storage,
            device: self.clone(),
        })
    }

    /// A new buffer on this device: host bytes on the CPU device (zeros for
    /// [`Fill::Uninit`]), a pool allocation on a GPU.
    fn new_storage(&self, fill: Fill<'_>) -> Result<Storage, Error> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu() {
            let buffer = match fill {
                Fill::Zeros(n) => alloc_zeros(gpu, n)?,
                Fill::Uninit(n) => alloc_uninit(gpu, n)?,
                Fill::Bytes(bytes) => upload(gpu, bytes)?,
            };
            return Ok(Storage::cuda(buffer));
        }
        let buffer = match fill {
            Fill::Zeros(n) | Fill::Uninit(n) => HostBuffer::zeroed(n)?,
            Fill::Bytes(bytes) => HostBuffer::from_bytes(bytes)?,
        };
        Ok(Storage::host(buffer))
    }
}

/// What a new buffer holds.
enum Fill<'a> {
    /// This many zero bytes.
    Zeros(usize),
    /// This many bytes, not initialized (see [`Device::uninit`]).
    Uninit(usize),
    /// A copy of these bytes.
    Bytes(&'a [u8]),
}

/// `numel * dtype size`, checked.
pub(super) fn byte_size(op: &'static str, numel: usize, dtype: DataType) -> Result<usize, Error> {
    numel.checked_mul(dtype.size_bytes()).ok_or_else(|| {
        Error::tensor(
            op,
            "a byte size that fits in usize",
            format!("{numel} elements of {dtype}"),
        )
    })
}

/// Maps an allocation failure to [`Error::OutOfMemory`] when that is what it was.
#[cfg(feature = "cuda")]
fn alloc_error<'a>(
    gpu: &'a CudaDevice,
    bytes: usize,
    call: &'static str,
) -> impl Fn(cudarc::driver::DriverError) -> Error + 'a {
    move |e| {
        if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory {
                device: gpu.label(),
                requested_bytes: bytes,
            }
        } else {
            Error::driver(call, e)
        }
    }
}

/// A zero-filled device buffer of `num_bytes` (at least one), from the device's pool.
#[cfg(feature = "cuda")]
fn alloc_zeros(gpu: &CudaDevice, num_bytes: usize) -> Result<Arc<dyn CudaBuffer>, Error> {
    let buffer = gpu
        .alloc(num_bytes)
        .map_err(alloc_error(gpu, num_bytes, "cuMemAllocAsync"))?;
    buffer
        .zero()
        .map_err(|e| Error::driver("cuMemsetD8Async", e))?;
    Ok(Arc::new(buffer))
}

/// A device buffer of `num_bytes` (at least one) with arbitrary contents, from the
/// device's pool (a block of a dropped tensor when one of its size class is cached).
/// The buffer is only ever read as plain bytes (a download copies them into a `u8`
/// buffer, and every element type decodes from any bit pattern), so stale contents can
/// give wrong values but never undefined behavior; `Device::uninit` documents that a
/// kernel must write every element before it is read, and the launcher only uses it for
/// outputs that the kernel writes completely.
#[cfg(feature = "cuda")]
fn alloc_uninit(gpu: &CudaDevice, num_bytes: usize) -> Result<Arc<dyn CudaBuffer>, Error> {
    let buffer = gpu
        .alloc(num_bytes)
        .map_err(alloc_error(gpu, num_bytes, "cuMemAllocAsync"))?;
    Ok(Arc::new(buffer))
}

/// A device buffer holding a copy of `bytes`.
#[cfg(feature = "cuda")]
fn upload(gpu: &CudaDevice, bytes: &[u8]) -> Result<Arc<dyn CudaBuffer>, Error> {
    if bytes.is_empty() {
        return alloc_zeros(gpu, 0);
    }
    let buffer =
        gpu.alloc(bytes.len())
            .map_err(alloc_error(gpu, bytes.len(), "cuMemAllocAsync"))?;
    buffer
        .upload(bytes)
        .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))?;
    Ok(Arc::new(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uninitialized_tensors_are_contiguous_and_zero_on_the_cpu() {
        let cpu = Device::cpu();
        let t = cpu.uninit(DataType::F32, &[2, 3]).unwrap();
        assert_eq!((t.sizes(), t.strides()), (&[2, 3][..], &[3, 1][..]));
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 6]);
        let empty = cpu.uninit(DataType::BF16, &[0, 5]).unwrap();
        assert_eq!(empty.numel(), 0);
        assert!(cpu.uninit(DataType::F64, &[usize::MAX, 2]).is_err());
    }
}
