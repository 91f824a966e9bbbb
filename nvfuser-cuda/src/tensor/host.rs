//! Conversions between [`Tensor`] and the CPU reference evaluator's [`HostTensor`].
//!
//! A `Tensor` models memory: a buffer, strides, an offset, an alignment. That holds for
//! the CPU reference device too, so that input validation (contiguity, stride 0 where
//! contiguity is declared, alignment) behaves the same on the CPU as on a GPU. A
//! `HostTensor` is a logical array, the evaluator's value type. These conversions are
//! the boundary between the two: the CPU device feeds the evaluator with
//! [`Tensor::to_host_tensor`] and wraps its results with [`Device::tensor_from_host`], and
//! GPU tests compare a downloaded `HostTensor` with the evaluator's.

use half::{bf16, f16};
use nvfuser_core::eval::HostTensor;
use nvfuser_core::fp8::{f8e4m3, f8e5m2};
use nvfuser_core::DataType;

use super::Tensor;
use crate::device::Device;
use crate::error::Error;

/// Runs `$body` with `$t` bound to the Rust element type of `$dtype`.
macro_rules! with_element {
    ($op:expr, $dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DataType::F32 => {
                type $t = f32;
                $body
            }
            DataType::F64 => {
                type $t = f64;
                $body
            }
            DataType::F16 => {
                type $t = f16;
                $body
            }
            DataType::BF16 => {
                type $t = bf16;
                $body
            }
            DataType::F8E4M3 => {
                type $t = f8e4m3;
                $body
            }
            DataType::F8E5M2 => {
                type $t = f8e5m2;
                $body
            }
            DataType::I32 => {
                type $t = i32;
                $body
            }
            DataType::I64 => {
                type $t = i64;
                $body
            }
            DataType::Bool => {
                type $t = bool;
                $body
            }
            dtype => Err(Error::UnsupportedDtype { op: $op, dtype }),
        }
    };
}

impl Device {
    /// A new contiguous tensor on this device holding the values of `host`, with its
    /// dtype and shape.
    pub fn tensor_from_host(&self, host: &HostTensor) -> Result<Tensor, Error> {
        with_element!("Device::tensor_from_host", host.dtype(), T => {
            let values = host.to_vec::<T>()?;
            self.tensor_from_slice(&values, host.shape())
        })
    }
}

impl Tensor {
    /// The values of this tensor (any view; downloaded from a GPU if needed) as a
    /// [`HostTensor`] of the same dtype and shape, for the CPU reference evaluator or for
    /// comparing with it.
    pub fn to_host_tensor(&self) -> Result<HostTensor, Error> {
        with_element!("Tensor::to_host_tensor", self.dtype(), T => {
            let values = self.to_vec::<T>()?;
            Ok(HostTensor::from_vec(values, self.sizes())?)
        })
    }
}

impl Tensor {
    /// Writes the elements of `value` (same dtype and sizes) into this tensor's, in
    /// place (the buffer every view of it shares): how both devices store an in-place
    /// output (`add_output_alias`) into its input. Any strided view that addresses each
    /// element once; a view that repeats elements (an expanded dim, or overlapping
    /// strides) is refused. On a GPU the copy is queued on the device's stream after
    /// the work queued before it (see `launch::store`); a `value` on another device is
    /// moved here first.
    pub(crate) fn store(&self, value: &Tensor) -> Result<(), Error> {
        const OP: &str = "in-place output";
        if value.dtype() != self.dtype() || value.sizes() != self.sizes() {
            return Err(Error::tensor(
                OP,
                format!(
                    "a {} value of shape {:?} (the input's)",
                    self.dtype(),
                    self.sizes()
                ),
                format!("a {} value of shape {:?}", value.dtype(), value.sizes()),
            ));
        }
        if let Some(axis) = self.layout.overlapping_dim() {
            let how = if self.strides()[axis] == 0 {
                "an expanded view"
            } else {
                "it overlaps another dim"
            };
            return Err(Error::tensor(
                OP,
                "an input whose elements are distinct memory locations",
                format!(
                    "stride {} at dim {axis} ({how}; sizes {:?}, strides {:?})",
                    self.strides()[axis],
                    self.sizes(),
                    self.strides()
                ),
            ));
        }
        if !self.device().is_gpu() {
            return self.store_host_tensor(&value.to_host_tensor()?);
        }
        #[cfg(not(feature = "cuda"))]
        return Err(Error::CudaDisabled { op: OP });
        #[cfg(feature = "cuda")]
        self.store_on_gpu(value)
    }

