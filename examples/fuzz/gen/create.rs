//! Steps that make a new tensor from sizes rather than from values: `full` and `uniform`
//! in the shape of another tensor, and `iota` along one of its dims. Each has its
//! proposal and its builder call.

use nvfuser::prelude::*;

use super::{Ax, Gen, Meta, Step};

impl Gen {
    /// A constant tensor in the shape of another.
    pub(super) fn propose_full_like(&mut self) -> Option<Step> {
        let like = self.pick_tensor(|_| true)?;
        let dt = self
            .rng
            .pick(&[DataType::F32, DataType::F16, DataType::I64]);
        Some(Step::FullLike(like, 1.5, dt))
    }

    /// An iota as long as one dim of a tensor.
    pub(super) fn propose_iota(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty())?;
        let axis = self.rng.below(self.metas[a].dims.len());
        let dt = self
            .rng
            .pick(&[DataType::I32, DataType::I64, DataType::F32, DataType::F64]);
        Some(Step::Iota(
            a,
            axis,
            100.0,
            self.rng.pick(&[1.0, 2.0, -3.0]),
            dt,
        ))
    }

    /// Uniform random numbers in the shape of another tensor, with a random seed and
    /// offset.
    pub(super) fn propose_uniform_like(&mut self) -> Option<Step> {
        let like = self.pick_tensor(|_| true)?;
        let dt = self
            .rng
            .pick(&[DataType::F32, DataType::F64, DataType::BF16]);
        Some(Step::UniformLike(
            like,
            self.rng.next() % 1000,
            self.rng.below(4) as u64 * 4,
            dt,
            self.rng.below(2) == 0,
        ))
    }

    pub(super) fn make_full_like(
        &mut self,
        like: usize,
        value: f64,
        dt: DataType,
    ) -> Option<(ValId, Meta)> {
        let (l, m) = self.operand(like)?;
        let sizes = self.sizes_of(l, &m.dims)?;
        let value = self.fd.constant(value);
        let v = self.fd.full(&sizes, value, dt).ok()?;
        Some((
            v,
            Meta {
                dims: m
                    .dims
                    .iter()
                    .map(|d| if *d == Ax::B { Ax::B } else { *d })
                    .collect(),
                dtype: dt,
                scalar: false,
                exact: true,
                bound: 2.0,
            },
        ))
    }

    pub(super) fn make_iota(
        &mut self,
        a: usize,
        axis: usize,
        start: f64,
        step: f64,
        dt: DataType,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let n = self.fd.size(x, axis as i64).ok()?;
        let (s, st) = if dt.is_float() {
            (self.fd.constant(start), self.fd.constant(step))
        } else {
            (
                self.fd.constant(start as i64),
                self.fd.constant(step as i64),
            )
        };
        let v = self.fd.iota(Size::Val(n), s, st, dt).ok()?;
        let d = m.dims[axis];
        Some((
            v,
            Meta {
                dims: vec![if d == Ax::B { Ax::B } else { d }],
                dtype: dt,
                scalar: false,
                exact: true,
                bound: 100.0 + 3.0 * 4096.0,
            },
        ))
    }

    pub(super) fn make_uniform_like(
        &mut self,
        like: usize,
        seed: u64,
        offset: u64,
        dt: DataType,
        generator: bool,
    ) -> Option<(ValId, Meta)> {
        let (l, m) = self.operand(like)?;
        let sizes = self.sizes_of(l, &m.dims)?;
        let lo = self.fd.constant(-1.0);
        let hi = self.fd.constant(1.0);
        let v = if generator {
            self.fd.rand_uniform(&sizes, lo, hi, dt).ok()?
        } else {
            let seed = self.fd.constant(seed as i64);
            let offset = self.fd.constant(offset as i64);
            self.fd.uniform(&sizes, lo, hi, seed, offset, dt).ok()?
        };
        Some((
            v,
            Meta {
                dims: m.dims.clone(),
                dtype: dt,
                scalar: false,
                exact: true,
                bound: 1.0,
            },
        ))
    }
}
