//! The expression graph the segmenter works on.
//!
//! Nodes are the live *tensor* expressions of a fusion (at least one tensor output), in
//! arena order. Scalar expressions are not nodes: a segment that needs a computed scalar
//! recomputes it (its whole scalar cone is copied into the segment), because scalars
//! cannot be segment outputs. A node "reads" every computed tensor it needs from another
//! node: its tensor inputs, and the tensors that the cones of its scalars read (`size`),
//! including the scalars that appear in the extents of its inputs' and outputs' types.

use rustc_hash::FxHashSet;
use smallvec::SmallVec;

use crate::ir::{ExprId, Extent, Fusion, Op, ValId, ValKind};

/// "No node" in index maps.
pub(crate) const NONE: u32 = u32::MAX;

/// A leaf of an extent: the size of an input tensor's dim, or a scalar value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Leaf {
    Dim(ValId, u32),
    Scalar(ValId),
}

/// Calls `f` on every leaf of `e`.
pub(crate) fn for_each_leaf(e: &Extent, f: &mut dyn FnMut(Leaf)) {
    match e {
        Extent::Const(_) => {}
        Extent::Dim { tensor, axis } => f(Leaf::Dim(*tensor, *axis)),
        Extent::Scalar(v) => f(Leaf::Scalar(*v)),
        Extent::Op(_, a, b) => {
            for_each_leaf(a, f);
            for_each_leaf(b, f);
        }
    }
}

/// Calls `f` on every scalar that the extents of `v`'s type mention.
fn for_each_type_scalar(fusion: &Fusion, v: ValId, f: &mut dyn FnMut(ValId)) {
    if let ValKind::Tensor(t) = &fusion.val(v).kind {
        for d in &t.domain {
            for_each_leaf(&d.extent, &mut |l| {
                if let Leaf::Scalar(s) = l {
                    f(s)
                }
            });
        }
    }
}

/// The segmenter's view of a fusion (see the module documentation).
pub(crate) struct Graph<'f> {
    pub fusion: &'f Fusion,
    /// Live tensor expressions, in arena order.
    pub nodes: Vec<ExprId>,
    /// Per expression: its node index, or [`NONE`].
    pub node_of: Vec<u32>,
    /// Per node: the computed tensors it needs (deduplicated).
    pub reads: Vec<SmallVec<[ValId; 4]>>,
    /// Per node: its producer nodes, each with "the edge crosses a `segment_set`".
    pub producers: Vec<SmallVec<[(u32, bool); 4]>>,
    /// Per value: the nodes that read it.
    pub readers: Vec<SmallVec<[u32; 2]>>,
    /// Per value: a fusion output.
    pub is_output: Vec<bool>,
    /// Per value: a fusion input.
    pub is_input: Vec<bool>,
    /// Some `segment_set` output is read by a node: the fusion cannot be one segment.
    pub forced_boundary: bool,
}

impl<'f> Graph<'f> {
    pub fn new(fusion: &'f Fusion) -> Self {
        let nv = fusion.num_vals();
        let ne = fusion.num_exprs();
        let mut is_output = vec![false; nv];
        for o in fusion.outputs() {
            is_output[o.val.index()] = true;
        }
        let mut is_input = vec![false; nv];
        for &i in fusion.inputs() {
            is_input[i.index()] = true;
        }

        // Liveness: outputs, then backwards through expression inputs and the scalars
        // in the extents of every type an expression touches.
        let mut live_val = is_output.clone();
        let mut live_expr = vec![false; ne];
        for (id, e) in fusion.exprs.iter().enumerate().rev() {
            if !e.outputs.iter().any(|o| live_val[o.index()]) {
                continue;
            }
            live_expr[id] = true;
            for &v in e.inputs.iter().chain(&e.outputs) {
                live_val[v.index()] = true;
                for_each_type_scalar(fusion, v, &mut |s| live_val[s.index()] = true);
            }
        }
        // A live output's own type may mention scalars too.
        for o in fusion.outputs() {
            for_each_type_scalar(fusion, o.val, &mut |s| live_val[s.index()] = true);
        }

        // Per value: the computed tensors a segment must receive to have this value
        // without producing it. Arena order is topological, so one forward pass does.
        let mut need: Vec<SmallVec<[ValId; 2]>> = vec![SmallVec::new(); nv];
        let push = |set: &mut SmallVec<[ValId; 2]>, v: ValId| {
            if !set.contains(&v) {
                set.push(v);
            }
        };
        let type_need = |need: &Vec<SmallVec<[ValId; 2]>>, v: ValId| {
            let mut set: SmallVec<[ValId; 2]> = SmallVec::new();
            for_each_type_scalar(fusion, v, &mut |s| {
                for &t in &need[s.index()] {
                    if !set.contains(&t) {
                        set.push(t);
                    }
                }
            });
            set
        };
        for &i in fusion.inputs() {
            if fusion.val(i).is_tensor() {
                need[i.index()] = type_need(&need, i);
            }
        }
        for (_, e) in fusion.exprs() {
            for &o in &e.outputs {
                let val = fusion.val(o);
                let mut set = SmallVec::new();
                if val.is_tensor() {
                    push(&mut set, o);
                    for t in type_need(&need, o) {
                        push(&mut set, t);
                    }
                } else {
                    for &i in &e.inputs {
                        for &t in &need[i.index()] {
                            push(&mut set, t);
                        }
                    }
                }
                need[o.index()] = set;
            }
        }

        let mut nodes = Vec::new();
        let mut node_of = vec![NONE; ne];
        for (id, e) in fusion.exprs() {
            if live_expr[id.index()] && e.outputs.iter().any(|&o| fusion.val(o).is_tensor()) {
                node_of[id.index()] = nodes.len() as u32;
                nodes.push(id);
            }
        }

        let mut reads = Vec::with_capacity(nodes.len());
        let mut producers = Vec::with_capacity(nodes.len());
        let mut readers: Vec<SmallVec<[u32; 2]>> = vec![SmallVec::new(); nv];
        let mut forced_boundary = false;
        for (n, &id) in nodes.iter().enumerate() {
            let e = fusion.expr(id);
            let mut set: SmallVec<[ValId; 4]> = SmallVec::new();
            let mut add = |t: ValId| {
                if !set.contains(&t) {
                    set.push(t);
                }
            };
            for &i in &e.inputs {
                need[i.index()].iter().for_each(|&t| add(t));
            }
            for &o in &e.outputs {
                for_each_type_scalar(fusion, o, &mut |s| {
                    need[s.index()].iter().for_each(|&t| add(t))
                });
            }
            let mut prods: SmallVec<[(u32, bool); 4]> = SmallVec::new();
            let mut seen = FxHashSet::default();
            for &t in &set {
                readers[t.index()].push(n as u32);
                let Some(def) = fusion.val(t).definition else {
                    continue;
                };
                let p = node_of[def.index()];
                if p == NONE {
                    continue;
                }
                let barrier = matches!(fusion.expr(def).op, Op::SegmentSet);
                forced_boundary |= barrier;
                if seen.insert(p) {
                    prods.push((p, barrier));
                } else if barrier {
                    if let Some(x) = prods.iter_mut().find(|x| x.0 == p) {
                        x.1 = true;
                    }
                }
            }
            reads.push(set);
            producers.push(prods);
        }

        Graph {
            fusion,
            nodes,
            node_of,
            reads,
            producers,
            readers,
            is_output,
            is_input,
            forced_boundary,
        }
    }
}
