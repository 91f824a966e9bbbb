//! The definition builder: the run-time ("direct") API that creates fusions.
//!
//! Every op is a method on [`FusionDefinition`] that checks its operands (kinds, dtypes,
//! ranks, axes, static sizes), computes the output type and appends one or more
//! expressions. Methods return [`Result`]; nothing panics on user input. The `fusion!`
//! macro expands to calls of these same methods, so both front ends share one set of
//! rules.
//!
//! Some conveniences expand into several primitive expressions, and the printed IR shows
//! the primitives: `keepdim` is a reduction followed by a broadcast, reductions of
//! f16/bf16 run between casts to and from f32, `broadcast_in_dim` is a broadcast followed
//! by an expand, and operands of lower rank are broadcast explicitly (numpy-style, aligned
//! on the right) before an elementwise op.

mod creation;
mod descriptor;
mod indexing;
mod pointwise;
mod reduction;
mod scan;
mod shape;
mod sort;
mod triangular;

use std::sync::atomic::{AtomicU32, Ordering};

use smallvec::SmallVec;

pub use descriptor::{tensor_spec_from_strides, Contiguity, TensorSpec};
pub use shape::Slice;

use crate::dtype::{DataType, ScalarValue};
use crate::error::{Error, Result};
use crate::ir::{
    Expr, Extent, Fusion, IterDomain, IterKind, Op, Output, SizeArg, TensorType, Val, ValId,
    ValKind, MAX_NUMEL,
};

/// A size-like argument: a constant or an integer scalar value of the fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// A constant (`-1` means "infer" or "keep" where an op allows it).
    Const(i64),
    /// An integer scalar value (an input, or computed, e.g. by [`FusionDefinition::size`]).
    Val(ValId),
}

impl From<i64> for Size {
    fn from(v: i64) -> Self {
        Size::Const(v)
    }
}

impl From<ValId> for Size {
    fn from(v: ValId) -> Self {
        Size::Val(v)
    }
}

/// Builds a [`Fusion`] op by op.
///
/// ```
/// use nvfuser_core::prelude::*;
/// let mut fd = FusionDefinition::new();
/// let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
/// let b = fd.define_tensor(DataType::F32, &[-1])?;
/// let y = fd.add(x, b)?; // [N, H] + [H] broadcasts
/// let y = fd.relu(y)?;
/// fd.add_output(y)?;
/// let fusion = fd.finish()?;
/// assert_eq!(fusion.inputs().len(), 2);
/// # Ok::<(), nvfuser_core::Error>(())
/// ```
///
/// Every id a definition returns carries the definition's tag (see [`ValId`]); an op
/// given an id that another definition returned is refused with
/// [`Error::ForeignValue`], even when its index is in range here. (Tags are 8 bits, so
/// of 256 definitions alive at once two share one; ids from [`ValId::new`] or read from
/// a [`Fusion`] carry no tag and are taken as indices.)
#[derive(Clone, Debug)]
pub struct FusionDefinition {
    fusion: Fusion,
    tag: u8,
}

impl Default for FusionDefinition {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh definition tag, 1..=255 in turn.
fn next_tag() -> u8 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    (NEXT.fetch_add(1, Ordering::Relaxed) % 255 + 1) as u8
}

impl FusionDefinition {
    /// An empty definition.
    pub fn new() -> Self {
        FusionDefinition {
            fusion: Fusion::default(),
            tag: next_tag(),
        }
    }

    /// The fusion built so far.
    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// Verifies the fusion and returns it. A fusion needs at least one output.
    pub fn finish(mut self) -> Result<Fusion> {
        if self.fusion.outputs.is_empty() {
            return Err(Error::arity("finish", "outputs (at least)", 1, 0));
        }
        // The generator's seed and offset go last, after every input the user declared
        // (whenever the first stateful random op was defined).
        if let Some(g) = self.fusion.generator {
            self.fusion.inputs.push(g.seed);
            self.fusion.inputs.push(g.offset);
        }
        crate::ir::verify(&self.fusion)?;
        Ok(self.fusion)
    }

