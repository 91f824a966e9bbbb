//! Building one segment: a fusion of its own, made of some of the original expressions,
//! plus the maps between its values and the original ones.
//!
//! The segment's inputs are, in this order: the original values it reads but does not
//! compute (fusion inputs, and tensors computed by other segments), sorted by original
//! id; then the extents it needs, sorted by (tensor, axis). An extent `T.size(a)` of an
//! original input tensor `T` that the segment does not receive becomes an `i64` scalar
//! input; if the segment receives `T`, the extent stays `T.size(a)` of that input.
//! Constants are copied. Computed scalars are recomputed from their whole scalar cone.
//! A tensor computed by another segment arrives as the output of that segment's kernel:
//! contiguous, row-major, without reduction dims, and with expanded dims materialized
//! (declared as ordinary dims).

use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use super::graph::{for_each_leaf, Graph, Leaf};
use super::{ExtentRef, SegmentValue};
use crate::ir::{
    Expr, ExprId, Extent, Fusion, IterDomain, IterKind, Output, TensorType, Val, ValId, ValKind,
};
use crate::DataType;

/// Segment ids of extents, by `(tensor, axis)`.
type ExtentMap = FxHashMap<(ValId, u32), ValId>;

/// A built segment.
pub(crate) struct Built {
    pub fusion: Fusion,
    /// Per segment input, what it is in the original fusion.
    pub inputs: Vec<SegmentValue>,
    /// Per segment output, the original value.
    pub outputs: Vec<ValId>,
    /// The original expressions copied (scalar cones included), arena order.
    pub exprs: Vec<ExprId>,
    /// Original value -> segment value, for every original value the segment holds.
    pub map: FxHashMap<ValId, ValId>,
}

/// Builds the segment that computes the tensor expressions `exprs` (arena order) and
/// returns `outputs` (original values produced by `exprs`). Expressions that contribute
/// to no output are left out.
pub(crate) fn build(g: &Graph<'_>, exprs: &[ExprId], outputs: &[ValId]) -> Built {
    let exprs = prune(g, exprs, outputs);
    let r = reads(g, exprs);
    let (mut map, ext_map) = number(g.fusion, &r);
    let mut fusion = segment_fusion(g, &r, &map, &ext_map, outputs);
    // Private copies of one value (`cones`) that land in one segment are one value.
    if let Some((deduped, replaced)) = fusion.dedup_exprs() {
        fusion = deduped;
        for v in map.values_mut() {
            if let Some(&r) = replaced.get(v) {
                *v = r;
            }
        }
    }
    let Reads {
        value_inputs,
        extents,
        all,
        ..
    } = r;
    let mut inputs: Vec<SegmentValue> =
        value_inputs.iter().map(|&v| SegmentValue::Val(v)).collect();
    inputs.extend(
        extents
            .iter()
            .map(|&(tensor, axis)| SegmentValue::Extent(ExtentRef { tensor, axis })),
    );
    Built {
        fusion,
        inputs,
        outputs: outputs.to_vec(),
        exprs: all,
        map,
    }
}

/// What a segment reads and computes, before any id is assigned.
struct Reads {
    /// Original values it reads but does not compute, sorted.
    value_inputs: Vec<ValId>,
    /// Constants it uses, sorted.
    constants: Vec<ValId>,
    /// The extents `(tensor, axis)` it needs of tensors it does not receive, sorted.
    extents: Vec<(ValId, u32)>,
    /// The expressions it copies (the scalar cones included), arena order.
    all: Vec<ExprId>,
}

