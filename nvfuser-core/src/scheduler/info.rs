//! What the heuristics see: the device and the actual inputs of a call.
//!
//! Heuristics never hard-code a card: everything they size (threads, persistent
//! batches, grid splits) comes from a [`DeviceInfo`] read from the driver (the CUDA crate
//! fills it from its `DeviceProperties`) and from the sizes, strides and alignment of the
//! inputs ([`InputInfo`]).

use serde::{Deserialize, Serialize};

use super::unfit::{SizeQuantity, SizeRefusal, SizeSubject};
use crate::dtype::{DataType, ScalarValue};
use crate::ir::{Extent, Fusion, ValId, MAX_NUMEL};

/// The properties of a GPU that the heuristics use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Most threads in one block.
    pub max_threads_per_block: u32,
    /// Most resident threads per SM.
    pub max_threads_per_sm: u32,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// Shared memory one block may use (opt-in limit), bytes.
    pub shared_memory_per_block: u32,
    /// L2 cache, bytes.
    pub l2_cache_bytes: u32,
    /// Grid limits (x, y, z).
    pub max_grid_dim: [u32; 3],
}

/// One tensor argument as the heuristics see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Element type.
    pub dtype: DataType,
    /// Sizes per dim.
    pub sizes: Vec<i64>,
    /// Strides per dim, in elements.
    pub strides: Vec<i64>,
    /// The largest power of two (at most 16) that divides the data address, in bytes.
    pub alignment: u32,
}

/// The widest vector access (bytes) that every vector width up to it, compiled for a
/// tensor, keeps aligned: the largest power of two, at most 16, that divides the data
/// address and every stride in bytes of a dim with more than one element, except unit
/// strides (the vectorized innermost dim). Two calls with the same value (and the same
/// layout) can share a kernel's vector accesses; the launch check is
/// [`vector_access_ok`], which holds for every width up to this value.
pub fn vector_alignment(
    address: u64,
    sizes: &[usize],
    strides: &[usize],
    elem_bytes: usize,
) -> u32 {
    let mut bytes = 16u32;
    while bytes > 1 && !vector_access_ok(bytes as u64, address, sizes, strides, elem_bytes) {
        bytes /= 2;
    }
    bytes
}

/// Whether vector accesses of `bytes` stay aligned on a tensor: `address` and every
/// stride in bytes of a dim with more than one element (except unit strides, the
/// vectorized innermost dim) are multiples of `bytes`. A row of a strided view starts
/// at `address + row * stride`, so a pitch that is not a multiple misaligns every other
/// row even when the first is aligned.
pub fn vector_access_ok(
    bytes: u64,
    address: u64,
    sizes: &[usize],
    strides: &[usize],
    elem_bytes: usize,
) -> bool {
    if bytes <= 1 {
        return true;
    }
    address.is_multiple_of(bytes)
        && sizes.iter().zip(strides).all(|(&n, &s)| {
            n <= 1 || s == 1 || (s as u128 * elem_bytes as u128).is_multiple_of(bytes as u128)
        })
}

/// One argument of a call as the heuristics see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum InputInfo {
    /// A tensor.
    Tensor(TensorInfo),
    /// A scalar.
    Scalar(ScalarValue),
}

/// The device and the arguments of one call, in the fusion's input order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    /// The GPU.
    pub device: DeviceInfo,
    /// The arguments.
    pub inputs: Vec<InputInfo>,
}

impl RuntimeInfo {
    /// Contiguous row-major tensors of these dtypes and sizes, 16-byte aligned (tests,
    /// and heuristics asked about shapes without data).
    pub fn contiguous(device: DeviceInfo, tensors: &[(DataType, &[i64])]) -> RuntimeInfo {
        let inputs = tensors
            .iter()
            .map(|&(dtype, sizes)| {
                let mut strides = vec![1i64; sizes.len()];
                for i in (0..sizes.len().saturating_sub(1)).rev() {
                    strides[i] = strides[i + 1].saturating_mul(sizes[i + 1].max(1));
                }
                InputInfo::Tensor(TensorInfo {
                    dtype,
                    sizes: sizes.to_vec(),
                    strides,
                    alignment: 16,
                })
            })
            .collect();
        RuntimeInfo { device, inputs }
    }

    /// The tensor argument bound to fusion input `v`.
    pub fn tensor(&self, fusion: &Fusion, v: ValId) -> Option<&TensorInfo> {
        match self.inputs.get(fusion.input_position(v)?)? {
            InputInfo::Tensor(t) => Some(t),
            InputInfo::Scalar(_) => None,
        }
    }

