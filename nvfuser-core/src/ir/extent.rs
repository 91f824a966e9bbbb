//! Symbolic extents (dimension sizes).
//!
//! An extent is a small expression over constants, the runtime sizes of fusion input
//! tensors and integer scalar values. It is held by value (tensors have few dims) and
//! folded eagerly when its operands are constant, so static shapes stay constants.
//! Lowering prints extents as index math; the evaluator computes them from bindings.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ValId;

/// The size of one dimension, symbolically.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Extent {
    /// A known size.
    Const(i64),
    /// The runtime size of fusion input `tensor` along its logical dim `axis`.
    Dim {
        /// A fusion input tensor.
        tensor: ValId,
        /// A logical dim of that tensor.
        axis: u32,
    },
    /// The runtime value of an integer scalar.
    Scalar(ValId),
    /// A binary integer operation.
    Op(ExtentOp, Box<Extent>, Box<Extent>),
}

/// The size of dim `axis` of the fusion input tensor `tensor`: one entry of
/// [`Fusion::extents`](super::Fusion::extents).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExtentRef {
    /// An input tensor of the fusion.
    pub tensor: ValId,
    /// One of its dims.
    pub axis: u32,
}

impl fmt::Display for ExtentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}.size({})", self.tensor.id(), self.axis)
    }
}

/// Integer operations in extents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExtentOp {
    /// a + b.
    Add,
    /// a - b.
    Sub,
    /// a * b.
    Mul,
    /// a / b rounded down (operands are non-negative).
    Div,
    /// a / b rounded up (operands are non-negative).
    CeilDiv,
    /// max(a, b).
    Max,
    /// min(a, b).
    Min,
}

impl ExtentOp {
    /// `a op b`, or `None` when it overflows or divides by zero (folding then leaves the
    /// op symbolic, and evaluation reports the extent as unknown).
    fn apply(self, a: i64, b: i64) -> Option<i64> {
        match self {
            ExtentOp::Add => a.checked_add(b),
            ExtentOp::Sub => a.checked_sub(b),
            ExtentOp::Mul => a.checked_mul(b),
            ExtentOp::Div => a.checked_div_euclid(b),
            ExtentOp::CeilDiv => a.checked_neg()?.checked_div_euclid(b)?.checked_neg(),
            ExtentOp::Max => Some(a.max(b)),
            ExtentOp::Min => Some(a.min(b)),
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            ExtentOp::Add => "+",
            ExtentOp::Sub => "-",
            ExtentOp::Mul => "*",
            ExtentOp::Div => "/",
            ExtentOp::CeilDiv => "ceildiv",
            ExtentOp::Max => "max",
            ExtentOp::Min => "min",
        }
    }
}

impl Extent {
    /// Builds `a op b`, folding constants and trivial identities.
    pub fn binary(op: ExtentOp, a: Extent, b: Extent) -> Extent {
        if let (Extent::Const(x), Extent::Const(y)) = (&a, &b) {
            if let Some(v) = op.apply(*x, *y) {
                return Extent::Const(v);
            }
        }
        match (op, &a, &b) {
            (ExtentOp::Add | ExtentOp::Sub, _, Extent::Const(0)) => a,
            (ExtentOp::Add, Extent::Const(0), _) => b,
            (ExtentOp::Mul | ExtentOp::Div | ExtentOp::CeilDiv, _, Extent::Const(1)) => a,
            (ExtentOp::Mul, Extent::Const(1), _) => b,
            _ => Extent::Op(op, Box::new(a), Box::new(b)),
        }
    }

    /// `self / other`, rounded up.
    pub fn ceil_div(self, other: Extent) -> Extent {
        Extent::binary(ExtentOp::CeilDiv, self, other)
    }
    /// `max(self, other)`.
    pub fn max(self, other: Extent) -> Extent {
        Extent::binary(ExtentOp::Max, self, other)
    }
    /// `min(self, other)`.
    pub fn min(self, other: Extent) -> Extent {
        Extent::binary(ExtentOp::Min, self, other)
    }

