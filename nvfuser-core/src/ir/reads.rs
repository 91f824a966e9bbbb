//! The data-dependent reads of a fusion, as data: what the arguments of a call must allow
//! before a kernel reads where they say (select indices, slice bounds and pad widths
//! given by scalars, reshape sizes, gather and take_along_axis index sizes), and the max/min reductions
//! whose emptiness only the call's sizes decide. [`ReadChecks::of`] finds them once per
//! fusion; a kernel carries its own ([`crate::codegen::Kernel::reads`]) and the launcher
//! runs [`ReadChecks::check`] with the call's extents and scalars, the CPU reference's
//! rules. A fusion without such reads has an empty list and costs nothing per call.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::{bind, Expr, ExprId, Extent, Fusion, IterKind, Op, SizeArg, ValId};

/// One value a check reads: a constant of the op, or a scalar input of the expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScalarRef {
    /// A constant.
    Const(i64),
    /// A scalar value of the fusion (an argument, a host-computed scalar, or a `size`).
    Val(ValId),
}

/// One data-dependent read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadCheck {
    /// `select(input, axis, index)`: the index within `-size..size`.
    Select {
        /// The selected tensor.
        input: ValId,
        /// The dim.
        axis: usize,
        /// The index.
        index: ScalarRef,
    },
    /// A slice bound given by a scalar: within `0..=size` of its dim.
    SliceBound {
        /// The sliced tensor.
        input: ValId,
        /// The dim.
        dim: usize,
        /// `start` or `stop`.
        what: BoundKind,
        /// The bound.
        bound: ValId,
    },
    /// `scatter`/`scatter_add` into a dim of size 0: an index with elements has no
    /// valid value (the evaluator refuses it; no kernel runs for an empty output).
    ScatterTarget {
        /// The tensor scattered into.
        input: ValId,
        /// The index tensor.
        index: ValId,
        /// The scattered dim.
        axis: usize,
    },
    /// A pad width given by a scalar: at least 0 (constant widths are checked when
    /// the fusion is defined).
    PadWidth {
        /// The padded tensor.
        input: ValId,
        /// The dim.
        dim: usize,
        /// The width.
        width: ValId,
    },
    /// `reshape(input, sizes)`: sizes >= 0 with at most one -1, the element count kept.
    Reshape {
        /// The reshaped tensor.
        input: ValId,
        /// The target sizes.
        sizes: Vec<ScalarRef>,
    },
    /// `gather` (index sizes at most the input's) or `take_along_axis` (equal, or
    /// broadcast) outside `axis`.
    IndexSizes {
        /// The indexed tensor.
        input: ValId,
        /// The index tensor.
        index: ValId,
        /// The gathered dim.
        axis: usize,
        /// `gather` rather than `take_along_axis`.
        gather: bool,
    },
}

/// Which bound of a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BoundKind {
    /// The first element.
    Start,
    /// One past the last.
    Stop,
}

/// A call whose arguments a data-dependent read does not allow.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{op}: expected {expected}, found {found}")]
pub struct ReadError {
    /// The op's name.
    pub op: &'static str,
    /// What the reference's rule expects.
    pub expected: String,
    /// What the call gives.
    pub found: String,
}

/// Every data-dependent read of one fusion, found once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadChecks {
    /// (expression, check), in expression order.
    checks: Vec<(ExprId, ReadCheck)>,
    /// Live max/min reductions: empty only for some calls.
    extremes: Vec<ExprId>,
}

/// The sizes and scalars of one call.
pub struct CallValues<'a> {
    /// An extent's value (`None`: not known from the arguments).
    pub extent: &'a dyn Fn(&Extent) -> Option<i64>,
    /// A scalar value's value as an integer (`None`: not known).
    pub scalar: &'a dyn Fn(ValId) -> Option<i64>,
}

