//! The creation ops (full, iota, rand): tensors made from scalar arguments and sizes.

use super::{checked_numel, invalid_ir, Evaluator};
use crate::dtype::round_to;
use crate::dtype::{Category, DataType};
use crate::error::{Error, Result};
use crate::eval::shape as sh;
use crate::eval::tensor::{HostData, HostTensor};
use crate::ir::{Distribution, Expr, IterKind, SizeArg};
use ndarray::{ArrayD, IxDyn};

impl Evaluator<'_> {
    /// `full`: the scalar input 0 expanded to the checked sizes.
    pub(super) fn full(&self, e: &Expr, sizes: &[SizeArg], out0: DataType) -> Result<HostData> {
        let shape = self.sizes(e, sizes)?;
        let v = HostTensor::from_scalar_value(self.scalar(e, 0)?, out0);
        sh::expand(e.op.name(), v.data(), &shape)
    }

    pub(super) fn iota(&self, e: &Expr, length: SizeArg, out: DataType) -> Result<HostData> {
        let name = e.op.name();
        let n = self.size_arg(e, length)?;
        if n < 0 {
            return Err(Error::invalid(name, format!("length {n}: expected >= 0")));
        }
        checked_numel(name, &[n as usize])?;
        let start = HostTensor::from_scalar_value(self.scalar(e, 0)?, out);
        let step = HostTensor::from_scalar_value(self.scalar(e, 1)?, out);
        // Along the one dim of the output that is not a broadcast; size 1 in the
        // others (a broadcast folded into the iota: `fold_creation_broadcasts`).
        let dims: Vec<usize> = match self.fusion.tensor_type(e.outputs[0]) {
            Some(t) if t.rank() > 1 => t
                .shape()
                .map(|d| {
                    if d.kind == IterKind::Broadcast {
                        1
                    } else {
                        n as usize
                    }
                })
                .collect(),
            _ => vec![n as usize],
        };
        let along = dims.iter().position(|&d| d != 1).unwrap_or(0);
        let shape = IxDyn(&dims);
        match (start.data(), step.data()) {
            (HostData::Int(a), HostData::Int(b)) => {
                let (a, b) = (
                    a.first().copied().unwrap_or(0),
                    b.first().copied().unwrap_or(0),
                );
                let mut r = ArrayD::from_shape_fn(shape, |i| {
                    a.wrapping_add((i[along] as i64).wrapping_mul(b))
                });
                crate::eval::convert::wrap_array(&mut r, out);
                Ok(HostData::Int(r))
            }
            (HostData::Float(a), HostData::Float(b)) => {
                let (a, b) = (
                    a.first().copied().unwrap_or(0.0),
                    b.first().copied().unwrap_or(0.0),
                );
                Ok(HostData::Float(ArrayD::from_shape_fn(shape, |i| {
                    a + i[along] as f64 * b
                })))
            }
            _ => Err(Error::dtype(name, "an integer or floating point type", out)),
        }
    }

    pub(super) fn rand(
        &self,
        e: &Expr,
        dist: Distribution,
        sizes: &[SizeArg],
        out: DataType,
    ) -> Result<HostData> {
        use crate::philox;
        let name = e.op.name();
        if out.category() != Category::Floating {
            return Err(Error::dtype(name, "a floating point output type", out));
        }
        let shape = self.sizes(e, sizes)?;
        let a = self.scalar(e, 0)?.as_f64();
        let b = self.scalar(e, 1)?.as_f64();
        let seed = self.int_scalar(e, 2, "the seed")? as u64;
        let offset = self.int_scalar(e, 3, "the offset")? as u64;
        let numel = checked_numel(name, &shape)? as u64;
        let values: Vec<f64> = match (dist, out) {
            // A value that rounds up to `high` becomes `low`, so the range is [low, high)
            // as in PyTorch (the generated kernels do the same after rounding).
            (Distribution::Uniform, DataType::F64) => (0..numel)
                .map(|i| philox::uniform_f64(seed, offset, i, a, b))
                .map(|v| if v >= b { a } else { v })
                .collect(),
            (Distribution::Uniform, _) => {
                let (lo, hi) = (a as f32, b as f32);
                let (lo_d, hi_d) = (round_to(lo as f64, out), round_to(hi as f64, out));
                (0..numel)
                    .map(|i| round_to(philox::uniform_f32(seed, offset, i, lo, hi) as f64, out))
                    .map(|v| if v >= hi_d { lo_d } else { v })
                    .collect()
            }
            (Distribution::Normal, DataType::F64) => (0..numel)
                .map(|i| philox::normal_f64(seed, offset, i, a, b))
                .collect(),
            (Distribution::Normal, _) => (0..numel)
                .map(|i| round_to(philox::normal_f32_as_f64(seed, offset, i, a, b), out))
                .collect(),
        };
        let arr = ArrayD::from_shape_vec(IxDyn(&shape), values)
            .map_err(|_| invalid_ir(format!("{name}: shape")))?;
        Ok(HostData::Float(arr))
    }
}