    /// Declares a contiguous row-major input tensor. `sizes` per dim: `-1` symbolic,
    /// `1` broadcast, `n >= 0` static.
    pub fn define_tensor(&mut self, dtype: DataType, sizes: &[i64]) -> Result<ValId> {
        self.define_tensor_spec(TensorSpec::new(dtype, sizes))
    }

    /// Declares an input scalar of `dtype`.
    pub fn define_scalar(&mut self, dtype: DataType) -> Result<ValId> {
        let v = self.new_scalar(dtype, None);
        self.fusion.inputs.push(v);
        Ok(v)
    }

    /// A constant of the value's natural type (`bool`, `i64` or `f64`). Like a Rust
    /// literal, an `f64` constant does not promote an `f32` tensor it meets.
    pub fn constant(&mut self, value: impl Into<ScalarValue>) -> ValId {
        let value = value.into();
        self.new_scalar(value.natural_dtype(), Some(value))
    }

    /// A constant of a given type; the value is converted as a cast would.
    pub fn constant_of(&mut self, value: impl Into<ScalarValue>, dtype: DataType) -> ValId {
        let value = value.into().cast(dtype);
        self.new_scalar(dtype, Some(value))
    }

    /// Marks a tensor as a fusion output.
    pub fn add_output(&mut self, val: ValId) -> Result<()> {
        self.tensor_type("add_output", val)?;
        self.fusion.outputs.push(Output {
            val,
            alias_of: None,
        });
        Ok(())
    }

    /// Marks `val` as an output stored in place into the input tensor `input` (same
    /// dtype and rank; sizes are checked when the fusion runs). Both devices write it
    /// into the input's buffer (every view of the input sees it) after the whole call
    /// has read the input, and return the input as that output; other outputs see the
    /// input's values from before the call. A GPU call computes it like any output,
    /// then copies it into the input's view, segmented or not. An input view that
    /// addresses one element twice (an expanded dim) is refused when the fusion runs.
    pub fn add_output_alias(&mut self, val: ValId, input: ValId) -> Result<()> {
        let op = "add_output_alias";
        let t = self.tensor_type(op, val)?.rank();
        let i = self.tensor_type(op, input)?.rank();
        if self.fusion.input_position(input).is_none() {
            return Err(Error::invalid(
                op,
                format!("{input} is not a fusion input; only inputs can be updated in place"),
            ));
        }
        let (vd, id) = (self.fusion.val(val).dtype, self.fusion.val(input).dtype);
        if vd != id {
            return Err(Error::dtype(op, format!("{id} (the input's type)"), vd));
        }
        if t != i {
            return Err(Error::Rank {
                op: op.into(),
                expected: format!("{i} (the input's rank)"),
                found: t,
            });
        }
        if self
            .fusion
            .outputs
            .iter()
            .any(|o| o.alias_of == Some(input))
        {
            return Err(Error::invalid(
                op,
                format!("{input} is already updated in place by another output"),
            ));
        }
        self.fusion.outputs.push(Output {
            val,
            alias_of: Some(input),
        });
        Ok(())
    }

    // ----- helpers shared by the op modules -----

    pub(crate) fn val(&self, op: &str, v: ValId) -> Result<&Val> {
        if v.tag() != 0 && v.tag() != self.tag {
            return Err(Error::ForeignValue {
                op: op.into(),
                id: v,
            });
        }
        self.fusion.get_val(v).ok_or_else(|| Error::UnknownValue {
            op: op.into(),
            id: v,
            count: self.fusion.num_vals(),
        })
    }

    pub(crate) fn dtype(&self, op: &str, v: ValId) -> Result<DataType> {
        Ok(self.val(op, v)?.dtype)
    }

