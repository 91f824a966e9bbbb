//! Pointwise steps: unary and binary ops, `where`, `clamp`, casts, scaling by a size, and
//! ops with a scalar input. Each has its proposal (which operands and ops the tracked
//! magnitudes and exactness allow) and its builder call (the value and its new meta).

use nvfuser::ir::{BinaryOp, UnaryOp};
use nvfuser::prelude::*;

use super::pool::{combined, compatible};
use super::{Gen, InputSpec, Meta, Step};

const FLOAT_UNARY_BOUNDED: [UnaryOp; 14] = [
    UnaryOp::Exp,
    UnaryOp::Exp2,
    UnaryOp::Expm1,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Erf,
    UnaryOp::Erfc,
    UnaryOp::Asinh,
    UnaryOp::Gelu,
    UnaryOp::GeluTanh,
    UnaryOp::Silu,
];
const FLOAT_UNARY_SAFE: [UnaryOp; 5] = [
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Atan,
    UnaryOp::Relu,
    UnaryOp::Abs,
];
const EXACT_UNARY: [UnaryOp; 7] = [
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Trunc,
    UnaryOp::Sign,
    UnaryOp::IsFinite,
    UnaryOp::IsNan,
];

impl Gen {
    /// A unary step (rolls 0 to 20): a function that amplifies errors on a bounded float
    /// (0 to 9), a safe one on any float (10 to 17), or a discontinuous one on an exact
    /// value (18 to 20).
    pub(super) fn propose_unary(&mut self, roll: usize) -> Option<Step> {
        let float = |m: &Meta| m.dtype.is_float();
        Some(match roll {
            0..=9 => {
                let a = self.pick_tensor(|m| float(m) && m.bound <= 20.0)?;
                let op = self.rng.pick(&FLOAT_UNARY_BOUNDED);
                // tan is ill-conditioned near its poles: only on |x| <= 1.
                if op == UnaryOp::Tan && self.metas[a].bound > 1.0 {
                    return None;
                }
                Step::Unary(op, a)
            }
            10..=17 => {
                let a = self.pick_tensor(float)?;
                Step::Unary(self.rng.pick(&FLOAT_UNARY_SAFE), a)
            }
            _ => {
                let a = self.pick_tensor(|m| m.exact)?;
                let op = if self.metas[a].dtype.is_float() {
                    self.rng.pick(&EXACT_UNARY)
                } else {
                    self.rng.pick(&[UnaryOp::Abs, UnaryOp::Neg, UnaryOp::Sign])
                };
                Step::Unary(op, a)
            }
        })
    }