    /// `prod(num) / prod(den)` for a quotient that the caller knows to be exact with a
    /// nonzero divisor, with the factors the two products share cancelled:
    /// `(a * b * c * d) / (a * b)` is `c * d`, and `(6 * a) / (4 * a)` is `3 / 2`. A
    /// reshape's inferred size is such a quotient: the launcher and the CPU reference
    /// refuse a reshape whose known sizes multiply to 0 or do not divide the element
    /// count. Products are flattened through nested `*`; factors cancel when they are
    /// structurally equal. The cancelled form is what the kernel evaluates, and the
    /// longer one once made NVRTC 13.0 crash (fuzz seed 11010968).
    pub fn exact_quotient(num: &[Extent], den: &[Extent]) -> Extent {
        fn factors(e: &Extent, consts: &mut i64, out: &mut Vec<Extent>) -> bool {
            match e {
                Extent::Const(c) => match consts.checked_mul(*c) {
                    Some(v) => {
                        *consts = v;
                        true
                    }
                    None => false,
                },
                Extent::Op(ExtentOp::Mul, a, b) => {
                    factors(a, consts, out) && factors(b, consts, out)
                }
                other => {
                    out.push(other.clone());
                    true
                }
            }
        }
        let product = |xs: &[Extent]| xs.iter().fold(Extent::Const(1), |acc, e| acc * e.clone());
        let (mut cn, mut cd) = (1i64, 1i64);
        let (mut fnum, mut fden) = (Vec::new(), Vec::new());
        let flat = num.iter().all(|e| factors(e, &mut cn, &mut fnum))
            && den.iter().all(|e| factors(e, &mut cd, &mut fden));
        if !flat || cn <= 0 || cd <= 0 {
            return product(num) / product(den);
        }
        let mut rest_den = Vec::new();
        for f in fden {
            match fnum.iter().position(|g| *g == f) {
                Some(i) => {
                    fnum.remove(i);
                }
                None => rest_den.push(f),
            }
        }
        let g = gcd(cn, cd);
        fnum.push(Extent::Const(cn / g));
        rest_den.push(Extent::Const(cd / g));
        product(&fnum) / product(&rest_den)
    }

    /// True when the extent mentions no value (only constants): an `Op` of this kind is
    /// a constant operation that overflowed while folding.
    pub fn is_closed(&self) -> bool {
        let mut closed = true;
        self.for_each_val(&mut |_| closed = false);
        closed
    }

