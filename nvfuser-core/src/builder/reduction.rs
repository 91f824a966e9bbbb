//! Reductions: sum, prod, max, min, mean, var, var_mean and welford.
//!
//! The output of a reduction keeps the reduced dims in its domain as reduction dims
//! (lowering iterates over them); its shape excludes them. `keepdim` appends an explicit
//! broadcast. Sums and products of bool/i32 accumulate in i64 (as PyTorch); those of
//! f16/bf16, and every mean and variance of them, run in f32 between explicit casts.

use super::{normalize_axes, FusionDefinition};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{IterDomain, IterKind, Op, ReductionOp, ValId};

impl FusionDefinition {
    /// Reduces `x` over `axes` (negative axes count from the end).
    pub fn reduction(
        &mut self,
        op: ReductionOp,
        x: ValId,
        axes: &[i64],
        keepdim: bool,
    ) -> Result<ValId> {
        let name = op.name();
        let d = self.dtype(name, x)?;
        let (x_in, out_dtype) = match op {
            ReductionOp::Sum | ReductionOp::Prod if !d.is_float() => {
                (self.cast(x, DataType::I64)?, DataType::I64)
            }
            ReductionOp::Mean if !d.is_float() => {
                return Err(Error::dtype(
                    name,
                    "a floating point tensor (cast integers first)",
                    d,
                ))
            }
            // e4m3 holds no infinity, the identity of max/min: fp8 selects in f32
            // (exact, as the result is one of the elements).
            ReductionOp::Max | ReductionOp::Min if d.is_fp8() => (self.cast(x, DataType::F32)?, d),
            ReductionOp::Max | ReductionOp::Min => (x, d),
            _ => (self.cast(x, d.compute_type())?, d),
        };
        let (axes, domain) = self.reduced_domain(name, x_in, axes)?;
        let compute = self.dtype(name, x_in)?;
        let r = self.emit_tensor(
            Op::Reduction {
                op,
                axes: axes.clone(),
            },
            &[x_in],
            compute,
            domain,
        )?;
        let r = self.cast(r, out_dtype)?;
        self.keepdim(r, &axes, keepdim)
    }

    /// [`reduction`](Self::reduction) computed in and returning `dtype`, as PyTorch's
    /// `dtype=` argument: `x` is cast to `dtype` first (a sum of f16 into f32 never
    /// rounds to f16; integer sums wrap in `dtype`). `sum`, `prod` and `mean` only
    /// (`mean` of a floating `dtype`); `dtype` may not be bool.
    pub fn reduction_as(
        &mut self,
        op: ReductionOp,
        x: ValId,
        axes: &[i64],
        keepdim: bool,
        dtype: DataType,
    ) -> Result<ValId> {
        let name = op.name();
        if !matches!(op, ReductionOp::Sum | ReductionOp::Prod | ReductionOp::Mean) {
            return Err(Error::invalid(
                name,
                "a dtype argument is taken by sum, prod and mean only",
            ));
        }
        if dtype == DataType::Bool {
            return Err(Error::dtype(name, "a numeric dtype argument", dtype));
        }
        let xc = self.cast(x, dtype)?;
        let r = self.reduction(op, xc, axes, keepdim)?;
        self.cast(r, dtype)
    }

    /// Sum over `axes` in `dtype` ([`reduction_as`](Self::reduction_as)).
    pub fn sum_as(
        &mut self,
        x: ValId,
        axes: &[i64],
        keepdim: bool,
        dtype: DataType,
    ) -> Result<ValId> {
        self.reduction_as(ReductionOp::Sum, x, axes, keepdim, dtype)
    }

    /// Sum over `axes`.
    pub fn sum(&mut self, x: ValId, axes: &[i64], keepdim: bool) -> Result<ValId> {
        self.reduction(ReductionOp::Sum, x, axes, keepdim)
    }

    /// Product over `axes`.
    pub fn prod(&mut self, x: ValId, axes: &[i64], keepdim: bool) -> Result<ValId> {
        self.reduction(ReductionOp::Prod, x, axes, keepdim)
    }

    /// Maximum over `axes` (NaN-propagating).
    pub fn max(&mut self, x: ValId, axes: &[i64], keepdim: bool) -> Result<ValId> {
        self.reduction(ReductionOp::Max, x, axes, keepdim)
    }

    /// Minimum over `axes` (NaN-propagating).
    pub fn min(&mut self, x: ValId, axes: &[i64], keepdim: bool) -> Result<ValId> {
        self.reduction(ReductionOp::Min, x, axes, keepdim)
    }

