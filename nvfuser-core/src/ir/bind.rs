//! Binding the arguments of a call to a fusion's inputs: the checks every device runs
//! before anything executes.
//!
//! Both the CPU reference evaluator (`eval::evaluate`) and the GPU executor call these,
//! so a call is refused the same way, with the same message, on every device:
//!
//! * [`check_scalar`]: a scalar argument against its declared dtype (a bool input takes
//!   only a bool, an integer input no float, an i32 input only values in i32 range).
//! * [`check_sizes`]: the sizes of the tensor arguments against every extent the fusion
//!   equates. The builder keeps one extent for a dim where operands meet (an elementwise
//!   op keeps the first operand's, `cat` the first real dim, ...) and relies on the
//!   others being equal; a kernel indexes every operand with the kept extent, so an
//!   operand of another size would be read out of bounds. This walks every live
//!   expression in arena order, pairs each input dim with the extent it must equal (or
//!   not exceed), evaluates both from the arguments and compares them. A dim declared
//!   broadcast is size 1 and stands against any size; a symbolic dim is never
//!   broadcast at run time, even when its size is 1.
//!
//! Errors name the arguments, dims and sizes, e.g. `argument 1 dim 1: size 6, but it
//! must equal argument 0 dim 1 (size 5): the fusion adds them`.

use crate::dtype::{Category, DataType, ScalarValue};
use crate::error::{Error, Result};
use crate::ir::{
    BinaryOp, Expr, ExprId, Extent, ExtentOp, Fusion, IterKind, Op, ReductionOp, SizeArg, ValId,
};
use smallvec::SmallVec;

/// One argument of a call, as the binding checks see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BoundArg<'a> {
    /// A tensor: its sizes.
    Tensor(&'a [usize]),
    /// A scalar: its value.
    Scalar(ScalarValue),
}

/// Checks a scalar argument `value` for input `index`, declared `dtype`: a bool input
/// takes only a bool, an integer input takes a bool or an integer (not a float), an i32
/// input only an integer in i32 range; a float input takes any value.
pub fn check_scalar(index: usize, dtype: DataType, value: ScalarValue) -> Result<()> {
    let err = |expected: String, found: String| {
        Err(Error::Input {
            index,
            expected,
            found,
        })
    };
    match (dtype.category(), value) {
        (Category::Bool, ScalarValue::Bool(_)) => Ok(()),
        (Category::Bool, other) => err("a bool value for a bool scalar".into(), other.to_string()),
        (Category::Integer, ScalarValue::Float(f)) => err(
            format!("an integer value for an {dtype} scalar"),
            format!("the float {f:?}"),
        ),
        (Category::Integer, ScalarValue::Int(i))
            if dtype == DataType::I32 && i != i as i32 as i64 =>
        {
            err(
                "a value in i32 range for an i32 scalar".into(),
                i.to_string(),
            )
        }
        _ => Ok(()),
    }
}

/// How an input dim relates to the extent it is paired with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rel {
    /// Equal sizes.
    Eq,
    /// Equal, unless the other side's value is -1 (expand's "keep").
    EqUnlessKeep,
    /// At most the other side (gather's index).
    AtMost,
    /// At least the other side (the sorted dim of `topk` against `k`).
    AtLeast,
}

/// One pairing: dim `axis` of expression input `operand` against `other`.
pub(crate) struct Tie {
    pub(crate) operand: usize,
    pub(crate) axis: usize,
    pub(crate) other: Extent,
    pub(crate) rel: Rel,
}