    /// The constant value, if known.
    pub fn as_const(&self) -> Option<i64> {
        match self {
            Extent::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// Evaluates the extent. `dim` gives the size of an input tensor's dim and `scalar`
    /// the value of an integer scalar; either may return `None` when unbound.
    pub fn eval(
        &self,
        dim: &dyn Fn(ValId, usize) -> Option<i64>,
        scalar: &dyn Fn(ValId) -> Option<i64>,
    ) -> Option<i64> {
        match self {
            Extent::Const(c) => Some(*c),
            Extent::Dim { tensor, axis } => dim(*tensor, *axis as usize),
            Extent::Scalar(v) => scalar(*v),
            Extent::Op(op, a, b) => op.apply(a.eval(dim, scalar)?, b.eval(dim, scalar)?),
        }
    }

    /// Calls `f` on every value id the extent mentions.
    pub fn for_each_val(&self, f: &mut dyn FnMut(ValId)) {
        match self {
            Extent::Const(_) => {}
            Extent::Dim { tensor, .. } => f(*tensor),
            Extent::Scalar(v) => f(*v),
            Extent::Op(_, a, b) => {
                a.for_each_val(f);
                b.for_each_val(f);
            }
        }
    }

    /// Returns a copy with every value id replaced through `map`.
    pub fn remap(&self, map: &dyn Fn(ValId) -> ValId) -> Extent {
        match self {
            Extent::Const(c) => Extent::Const(*c),
            Extent::Dim { tensor, axis } => Extent::Dim {
                tensor: map(*tensor),
                axis: *axis,
            },
            Extent::Scalar(v) => Extent::Scalar(map(*v)),
            Extent::Op(op, a, b) => Extent::Op(*op, Box::new(a.remap(map)), Box::new(b.remap(map))),
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

macro_rules! extent_ops {
    ($($trait:ident $method:ident => $op:ident),*) => {
        $(
            impl std::ops::$trait for Extent {
                type Output = Extent;
                fn $method(self, other: Extent) -> Extent {
                    Extent::binary(ExtentOp::$op, self, other)
                }
            }
        )*
    };
}

// `/` rounds down; extents are non-negative.
extent_ops!(Add add => Add, Sub sub => Sub, Mul mul => Mul, Div div => Div);

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Const(c) => write!(f, "{c}"),
            Extent::Dim { tensor, axis } => write!(f, "{tensor}.size({axis})"),
            Extent::Scalar(v) => write!(f, "{v}"),
            Extent::Op(op, a, b) => match op {
                ExtentOp::CeilDiv | ExtentOp::Max | ExtentOp::Min => {
                    write!(f, "{}({a}, {b})", op.symbol())
                }
                _ => write!(f, "({a} {} {b})", op.symbol()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_constants_and_identities() {
        assert_eq!(
            Extent::Const(7).ceil_div(Extent::Const(2)),
            Extent::Const(4)
        );
        assert_eq!(Extent::Const(7) / Extent::Const(2), Extent::Const(3));
        let d = Extent::Dim {
            tensor: ValId(0),
            axis: 1,
        };
        assert_eq!(d.clone() + Extent::Const(0), d);
        assert_eq!(d.clone() * Extent::Const(1), d);
        let e = (d.clone() - Extent::Const(2)).ceil_div(Extent::Const(3));
        assert_eq!(e.to_string(), "ceildiv((v0.size(1) - 2), 3)");
        let v = e.eval(&|_, axis| Some(10 + axis as i64), &|_| None);
        assert_eq!(v, Some(3)); // ceil((11 - 2) / 3)
    }

    #[test]
    fn exact_quotients_cancel_shared_factors() {
        let d = |axis| Extent::Dim {
            tensor: ValId(0),
            axis,
        };
        let num = [d(0), d(1), d(2), d(3)];
        // [a, b, c, d] -> [a, b, -1]: the inferred size is c * d, with no division.
        let q = Extent::exact_quotient(&num, &[d(0), d(1)]);
        assert_eq!(q.to_string(), "(v0.size(2) * v0.size(3))");
        // Constants cancel through their gcd; unmatched factors stay in the divisor.
        let q = Extent::exact_quotient(
            &[Extent::Const(6), d(0) * d(1)],
            &[Extent::Const(4), d(1), d(2)],
        );
        assert_eq!(q.to_string(), "((v0.size(0) * 3) / (v0.size(2) * 2))");
        let at = |sizes: [i64; 3]| q.eval(&|_, a| Some(sizes[a]), &|_| None);
        assert_eq!(at([4, 5, 3]), Some(2)); // 6*4*5 / (4*5*3) = 2
                                            // Everything cancels: the quotient is 1.
        assert_eq!(Extent::exact_quotient(&num, &num), Extent::Const(1));
        // A zero constant is left to the plain quotient (and to the launcher's check).
        let z = Extent::exact_quotient(&[d(0), Extent::Const(0)], &[d(0), Extent::Const(0)]);
        assert_eq!(z.to_string(), "((v0.size(0) * 0) / (v0.size(0) * 0))");
    }

    #[test]
    fn overflowing_folds_stay_symbolic() {
        let big = Extent::Const(i64::MAX);
        let sum = big.clone() + Extent::Const(1);
        assert!(sum.as_const().is_none() && sum.is_closed());
        assert_eq!(sum.eval(&|_, _| None, &|_| None), None);
        let m = Extent::Const(i64::MIN);
        assert!((m.clone() / Extent::Const(-1)).as_const().is_none());
        assert!(m.ceil_div(Extent::Const(2)).as_const().is_none());
        assert!((big / Extent::Const(0)).as_const().is_none());
    }
}