    /// A binary step on two operands that broadcast together, with an op their
    /// magnitudes and exactness allow.
    pub(super) fn propose_binary(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dtype != DataType::Bool)?;
        let da = self.metas[a].dims.clone();
        let ta = self.metas[a].dtype;
        let b = self.pick_tensor(|m| {
            compatible(&m.dims, &da) && m.dtype != DataType::Bool && promotes(ta, m.dtype)
        })?;
        let (ma, mb) = (&self.metas[a], &self.metas[b]);
        let ints = !ma.dtype.is_float() && !mb.dtype.is_float();
        let mut ops = vec![BinaryOp::Add, BinaryOp::Maximum, BinaryOp::Minimum];
        // A float difference of large values (a welford var_sum minus its mean)
        // cancels, and a sum of it cancels again: the result is tiny while its
        // rounding error scales with the operands, beyond what a comparison scaled
        // by the output can tell from a wrong value.
        if ints || (ma.bound <= 1e3 && mb.bound <= 1e3) {
            ops.push(BinaryOp::Sub);
        }
        if ma.bound * mb.bound < 1e6 {
            ops.push(BinaryOp::Mul);
        }
        if ints {
            ops.extend([
                BinaryOp::BitwiseAnd,
                BinaryOp::BitwiseXor,
                BinaryOp::Div,
                BinaryOp::Remainder,
            ]);
        } else if ma.bound < 100.0 && mb.bound < 100.0 && ma.exact && mb.exact {
            // atan2 jumps across the negative x axis and at the origin: only on
            // operands both devices compute bit for bit (atan2(m, m) of a mean
            // that is 0 on the CPU and 1e-17 on the GPU differs by pi/4).
            ops.push(BinaryOp::Atan2);
        }
        if ma.exact && mb.exact {
            ops.extend([BinaryOp::Lt, BinaryOp::Ge, BinaryOp::Eq, BinaryOp::Ne]);
        }
        Some(Step::Binary(self.rng.pick(&ops), a, b))
    }

    /// `where(c, a, b)` on a boolean condition and two operands that broadcast with it.
    pub(super) fn propose_where(&mut self) -> Option<Step> {
        let c = self.pick_tensor(|m| m.dtype == DataType::Bool)?;
        let dc = self.metas[c].dims.clone();
        let a = self.pick_tensor(|m| compatible(&m.dims, &dc))?;
        let da = combined(&dc, &self.metas[a].dims);
        let ta = self.metas[a].dtype;
        let b = self.pick_tensor(|m| compatible(&m.dims, &da) && promotes(ta, m.dtype))?;
        Some(Step::Where(c, a, b))
    }

    /// A clamp of a float to random bounds around zero.
    pub(super) fn propose_clamp(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dtype.is_float())?;
        Some(Step::Clamp(
            a,
            -1.0 - self.rng.unit(),
            0.5 + self.rng.unit(),
        ))
    }

    /// A cast: of an exact value to any dtype, of a rounded one to a float dtype.
    pub(super) fn propose_cast(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|_| true)?;
        let m = &self.metas[a];
        let to = if self.rng.chance(15) {
            // To fp8: of an exact value bit for bit on both devices (and read on), of
            // another value an output only (`Meta::terminal`).
            self.rng.pick(&[DataType::F8E4M3, DataType::F8E5M2])
        } else if m.exact {
            self.rng.pick(&[
                DataType::F16,
                DataType::BF16,
                DataType::F32,
                DataType::F64,
                DataType::I32,
                DataType::I64,
                DataType::Bool,
            ])
        } else {
            self.rng
                .pick(&[DataType::F16, DataType::BF16, DataType::F32, DataType::F64])
        };
        Some(Step::Cast(a, to))
    }

    /// A float scaled by one of its sizes (scalar math on sizes).
    pub(super) fn propose_scale_by_size(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dtype.is_float() && !m.dims.is_empty())?;
        let axis = self.rng.below(self.metas[a].dims.len());
        Some(Step::ScaleBySize(a, axis))
    }

    /// A tensor combined with the scalar input (when the recipe declares one).
    pub(super) fn propose_with_scalar(&mut self, inputs: &[InputSpec]) -> Option<Step> {
        let s = (0..self.metas.len())
            .find(|&i| self.metas[i].scalar && self.ids[i].is_some() && i < inputs.len())?;
        let a = self.pick_tensor(|m| m.dtype != DataType::Bool)?;
        let op = self
            .rng
            .pick(&[BinaryOp::Add, BinaryOp::Mul, BinaryOp::Sub]);
        Some(Step::WithScalar(op, a, s))
    }

    pub(super) fn make_unary(&mut self, op: UnaryOp, a: usize) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = self.fd.unary(op, x).ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        let exact = m.exact
            && matches!(
                op,
                UnaryOp::Abs
                    | UnaryOp::Neg
                    | UnaryOp::Relu
                    | UnaryOp::Floor
                    | UnaryOp::Ceil
                    | UnaryOp::Round
                    | UnaryOp::Trunc
                    | UnaryOp::Sign
                    | UnaryOp::IsFinite
                    | UnaryOp::IsNan
            );
        let bound = match op {
            UnaryOp::Exp | UnaryOp::Sinh | UnaryOp::Cosh => m.bound.exp(),
            UnaryOp::Exp2 => m.bound.exp2(),
            UnaryOp::Expm1 => m.bound.exp(),
            UnaryOp::Tan => 1.6,
            UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Erf
            | UnaryOp::Sign => 1.0,
            UnaryOp::Erfc | UnaryOp::Atan => 2.0,
            _ => m.bound + 1.0,
        };
        Some((
            v,
            Meta {
                dtype,
                exact,
                bound,
                ..m
            },
        ))
    }

    pub(super) fn make_binary(
        &mut self,
        op: BinaryOp,
        a: usize,
        b: usize,
    ) -> Option<(ValId, Meta)> {
        let (x, ma) = self.operand(a)?;
        let (y, mb) = self.operand(b)?;
        let ints = !ma.dtype.is_float() && !mb.dtype.is_float();
        let v = match op {
            // Integer division and remainder by |b| + 1 (never zero).
            BinaryOp::Div | BinaryOp::Remainder if ints => {
                let ab = self.fd.abs(y).ok()?;
                let one = self.fd.constant(1i64);
                let d = self.fd.add(ab, one).ok()?;
                self.fd.binary(op, x, d).ok()?
            }
            _ => self.fd.binary(op, x, y).ok()?,
        };
        let dtype = self.fd.fusion().val(v).dtype;
        let exact = ma.exact
            && mb.exact
            && (ints
                || matches!(
                    op,
                    BinaryOp::Maximum
                        | BinaryOp::Minimum
                        | BinaryOp::Lt
                        | BinaryOp::Ge
                        | BinaryOp::Eq
                        | BinaryOp::Ne
                ));
        let bound = match op {
            BinaryOp::Mul => ma.bound * mb.bound,
            BinaryOp::Atan2 => 4.0,
            BinaryOp::Lt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne => 1.0,
            BinaryOp::Remainder | BinaryOp::Div => ma.bound.max(mb.bound),
            _ => ma.bound + mb.bound,
        };
        let dims = combined(&ma.dims, &mb.dims);
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

    pub(super) fn make_where(&mut self, c: usize, a: usize, b: usize) -> Option<(ValId, Meta)> {
        let (cv, mc) = self.operand(c)?;
        let (x, ma) = self.operand(a)?;
        let (y, mb) = self.operand(b)?;
        let v = self.fd.where_(cv, x, y).ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        let dims = combined(&combined(&mc.dims, &ma.dims), &mb.dims);
        Some((
            v,
            Meta {
                dims,
                dtype,
                scalar: false,
                exact: mc.exact && ma.exact && mb.exact,
                bound: ma.bound.max(mb.bound),
            },
        ))
    }

    /// `triu` or `tril` of a tensor of rank 2 or more, diagonal in -2..=2.
    pub(super) fn propose_triangle(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| m.dims.len() >= 2)?;
        let upper = self.rng.below(2) == 0;
        let diagonal = self.rng.below(5) as i64 - 2;
        Some(Step::Triangle(a, upper, diagonal))
    }

    pub(super) fn make_triangle(
        &mut self,
        a: usize,
        upper: bool,
        diagonal: i64,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = if upper {
            self.fd.triu(x, diagonal).ok()?
        } else {
            self.fd.tril(x, diagonal).ok()?
        };
        Some((v, m))
    }

    pub(super) fn make_clamp(&mut self, a: usize, lo: f64, hi: f64) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let lo = self.fd.constant(lo);
        let hi = self.fd.constant(hi);
        let v = self.fd.clamp(x, lo, hi).ok()?;
        Some((
            v,
            Meta {
                exact: false,
                bound: 2.0,
                ..m
            },
        ))
    }

    pub(super) fn make_cast(&mut self, a: usize, to: DataType) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let v = self.fd.cast(x, to).ok()?;
        // Narrowing float casts round: exact only when widening or to integers
        // of exact values.
        // A cast to fp8 of an exact value other than fp8 is exact too: the conversion is
        // the same integer arithmetic on both devices, which is what the fuzzer checks
        // (but fp8 to the other fp8 rounds away a mantissa bit: inexact).
        let exact = m.exact
            && if to.is_fp8() {
                !m.dtype.is_fp8()
            } else {
                !to.is_float() || to.size_bytes() >= m.dtype.size_bytes() || !m.dtype.is_float()
            };
        let bound = if to == DataType::Bool { 1.0 } else { m.bound };
        Some((
            v,
            Meta {
                dtype: to,
                exact,
                bound,
                ..m
            },
        ))
    }

    pub(super) fn make_scale_by_size(&mut self, x: usize, axis: usize) -> Option<(ValId, Meta)> {
        let (xv, m) = self.operand(x)?;
        let n = self.fd.size(xv, axis as i64).ok()?;
        let one = self.fd.constant(1i64);
        let n1 = self.fd.add(n, one).ok()?;
        let nf = self.fd.cast(n1, m.dtype).ok()?;
        let r = self.fd.reciprocal(nf).ok()?;
        let v = self.fd.mul(xv, r).ok()?;
        Some((v, Meta { exact: false, ..m }))
    }

    pub(super) fn make_with_scalar(
        &mut self,
        op: BinaryOp,
        a: usize,
        s: usize,
    ) -> Option<(ValId, Meta)> {
        let (x, m) = self.operand(a)?;
        let (sv, ms) = self.operand(s)?;
        if !ms.scalar {
            return None;
        }
        let v = self.fd.binary(op, x, sv).ok()?;
        let dtype = self.fd.fusion().val(v).dtype;
        let bound = if op == BinaryOp::Mul {
            m.bound * 8.0
        } else {
            m.bound + 8.0
        };
        Some((
            v,
            Meta {
                dtype,
                exact: m.exact && ms.exact && !dtype.is_float(),
                bound,
                ..m
            },
        ))
    }
}

/// Whether tensors of types `a` and `b` may meet in one op: an fp8 type promotes with
/// nothing but itself (the builder refuses the rest).
fn promotes(a: DataType, b: DataType) -> bool {
    a == b || (!a.is_fp8() && !b.is_fp8())
}