/// Checks the sizes of the tensor arguments against every extent `fusion` equates (see
/// the [module documentation](self)). `args` holds one entry per fusion input, already
/// checked for kind, rank, declared static sizes and broadcast dims; a missing or
/// mismatched entry makes the extents that read it unknown, and unknown extents are
/// not compared.
pub fn check_sizes(fusion: &Fusion, args: &[BoundArg<'_>]) -> Result<()> {
    SizeChecks::of(fusion).check(fusion, args)
}

/// What [`check_sizes`] evaluates, found once per fusion: the `size` ops whose values
/// extents read, every pairing of two extents, and the max/min reductions, in
/// expression order. Checking a call then evaluates extents only, without walking the
/// fusion or allocating (the cached call path of a runtime).
#[derive(Clone, Debug, Default)]
pub struct SizeChecks {
    steps: Vec<Step>,
    /// True when some step is a max or min reduction (the empty-reduction rule runs).
    extremes: bool,
}

#[derive(Clone, Debug)]
enum Step {
    /// Scalar `out` is the extent `dim` of a tensor.
    Size { out: ValId, dim: Extent },
    /// `a` (dim `axis` of an input of `expr`) against `b`.
    Tie {
        expr: ExprId,
        a: Extent,
        b: Extent,
        rel: Rel,
    },
    /// A max or min reduction.
    Extreme(ExprId),
}

impl SizeChecks {
    /// The checks of `fusion` (its live expressions).
    pub fn of(fusion: &Fusion) -> SizeChecks {
        let live = fusion.live_exprs();
        let mut steps = Vec::new();
        let mut ties = Vec::new();
        let mut extremes = false;
        for (id, e) in fusion.exprs() {
            if !live[id.index()] {
                continue;
            }
            if let Op::Size { axis } = e.op {
                let dim = e
                    .inputs
                    .first()
                    .and_then(|&x| fusion.tensor_type(x))
                    .and_then(|t| t.shape().nth(axis))
                    .map(|d| d.extent.clone());
                if let (Some(&out), Some(dim)) = (e.outputs.first(), dim) {
                    steps.push(Step::Size { out, dim });
                }
                continue;
            }
            if is_max_or_min(&e.op) {
                steps.push(Step::Extreme(id));
                extremes = true;
            }
            ties.clear();
            collect_ties(fusion, e, &mut ties);
            for t in &ties {
                let Some(&input) = e.inputs.get(t.operand) else {
                    continue;
                };
                let Some(dim) = fusion
                    .tensor_type(input)
                    .and_then(|tt| tt.shape().nth(t.axis))
                else {
                    continue;
                };
                if !matches!(t.rel, Rel::AtMost | Rel::AtLeast) && dim.kind == IterKind::Broadcast {
                    continue;
                }
                if dim.extent == t.other {
                    continue;
                }
                steps.push(Step::Tie {
                    expr: id,
                    a: dim.extent.clone(),
                    b: t.other.clone(),
                    rel: t.rel,
                });
            }
        }
        SizeChecks { steps, extremes }
    }

    /// Every pairing of two extents: (input dim, the extent it is held against, how).
    pub(crate) fn ties(&self) -> impl Iterator<Item = (&Extent, &Extent, Rel)> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::Tie { a, b, rel, .. } => Some((a, b, *rel)),
            _ => None,
        })
    }

    /// Checks one call (see [`check_sizes`]); `fusion` is the fusion these checks were
    /// found in.
    pub fn check(&self, fusion: &Fusion, args: &[BoundArg<'_>]) -> Result<()> {
        let mut computed: SmallVec<[(ValId, i64); 8]> = SmallVec::new();
        let mut empty: Vec<bool> = Vec::new();
        for step in &self.steps {
            let value = |x: &Extent, computed: &[(ValId, i64)]| {
                eval_with(
                    fusion,
                    args,
                    &|v| computed.iter().find(|c| c.0 == v).map(|c| c.1),
                    x,
                )
            };
            match step {
                Step::Size { out, dim } => {
                    if let Some(v) = value(dim, &computed) {
                        computed.push((*out, v));
                    }
                }
                Step::Extreme(id) => {
                    if reduces_empty(fusion, fusion.expr(*id), &|x| value(x, &computed)) {
                        empty.resize(fusion.num_exprs(), false);
                        empty[id.index()] = true;
                    }
                }
                Step::Tie { expr, a, b, rel } => {
                    let (Some(x), Some(y)) = (value(a, &computed), value(b, &computed)) else {
                        continue;
                    };
                    let ok = match rel {
                        Rel::Eq => x == y,
                        Rel::EqUnlessKeep => y == -1 || x == y,
                        Rel::AtMost => x <= y,
                        Rel::AtLeast => x >= y,
                    };
                    if !ok {
                        let relation = match rel {
                            Rel::AtMost => "be at most",
                            Rel::AtLeast => "be at least",
                            _ => "equal",
                        };
                        let other = match b {
                            Extent::Const(c) => c.to_string(),
                            _ => format!("{} (size {y})", describe(fusion, b)),
                        };
                        return Err(Error::ArgumentSizes {
                            found: format!("{}: size {x}", describe(fusion, a)),
                            expected: format!("{relation} {other}"),
                            why: why(fusion.expr(*expr)),
                        });
                    }
                }
            }
        }
        if !self.extremes {
            return Ok(());
        }
        let lookup = |v: ValId| computed.iter().find(|c| c.0 == v).map(|c| c.1);
        let no_elements =
            |v: ValId| has_no_elements(fusion, v, &|x| eval_with(fusion, args, &lookup, x));
        match observed_empty_reduction(fusion, &empty, &no_elements) {
            Some(e) => Err(observed_empty_reduction_error(fusion, e)),
            None => Ok(()),
        }
    }
}