    /// Refuses sizes the schedulers' arithmetic is not made for, before any planning:
    /// an input tensor, or a live tensor of the fusion whose extents evaluate, with a dim or
    /// an element count above [`MAX_NUMEL`] (zeros counted as one), a negative size, a
    /// stride above `MAX_NUMEL` in magnitude on a dim longer than 1, or an extent whose
    /// computation overflows `i64` for these arguments.
    pub fn check_sizes(&self, fusion: &Fusion) -> Result<(), SizeRefusal> {
        let limit = |subject, quantity, shape: Vec<Option<i64>>| SizeRefusal::TooLarge {
            subject,
            quantity,
            shape,
            limit: MAX_NUMEL,
        };
        for (i, inp) in self.inputs.iter().enumerate() {
            let InputInfo::Tensor(t) = inp else { continue };
            let shape = || t.sizes.iter().map(|&s| Some(s)).collect();
            let mut n: i64 = 1;
            for (&s, &st) in t.sizes.iter().zip(&t.strides) {
                if s < 0 {
                    return Err(SizeRefusal::Negative { input: i, size: s });
                }
                if s > MAX_NUMEL || (s > 1 && st.unsigned_abs() > MAX_NUMEL as u64) {
                    let strides = t.strides.clone();
                    let q = SizeQuantity::SizeOrStride { strides };
                    return Err(limit(SizeSubject::Input(i), q, shape()));
                }
                n = n.saturating_mul(s.max(1));
                if n > MAX_NUMEL {
                    let q = SizeQuantity::ElementCount;
                    return Err(limit(SizeSubject::Input(i), q, shape()));
                }
            }
        }
        // Tensors the fusion computes (or reads): a dead value's extent (a `reshape` of an
        // empty tensor with an inferred dim, which divides by zero) refuses nothing.
        let mut live = vec![false; fusion.num_vals()];
        for &i in fusion.inputs() {
            live[i.index()] = true;
        }
        let live_exprs = fusion.live_exprs();
        for (id, e) in fusion.exprs() {
            if live_exprs[id.index()] {
                for &o in &e.outputs {
                    live[o.index()] = true;
                }
            }
        }
        for (v, _) in live.iter().enumerate().filter(|(_, &l)| l) {
            let id = ValId::new(v as u32);
            let Some(t) = fusion.tensor_type(id) else {
                continue;
            };
            let mut n: i64 = 1;
            let mut sizes = Vec::new();
            for d in &t.domain {
                let Some(s) = self.eval(fusion, &d.extent) else {
                    // Unbound (not an overflow) unless every operand is known.
                    if self.extent_operands_known(fusion, &d.extent) {
                        return Err(SizeRefusal::Overflow {
                            tensor: id,
                            extent: d.extent.clone(),
                        });
                    }
                    sizes.push(None);
                    continue;
                };
                sizes.push(Some(s));
                if s > MAX_NUMEL {
                    return Err(limit(SizeSubject::Tensor(id), SizeQuantity::Dim, sizes));
                }
                n = n.saturating_mul(s.max(1));
                if n > MAX_NUMEL {
                    let q = SizeQuantity::ElementCount;
                    return Err(limit(SizeSubject::Tensor(id), q, sizes));
                }
            }
        }
        Ok(())
    }

    /// Whether every leaf of `e` has a value for these arguments.
    fn extent_operands_known(&self, fusion: &Fusion, e: &Extent) -> bool {
        match e {
            Extent::Const(_) => true,
            Extent::Dim { .. } | Extent::Scalar(_) => self.eval(fusion, e).is_some(),
            Extent::Op(_, a, b) => {
                self.extent_operands_known(fusion, a) && self.extent_operands_known(fusion, b)
            }
        }
    }

    /// The value of an extent for these arguments.
    pub fn eval(&self, fusion: &Fusion, e: &Extent) -> Option<i64> {
        e.eval(
            &|t, axis| self.tensor(fusion, t)?.sizes.get(axis).copied(),
            &|v| match self.inputs.get(fusion.input_position(v)?)? {
                InputInfo::Scalar(s) => s.cast(fusion.val(v).dtype).as_i64(),
                InputInfo::Tensor(_) => None,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_alignment_covers_the_address_and_every_non_unit_stride() {
        // A [256, 64] f32 column view with row pitch 68 (272 bytes) keeps 16-byte rows;
        // pitch 66 (264 bytes) only 8-byte ones; 4100 and 4098 the same.
        assert_eq!(vector_alignment(0x1000, &[256, 64], &[68, 1], 4), 16);
        assert_eq!(vector_alignment(0x1000, &[256, 64], &[66, 1], 4), 8);
        assert_eq!(vector_alignment(0x1000, &[64, 4096], &[4100, 1], 4), 16);
        assert_eq!(vector_alignment(0x1000, &[64, 4096], &[4098, 1], 4), 8);
        // The address counts, and so does an odd pitch of f16.
        assert_eq!(vector_alignment(0x1004, &[256, 64], &[68, 1], 4), 4);
        assert_eq!(vector_alignment(0x1000, &[8, 63], &[63, 1], 2), 2);
        // Size-1 dims, unit strides and stride 0 (expanded dims) do not limit it.
        assert_eq!(vector_alignment(0x1000, &[1, 64], &[3, 1], 4), 16);
        assert_eq!(vector_alignment(0x1000, &[5, 64], &[0, 1], 4), 16);
        assert_eq!(vector_alignment(0, &[], &[], 8), 16);
        assert!(vector_access_ok(16, 0x1000, &[256, 64], &[68, 1], 4));
        assert!(!vector_access_ok(16, 0x1000, &[256, 64], &[66, 1], 4));
        assert!(vector_access_ok(8, 0x1000, &[256, 64], &[66, 1], 4));
        assert!(!vector_access_ok(16, 0x1008, &[256, 64], &[68, 1], 4));
        assert!(vector_access_ok(1, 0x1001, &[3], &[7], 1));
    }
}