    pub(crate) fn tensor_type(&self, op: &str, v: ValId) -> Result<&TensorType> {
        match &self.val(op, v)?.kind {
            ValKind::Tensor(t) => Ok(t),
            ValKind::Scalar(_) => Err(Error::Kind {
                op: op.into(),
                expected: "tensor".into(),
                found: format!("scalar of type {}", self.fusion.val(v).dtype),
            }),
        }
    }

    /// The shape dims of tensor `v` (reduction dims excluded).
    pub(crate) fn shape(&self, op: &str, v: ValId) -> Result<Vec<IterDomain>> {
        Ok(self.tensor_type(op, v)?.shape_dims())
    }

    pub(crate) fn scalar(&self, op: &str, v: ValId) -> Result<DataType> {
        let val = self.val(op, v)?;
        if val.is_tensor() {
            return Err(Error::Kind {
                op: op.into(),
                expected: "scalar".into(),
                found: format!("tensor of type {}", val.dtype),
            });
        }
        Ok(val.dtype)
    }

    /// A new scalar value. Panics only when the fusion already holds 2^24 values (the
    /// ops that return a `Result` refuse before that: [`Self::check_room`]).
    pub(crate) fn new_scalar(&mut self, dtype: DataType, value: Option<ScalarValue>) -> ValId {
        let v = self.fusion.push_val(Val {
            dtype,
            kind: ValKind::Scalar(value),
            definition: None,
        });
        self.own(v)
    }

    /// Refuses to grow the fusion past [`ValId::MAX_INDEX`] values (a margin of 16 is
    /// left for the scalars an op may add besides its result).
    pub(crate) fn check_room(&self, op: &str) -> Result<()> {
        let limit = ValId::MAX_INDEX as usize - 16;
        if self.fusion.num_vals() >= limit {
            return Err(Error::SizeLimit {
                op: op.into(),
                what: "values in one fusion".into(),
                limit: limit.to_string(),
                found: (self.fusion.num_vals() + 1).to_string(),
            });
        }
        Ok(())
    }

    /// Tags an id this definition just pushed.
    pub(crate) fn own(&self, v: ValId) -> ValId {
        v.tagged(self.tag)
    }

    /// A new tensor value over `domain`, after [`check_domain`].
    pub(crate) fn new_tensor(
        &mut self,
        op: &str,
        dtype: DataType,
        domain: Vec<IterDomain>,
    ) -> Result<ValId> {
        check_domain(op, &domain)?;
        self.check_room(op)?;
        let v = self.fusion.push_val(Val {
            dtype,
            kind: ValKind::Tensor(TensorType::contiguous(domain)),
            definition: None,
        });
        Ok(self.own(v))
    }

    pub(crate) fn emit(&mut self, op: Op, inputs: &[ValId], outputs: &[ValId]) {
        self.fusion.push_expr(Expr {
            op,
            inputs: SmallVec::from_slice(inputs),
            outputs: SmallVec::from_slice(outputs),
        });
    }

    /// Emits a one-output expression producing a tensor.
    pub(crate) fn emit_tensor(
        &mut self,
        op: Op,
        inputs: &[ValId],
        dtype: DataType,
        domain: Vec<IterDomain>,
    ) -> Result<ValId> {
        let out = self.new_tensor(op.name(), dtype, domain)?;
        self.emit(op, inputs, &[out]);
        Ok(out)
    }

