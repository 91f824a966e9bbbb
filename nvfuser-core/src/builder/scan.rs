//! Scans: `cumsum`, `cumprod`, `cummax` and `cummin` along one axis.
//!
//! Like the reductions, running sums and products of bool and integer tensors run in
//! i64 (PyTorch's `cumsum`/`cumprod` return i64 for them), and those of f16/bf16 run in
//! f32 between explicit casts: each output element is the f32 running value rounded
//! once. `cummax`/`cummin` keep the dtype. The output has the input's shape; a scanned
//! expanded dim becomes an ordinary one (its elements differ), a scanned broadcast dim
//! stays one (a scan of one element is that element).

use super::{normalize_axis, FusionDefinition};
use crate::dtype::DataType;
use crate::error::Result;
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