/// Finds what the segment of `exprs` reads: its inputs, constants and extents, and the
/// scalar cones it recomputes.
fn reads(g: &Graph<'_>, exprs: Vec<ExprId>) -> Reads {
    let f = g.fusion;
    let mut produced: FxHashSet<ValId> = FxHashSet::default();
    for &e in &exprs {
        produced.extend(f.expr(e).outputs.iter().copied());
    }
    let mut value_inputs: Vec<ValId> = Vec::new();
    let mut constants: Vec<ValId> = Vec::new();
    let mut cone: Vec<ExprId> = Vec::new();
    let mut dims: FxHashSet<(ValId, u32)> = FxHashSet::default();
    let mut seen: FxHashSet<ValId> = FxHashSet::default();
    let mut stack: Vec<ValId> = Vec::new();

    // The extents of `v`'s type (only its shape dims when it arrives from another
    // segment: a boundary tensor has no reduction dims).
    let scan_type =
        |v: ValId, received: bool, stack: &mut Vec<ValId>, dims: &mut FxHashSet<(ValId, u32)>| {
            if let ValKind::Tensor(t) = &f.val(v).kind {
                for d in t.domain.iter().filter(|d| !(received && d.is_reduction())) {
                    for_each_leaf(&d.extent, &mut |l| match l {
                        Leaf::Dim(t, a) => {
                            dims.insert((t, a));
                        }
                        Leaf::Scalar(s) => stack.push(s),
                    });
                }
            }
        };
    for &e in &exprs {
        let expr = f.expr(e);
        stack.extend(expr.inputs.iter().copied());
        for &o in &expr.outputs {
            scan_type(o, false, &mut stack, &mut dims);
        }
    }
    while let Some(v) = stack.pop() {
        if !seen.insert(v) || produced.contains(&v) {
            continue;
        }
        let val = f.val(v);
        if val.constant().is_some() {
            constants.push(v);
        } else if g.is_input[v.index()] || val.is_tensor() || val.definition.is_none() {
            value_inputs.push(v);
            scan_type(v, !g.is_input[v.index()], &mut stack, &mut dims);
        } else if let Some(def) = val.definition {
            // A computed scalar: recompute its cone here.
            cone.push(def);
            let expr = f.expr(def);
            produced.extend(expr.outputs.iter().copied());
            stack.extend(expr.inputs.iter().copied());
        }
    }
    value_inputs.sort_unstable();
    constants.sort_unstable();
    let input_set: FxHashSet<ValId> = value_inputs.iter().copied().collect();
    let mut extents: Vec<(ValId, u32)> = dims
        .into_iter()
        .filter(|(t, _)| !input_set.contains(t))
        .collect();
    extents.sort_unstable();

    let mut all: Vec<ExprId> = exprs;
    all.extend(cone);
    all.sort_unstable();
    all.dedup();
    Reads {
        value_inputs,
        constants,
        extents,
        all,
    }
}

/// Segment ids of the original values and extents the segment holds.
fn number(f: &Fusion, r: &Reads) -> (FxHashMap<ValId, ValId>, ExtentMap) {
    let Reads {
        value_inputs,
        constants,
        extents,
        all,
    } = r;
    // Ids: inputs first (in input order), then constants, then expression outputs in
    // expression order, all assigned before any type is remapped.
    let mut map: FxHashMap<ValId, ValId> = FxHashMap::default();
    let mut ext_map: FxHashMap<(ValId, u32), ValId> = FxHashMap::default();
    let mut next = 0u32;
    let mut fresh = || {
        next += 1;
        ValId::new(next - 1)
    };
    for &v in value_inputs {
        map.insert(v, fresh());
    }
    for &d in extents {
        ext_map.insert(d, fresh());
    }
    for &c in constants {
        map.insert(c, fresh());
    }
    for &e in all {
        for &o in &f.expr(e).outputs {
            map.insert(o, fresh());
        }
    }
    (map, ext_map)
}