    /// Converts user sizes into attributes, appending value sizes to `inputs`.
    pub(crate) fn size_args(
        &self,
        op: &str,
        sizes: &[Size],
        inputs: &mut Vec<ValId>,
    ) -> Result<(Vec<SizeArg>, Vec<Extent>)> {
        let mut args = Vec::with_capacity(sizes.len());
        let mut extents = Vec::with_capacity(sizes.len());
        for &s in sizes {
            match s {
                Size::Const(c) => {
                    args.push(SizeArg::Const(c));
                    extents.push(Extent::Const(c));
                }
                Size::Val(v) => {
                    let d = self.scalar(op, v)?;
                    if !d.is_int() {
                        return Err(Error::dtype(op, "an integer scalar for a size", d));
                    }
                    if let Some(c) = self.fusion.val(v).constant().and_then(ScalarValue::as_i64) {
                        args.push(SizeArg::Const(c));
                        extents.push(Extent::Const(c));
                        continue;
                    }
                    let pos = match inputs.iter().position(|&i| i == v) {
                        Some(p) => p,
                        None => {
                            inputs.push(v);
                            inputs.len() - 1
                        }
                    };
                    args.push(SizeArg::Input(pos as u32));
                    extents.push(self.size_extent(v));
                }
            }
        }
        Ok((args, extents))
    }
}

impl FusionDefinition {
    /// The extent a size given by scalar `v` has: the dim's own extent when `v` is
    /// `x.size(d)` (equal by definition, and spelled like every other use of that dim, so
    /// a kernel sees one extent where `full([x.size(0)])` meets `x`), else `v` itself.
    fn size_extent(&self, v: ValId) -> Extent {
        let f = &self.fusion;
        f.val(v)
            .definition
            .map(|d| f.expr(d))
            .and_then(|e| match e.op {
                Op::Size { axis } => f
                    .tensor_type(*e.inputs.first()?)?
                    .shape()
                    .nth(axis)
                    .map(|d| d.extent.clone()),
                _ => None,
            })
            .unwrap_or(Extent::Scalar(v))
    }
}

/// Refuses a domain whose static sizes are too large: a constant extent computation
/// that overflowed `i64` while folding (it stays symbolic over constants only), a
/// static extent above [`MAX_NUMEL`], or static extents whose product (zeros counted as
/// one, so that no partial product of the dims overflows either) exceeds it.
pub(crate) fn check_domain(op: &str, domain: &[IterDomain]) -> Result<()> {
    let mut product: i64 = 1;
    for (i, d) in domain.iter().enumerate() {
        let n = match d.extent.as_const() {
            Some(n) => n,
            None if d.extent.is_closed() => {
                return Err(Error::SizeLimit {
                    op: op.into(),
                    what: format!("size of dim {i}"),
                    limit: format!("{MAX_NUMEL} (2^48)"),
                    found: format!("{}, which overflows i64", d.extent),
                })
            }
            None => continue,
        };
        if n > MAX_NUMEL {
            return Err(Error::SizeLimit {
                op: op.into(),
                what: format!("size of dim {i}"),
                limit: format!("{MAX_NUMEL} (2^48)"),
                found: n.to_string(),
            });
        }
        product = product.saturating_mul(n.max(1));
        if product > MAX_NUMEL {
            return Err(Error::SizeLimit {
                op: op.into(),
                what: "number of elements of a static shape".into(),
                limit: format!("{MAX_NUMEL} (2^48)"),
                found: format!("{} (more)", describe_shape(domain)),
            });
        }
    }
    Ok(())
}

/// Normalizes a possibly negative axis against `rank`.
pub(crate) fn normalize_axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(Error::AxisOutOfRange {
            op: op.into(),
            axis,
            rank,
        });
    }
    Ok(a as usize)
}

/// Normalizes a list of axes: in range, sorted, no duplicates.
pub(crate) fn normalize_axes(op: &str, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(op, a, rank)?;
        if out.contains(&n) {
            return Err(Error::invalid(op, format!("axis {a} is listed twice")));
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

/// A short human-readable rendering of a shape, for error messages.
pub(crate) fn describe_shape(dims: &[IterDomain]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match (&d.kind, &d.extent) {
            (IterKind::Broadcast, _) => "b1".to_string(),
            (IterKind::Expanded, e) => format!("x{e}"),
            (_, e) => e.to_string(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}