impl ReadChecks {
    /// The data-dependent reads of the live expressions of `fusion`.
    pub fn of(fusion: &Fusion) -> Self {
        let live = fusion.live_exprs();
        let mut out = ReadChecks::default();
        for (id, e) in fusion.exprs() {
            if !live[id.index()] {
                continue;
            }
            let scalar = |a: SizeArg| match a {
                SizeArg::Const(c) => Some(ScalarRef::Const(c)),
                SizeArg::Input(k) => e.inputs.get(k as usize).map(|&v| ScalarRef::Val(v)),
            };
            let mut push = |c: ReadCheck| out.checks.push((id, c));
            match &e.op {
                Op::Select { axis, index } => {
                    if let Some(index) = scalar(*index) {
                        push(ReadCheck::Select {
                            input: e.inputs[0],
                            axis: *axis,
                            index,
                        });
                    }
                }
                Op::Slice { ranges } => {
                    for (dim, r) in ranges.iter().enumerate() {
                        for (what, a) in [(BoundKind::Start, r.start), (BoundKind::Stop, r.stop)] {
                            if let Some(ScalarRef::Val(bound)) =
                                matches!(a, SizeArg::Input(_)).then(|| scalar(a)).flatten()
                            {
                                push(ReadCheck::SliceBound {
                                    input: e.inputs[0],
                                    dim,
                                    what,
                                    bound,
                                });
                            }
                        }
                    }
                }
                Op::Scatter { axis, .. } => push(ReadCheck::ScatterTarget {
                    input: e.inputs[0],
                    index: e.inputs[1],
                    axis: *axis,
                }),
                Op::Pad { widths } => {
                    for (dim, &(lo, hi)) in widths.iter().enumerate() {
                        for a in [lo, hi] {
                            if let SizeArg::Input(k) = a {
                                if let Some(&width) = e.inputs.get(k as usize) {
                                    push(ReadCheck::PadWidth {
                                        input: e.inputs[0],
                                        dim,
                                        width,
                                    });
                                }
                            }
                        }
                    }
                }
                Op::Reshape { sizes } => {
                    if let Some(sizes) = sizes.iter().map(|&a| scalar(a)).collect() {
                        push(ReadCheck::Reshape {
                            input: e.inputs[0],
                            sizes,
                        });
                    }
                }
                Op::Gather { axis } | Op::TakeAlongAxis { axis } => push(ReadCheck::IndexSizes {
                    input: e.inputs[0],
                    index: e.inputs[1],
                    axis: *axis,
                    gather: matches!(e.op, Op::Gather { .. }),
                }),
                Op::Reduction {
                    op: super::ReductionOp::Max | super::ReductionOp::Min,
                    ..
                } => out.extremes.push(id),
                _ => {}
            }
        }
        out
    }

    /// True when the fusion has no data-dependent read.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty() && self.extremes.is_empty()
    }

    /// The checks, with the expression each belongs to.
    pub fn checks(&self) -> &[(ExprId, ReadCheck)] {
        &self.checks
    }

    /// Checks one call of `fusion` (the fusion these checks were found in). With `strict`, a size or scalar the call does not give is an
    /// error; otherwise that check is skipped (a kernel's own launch checks it). Then the
    /// max/min rule: a reduction over a dim the call makes empty is refused when an
    /// output with elements depends on it (`bind::observed_empty_reduction`; a segment
    /// leaves it to the whole fusion).
    pub fn check(
        &self,
        fusion: &Fusion,
        call: &CallValues<'_>,
        strict: bool,
    ) -> Result<(), ReadError> {
        if self.is_empty() {
            return Ok(());
        }
        for (id, c) in &self.checks {
            match check_one(fusion, fusion.expr(*id), c, call) {
                Ok(()) | Err(Failed::Unknown(_)) if !strict => {}
                Ok(()) => {}
                Err(Failed::Unknown(what)) => {
                    return Err(ReadError {
                        op: fusion.expr(*id).op.name(),
                        expected: "sizes and scalars computable from the arguments".into(),
                        found: format!("an unknown {what}"),
                    })
                }
                Err(Failed::Invalid(e)) => return Err(e),
            }
        }
        if self.extremes.is_empty() {
            return Ok(());
        }
        let mut empty: Vec<bool> = Vec::new();
        for &id in &self.extremes {
            if bind::reduces_empty(fusion, fusion.expr(id), call.extent) {
                empty.resize(fusion.num_exprs(), false);
                empty[id.index()] = true;
            }
        }
        let no_elements = |v: ValId| bind::has_no_elements(fusion, v, call.extent);
        if let Some(id) = bind::observed_empty_reduction(fusion, &empty, &no_elements) {
            let op = fusion.expr(id).op.name();
            return Err(ReadError {
                op,
                expected: format!(
                    "a non-empty dim to reduce ({op} of zero elements is not defined, and an \
                     output with elements depends on it)"
                ),
                found: "a reduced dim of size 0".into(),
            });
        }
        Ok(())
    }
}