/// Whether `op` is a max or min reduction (undefined over no elements).
pub fn is_max_or_min(op: &Op) -> bool {
    matches!(
        op,
        Op::Reduction {
            op: ReductionOp::Max | ReductionOp::Min,
            ..
        }
    )
}

/// Whether reduction `e` reduces over a dim whose extent `eval` gives as 0.
pub fn reduces_empty(fusion: &Fusion, e: &Expr, eval: &dyn Fn(&Extent) -> Option<i64>) -> bool {
    let (Op::Reduction { axes, .. }, Some(dims)) =
        (&e.op, e.inputs.first().and_then(|&x| fusion.tensor_type(x)))
    else {
        return false;
    };
    axes.iter()
        .any(|&axis| dims.shape().nth(axis).and_then(|d| eval(&d.extent)) == Some(0))
}

/// The rule for a max or min over an empty dim, on every device: its values (the
/// reduction's identity, `-inf` for a float max) are not defined, so the call is refused
/// when they are **observed**, i.e. when the reduction's result, or anything computed
/// from it, is an output with elements. A softmax over an empty dim therefore returns
/// its empty result, as PyTorch does, while `max` of `[3, 0]` over dim 1 is refused.
///
/// `empty[e]` marks the max/min expressions (by expression index; a short slice marks
/// none past its end) that reduce over an empty dim; `no_elements(v)` says whether
/// output `v` is known to have no elements. Returns the first offending reduction. A
/// [segment](Fusion::is_segment) never refuses. The propagation is conservative: a
/// value computed from the reduction is tainted even where its own reduction reads none
/// of it (a sum over the same empty dim).
pub fn observed_empty_reduction(
    fusion: &Fusion,
    empty: &[bool],
    no_elements: &dyn Fn(ValId) -> bool,
) -> Option<ExprId> {
    // A segment's outputs may be intermediates of the whole fusion, which the whole
    // fusion's check (run first, on every device) judged.
    if fusion.is_segment() || !empty.iter().any(|&e| e) {
        return None;
    }
    let mut taint: Vec<Option<ExprId>> = vec![None; fusion.num_vals()];
    for (id, e) in fusion.exprs() {
        // A size is a fact of the shape, not of the values.
        if matches!(e.op, Op::Size { .. }) {
            continue;
        }
        let source = e
            .inputs
            .iter()
            .find_map(|i| taint[i.index()])
            .or_else(|| (empty.get(id.index()) == Some(&true)).then_some(id));
        if source.is_some() {
            for o in &e.outputs {
                taint[o.index()] = source;
            }
        }
    }
    fusion
        .outputs()
        .iter()
        .find_map(|o| taint[o.val.index()].filter(|_| !no_elements(o.val)))
}

