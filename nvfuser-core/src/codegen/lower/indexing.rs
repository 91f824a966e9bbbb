//! Index math: loop indices pushed backward through a consumer's transforms to its root
//! dims, mapped to each input's dims, and pushed forward through a producer's own
//! transforms; global offsets by strides, register and shared offsets by allocation.

use std::collections::HashMap;
use std::ops::{Add, Div, Mul, Rem};

use super::{ext, is_broadcast, shape_field, unsupported, Key, Lower};
use crate::codegen::index::{Idx, ShapeField};
use crate::codegen::kir::{Expr, Func};
use crate::ir::{Extent, IterKind, Op, ValId};
use crate::sched::{
    DomId, DomTransform, MemoryType, ParallelType, SExpr, SchedResult, TensorDomain,
};

impl Lower<'_> {
    fn key_index(&self, k: Key) -> Idx {
        if let Some(i) = self.env.get(&k) {
            return i.clone();
        }
        let d = self.key_dom(k);
        match d.parallel.cuda_index() {
            Some(b) if d.kind != IterKind::Broadcast => Idx::var(b),
            _ => Idx::Const(0),
        }
    }

    /// Indices of every dim of `tv`'s domain from the current loop indices.
    pub(super) fn consumer_indices(&self, tv: ValId) -> HashMap<DomId, Idx> {
        let d = &self.t(tv).domain;
        let mut idx = HashMap::new();
        // Loop dims shared with the tensor that owns the loop (compute-at), as that
        // tensor's doms: a shared loop runs over the owner's index space, which is wider
        // than `tv`'s where `tv` has a broadcast the owner resolves.
        let mut twin: HashMap<DomId, (ValId, DomId)> = HashMap::new();
        for (i, &l) in d.loop_dims.iter().enumerate() {
            let dom = d.dom(l);
            let k = self.key(tv, i);
            if k.0 != tv {
                twin.insert(l, (k.0, self.t(k.0).domain.loop_dims[k.1]));
            }
            let v = if dom.kind == IterKind::Broadcast || dom.parallel == ParallelType::Vectorize {
                Idx::Const(0)
            } else {
                self.key_index(k)
            };
            idx.insert(l, v);
        }
        for tr in d.transforms.iter().rev() {
            match tr {
                DomTransform::Split {
                    input,
                    outer,
                    inner,
                    ..
                } => {
                    let (Some(o), Some(i)) = (idx.get(outer).cloned(), idx.get(inner).cloned())
                    else {
                        continue;
                    };
                    let v = o.mul(ext(&d.dom(*inner).extent)).add(i);
                    idx.insert(*input, v);
                    if let (Some(&(ow, a)), Some(&(ow2, b))) = (twin.get(outer), twin.get(inner)) {
                        let od = &self.t(ow).domain;
                        let src = od.transforms.iter().find_map(|t| match t {
                            DomTransform::Split {
                                input: x,
                                outer: a2,
                                inner: b2,
                                ..
                            } if ow == ow2 && *a2 == a && *b2 == b => Some(*x),
                            _ => None,
                        });
                        if let Some(x) = src {
                            twin.insert(*input, (ow, x));
                        }
                    }
                }
                DomTransform::Merge { outer, inner, out } => {
                    let Some(m) = idx.get(out).cloned() else {
                        continue;
                    };
                    let mut e = ext(&d.dom(*inner).extent);
                    if let Some(&(ow, o)) = twin.get(out) {
                        let od = &self.t(ow).domain;
                        let src = od.transforms.iter().find_map(|t| match t {
                            DomTransform::Merge {
                                outer: a2,
                                inner: b2,
                                out: o2,
                            } if *o2 == o => Some((*a2, *b2)),
                            _ => None,
                        });
                        if let Some((a2, b2)) = src {
                            // The owner's inner extent where `tv`'s inner is a broadcast
                            // the owner resolves (the merged loop runs over its extent).
                            if is_broadcast(d.dom(*inner))
                                && !is_broadcast(od.dom(b2))
                                && d.dom(*inner).extent != od.dom(b2).extent
                            {
                                e = ext(&od.dom(b2).extent);
                            }
                            twin.insert(*outer, (ow, a2));
                            twin.insert(*inner, (ow, b2));
                        }
                    }
                    idx.insert(*outer, m.clone().div(e.clone()));
                    idx.insert(*inner, m.rem(e));
                }
            }
        }
        for (&k, v) in idx.iter_mut() {
            if d.dom(k).kind == IterKind::Broadcast {
                *v = Idx::Const(0);
            }
        }
        idx
    }

    /// For each shape dim of input `p` of expression `e`, the root dim of the output.
    fn input_map(&self, e: &SExpr, p: ValId) -> SchedResult<Vec<Option<DomId>>> {
        let cd = &self.t(e.output).domain;
        let prank = self.shape_kinds(p).len();
        let root = &cd.root;
        let map: Vec<Option<DomId>> = match &e.op {
            Op::Broadcast { mask } => {
                let kept: Vec<DomId> = root
                    .iter()
                    .zip(mask)
                    .filter(|(_, m)| !**m)
                    .map(|(r, _)| *r)
                    .collect();
                kept.into_iter().map(Some).collect()
            }
            Op::Permute { perm } => {
                let mut m = vec![None; prank];
                for (j, &pj) in perm.iter().enumerate() {
                    if let (Some(slot), Some(&r)) = (m.get_mut(pj), root.get(j)) {
                        *slot = Some(r);
                    }
                }
                m
            }
            Op::Squeeze { axes } => {
                let mut it = root.iter();
                (0..prank)
                    .map(|j| {
                        if axes.contains(&j) {
                            None
                        } else {
                            it.next().copied()
                        }
                    })
                    .collect()
            }
            _ => root.iter().map(|&r| Some(r)).collect(),
        };
        if map.len() != prank {
            return unsupported(format!(
                "{} from T{} ({} dims) to T{} ({} root dims)",
                e.op.name(),
                p.id(),
                prank,
                e.output.id(),
                root.len()
            ));
        }
        Ok(map)
    }

    pub(super) fn global_offset(&self, tv: ValId, shape_idx: &[Idx]) -> Idx {
        let t = self.t(tv);
        let doms = shape_doms(&t.domain);
        // An expanded dim has stride 0 only in a fusion input; a tensor this kernel
        // writes (an output) is allocated in full, so its expanded dims are indexed.
        let is_input = self.sf.fusion().input_position(tv).is_some();
        let mut off = Idx::Const(0);
        for (j, &d) in doms.iter().enumerate() {
            match t.domain.dom(d).kind {
                IterKind::Iteration => {}
                IterKind::Expanded if !is_input => {}
                _ => continue,
            }
            let stride =
                if t.contiguity.get(j) == Some(&Some(true)) && t.stride_order.get(j) == Some(&0) {
                    Idx::Const(1)
                } else {
                    shape_field(tv.id(), ShapeField::Stride, j)
                };
            off = off.add(shape_idx[j].clone().mul(stride));
        }
        off
    }

    pub(super) fn local_offset(
        &self,
        tv: ValId,
        loop_idx: &dyn Fn(usize) -> Idx,
    ) -> SchedResult<Idx> {
        let (dims, exts) = self.padded_alloc_dims(tv)?;
        let mut off = Idx::Const(0);
        for (n, &i) in dims.iter().enumerate() {
            let stride: i64 = exts[n + 1..].iter().product();
            off = off.add(loop_idx(i).mul(Idx::Const(stride)));
        }
        Ok(off)
    }

    /// The element of input tensor `p` read by expression `e` at the current indices
    /// (computed right here when `p` is recomputed at each use).
    pub(super) fn read(
        &self,
        e: &SExpr,
        p: ValId,
        cidx: &HashMap<DomId, Idx>,
    ) -> SchedResult<Expr> {
        if let Some(r) = self.s.recomputed(p) {
            let map = self.input_map(e, p)?;
            let idx: Vec<Idx> = map
                .iter()
                .map(|m| {
                    m.and_then(|c| cidx.get(&c).cloned())
                        .unwrap_or(Idx::Const(0))
                })
                .collect();
            return self.recompute(r, &idx);
        }
        let off = self.read_offset(e, p, cidx)?;
        Ok(self.element(p, &off))
    }

    /// `T3[off]`; for an output this kernel stores and reads back (by the storing
    /// thread: `collect_bindings`, `read_offset`), a volatile load, since NVRTC merged
    /// `c ? in[i] : out[i]` into one read-only load issued before the store.
    pub(super) fn element(&self, p: ValId, off: &Idx) -> Expr {
        let el = Expr::elem(format!("T{}", p.id()), off.clone());
        if self.t(p).memory == MemoryType::Global && self.s.definition(p).is_some() {
            Expr::call(Func::LoadVolatile, vec![el.addr_of()])
        } else {
            el
        }
    }

    fn read_offset(&self, e: &SExpr, p: ValId, cidx: &HashMap<DomId, Idx>) -> SchedResult<Idx> {
        let map = self.input_map(e, p)?;
        let pt = self.t(p);
        let pd = &pt.domain;
        let pshape = shape_doms(pd);
        let seeds: Vec<Idx> = pshape
            .iter()
            .zip(&map)
            .map(|(&pdim, m)| {
                // Only a broadcast dim reads element 0: an expanded dim of a tensor
                // this kernel computes holds every element (an input's has stride 0).
                if pd.dom(pdim).kind == IterKind::Broadcast {
                    Idx::Const(0)
                } else {
                    m.and_then(|c| cidx.get(&c).cloned())
                        .unwrap_or(Idx::Const(0))
                }
            })
            .collect();
        if pt.memory == MemoryType::Global {
            let off = self.global_offset(p, &seeds);
            // An output this kernel stores and reads back: the reader must load the
            // element the same thread stored at this point of the loops (the bindings
            // check compares parallel types; this compares the offsets).
            if self.s.definition(p).is_some() {
                let stored = self.store_offset(p, &self.consumer_indices(p))?;
                if stored != off {
                    return unsupported(format!(
                        "T{} reads back T{} at [{off}], where this thread stored [{stored}]",
                        e.output.id(),
                        p.id()
                    ));
                }
            }
            return Ok(off);
        }
        let cd = &self.t(e.output).domain;
        let mut pmap: HashMap<DomId, DomId> = HashMap::new();
        let mut pidx: HashMap<DomId, Idx> = HashMap::new();
        for (j, &pdim) in pshape.iter().enumerate() {
            pidx.insert(pdim, seeds[j].clone());
            if let Some(c) = map[j] {
                pmap.insert(pdim, c);
            }
        }
        for tr in &pd.transforms {
            match tr {
                DomTransform::Split {
                    input,
                    outer,
                    inner,
                    factor,
                    inner_split,
                } => {
                    let twin = pmap.get(input).and_then(|&ci| {
                        cd.transforms.iter().find_map(|ct| match ct {
                            DomTransform::Split {
                                input: i2,
                                outer: o2,
                                inner: n2,
                                factor: f2,
                                inner_split: s2,
                            } if *i2 == ci && f2 == factor && s2 == inner_split => Some((*o2, *n2)),
                            _ => None,
                        })
                    });
                    if let Some((o2, n2)) = twin {
                        pmap.insert(*outer, o2);
                        pmap.insert(*inner, n2);
                        let bc = pd.dom(*input).kind == IterKind::Broadcast;
                        let get = |c: DomId| {
                            if bc {
                                Idx::Const(0)
                            } else {
                                cidx.get(&c).cloned().unwrap_or(Idx::Const(0))
                            }
                        };
                        pidx.insert(*outer, get(o2));
                        pidx.insert(*inner, get(n2));
                    } else if let Some(v) = pidx.get(input).cloned() {
                        let ie = ext(&pd.dom(*inner).extent);
                        pidx.insert(*outer, v.clone().div(ie.clone()));
                        pidx.insert(*inner, v.rem(ie));
                    }
                }
                DomTransform::Merge { outer, inner, out } => {
                    // A twin merge spans the same index space only where no side is a
                    // broadcast the other resolves (merge(i{2}, b{1}) in the producer
                    // has 2 elements, merge(i{2}, i{N}) in the consumer 2N): otherwise
                    // the producer's index is composed from its inputs' (i / N here).
                    // (A broadcast promoted to the extent it resolves to, see
                    // `transform_like`, spans the consumer's space.)
                    let same_space = |pdim: DomId, cdim: DomId| {
                        let (a, b) = (pd.dom(pdim), cd.dom(cdim));
                        is_broadcast(a) == is_broadcast(b) || a.extent == b.extent
                    };
                    let twin = match (pmap.get(outer), pmap.get(inner)) {
                        (Some(&a), Some(&b)) if same_space(*outer, a) && same_space(*inner, b) => {
                            cd.transforms.iter().find_map(|ct| match ct {
                                DomTransform::Merge {
                                    outer: a2,
                                    inner: b2,
                                    out: o2,
                                } if *a2 == a && *b2 == b => Some(*o2),
                                _ => None,
                            })
                        }
                        _ => None,
                    };
                    if let Some(o2) = twin {
                        pmap.insert(*out, o2);
                        pidx.insert(*out, cidx.get(&o2).cloned().unwrap_or(Idx::Const(0)));
                    } else if let (Some(a), Some(b)) =
                        (pidx.get(outer).cloned(), pidx.get(inner).cloned())
                    {
                        pidx.insert(*out, a.mul(ext(&pd.dom(*inner).extent)).add(b));
                    }
                }
            }
        }
        // A register holds the elements of its own thread only: each thread-bound loop
        // dim of the producer must be indexed by the reader's own thread index.
        if pt.memory == MemoryType::Local {
            for &l in &pd.loop_dims {
                let d = pd.dom(l);
                let Some(b) = d.parallel.cuda_index() else {
                    continue;
                };
                // (A reduced dim's result is with the thread the reduction left it
                // in; the reduction lowering places its readers.)
                if d.kind != IterKind::Iteration || d.extent == Extent::Const(1) {
                    continue;
                }
                let i = pidx.get(&l).cloned().unwrap_or(Idx::Const(0));
                if i != Idx::var(b) {
                    return unsupported(format!(
                        "T{} reads register tensor T{} at {} = {i}, an element another thread holds",
                        e.output.id(), p.id(), b
                    ));
                }
            }
        }
        self.local_offset(p, &|i| {
            pidx.get(&pd.loop_dims[i]).cloned().unwrap_or(Idx::Const(0))
        })
    }

    /// Where expression outputs are stored: `T3[...]`.
    pub(super) fn store_offset(&self, tv: ValId, cidx: &HashMap<DomId, Idx>) -> SchedResult<Idx> {
        let t = self.t(tv);
        if t.memory == MemoryType::Global {
            let shape: Vec<Idx> = shape_doms(&t.domain)
                .iter()
                .map(|d| cidx.get(d).cloned().unwrap_or(Idx::Const(0)))
                .collect();
            return Ok(self.global_offset(tv, &shape));
        }
        let d = &t.domain;
        self.local_offset(tv, &|i| {
            cidx.get(&d.loop_dims[i]).cloned().unwrap_or(Idx::Const(0))
        })
    }
}

pub(super) fn shape_doms(d: &TensorDomain) -> Vec<DomId> {
    d.logical
        .iter()
        .copied()
        .filter(|&l| d.dom(l).kind != IterKind::Reduction)
        .collect()
}

/// Pushes logical indices forward through a tensor's transforms (split: div/mod,
/// merge: linearize), filling in the loop dims' indices.
pub(super) fn forward_indices(d: &TensorDomain, idx: &mut HashMap<DomId, Idx>) {
    for tr in &d.transforms {
        match tr {
            DomTransform::Split {
                input,
                outer,
                inner,
                ..
            } => {
                if let Some(v) = idx.get(input).cloned() {
                    let ie = ext(&d.dom(*inner).extent);
                    idx.insert(*outer, v.clone().div(ie.clone()));
                    idx.insert(*inner, v.rem(ie));
                }
            }
            DomTransform::Merge { outer, inner, out } => {
                if let (Some(a), Some(b)) = (idx.get(outer).cloned(), idx.get(inner).cloned()) {
                    idx.insert(*out, a.mul(ext(&d.dom(*inner).extent)).add(b));
                }
            }
        }
    }
}