    /// Mean over `axes` (floating tensors only).
    pub fn mean(&mut self, x: ValId, axes: &[i64], keepdim: bool) -> Result<ValId> {
        self.reduction(ReductionOp::Mean, x, axes, keepdim)
    }

    /// Variance over `axes`: sum((x - mean)^2) / (n - correction).
    pub fn var(&mut self, x: ValId, axes: &[i64], correction: i64, keepdim: bool) -> Result<ValId> {
        let (x_in, d) = self.float_reduction_input("var", x, correction)?;
        let (axes, domain) = self.reduced_domain("var", x_in, axes)?;
        let compute = self.dtype("var", x_in)?;
        let v = self.emit_tensor(
            Op::Var {
                axes: axes.clone(),
                correction,
            },
            &[x_in],
            compute,
            domain,
        )?;
        let v = self.cast(v, d)?;
        self.keepdim(v, &axes, keepdim)
    }

    /// Variance and mean over `axes` in one pass; returns `(var, mean)`.
    pub fn var_mean(
        &mut self,
        x: ValId,
        axes: &[i64],
        correction: i64,
        keepdim: bool,
    ) -> Result<(ValId, ValId)> {
        let (x_in, d) = self.float_reduction_input("var_mean", x, correction)?;
        let (axes, domain) = self.reduced_domain("var_mean", x_in, axes)?;
        let compute = self.dtype("var_mean", x_in)?;
        let var = self.new_tensor("var_mean", compute, domain.clone())?;
        let mean = self.new_tensor("var_mean", compute, domain)?;
        self.emit(
            Op::VarMean {
                axes: axes.clone(),
                correction,
            },
            &[x_in],
            &[var, mean],
        );
        let var = self.cast(var, d)?;
        let mean = self.cast(mean, d)?;
        Ok((
            self.keepdim(var, &axes, keepdim)?,
            self.keepdim(mean, &axes, keepdim)?,
        ))
    }

    /// Welford's algorithm over `axes`; returns `(mean, var_sum, count)` where `var_sum`
    /// is the sum of squared deviations and `count` (i64) the number of elements. Means
    /// and sums stay in the computation type (f32 for f16/bf16 inputs).
    pub fn welford(&mut self, x: ValId, axes: &[i64]) -> Result<(ValId, ValId, ValId)> {
        let (x_in, _) = self.float_reduction_input("welford", x, 0)?;
        let (axes, domain) = self.reduced_domain("welford", x_in, axes)?;
        let compute = self.dtype("welford", x_in)?;
        let mean = self.new_tensor("welford", compute, domain.clone())?;
        let var_sum = self.new_tensor("welford", compute, domain.clone())?;
        let count = self.new_tensor("welford", DataType::I64, domain)?;
        self.emit(Op::Welford { axes }, &[x_in], &[mean, var_sum, count]);
        Ok((mean, var_sum, count))
    }

    fn float_reduction_input(
        &mut self,
        op: &str,
        x: ValId,
        correction: i64,
    ) -> Result<(ValId, DataType)> {
        let d = self.dtype(op, x)?;
        if !d.is_float() {
            return Err(Error::dtype(
                op,
                "a floating point tensor (cast integers first)",
                d,
            ));
        }
        if correction < 0 {
            return Err(Error::invalid(
                op,
                format!("correction {correction}: expected >= 0"),
            ));
        }
        Ok((self.cast(x, d.compute_type())?, d))
    }

    /// Checks `axes` and returns them normalized with the output domain.
    fn reduced_domain(
        &self,
        op: &str,
        x: ValId,
        axes: &[i64],
    ) -> Result<(Vec<usize>, Vec<IterDomain>)> {
        let shape = self.shape(op, x)?;
        if axes.is_empty() {
            return Err(Error::invalid(
                op,
                "expected at least one axis to reduce, found none",
            ));
        }
        let axes = normalize_axes(op, axes, shape.len())?;
        let domain = shape
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                if axes.contains(&i) {
                    IterDomain {
                        extent: d.extent,
                        kind: IterKind::Reduction,
                    }
                } else {
                    d
                }
            })
            .collect();
        Ok((axes, domain))
    }

    /// Re-inserts reduced dims as broadcast dims when `keepdim` is set.
    fn keepdim(&mut self, r: ValId, axes: &[usize], keepdim: bool) -> Result<ValId> {
        if !keepdim {
            return Ok(r);
        }
        let rank = self.tensor_type("keepdim", r)?.rank() + axes.len();
        let mask: Vec<bool> = (0..rank).map(|i| axes.contains(&i)).collect();
        self.broadcast(r, &mask)
    }
}