/// Why one check did not pass.
enum Failed {
    /// A size or scalar the call does not give (what).
    Unknown(&'static str),
    /// The call breaks the rule.
    Invalid(ReadError),
}

fn check_one(
    fusion: &Fusion,
    e: &Expr,
    c: &ReadCheck,
    call: &CallValues<'_>,
) -> Result<(), Failed> {
    let op = e.op.name();
    let bad = |expected: String, found: String| {
        Failed::Invalid(ReadError {
            op,
            expected,
            found,
        })
    };
    let sizes = |v: ValId| -> Result<SmallVec<[i64; 6]>, Failed> {
        let mut out = SmallVec::new();
        if let Some(t) = fusion.tensor_type(v) {
            for d in t.shape() {
                out.push(
                    (call.extent)(&d.extent)
                        .ok_or(Failed::Unknown("size"))?
                        .max(0),
                );
            }
        }
        Ok(out)
    };
    let value = |r: ScalarRef| match r {
        ScalarRef::Const(c) => Ok(c),
        ScalarRef::Val(v) => (call.scalar)(v).ok_or(Failed::Unknown("scalar")),
    };
    match c {
        ReadCheck::Select { input, axis, index } => {
            let size = sizes(*input)?.get(*axis).copied().unwrap_or(0);
            let i = value(*index)?;
            if i < -size || i >= size {
                return Err(bad(
                    format!(
                        "an index in {}..{size} for dim {axis} of size {size}",
                        -size
                    ),
                    i.to_string(),
                ));
            }
        }
        ReadCheck::SliceBound {
            input,
            dim,
            what,
            bound,
        } => {
            let size = sizes(*input)?.get(*dim).copied().unwrap_or(0);
            let v = value(ScalarRef::Val(*bound))?;
            if v < 0 || v > size {
                let what = match what {
                    BoundKind::Start => "start",
                    BoundKind::Stop => "stop",
                };
                return Err(bad(
                    format!("a {what} given by a scalar in 0..={size} at dim {dim}"),
                    v.to_string(),
                ));
            }
        }
        ReadCheck::ScatterTarget { input, index, axis } => {
            let (xs, is) = (sizes(*input)?, sizes(*index)?);
            let n = xs.get(*axis).copied().unwrap_or(0);
            if n == 0 && !is.contains(&0) {
                return Err(bad(
                    format!("no index elements, as dim {axis} of the input is empty"),
                    format!("an index of sizes {is:?} (input sizes {xs:?})"),
                ));
            }
        }
        ReadCheck::PadWidth { dim, width, .. } => {
            let v = value(ScalarRef::Val(*width))?;
            if v < 0 {
                return Err(bad(
                    format!("a pad width given by a scalar >= 0 at dim {dim} (use slice to crop)"),
                    v.to_string(),
                ));
            }
        }
        ReadCheck::Reshape {
            input,
            sizes: targets,
        } => {
            // The reference's rule: sizes >= 0 and at most one -1, inferred only from a
            // nonzero product of the others that divides the element count (so
            // `[16, 4, -1, 0]` of 0 elements is ambiguous and refused).
            let from = sizes(*input)?;
            let numel = from.iter().try_fold(1i64, |a, &n| a.checked_mul(n));
            let mut vals: SmallVec<[i64; 6]> = SmallVec::new();
            for &a in targets {
                vals.push(value(a)?);
            }
            let inferred = vals.iter().filter(|&&v| v == -1).count();
            let known = vals.iter().filter(|&&v| v != -1).try_fold(1i64, |a, &v| {
                if v < 0 {
                    None
                } else {
                    a.checked_mul(v)
                }
            });
            let ok = match (numel, known, inferred) {
                (Some(n), Some(k), 0) => k == n,
                (Some(n), Some(k), 1) => k != 0 && n % k == 0,
                _ => false,
            };
            if !ok {
                return Err(bad(
                    format!("sizes with the input's element count (input sizes {from:?})"),
                    format!("sizes {vals:?}"),
                ));
            }
        }
        ReadCheck::IndexSizes {
            input,
            index,
            axis,
            gather,
        } => {
            let (xs, is) = (sizes(*input)?, sizes(*index)?);
            let kinds = |v| -> SmallVec<[bool; 6]> {
                fusion.tensor_type(v).map_or_else(SmallVec::new, |t| {
                    t.shape().map(|d| d.kind == IterKind::Broadcast).collect()
                })
            };
            let (xb, ib) = (kinds(*input), kinds(*index));
            for d in (0..xs.len().min(is.len())).filter(|d| d != axis) {
                let (x, i) = (xs[d], is[d]);
                let fits = if *gather {
                    i <= x
                } else {
                    x == i || xb.get(d) == Some(&true) || ib.get(d) == Some(&true)
                };
                if !fits {
                    return Err(bad(
                        format!(
                            "an index size {} {x} at dim {d} (the input's size)",
                            if *gather { "<=" } else { "equal to" }
                        ),
                        format!("{i} (index sizes {is:?}, input sizes {xs:?})"),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{CallValues, ReadCheck, ReadChecks, ScalarRef};
    use crate::builder::{FusionDefinition, Size};
    use crate::dtype::DataType;
    use crate::ir::{Extent, ValId};

    #[test]
    fn pointwise_fusions_have_no_reads_to_check() {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let y = fd.exp(x).unwrap();
        fd.add_output(y).unwrap();
        assert!(ReadChecks::of(&fd.finish().unwrap()).is_empty());
    }

    #[test]
    fn a_select_index_is_checked_strictly_or_skipped_when_unknown() {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let i = fd.define_scalar(DataType::I64).unwrap();
        let y = fd.select(x, 0, Size::Val(i)).unwrap();
        fd.add_output(y).unwrap();
        let f = fd.finish().unwrap();
        let checks = ReadChecks::of(&f);
        assert!(matches!(
            checks.checks(),
            [(
                _,
                ReadCheck::Select {
                    axis: 0,
                    index: ScalarRef::Val(_),
                    ..
                }
            )]
        ));
        let rows = 4i64;
        let dim =
            |t: ValId, axis: usize| (f.input_position(t) == Some(0)).then_some([rows, 3][axis]);
        let run = |index: Option<i64>, strict: bool| {
            let scalar = |v: ValId| {
                if f.input_position(v) == Some(1) {
                    index
                } else {
                    None
                }
            };
            let extent = |e: &Extent| e.eval(&dim, &scalar);
            let call = CallValues {
                extent: &extent,
                scalar: &scalar,
            };
            checks.check(&f, &call, strict)
        };
        assert!(run(Some(3), true).is_ok());
        assert!(run(Some(-4), true).is_ok());
        let err = run(Some(4), true).unwrap_err();
        assert_eq!((err.op, err.found.as_str()), ("select", "4"));
        assert!(err.expected.contains("-4..4"), "{err}");
        // An index the call does not give: an error when strict, skipped otherwise.
        assert!(run(None, true)
            .unwrap_err()
            .found
            .contains("unknown scalar"));
        assert!(run(None, false).is_ok());
    }
}