/// Whether tensor `v` has a dim whose extent `eval` gives as 0 (false for a scalar).
pub fn has_no_elements(fusion: &Fusion, v: ValId, eval: &dyn Fn(&Extent) -> Option<i64>) -> bool {
    fusion
        .tensor_type(v)
        .is_some_and(|t| t.shape().any(|d| eval(&d.extent) == Some(0)))
}

/// The error of the max or min `e` over an empty dim whose values are observed (the
/// evaluator's too).
pub fn observed_empty_reduction_error(fusion: &Fusion, e: ExprId) -> Error {
    match fusion.expr(e).op {
        Op::Reduction { op, .. } => empty_reduction_error(op),
        ref other => Error::InvalidIr(format!("{} is not a reduction", other.name())),
    }
}

/// The error of a max or min over an empty dim whose values are observed.
pub(crate) fn empty_reduction_error(op: ReductionOp) -> Error {
    Error::invalid(
        op.name(),
        format!(
            "cannot reduce over an empty dimension: the {} of zero elements is not defined (and an output with elements depends on it)",
            op.name()
        ),
    )
}

/// The value of `e` for these arguments: input dims and scalar inputs from `args`,
/// scalars computed by `size` ops from `computed`.
fn eval_with(
    fusion: &Fusion,
    args: &[BoundArg<'_>],
    computed: &dyn Fn(ValId) -> Option<i64>,
    e: &Extent,
) -> Option<i64> {
    e.eval(
        &|t: ValId, axis: usize| match args.get(fusion.input_position(t)?)? {
            BoundArg::Tensor(sizes) => sizes.get(axis).and_then(|&s| i64::try_from(s).ok()),
            BoundArg::Scalar(_) => None,
        },
        &|v: ValId| match fusion.input_position(v) {
            Some(p) => match args.get(p)? {
                BoundArg::Scalar(s) => s.cast(fusion.val(v).dtype).as_i64(),
                BoundArg::Tensor(_) => None,
            },
            None => computed(v),
        },
    )
}

/// Pushes the pairings of expression `e` (see [`check_sizes`]).
pub(crate) fn collect_ties(fusion: &Fusion, e: &Expr, out: &mut Vec<Tie>) {
    let out_dims = |k: usize, full: bool| -> Vec<Extent> {
        e.outputs
            .get(k)
            .and_then(|&o| fusion.tensor_type(o))
            .map(|t| {
                if full {
                    t.domain.iter().map(|d| d.extent.clone()).collect()
                } else {
                    t.shape().map(|d| d.extent.clone()).collect()
                }
            })
            .unwrap_or_default()
    };
    let rank = |k: usize| -> Option<usize> {
        e.inputs
            .get(k)
            .and_then(|&v| fusion.tensor_type(v))
            .map(|t| t.rank())
    };
    let mut tie = |operand: usize, axis: usize, other: Option<&Extent>, rel: Rel| {
        if let Some(other) = other {
            out.push(Tie {
                operand,
                axis,
                other: other.clone(),
                rel,
            });
        }
    };
    match &e.op {
        Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) | Op::Cast | Op::Set | Op::SegmentSet => {
            // Operands align on the right (the builder makes rank extension explicit).
            let o = out_dims(0, false);
            for k in 0..e.inputs.len() {
                let Some(r) = rank(k).filter(|&r| r <= o.len()) else {
                    continue;
                };
                let lead = o.len() - r;
                for j in 0..r {
                    tie(k, j, o.get(lead + j), Rel::Eq);
                }
            }
        }
        Op::Reduction { .. }
        | Op::Var { .. }
        | Op::VarMean { .. }
        | Op::Welford { .. }
        | Op::Scan { .. } => {
            // The output's domain keeps every input dim, reduced ones as reduction dims
            // (a scan's output has the input's shape).
            let o = out_dims(0, true);
            for j in 0..rank(0).unwrap_or(0) {
                tie(0, j, o.get(j), Rel::Eq);
            }
        }
        Op::Sort { axis, k, .. } => {
            // Both outputs keep every dim but the sorted one, which `topk` shortens to
            // `k`: the input must hold at least `k` elements there.
            let o = out_dims(0, true);
            for j in 0..rank(0).unwrap_or(0) {
                match (j == *axis, k) {
                    (true, Some(k)) => tie(0, j, Some(&Extent::Const(*k)), Rel::AtLeast),
                    _ => tie(0, j, o.get(j), Rel::Eq),
                }
            }
        }
        Op::Broadcast { mask } => {
            let o = out_dims(0, false);
            let kept = mask.iter().enumerate().filter(|(_, b)| !**b);
            for (j, (i, _)) in kept.enumerate() {
                tie(0, j, o.get(i), Rel::Eq);
            }
        }
        Op::Expand { sizes } => {
            for (j, s) in sizes.iter().enumerate() {
                let size = match *s {
                    SizeArg::Const(-1) => continue,
                    SizeArg::Const(c) => Extent::Const(c),
                    SizeArg::Input(k) => match e.inputs.get(k as usize) {
                        Some(&v) => Extent::Scalar(v),
                        None => continue,
                    },
                };
                tie(0, j, Some(&size), Rel::EqUnlessKeep);
            }
        }
        Op::Permute { perm } => {
            let o = out_dims(0, false);
            for (i, &p) in perm.iter().enumerate() {
                tie(0, p, o.get(i), Rel::Eq);
            }
        }
        Op::Squeeze { axes } => {
            let o = out_dims(0, false);
            let kept = (0..rank(0).unwrap_or(0)).filter(|a| !axes.contains(a));
            for (i, j) in kept.enumerate() {
                tie(0, j, o.get(i), Rel::Eq);
            }
        }
        Op::Pad { widths } => {
            let o = out_dims(0, false);
            for (j, w) in widths.iter().enumerate() {
                if *w == (SizeArg::Const(0), SizeArg::Const(0)) {
                    tie(0, j, o.get(j), Rel::Eq);
                }
            }
        }
        Op::Cat { axis } => {
            let o = out_dims(0, false);
            for k in 0..e.inputs.len() {
                for j in (0..rank(k).unwrap_or(0)).filter(|j| j != axis) {
                    tie(k, j, o.get(j), Rel::Eq);
                }
            }
        }
        Op::IndexSelect { axis } => {
            let o = out_dims(0, false);
            for j in (0..rank(0).unwrap_or(0)).filter(|j| j != axis) {
                tie(0, j, o.get(j), Rel::Eq);
            }
            tie(1, 0, o.get(*axis), Rel::Eq);
        }
        Op::Select { axis, .. } => {
            let o = out_dims(0, false);
            for j in (0..rank(0).unwrap_or(0)).filter(|j| j != axis) {
                tie(0, j, o.get(if j < *axis { j } else { j - 1 }), Rel::Eq);
            }
        }
        Op::TakeAlongAxis { axis } => {
            let o = out_dims(0, false);
            for k in 0..2 {
                for j in (0..rank(k).unwrap_or(0)).filter(|j| j != axis) {
                    tie(k, j, o.get(j), Rel::Eq);
                }
            }
        }
        Op::Gather { axis } => {
            let x: Vec<Extent> = e
                .inputs
                .first()
                .and_then(|&v| fusion.tensor_type(v))
                .map(|t| t.shape().map(|d| d.extent.clone()).collect())
                .unwrap_or_default();
            for j in (0..rank(1).unwrap_or(0)).filter(|j| j != axis) {
                tie(1, j, x.get(j), Rel::AtMost);
            }
        }
        Op::Scatter { axis, .. } => {
            let dims = |k: usize| -> Vec<Extent> {
                e.inputs
                    .get(k)
                    .and_then(|&v| fusion.tensor_type(v))
                    .map(|t| t.shape().map(|d| d.extent.clone()).collect())
                    .unwrap_or_default()
            };
            let (x, src) = (dims(0), dims(2));
            let o = out_dims(0, false);
            for j in 0..rank(0).unwrap_or(0) {
                tie(0, j, o.get(j), Rel::Eq);
            }
            for j in 0..rank(1).unwrap_or(0) {
                if j != *axis {
                    tie(1, j, x.get(j), Rel::AtMost);
                }
                tie(1, j, src.get(j), Rel::AtMost);
            }
        }
        // Slices change extents (their bounds are checked where they are read), reshape
        // keeps the element count (checked by the evaluator and before a launch), and
        // factories and `size` have no tensor operand to tie.
        Op::Slice { .. }
        | Op::Reshape { .. }
        | Op::Full { .. }
        | Op::Iota { .. }
        | Op::Rand { .. }
        | Op::Size { .. } => {}
    }
}

