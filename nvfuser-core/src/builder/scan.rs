//! Scans: `cumsum`, `cumprod`, `cummax` and `cummin` along one axis.
//!
//! Like the reductions, running sums and products of bool and integer tensors run in
//! i64 (PyTorch's `cumsum`/`cumprod` return i64 for them), and those of f16/bf16 run in
//! f32 between explicit casts: each output element is the f32 running value rounded
//! once. `cummax`/`cummin` keep the dtype. The output has the input's shape; a scanned
//! expanded dim becomes an ordinary one (its elements differ), a scanned broadcast dim
//! stays one (a scan of one element is that element).
//!
//! `cumsum_as`/`cumprod_as` ([`FusionDefinition::scan_as`]) take PyTorch's `dtype=`:
//! the input is cast to it first, and the result has it.

use super::{normalize_axis, FusionDefinition};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{IterKind, Op, ScanOp, ValId};

impl FusionDefinition {
    /// Inclusive scan of `x` along `axis` (negative counts from the end): output element
    /// `i` along the axis combines input elements `0..=i`. A 0-d tensor takes axis 0 or
    /// -1 and is returned (promoted) as is, like PyTorch.
    pub fn scan(&mut self, op: ScanOp, x: ValId, axis: i64) -> Result<ValId> {
        let name = op.name();
        let d = self.dtype(name, x)?;
        let shape = self.shape(name, x)?;
        // The axis first, so that a refused call leaves no promoting cast behind.
        let axis = normalize_axis(name, axis, shape.len().max(1))?;
        let (x_in, out_dtype) = match op {
            ScanOp::Sum | ScanOp::Prod if !d.is_float() => {
                (self.cast(x, DataType::I64)?, DataType::I64)
            }
            ScanOp::Sum | ScanOp::Prod => (self.cast(x, d.compute_type())?, d),
            // As the max/min reductions: e4m3 holds no infinity, so fp8 scans in f32.
            ScanOp::Max | ScanOp::Min if d.is_fp8() => (self.cast(x, DataType::F32)?, d),
            ScanOp::Max | ScanOp::Min => (x, d),
        };
        if shape.is_empty() {
            let r = self.set(x_in)?;
            return self.cast(r, out_dtype);
        }
        let mut domain = shape;
        if domain[axis].kind == IterKind::Expanded {
            domain[axis].kind = IterKind::Iteration;
        }
        let compute = self.dtype(name, x_in)?;
        let r = self.emit_tensor(Op::Scan { op, axis }, &[x_in], compute, domain)?;
        self.cast(r, out_dtype)
    }

    /// [`scan`](Self::scan) computed in and returning `dtype`, as PyTorch's
    /// `torch.cumsum(x, dim, dtype=...)`: `x` is cast to `dtype` first, so an f16 input
    /// summed with an f32 `dtype` is never rounded to f16, and an integer `dtype` wraps
    /// in it (an i32 running sum runs in i64 and each element is cast back to i32: the
    /// same bits as an i32 sum wrapping at every step). An f16/bf16 `dtype` runs in f32
    /// as [`scan`](Self::scan) does. `cumsum` and `cumprod` only; `dtype` may not be
    /// bool. The axis is checked first: a refused call adds no expression.
    pub fn scan_as(&mut self, op: ScanOp, x: ValId, axis: i64, dtype: DataType) -> Result<ValId> {
        let name = op.name();
        if !matches!(op, ScanOp::Sum | ScanOp::Prod) {
            return Err(Error::invalid(
                name,
                "a dtype argument is taken by cumsum and cumprod only",
            ));
        }
        if dtype == DataType::Bool {
            return Err(Error::dtype(name, "a numeric dtype argument", dtype));
        }
        let rank = self.shape(name, x)?.len();
        normalize_axis(name, axis, rank.max(1))?;
        let xc = self.cast(x, dtype)?;
        let r = self.scan(op, xc, axis)?;
        self.cast(r, dtype)
    }

    /// Running sum along `axis` in `dtype` ([`scan_as`](Self::scan_as)).
    pub fn cumsum_as(&mut self, x: ValId, axis: i64, dtype: DataType) -> Result<ValId> {
        self.scan_as(ScanOp::Sum, x, axis, dtype)
    }

    /// Running product along `axis` in `dtype` ([`scan_as`](Self::scan_as)).
    pub fn cumprod_as(&mut self, x: ValId, axis: i64, dtype: DataType) -> Result<ValId> {
        self.scan_as(ScanOp::Prod, x, axis, dtype)
    }

    /// Running sum along `axis` (`torch.cumsum`; bool and integers sum in i64).
    pub fn cumsum(&mut self, x: ValId, axis: i64) -> Result<ValId> {
        self.scan(ScanOp::Sum, x, axis)
    }

    /// Running product along `axis` (`torch.cumprod`; bool and integers in i64).
    pub fn cumprod(&mut self, x: ValId, axis: i64) -> Result<ValId> {
        self.scan(ScanOp::Prod, x, axis)
    }

    /// Running maximum along `axis`, NaN-propagating (the values of `torch.cummax`).
    pub fn cummax(&mut self, x: ValId, axis: i64) -> Result<ValId> {
        self.scan(ScanOp::Max, x, axis)
    }

    /// Running minimum along `axis`, NaN-propagating (the values of `torch.cummin`).
    pub fn cummin(&mut self, x: ValId, axis: i64) -> Result<ValId> {
        self.scan(ScanOp::Min, x, axis)
    }
}