/// The segment's fusion: its inputs (received tensors declared contiguous), extent
/// scalars, constants, the copied expressions with remapped types, and its outputs.
fn segment_fusion(
    g: &Graph<'_>,
    r: &Reads,
    map: &FxHashMap<ValId, ValId>,
    ext_map: &ExtentMap,
    outputs: &[ValId],
) -> Fusion {
    let f = g.fusion;
    let Reads {
        value_inputs,
        constants,
        extents,
        all,
    } = r;
    let mut fusion = Fusion::new();
    fusion.segment = true;
    for &v in value_inputs {
        let val = f.val(v);
        let kind = match &val.kind {
            ValKind::Tensor(t) if !g.is_input[v.index()] => {
                let dims: Vec<IterDomain> = t
                    .shape()
                    .map(|d| IterDomain {
                        extent: remap_extent(&d.extent, map, ext_map),
                        kind: match d.kind {
                            IterKind::Expanded => IterKind::Iteration,
                            k => k,
                        },
                    })
                    .collect();
                ValKind::Tensor(TensorType::contiguous(dims))
            }
            ValKind::Tensor(t) => ValKind::Tensor(remap_type(t, map, ext_map)),
            ValKind::Scalar(c) => ValKind::Scalar(*c),
        };
        fusion.push_val(Val {
            dtype: val.dtype,
            kind,
            definition: None,
        });
    }
    for _ in extents {
        fusion.push_val(Val {
            dtype: DataType::I64,
            kind: ValKind::Scalar(None),
            definition: None,
        });
    }
    for &c in constants {
        let mut val = f.val(c).clone();
        val.definition = None;
        fusion.push_val(val);
    }
    fusion.inputs = (0..(value_inputs.len() + extents.len()) as u32)
        .map(ValId::new)
        .collect();
    for &e in all {
        let expr = f.expr(e);
        let mut outs: SmallVec<[ValId; 1]> = SmallVec::new();
        for &o in &expr.outputs {
            let val = f.val(o);
            let kind = match &val.kind {
                ValKind::Tensor(t) => ValKind::Tensor(remap_type(t, map, ext_map)),
                ValKind::Scalar(c) => ValKind::Scalar(*c),
            };
            outs.push(fusion.push_val(Val {
                dtype: val.dtype,
                kind,
                definition: None,
            }));
        }
        let inputs = expr.inputs.iter().map(|i| map[i]).collect();
        fusion.push_expr(Expr {
            op: expr.op.clone(),
            inputs,
            outputs: outs,
        });
    }
    fusion.outputs = outputs
        .iter()
        .map(|o| Output {
            val: map[o],
            alias_of: None,
        })
        .collect();
    fusion
}

/// `exprs` (nodes) without the ones that contribute to none of `outputs`.
pub(crate) fn prune(g: &Graph<'_>, exprs: &[ExprId], outputs: &[ValId]) -> Vec<ExprId> {
    let f = g.fusion;
    let mut needed: FxHashSet<ValId> = outputs.iter().copied().collect();
    let mut keep = vec![false; exprs.len()];
    for (k, &e) in exprs.iter().enumerate().rev() {
        if f.expr(e).outputs.iter().any(|o| needed.contains(o)) {
            keep[k] = true;
            needed.extend(g.reads[g.node_of[e.index()] as usize].iter().copied());
        }
    }
    exprs
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(&e, _)| e)
        .collect()
}

fn remap_type(
    t: &TensorType,
    map: &FxHashMap<ValId, ValId>,
    ext_map: &FxHashMap<(ValId, u32), ValId>,
) -> TensorType {
    let mut t = t.clone();
    for d in &mut t.domain {
        d.extent = remap_extent(&d.extent, map, ext_map);
    }
    t
}

/// An original extent in segment ids: `T.size(a)` of a received input stays a dim of
/// that input, any other becomes its extent input; scalars go through `map`.
fn remap_extent(
    e: &Extent,
    map: &FxHashMap<ValId, ValId>,
    ext_map: &FxHashMap<(ValId, u32), ValId>,
) -> Extent {
    match e {
        Extent::Const(c) => Extent::Const(*c),
        Extent::Dim { tensor, axis } => match map.get(tensor) {
            Some(&t) => Extent::Dim {
                tensor: t,
                axis: *axis,
            },
            None => Extent::Scalar(ext_map[&(*tensor, *axis)]),
        },
        Extent::Scalar(v) => Extent::Scalar(map[v]),
        Extent::Op(op, a, b) => Extent::Op(
            *op,
            Box::new(remap_extent(a, map, ext_map)),
            Box::new(remap_extent(b, map, ext_map)),
        ),
    }
}