    /// The GPU part of [`Tensor::store`] (checked there).
    #[cfg(feature = "cuda")]
    fn store_on_gpu(&self, value: &Tensor) -> Result<(), Error> {
        if value.shares_buffer(self)
            && value.strides() == self.strides()
            && value.offset() == self.offset()
        {
            return Ok(()); // already there
        }
        // A value on another device is moved here; one that shares this buffer
        // elsewhere (the copy would read what it writes) is copied out first.
        let staged;
        let value = if value.device() != self.device() {
            staged = value.to_device(self.device())?;
            &staged
        } else if value.shares_buffer(self) {
            staged = value.duplicate()?;
            &staged
        } else {
            value
        };
        crate::launch::store::store_on_gpu(self, value)
    }

    /// A contiguous copy of this view on its own device, in a new buffer (on a GPU, a
    /// copy queued on the device's stream).
    pub(crate) fn duplicate(&self) -> Result<Tensor, Error> {
        let copy = self.device().uninit(self.dtype(), self.sizes())?;
        copy.store(self)?;
        Ok(copy)
    }

    /// The host part of [`Tensor::store`] (checked there): `host`'s values written
    /// into this CPU tensor's view.
    pub(super) fn store_host_tensor(&self, host: &HostTensor) -> Result<(), Error> {
        const OP: &str = "in-place output";
        let Some(buffer) = self.storage.as_host() else {
            return Err(Error::tensor(
                OP,
                "an input on the CPU device",
                format!("a tensor on {}", self.device()),
            ));
        };
        let bytes = with_element!(OP, self.dtype(), T => {
            let values = host.to_vec::<T>()?;
            let mut bytes = Vec::new();
            <T as super::Element>::encode(&values, &mut bytes);
            Ok::<Vec<u8>, Error>(bytes)
        })?;
        // Element positions of the view, in row-major order of its shape.
        let (sizes, strides) = (self.sizes(), self.strides());
        let mut positions = Vec::with_capacity(self.numel());
        let mut index = vec![0usize; sizes.len()];
        for _ in 0..self.numel() {
            let p = self.offset() + index.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>();
            positions.push(p);
            for d in (0..sizes.len()).rev() {
                index[d] += 1;
                if index[d] < sizes[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        buffer.write_elements(self.dtype().size_bytes(), &positions, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_tensors_round_trip_in_every_dtype() {
        let cpu = Device::cpu();
        for (i, dtype) in DataType::ALL.into_iter().enumerate() {
            for shape in [&[][..], &[0], &[5], &[2, 3, 4]] {
                let host = HostTensor::random(dtype, shape, i as u64);
                let t = cpu.tensor_from_host(&host).unwrap();
                assert_eq!((t.dtype(), t.sizes()), (dtype, shape));
                assert_eq!(t.to_host_tensor().unwrap(), host, "{dtype} {shape:?}");
            }
        }
    }

    #[test]
    fn views_become_the_host_tensor_of_the_same_view() {
        let cpu = Device::cpu();
        let values: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let t = cpu.tensor_from_slice(&values, [2, 3, 4]).unwrap();
        let view = t.permute(&[2, 0, 1]).unwrap().slice(2, 1, 3, 1).unwrap();
        let strides: Vec<i64> = view.strides().iter().map(|&s| s as i64).collect();
        let expected =
            HostTensor::from_strided(&values, view.sizes(), &strides, view.offset()).unwrap();
        assert_eq!(view.to_host_tensor().unwrap(), expected);
    }
}
