//! Outputs that are views of an input: a chain of layout-only ops (permute, squeeze,
//! broadcast, expand, slice, reshape) from a fusion input to an output, returned as a
//! strided view of the input's buffer instead of being computed (nvFuser's alias
//! analysis and no-op scheduler).
//!
//! Whether a chain is a view is decided once, from the input's declaration: every op
//! but `reshape` maps any strided layout to a strided layout, and `reshape` needs its
//! input dense in row-major order (ignoring size-1 dims). That holds for an input
//! declared contiguous in row-major order (the argument checks enforce it on every
//! call), and stays true through squeeze, broadcast, a permutation that moves nothing,
//! a reshape, and a slice of the outermost dim alone with step 1; any other op makes
//! the layout merely strided, and a later reshape ends the chain (the output is then
//! computed). [`ViewChain::layout`] computes the view of one call: the sizes are the
//! ops' output extents, the strides and the offset follow from the input's.

use serde::{Deserialize, Serialize};

use super::{ExprId, Extent, Fusion, IterKind, Op, SizeArg, ValId};

/// How an output is a view of an input: the expressions from the input to the output,
/// in order, each a layout-only op of one tensor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewChain {
    /// The input's position among the fusion's inputs.
    pub input: usize,
    /// The ops, from the input's reader to the output's definition.
    pub exprs: Vec<ExprId>,
}

/// A strided layout in elements: sizes, strides and the offset of element 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewLayout {
    /// Sizes.
    pub sizes: Vec<usize>,
    /// Strides.
    pub strides: Vec<usize>,
    /// Offset of the first element.
    pub offset: usize,
}

/// Whether a value's layout is known dense in row-major order (ignoring size-1 dims)
/// for every call the argument checks accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dense {
    Yes,
    Maybe,
}

impl ViewChain {
    /// The chain from an input to `out`, when `out` is a view of that input for every
    /// call (see the module documentation); `None` when it is an input itself, is
    /// computed by any other op, or needs a reshape of a layout that may not be dense.
    pub fn of(fusion: &Fusion, out: ValId) -> Option<ViewChain> {
        let mut exprs = Vec::new();
        let mut v = out;
        let input = loop {
            if let Some(p) = fusion.input_position(v) {
                break p;
            }
            let id = fusion.val(v).definition?;
            let e = fusion.expr(id);
            let layout_only = matches!(
                e.op,
                Op::Permute { .. }
                    | Op::Squeeze { .. }
                    | Op::Broadcast { .. }
                    | Op::Expand { .. }
                    | Op::Slice { .. }
                    | Op::Reshape { .. }
            );
            if !layout_only || e.outputs.len() != 1 {
                return None;
            }
            exprs.push(id);
            v = *e.inputs.first()?;
        };
        if exprs.is_empty() {
            return None;
        }
        exprs.reverse();
        let source = fusion.tensor_type(fusion.inputs()[input])?;
        let rank = source.contiguity.len();
        let row_major = source
            .stride_order
            .iter()
            .enumerate()
            .all(|(a, &o)| o + 1 + a == rank);
        let dense_dims = source
            .shape()
            .zip(&source.contiguity)
            .all(|(d, c)| match c {
                Some(c) => *c,
                None => d.kind == IterKind::Broadcast,
            });
        let mut dense = if row_major && dense_dims {
            Dense::Yes
        } else {
            Dense::Maybe
        };
        for &id in &exprs {
            let e = fusion.expr(id);
            dense = match &e.op {
                Op::Squeeze { .. } | Op::Broadcast { .. } => dense,
                Op::Reshape { .. } if dense == Dense::Yes => Dense::Yes,
                Op::Reshape { .. } => return None,
                Op::Permute { perm } if perm.iter().enumerate().all(|(i, &p)| i == p) => dense,
                Op::Slice { ranges } => {
                    let inner_full = ranges.iter().skip(1).all(|r| {
                        r.step == 1
                            && r.start == SizeArg::Const(0)
                            && r.stop == SizeArg::Const(i64::MAX)
                    });
                    let outer_step = ranges.first().is_none_or(|r| r.step == 1);
                    if inner_full && outer_step {
                        dense
                    } else {
                        Dense::Maybe
                    }
                }
                _ => Dense::Maybe,
            };
        }
        Some(ViewChain { input, exprs })
    }