/// Why the pairing of `e` must hold, for the error message.
fn why(e: &Expr) -> String {
    let name = e.op.name();
    match &e.op {
        Op::Binary(BinaryOp::Add) => "the fusion adds them".into(),
        Op::Binary(BinaryOp::Sub) => "the fusion subtracts them".into(),
        Op::Binary(BinaryOp::Mul) => "the fusion multiplies them".into(),
        Op::Binary(BinaryOp::Div | BinaryOp::TrueDiv) => "the fusion divides them".into(),
        Op::Binary(_) | Op::Ternary(_) => {
            format!("the fusion combines them elementwise ({name})")
        }
        Op::Cat { axis } => {
            format!("the fusion concatenates them along dim {axis} (cat), so the other dims must match")
        }
        Op::Expand { .. } => {
            "expand only changes the size of broadcast dims (-1 keeps a dim)".into()
        }
        Op::TakeAlongAxis { axis } => format!(
            "take_along_axis pairs the index with the input outside dim {axis} (unless one is a broadcast dim)"
        ),
        Op::Gather { axis } => {
            format!("gather reads the input at the index's positions outside dim {axis}")
        }
        Op::Scatter { axis, .. } => format!(
            "{name} writes the source at the index's positions (outside dim {axis} also into the input's)"
        ),
        Op::Reduction { .. } | Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. } => {
            format!("{name} keeps the dims it does not reduce")
        }
        Op::Sort { axis, k: Some(k), .. } => {
            format!("topk takes k = {k} elements along dim {axis}")
        }
        _ => format!("{name} keeps this dim"),
    }
}

/// An extent in the caller's terms: input dims as `argument K dim D`, scalar inputs as
/// `argument K`.
fn describe(fusion: &Fusion, e: &Extent) -> String {
    match e {
        Extent::Const(c) => c.to_string(),
        Extent::Dim { tensor, axis } => match fusion.input_position(*tensor) {
            Some(p) => format!("argument {p} dim {axis}"),
            None => format!("{tensor}.size({axis})"),
        },
        Extent::Scalar(v) => match fusion.input_position(*v) {
            Some(p) => format!("argument {p}"),
            None => format!("the scalar {v}"),
        },
        Extent::Op(op, a, b) => {
            let (a, b) = (describe(fusion, a), describe(fusion, b));
            match op {
                ExtentOp::Add => format!("({a} + {b})"),
                ExtentOp::Sub => format!("({a} - {b})"),
                ExtentOp::Mul => format!("({a} * {b})"),
                ExtentOp::Div => format!("({a} / {b})"),
                ExtentOp::CeilDiv => format!("ceildiv({a}, {b})"),
                ExtentOp::Max => format!("max({a}, {b})"),
                ExtentOp::Min => format!("min({a}, {b})"),
            }
        }
    }
}
