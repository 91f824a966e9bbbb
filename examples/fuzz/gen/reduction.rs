//! Reduction steps: sum, product, max, min and mean over random axes, the variance
//! family (var, var_mean, welford), and the scans (cumsum, cumprod, cummax, cummin along
//! one axis), and the sorts (sort, argsort, topk), proposed with the scans. Each has its
//! proposal and its builder call.

use nvfuser::ir::{ScanOp, UnaryOp};
use nvfuser::prelude::*;

use super::{Ax, Gen, Meta, Red, Step, MAX_DIM};

impl Gen {
    /// A reduction of a non-boolean tensor; a product only of a bounded float, a mean
    /// only of a float.
    pub(super) fn propose_reduce(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty() && m.dtype != DataType::Bool)?;
        let axes = self.axes_of(self.metas[a].dims.len());
        let keep = self.rng.chance(50);
        let float = self.metas[a].dtype.is_float();
        let red = match self.rng.below(6) {
            0 if float && self.metas[a].bound <= 20.0 => Red::Prod,
            1 => Red::Max,
            2 => Red::Min,
            3 if float => Red::Mean,
            _ => Red::Sum,
        };
        Some(Step::Reduce(red, a, axes, keep))
    }

    /// A variance, var_mean or welford of a float of moderate magnitude.
    pub(super) fn propose_variance(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty() && m.dtype.is_float() && m.bound < 1e3)?;
        let axes = self.axes_of(self.metas[a].dims.len());
        Some(match self.rng.below(3) {
            0 => Step::Var(a, axes, self.rng.below(2) as i64, self.rng.chance(50)),
            1 => Step::VarMean(a, axes, self.rng.below(2) as i64, self.rng.below(2)),
            _ => Step::Welford(a, axes, self.rng.below(3)),
        })
    }

    pub(super) fn make_reduce(
        &mut self,
        red: Red,
        a: usize,
        axes: &[i64],
        keep: bool,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = match red {
            Red::Sum => self.fd.sum(x, axes, keep),
            Red::Prod => {
                // Products of values near 1 stay finite. An f32 product is
                // accumulated in f32 on the GPU but in f64 by the reference (the
                // value model), so its factors stay within 1 +- 2^-16: over the
                // largest universe (2^21 elements) the product stays below e^32,
                // far from f32's range, where the two would part (inf against a
                // finite value). f16/bf16 results round to their dtype on both
                // sides, and f64 is f64 on both.
                let t = self.fd.tanh(x).ok()?;
                let f32_math = self.fd.fusion().val(t).dtype == DataType::F32;
                let k = self
                    .fd
                    .constant(if f32_math { 1.0 / 65536.0 } else { 0.01 });
                let t = self.fd.mul(t, k).ok()?;
                let one = self.fd.constant(1.0);
                let t = self.fd.add(t, one).ok()?;
                self.fd.prod(t, axes, keep)
            }
            Red::Max => self.fd.max(x, axes, keep),
            Red::Min => self.fd.min(x, axes, keep),
            Red::Mean => self.fd.mean(x, axes, keep),
        }
        .ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        let dims = reduced_dims(&m.dims, axes, keep);
        let exact = m.exact && (matches!(red, Red::Max | Red::Min) || !dtype.is_float());
        let bound = match red {
            Red::Sum => m.bound * 4096.0,
            Red::Prod => 1e30,
            _ => m.bound,
        };
        Some((
            v,
            Meta {
                dims,
                dtype,
                scalar: false,
                exact,
                bound,
            },
        ))
    }

    /// A scan of any tensor and dtype along a random axis (a 0-d tensor takes 0 or -1).
    pub(super) fn propose_scan(&mut self) -> Option<Step> {
        if self.rng.chance(60) {
            return self.propose_sort();
        }
        let a = self.pick_tensor(|_| true)?;
        let rank = self.metas[a].dims.len() as i64;
        let mut axis = self.rng.below(rank.max(1) as usize) as i64;
        if self.rng.chance(25) {
            // Negative axes too.
            axis -= rank.max(1);
        }
        Some(Step::Scan(self.rng.pick(ScanOp::ALL), a, axis))
    }

    /// A sort, argsort or topk of a value both devices compute exactly (the order of
    /// inexact values could differ by a rounding, and so the indices), not fp8, of rank
    /// 1 or more; `k` is small (a call whose dim is shorter is refused by both devices).
    pub(super) fn propose_sort(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.exact && !m.dims.is_empty() && !m.dtype.is_fp8())?;
        let rank = self.metas[a].dims.len() as i64;
        let mut axis = self.rng.below(rank as usize) as i64;
        if self.rng.chance(25) {
            axis -= rank;
        }
        let k = if self.rng.chance(50) {
            Some(self.rng.pick(&[0i64, 1, 1, 2, 3, 3, 5, 8]))
        } else {
            None
        };
        Some(Step::Sort {
            a,
            axis,
            descending: self.rng.chance(50),
            k,
            pick: self.rng.below(2),
            ties: self.rng.chance(50),
        })
    }

    /// The sort: with `ties`, a float operand is first `round(x * 2)` (exact on both
    /// devices; many equal keys, whose order is the index order).
    pub(super) fn make_sort(
        &mut self,
        a: usize,
        axis: i64,
        descending: bool,
        k: Option<i64>,
        pick: usize,
        ties: bool,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        if !m.exact || m.dtype.is_fp8() {
            return None;
        }
        let x = if ties && m.dtype.is_float() {
            let two = self.fd.constant(2.0);
            let y = self.fd.mul(x, two).ok()?;
            let y = self.fd.unary(UnaryOp::Round, y).ok()?;
            if self.fd.fusion().val(y).dtype != m.dtype {
                return None;
            }
            y
        } else {
            x
        };
        let (values, indices) = self.fd.sort_op(x, axis, descending, k).ok()?;
        let rank = m.dims.len() as i64;
        let along = (if axis < 0 { axis + rank } else { axis }) as usize;
        let mut dims = m.dims.clone();
        if k.is_some() {
            dims[along] = self.fresh();
        }
        let (v, dtype, bound) = if pick == 0 {
            let b = if ties { m.bound * 2.0 + 1.0 } else { m.bound };
            (values, m.dtype, b)
        } else {
            (indices, DataType::I64, (1u64 << 22) as f64)
        };
        Some((
            v,
            Meta {
                dims,
                dtype,
                scalar: false,
                exact: true,
                bound,
            },
        ))
    }

    /// The scan: a float `cumprod` runs over factors `1 + k tanh(x)`, like a product.
    /// The GPU multiplies in f32 when the factors are f32 (the reference in f64), so
    /// they stay close enough to 1 that no prefix overflows: `k = 2^-7` along a universe
    /// dim (at most [`MAX_DIM`] factors: below `e^32`), `2^-16` along a merged dim (up
    /// to 2^21); other float types take `k = 0.01` as products do. Integer and bool
    /// scans run on the values themselves (an integer `cumprod` wraps on both sides).
    pub(super) fn make_scan(&mut self, op: ScanOp, a: usize, axis: i64) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let rank = m.dims.len() as i64;
        let along = if axis < 0 { axis + rank } else { axis };
        let long_axis = matches!(m.dims.get(along.max(0) as usize), Some(Ax::X(_)));
        let x = if op == ScanOp::Prod && m.dtype.is_float() {
            let t = self.fd.tanh(x).ok()?;
            let f32_math = self.fd.fusion().val(t).dtype == DataType::F32;
            let k = match (f32_math, long_axis) {
                (true, false) => 1.0 / 128.0,
                (true, true) => 1.0 / 65536.0,
                (false, _) => 0.01,
            };
            let k = self.fd.constant(k);
            let t = self.fd.mul(t, k).ok()?;
            let one = self.fd.constant(1.0);
            self.fd.add(t, one).ok()?
        } else {
            x
        };
        let v = self.fd.scan(op, x, axis).ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        let selects = matches!(op, ScanOp::Max | ScanOp::Min);
        let bound = match op {
            ScanOp::Sum => m.bound * MAX_DIM as f64,
            ScanOp::Prod => 1e30,
            _ => m.bound,
        };
        Some((
            v,
            Meta {
                dims: m.dims,
                dtype,
                scalar: false,
                exact: m.exact && (selects || !dtype.is_float()),
                bound,
            },
        ))
    }

    pub(super) fn make_var(
        &mut self,
        a: usize,
        axes: &[i64],
        corr: i64,
        keep: bool,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = self.fd.var(x, axes, corr, keep).ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        Some((
            v,
            Meta {
                dims: reduced_dims(&m.dims, axes, keep),
                dtype,
                scalar: false,
                exact: false,
                bound: m.bound * m.bound,
            },
        ))
    }

    pub(super) fn make_var_mean(
        &mut self,
        a: usize,
        axes: &[i64],
        corr: i64,
        pick: usize,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let (var, mean) = self.fd.var_mean(x, axes, corr, false).ok()?;
        let v = if pick == 0 { var } else { mean };
        let dtype = self.fd.fusion().val(v).dtype;
        Some((
            v,
            Meta {
                dims: reduced_dims(&m.dims, axes, false),
                dtype,
                scalar: false,
                exact: false,
                bound: m.bound * m.bound,
            },
        ))
    }

    pub(super) fn make_welford(
        &mut self,
        a: usize,
        axes: &[i64],
        pick: usize,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let (mean, var_sum, count) = self.fd.welford(x, axes).ok()?;
        let v = [mean, var_sum, count][pick];
        let dtype = self.fd.fusion().val(v).dtype;
        Some((
            v,
            Meta {
                dims: reduced_dims(&m.dims, axes, false),
                dtype,
                scalar: false,
                exact: pick == 2,
                bound: m.bound * m.bound * 4096.0,
            },
        ))
    }
}

/// The shape left by reducing `axes` (negative ones count from the end): the reduced
/// dims become broadcast dims when kept, and go otherwise.
fn reduced_dims(dims: &[Ax], axes: &[i64], keep: bool) -> Vec<Ax> {
    let r = dims.len() as i64;
    let norm: Vec<usize> = axes
        .iter()
        .map(|&a| if a < 0 { (a + r) as usize } else { a as usize })
        .collect();
    dims.iter()
        .enumerate()
        .filter_map(|(i, &d)| {
            if norm.contains(&i) {
                keep.then_some(Ax::B)
            } else {
                Some(d)
            }
        })
        .collect()
}