    /// The view of one call: `input` is the layout of the input tensor, `extent`
    /// evaluates an extent of `fusion` for the call and `scalar` a scalar input (a slice
    /// bound given by a scalar, already checked against its dim). `None` when an extent
    /// cannot be evaluated, or a reshape meets a layout that is not dense (which
    /// [`ViewChain::of`] rules out for calls the argument checks accept).
    pub fn layout(
        &self,
        fusion: &Fusion,
        input: ViewLayout,
        extent: &dyn Fn(&Extent) -> Option<i64>,
        scalar: &dyn Fn(ValId) -> Option<i64>,
    ) -> Option<ViewLayout> {
        let start = input.offset;
        let mut cur = input;
        for &id in &self.exprs {
            let e = fusion.expr(id);
            let out = fusion.tensor_type(*e.outputs.first()?)?;
            let sizes = out
                .shape()
                .map(|d| extent(&d.extent).map(|n| n.max(0) as usize))
                .collect::<Option<Vec<usize>>>()?;
            let strides = match &e.op {
                Op::Permute { perm } => perm
                    .iter()
                    .map(|&p| cur.strides.get(p).copied())
                    .collect::<Option<Vec<_>>>()?,
                Op::Squeeze { axes } => (0..cur.strides.len())
                    .filter(|a| !axes.contains(a))
                    .map(|a| cur.strides[a])
                    .collect(),
                Op::Broadcast { mask } => {
                    let mut kept = cur.strides.iter();
                    mask.iter()
                        .map(|&new| if new { Some(0) } else { kept.next().copied() })
                        .collect::<Option<Vec<_>>>()?
                }
                Op::Expand { .. } => cur
                    .strides
                    .iter()
                    .zip(&cur.sizes)
                    .zip(&sizes)
                    .map(|((&s, &from), &to)| if from == to { s } else { 0 })
                    .collect(),
                Op::Slice { ranges } => {
                    let mut strides = Vec::with_capacity(ranges.len());
                    for (d, r) in ranges.iter().enumerate() {
                        let n = *cur.sizes.get(d)? as i64;
                        let start = match r.start {
                            SizeArg::Const(c) if c < 0 => (n + c).max(0),
                            SizeArg::Const(c) => c.min(n),
                            SizeArg::Input(k) => scalar(*e.inputs.get(k as usize)?)?,
                        };
                        let stride = *cur.strides.get(d)?;
                        cur.offset += usize::try_from(start).ok()? * stride;
                        strides.push(stride * r.step as usize);
                    }
                    strides
                }
                Op::Reshape { .. } => {
                    if !dense(&cur) {
                        return None;
                    }
                    row_major(&sizes)
                }
                _ => return None,
            };
            if strides.len() != sizes.len() {
                return None;
            }
            cur = ViewLayout {
                sizes,
                strides,
                offset: cur.offset,
            };
        }
        // A view without elements addresses nothing: it keeps the input's offset, which
        // lies inside the buffer (a slice start past an empty dim's buffer does not).
        if cur.sizes.contains(&0) {
            cur.offset = start;
        }
        Some(cur)
    }
}

/// Dense row-major strides of `sizes`.
fn row_major(sizes: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; sizes.len()];
    let mut step = 1usize;
    for (s, &n) in strides.iter_mut().zip(sizes).rev() {
        *s = step;
        step = step.saturating_mul(n.max(1));
    }
    strides
}

/// True when the dims of more than one element are dense in row-major order.
fn dense(l: &ViewLayout) -> bool {
    if l.sizes.contains(&0) {
        return true;
    }
    let mut expected = 1usize;
    for (&n, &s) in l.sizes.iter().zip(&l.strides).rev() {
        if n > 1 {
            if s != expected {
                return false;
            }
            expected = expected.saturating_mul(n);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::build_str;

    fn chain(src: &str) -> (Fusion, Option<ViewChain>) {
        let f = build_str(src).unwrap().remove(0).0;
        let out = f.outputs()[0].val;
        let c = ViewChain::of(&f, out);
        (f, c)
    }

    /// The view of a `[rows, cols]` input with row pitch `pitch` (`dims` are its sizes).
    fn view(f: &Fusion, c: &ViewChain, dims: &[i64], pitch: usize) -> Option<ViewLayout> {
        let input = ViewLayout {
            sizes: dims.iter().map(|&d| d as usize).collect(),
            strides: vec![pitch, 1],
            offset: 3,
        };
        let dim = |t: ValId, axis: usize| {
            (f.input_position(t) == Some(0)).then(|| dims.get(axis).copied())?
        };
        c.layout(f, input, &|e| e.eval(&dim, &|_| None), &|_| None)
    }

    #[test]
    fn strides_and_offsets_follow_the_ops() {
        let (f, c) = chain(
            "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, 1, _]> { x.permute([1, 0]).slice([(1, 6, 2), 2..]).unsqueeze(1) }",
        );
        let c = c.expect("a view");
        let l = view(&f, &c, &[4, 7], 7).unwrap();
        assert_eq!(l.sizes, [3, 1, 2]);
        assert_eq!(l.strides, [2, 0, 7]);
        // offset 3, plus 1 column (stride 1) and 2 rows (stride 7).
        assert_eq!(l.offset, 3 + 1 + 2 * 7);
    }

    #[test]
    fn a_reshape_needs_a_dense_layout() {
        let (f, c) = chain("fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.reshape([-1]) }");
        let c = c.expect("a dense input reshapes to a view");
        assert_eq!(view(&f, &c, &[4, 7], 7).unwrap().strides, [1]);
        // A pitched layout (which the argument checks refuse for this declaration) has
        // no view: the layout says so rather than giving wrong strides.
        assert_eq!(view(&f, &c, &[4, 7], 9), None);
        let (_, c) = chain(
            "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.slice([.., 1..]).reshape([-1]) }",
        );
        assert_eq!(c, None, "an inner slice is not dense");
        let (_, c) = chain("fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.abs() }");
        assert_eq!(c, None, "computed");
    }
}
