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
