//! Lowering: loop nests, index math, predicates, allocations and reductions.
//!
//! - Every loop dim of a tensor has a *loop key*: a producer's dims below its
//!   compute-at position take the key of the consumer's dim at the same position, so
//!   producer and consumer share those loops. Each expression is placed in the nest of
//!   its output's keys; consecutive expressions share the common prefix of open loops.
//! - Grid/block dims, vectorized dims, broadcast dims and extent-1 dims make no loop.
//! - Indices: an expression's loop indices are pushed backward through its output's
//!   transforms to its root dims; the root dims map to each input's logical dims; a
//!   global input is indexed by strides, a register/shared input by pushing the
//!   logical indices forward through the input's own transforms (reusing the
//!   consumer's loop index wherever the two tensors were split alike).
//! - Predicates: a root index is checked against its extent when a split below it is
//!   not provably divisible; global writes are guarded by `threadIdx.* == 0` /
//!   `blockIdx.* == 0` for thread dims the tensor does not use or reduces over.
//! - Reductions accumulate in a register, are initialized before their serial
//!   reduction loops, and are finished after them by a block all-reduce over
//!   `threadIdx.x` when a reduction dim is bound to it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::{Add, Div, Mul, Rem};

use super::abi::{cuda_type, IndexType, KernelAbi, Param, ParamKind};
use super::index::Idx;
use super::kir::{Requirement, Stmt};
use super::{Kernel, KernelOptions, LaunchDims};
use crate::dtype::{promote, DataType, Operand, ScalarValue};
use crate::ir::{
    BinaryOp, BinaryRule, Distribution, Extent, IterKind, Op, ReductionOp, TernaryOp, UnaryRule,
    ValId,
};
use crate::sched::{
    DomId, DomTransform, MemoryType, ParallelType, SExpr, SchedResult, Schedule, ScheduleError,
    ScheduledFusion, TensorDomain, TensorSchedule,
};

type Key = (ValId, usize);

enum Node {
    Loop { key: Key, body: Vec<Node> },
    Expr(usize),
}

struct Lower<'a> {
    sf: &'a ScheduledFusion,
    s: &'a Schedule,
    env: HashMap<Key, Idx>,
    next_var: usize,
    /// Register allocations per scope (None = kernel top).
    allocs: HashMap<Option<Key>, Vec<ValId>>,
    /// Reduction expressions anchored at a serial reduction loop.
    anchors: HashMap<Key, Vec<usize>>,
    anchored: HashSet<usize>,
    shared: Vec<(String, DataType, i64)>,
    bound: BTreeMap<ParallelType, Extent>,
    requirements: Vec<Requirement>,
}

fn unsupported<T>(m: String) -> SchedResult<T> {
    Err(ScheduleError::Unsupported(m))
}

fn dim_name(t: u32, a: u32) -> String {
    format!("T{t}_shape.size[{a}]")
}

fn scalar_name(v: u32) -> String {
    format!("s{v}")
}

fn ext(e: &Extent) -> Idx {
    Idx::from_extent(e, &dim_name, &scalar_name)
}

pub(super) fn lower(sf: &ScheduledFusion, opts: &KernelOptions) -> SchedResult<Kernel> {
    let s = sf.schedule();
    let mut l = Lower {
        sf,
        s,
        env: HashMap::new(),
        next_var: 0,
        allocs: HashMap::new(),
        anchors: HashMap::new(),
        anchored: HashSet::new(),
        shared: Vec::new(),
        bound: BTreeMap::new(),
        requirements: Vec::new(),
    };
    l.collect_bindings()?;
    let tree = l.build_tree()?;
    l.plan_allocs_and_anchors()?;
    let mut body = Vec::new();
    for &tv in l.allocs.get(&None).cloned().unwrap_or_default().iter() {
        body.push(l.alloc_stmt(tv)?);
    }
    for n in &tree {
        l.emit_node(n, &mut body)?;
    }
    let abi = l.abi(opts);
    let one = || Extent::Const(1);
    let get = |p: ParallelType| l.bound.get(&p).cloned().unwrap_or_else(one);
    let launch = LaunchDims {
        grid: [
            get(ParallelType::BIDx),
            get(ParallelType::BIDy),
            get(ParallelType::BIDz),
        ],
        block: [
            get(ParallelType::TIDx),
            get(ParallelType::TIDy),
            get(ParallelType::TIDz),
        ],
    };
    Ok(Kernel {
        abi,
        launch,
        requirements: l.requirements,
        shared: l.shared,
        body,
    })
}

impl<'a> Lower<'a> {
    fn t(&self, tv: ValId) -> &'a TensorSchedule {
        &self.s.tensors[&tv]
    }

    fn collect_bindings(&mut self) -> SchedResult<()> {
        for (&tv, t) in &self.s.tensors {
            if self.s.is_input(tv) {
                continue;
            }
            if t.memory == MemoryType::Global && !self.s.is_output(tv) {
                return unsupported(format!(
                    "T{}: global intermediates (no work buffers yet)",
                    tv.0
                ));
            }
            for &l in &t.domain.loop_dims {
                let d = t.domain.dom(l);
                if d.parallel.is_thread() && d.kind != IterKind::Broadcast {
                    self.bound
                        .entry(d.parallel)
                        .or_insert_with(|| d.extent.clone());
                }
            }
        }
        Ok(())
    }

    fn key(&self, tv: ValId, i: usize) -> Key {
        match self.t(tv).compute_at {
            Some(ca) if i < ca.pos => self.key(ca.consumer, i),
            _ => (tv, i),
        }
    }

    fn key_dom(&self, k: Key) -> &'a crate::sched::Dom {
        self.t(k.0).domain.loop_dom(k.1)
    }

    fn makes_loop(&self, k: Key) -> bool {
        let d = self.key_dom(k);
        !d.parallel.is_thread()
            && d.parallel != ParallelType::Vectorize
            && d.kind != IterKind::Broadcast
            && d.extent != Extent::Const(1)
    }

    fn nest(&self, tv: ValId) -> Vec<Key> {
        (0..self.t(tv).domain.loop_dims.len())
            .map(|i| self.key(tv, i))
            .filter(|&k| self.makes_loop(k))
            .collect()
    }

    fn build_tree(&self) -> SchedResult<Vec<Node>> {
        let mut root: Vec<Node> = Vec::new();
        let mut open: Vec<Key> = Vec::new();
        let mut closed: HashSet<Key> = HashSet::new();
        for (ei, e) in self.s.exprs.iter().enumerate() {
            let nest = self.nest(e.output);
            let common = open.iter().zip(&nest).take_while(|(a, b)| a == b).count();
            for k in open.drain(common..) {
                closed.insert(k);
            }
            for k in &nest[common..] {
                if closed.contains(k) {
                    return unsupported(format!(
                        "T{} needs loop {} of T{} again after it was closed; inline its producers or reorder",
                        e.output.0, k.1, k.0 .0
                    ));
                }
            }
            let mut scope = &mut root;
            for _ in 0..common {
                match scope.last_mut() {
                    Some(Node::Loop { body, .. }) => scope = body,
                    _ => return unsupported("loop nest bookkeeping".into()),
                }
            }
            for &k in &nest[common..] {
                scope.push(Node::Loop {
                    key: k,
                    body: Vec::new(),
                });
                match scope.last_mut() {
                    Some(Node::Loop { body, .. }) => scope = body,
                    _ => return unsupported("loop nest bookkeeping".into()),
                }
                open.push(k);
            }
            scope.push(Node::Expr(ei));
        }
        Ok(root)
    }

    /// The scope (loop key) a register tensor is allocated in, and its size.
    fn alloc_scope(&self, tv: ValId) -> Option<Key> {
        let pos = self.t(tv).compute_at.map_or(0, |c| c.pos);
        (0..pos)
            .map(|i| self.key(tv, i))
            .rfind(|&k| self.makes_loop(k))
    }

    fn plan_allocs_and_anchors(&mut self) -> SchedResult<()> {
        for (ei, e) in self.s.exprs.iter().enumerate() {
            let tv = e.output;
            let t = self.t(tv);
            if t.memory != MemoryType::Global {
                if t.memory == MemoryType::Shared {
                    return unsupported(format!(
                        "T{}: shared-memory tensors are not lowered yet",
                        tv.0
                    ));
                }
                let scope = self.alloc_scope(tv);
                self.allocs.entry(scope).or_default().push(tv);
            }
            if is_reduction(&t.domain) {
                let anchor = (0..t.domain.loop_dims.len()).find(|&i| {
                    t.domain.loop_dom(i).kind == IterKind::Reduction
                        && self.makes_loop(self.key(tv, i))
                });
                if let Some(i) = anchor {
                    self.anchors.entry(self.key(tv, i)).or_default().push(ei);
                    self.anchored.insert(ei);
                }
                let tidx_red = t.domain.loop_dims.iter().any(|&l| {
                    let d = t.domain.dom(l);
                    d.kind == IterKind::Reduction && d.parallel == ParallelType::TIDx
                });
                if tidx_red {
                    if self.bound.contains_key(&ParallelType::TIDy)
                        || self.bound.contains_key(&ParallelType::TIDz)
                    {
                        return unsupported(
                            "block reductions in kernels that use threadIdx.y/z".into(),
                        );
                    }
                    let e = self.bound[&ParallelType::TIDx].clone();
                    if e.as_const().is_none() {
                        self.requirements.push(Requirement::Divisible {
                            extent: e,
                            by: 32,
                            why: format!("block reduction of T{} over threadIdx.x", tv.0),
                        });
                    }
                    self.shared.push((format!("T{}_smem", tv.0), t.dtype, 32));
                }
            }
        }
        Ok(())
    }

    /// Size of a register tensor and the loop positions it is allocated over.
    fn alloc_dims(&self, tv: ValId) -> SchedResult<(Vec<usize>, Vec<i64>)> {
        let t = self.t(tv);
        let pos = t.compute_at.map_or(0, |c| c.pos);
        let mut dims = Vec::new();
        let mut exts = Vec::new();
        for i in pos..t.domain.loop_dims.len() {
            let d = t.domain.loop_dom(i);
            if d.kind == IterKind::Reduction
                || d.kind == IterKind::Broadcast
                || d.extent == Extent::Const(1)
            {
                continue;
            }
            let skip = match t.memory {
                MemoryType::Local => d.parallel.is_thread(),
                _ => d.parallel.is_bid(),
            };
            if skip {
                continue;
            }
            let Some(c) = d.extent.as_const() else {
                return unsupported(format!(
                    "T{} in registers over loop dim {i} of symbolic extent {}; split it by a constant or inline it",
                    tv.0, d.extent
                ));
            };
            dims.push(i);
            exts.push(c);
        }
        Ok((dims, exts))
    }

    fn alloc_stmt(&self, tv: ValId) -> SchedResult<Stmt> {
        let (_, exts) = self.alloc_dims(tv)?;
        Ok(Stmt::Alloc {
            name: format!("T{}", tv.0),
            dtype: self.t(tv).dtype,
            size: exts.iter().product::<i64>().max(1),
        })
    }

    fn emit_node(&mut self, n: &Node, out: &mut Vec<Stmt>) -> SchedResult<()> {
        match n {
            Node::Expr(ei) => {
                if self.anchored.contains(ei) {
                    self.emit_accumulate(*ei, out)
                } else {
                    self.emit_expr(*ei, out)
                }
            }
            Node::Loop { key, body } => {
                let anchored = self.anchors.get(key).cloned().unwrap_or_default();
                for &ei in &anchored {
                    self.emit_reduction_init(ei, out)?;
                }
                let var = format!("i{}", self.next_var);
                self.next_var += 1;
                self.env.insert(*key, Idx::var(var.clone()));
                let mut inner = Vec::new();
                for &tv in self
                    .allocs
                    .get(&Some(*key))
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                {
                    inner.push(self.alloc_stmt(tv)?);
                }
                for c in body {
                    self.emit_node(c, &mut inner)?;
                }
                self.env.remove(key);
                let d = self.key_dom(*key);
                out.push(Stmt::For {
                    var,
                    extent: ext(&d.extent),
                    unroll: d.parallel == ParallelType::Unroll,
                    body: inner,
                });
                for &ei in &anchored {
                    self.emit_reduction_finish(ei, out)?;
                }
                Ok(())
            }
        }
    }

    // ----- indexing -----

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
    fn consumer_indices(&self, tv: ValId) -> HashMap<DomId, Idx> {
        let d = &self.t(tv).domain;
        let mut idx = HashMap::new();
        for (i, &l) in d.loop_dims.iter().enumerate() {
            let dom = d.dom(l);
            let v = if dom.kind == IterKind::Broadcast || dom.parallel == ParallelType::Vectorize {
                Idx::Const(0)
            } else {
                self.key_index(self.key(tv, i))
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
                }
                DomTransform::Merge { outer, inner, out } => {
                    let Some(m) = idx.get(out).cloned() else {
                        continue;
                    };
                    let e = ext(&d.dom(*inner).extent);
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
        let pshape = shape_doms(&self.t(p).domain);
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
                let mut m = vec![None; pshape.len()];
                for (j, &pj) in perm.iter().enumerate() {
                    if let (Some(slot), Some(&r)) = (m.get_mut(pj), root.get(j)) {
                        *slot = Some(r);
                    }
                }
                m
            }
            Op::Squeeze { axes } => {
                let mut it = root.iter();
                (0..pshape.len())
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
        if map.len() != pshape.len() {
            return unsupported(format!(
                "{} from T{} ({} dims) to T{} ({} root dims)",
                e.op.name(),
                p.0,
                pshape.len(),
                e.output.0,
                root.len()
            ));
        }
        Ok(map)
    }

    fn global_offset(&self, tv: ValId, shape_idx: &[Idx]) -> Idx {
        let t = self.t(tv);
        let doms = shape_doms(&t.domain);
        let mut off = Idx::Const(0);
        for (j, &d) in doms.iter().enumerate() {
            if t.domain.dom(d).kind != IterKind::Iteration {
                continue;
            }
            let stride =
                if t.contiguity.get(j) == Some(&Some(true)) && t.stride_order.get(j) == Some(&0) {
                    Idx::Const(1)
                } else {
                    Idx::var(format!("T{}_shape.stride[{j}]", tv.0))
                };
            off = off.add(shape_idx[j].clone().mul(stride));
        }
        off
    }

    fn local_offset(&self, tv: ValId, loop_idx: &dyn Fn(usize) -> Idx) -> SchedResult<Idx> {
        let (dims, exts) = self.alloc_dims(tv)?;
        let mut off = Idx::Const(0);
        for (n, &i) in dims.iter().enumerate() {
            let stride: i64 = exts[n + 1..].iter().product();
            off = off.add(loop_idx(i).mul(Idx::Const(stride)));
        }
        Ok(off)
    }

    /// The element of input tensor `p` read by expression `e` at the current indices.
    fn read(&self, e: &SExpr, p: ValId, cidx: &HashMap<DomId, Idx>) -> SchedResult<String> {
        Ok(format!("T{}[{}]", p.0, self.read_offset(e, p, cidx)?))
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
                if pd.dom(pdim).kind != IterKind::Iteration {
                    Idx::Const(0)
                } else {
                    m.and_then(|c| cidx.get(&c).cloned())
                        .unwrap_or(Idx::Const(0))
                }
            })
            .collect();
        if pt.memory == MemoryType::Global {
            return Ok(self.global_offset(p, &seeds));
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
                    let twin = match (pmap.get(outer), pmap.get(inner)) {
                        (Some(&a), Some(&b)) => cd.transforms.iter().find_map(|ct| match ct {
                            DomTransform::Merge {
                                outer: a2,
                                inner: b2,
                                out: o2,
                            } if *a2 == a && *b2 == b => Some(*o2),
                            _ => None,
                        }),
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
        self.local_offset(p, &|i| {
            pidx.get(&pd.loop_dims[i]).cloned().unwrap_or(Idx::Const(0))
        })
    }

    /// Where expression outputs are stored: `T3[...]`.
    fn store_offset(&self, tv: ValId, cidx: &HashMap<DomId, Idx>) -> SchedResult<Idx> {
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

    /// Bounds checks of the root indices of `tv` (reduction roots only if `with_red`).
    fn predicates(&self, tv: ValId, cidx: &HashMap<DomId, Idx>, with_red: bool) -> Vec<String> {
        let d = &self.t(tv).domain;
        let mut out = Vec::new();
        for &r in &d.root {
            let dom = d.dom(r);
            if dom.kind == IterKind::Broadcast || (!with_red && dom.kind == IterKind::Reduction) {
                continue;
            }
            if needs_predicate(d, r) {
                if let Some(i) = cidx.get(&r) {
                    out.push(format!("{} < {}", i, ext(&dom.extent)));
                }
            }
        }
        out
    }

    /// `threadIdx.x == 0`-style guards for a global write of `tv`.
    fn thread_guards(&self, tv: ValId) -> Vec<String> {
        let d = &self.t(tv).domain;
        let mut out = Vec::new();
        for &p in self.bound.keys() {
            let used = d.loop_dims.iter().any(|&l| {
                let x = d.dom(l);
                x.parallel == p && x.kind != IterKind::Broadcast && x.kind != IterKind::Reduction
            });
            if !used {
                out.push(format!("{} == 0", p.cuda_index().unwrap_or("0")));
            }
        }
        out
    }

    // ----- expressions -----

    fn val_dtype(&self, v: ValId) -> DataType {
        self.sf.fusion().val(v).dtype
    }

    fn operand(
        &self,
        e: &SExpr,
        v: ValId,
        to: DataType,
        cidx: &HashMap<DomId, Idx>,
    ) -> SchedResult<String> {
        let val = self.sf.fusion().get_val(v);
        let (text, from) = if self.s.tensors.contains_key(&v) {
            (self.read(e, v, cidx)?, self.t(v).dtype)
        } else {
            match val {
                Some(x) => match x.constant() {
                    Some(c) => return Ok(literal(c, to)),
                    None => (scalar_name(v.0), x.dtype),
                },
                None => return unsupported(format!("unknown value {v}")),
            }
        };
        Ok(if from == to {
            text
        } else {
            format!("({})({text})", cuda_type(to))
        })
    }

    fn value(&self, e: &SExpr, cidx: &HashMap<DomId, Idx>) -> SchedResult<String> {
        let out_dt = self.t(e.output).dtype;
        let ins = &e.inputs;
        let promoted = |ids: &[ValId]| -> DataType {
            let ops: Vec<Operand> = ids
                .iter()
                .map(|&v| Operand {
                    dtype: self.val_dtype_any(v),
                    is_scalar: !self.s.tensors.contains_key(&v),
                })
                .collect();
            promote(&ops).unwrap_or(out_dt)
        };
        Ok(match &e.op {
            Op::Set
            | Op::SegmentSet
            | Op::Cast
            | Op::Broadcast { .. }
            | Op::Expand { .. }
            | Op::Permute { .. }
            | Op::Squeeze { .. } => {
                let p = ins[0];
                let pd = self.val_dtype_any(p);
                self.operand(e, p, pd, cidx)?
            }
            Op::Unary(u) => {
                let inp = self.val_dtype_any(ins[0]);
                let c = match u.rule() {
                    UnaryRule::FloatMath | UnaryRule::FloatOnly => out_dt.compute_type(),
                    _ => inp.compute_type(),
                };
                format!("nvf_{}({})", u.name(), self.operand(e, ins[0], c, cidx)?)
            }
            Op::Binary(b) => {
                let c = match b.rule() {
                    BinaryRule::FloatMath => out_dt.compute_type(),
                    _ => promoted(&ins[..2]).compute_type(),
                };
                let (x, y) = (
                    self.operand(e, ins[0], c, cidx)?,
                    self.operand(e, ins[1], c, cidx)?,
                );
                match infix(*b) {
                    Some(op) => format!("{x} {op} {y}"),
                    None => format!("nvf_{}({x}, {y})", b.name()),
                }
            }
            Op::Ternary(t) => {
                let c = out_dt.compute_type();
                match t {
                    TernaryOp::Where => {
                        let cond = self.operand(e, ins[0], DataType::Bool, cidx)?;
                        format!(
                            "{cond} ? {} : {}",
                            self.operand(e, ins[1], c, cidx)?,
                            self.operand(e, ins[2], c, cidx)?
                        )
                    }
                    _ => {
                        let a: Vec<String> = ins
                            .iter()
                            .map(|&v| self.operand(e, v, c, cidx))
                            .collect::<SchedResult<_>>()?;
                        match t {
                            TernaryOp::Lerp => format!("{0} + {2} * ({1} - {0})", a[0], a[1], a[2]),
                            TernaryOp::Clamp => format!("nvf_clamp({}, {}, {})", a[0], a[1], a[2]),
                            TernaryOp::Threshold => {
                                format!("{0} > {1} ? {0} : {2}", a[0], a[1], a[2])
                            }
                            TernaryOp::Addcmul => {
                                format!("{} + {} * {} * {}", a[0], a[3], a[1], a[2])
                            }
                            TernaryOp::Where => unreachable!("handled above"),
                        }
                    }
                }
            }
            Op::Full { .. } => self.operand(e, ins[0], out_dt.compute_type(), cidx)?,
            Op::Iota { .. } => {
                let c = out_dt.compute_type();
                let d = &self.t(e.output).domain;
                let i = cidx.get(&d.root[0]).cloned().unwrap_or(Idx::Const(0));
                format!(
                    "{} + ({})({i}) * {}",
                    self.operand(e, ins[0], c, cidx)?,
                    cuda_type(c),
                    self.operand(e, ins[1], c, cidx)?
                )
            }
            Op::Rand { dist, .. } => {
                let d = &self.t(e.output).domain;
                let mut lin = Idx::Const(0);
                for &r in &shape_doms(d) {
                    let x = cidx.get(&r).cloned().unwrap_or(Idx::Const(0));
                    lin = lin.mul(ext(&d.dom(r).extent)).add(x);
                }
                let seed = self.operand(e, ins[2], DataType::I64, cidx)?;
                let off = self.operand(e, ins[3], DataType::I64, cidx)?;
                let wide = out_dt == DataType::F64;
                let (f, pt) = match (dist, wide) {
                    (Distribution::Uniform, false) => ("nvf_uniform_f32", DataType::F32),
                    (Distribution::Uniform, true) => ("nvf_uniform_f64", DataType::F64),
                    (Distribution::Normal, false) => ("nvf_normal_f32", DataType::F64),
                    (Distribution::Normal, true) => ("nvf_normal_f64", DataType::F64),
                };
                format!(
                    "{f}((unsigned long long)({seed}), (unsigned long long)({off}), (unsigned long long)({lin}), {}, {})",
                    self.operand(e, ins[0], pt, cidx)?,
                    self.operand(e, ins[1], pt, cidx)?
                )
            }
            other => {
                return unsupported(format!(
                    "lowering of {} is not implemented yet",
                    other.name()
                ))
            }
        })
    }

    fn val_dtype_any(&self, v: ValId) -> DataType {
        match self.s.tensors.get(&v) {
            Some(t) => t.dtype,
            None => self.val_dtype(v),
        }
    }

    fn emit_expr(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        if is_reduction(&t.domain) {
            self.emit_reduction_init(ei, out)?;
            self.emit_accumulate(ei, out)?;
            return self.emit_reduction_finish(ei, out);
        }
        let cidx = self.consumer_indices(tv);
        let mut cond = self.predicates(tv, &cidx, false);
        if t.memory == MemoryType::Global {
            cond.extend(self.thread_guards(tv));
        }
        let lhs = format!("T{}[{}]", tv.0, self.store_offset(tv, &cidx)?);
        let vec = t
            .domain
            .loop_dims
            .last()
            .map(|&l| t.domain.dom(l))
            .filter(|d| d.parallel == ParallelType::Vectorize);
        let stmt = if let Some(vd) = vec {
            let width = vd.extent.as_const().unwrap_or(1);
            let p = e.inputs[0];
            let src = self.read(e, p, &cidx)?;
            for g in [p, tv] {
                let gt = self.t(g);
                if gt.memory != MemoryType::Global {
                    continue;
                }
                if let Some(&last) = shape_doms(&gt.domain).last() {
                    let x = gt.domain.dom(last).extent.clone();
                    if x.as_const().is_none() {
                        self.requirements.push(Requirement::Divisible {
                            extent: x,
                            by: width,
                            why: format!("vectorized access of T{} by {width}", g.0),
                        });
                    }
                }
                self.requirements.push(Requirement::Aligned {
                    tensor: g,
                    bytes: width as usize * gt.dtype.size_bytes(),
                });
            }
            Stmt::VecCopy {
                dtype: t.dtype,
                width,
                dst: format!("&{lhs}"),
                src: format!("&{src}"),
            }
        } else {
            let rhs = self.value(e, &cidx)?;
            Stmt::Assign {
                lhs,
                rhs: format!("({})({rhs})", cuda_type(t.dtype)),
            }
        };
        out.push(if cond.is_empty() {
            stmt
        } else {
            Stmt::If {
                cond,
                body: vec![stmt],
            }
        });
        Ok(())
    }

    fn red_op(&self, ei: usize) -> SchedResult<ReductionOp> {
        match &self.s.exprs[ei].op {
            Op::Reduction { op, .. } => Ok(*op),
            other => unsupported(format!(
                "lowering of {} is not implemented yet",
                other.name()
            )),
        }
    }

    fn acc(&self, tv: ValId) -> SchedResult<String> {
        let t = self.t(tv);
        if t.memory == MemoryType::Global {
            return Ok(format!("T{}_acc", tv.0));
        }
        let cidx = self.consumer_indices(tv);
        Ok(format!("T{}[{}]", tv.0, self.store_offset(tv, &cidx)?))
    }

    fn emit_reduction_init(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let tv = self.s.exprs[ei].output;
        let op = self.red_op(ei)?;
        let dt = self.t(tv).dtype;
        let init = init_value(op, dt);
        if self.t(tv).memory == MemoryType::Global {
            out.push(Stmt::Comment(format!("accumulator of T{}", tv.0)));
            out.push(Stmt::Assign {
                lhs: format!("{} T{}_acc", cuda_type(dt), tv.0),
                rhs: init,
            });
        } else {
            out.push(Stmt::Assign {
                lhs: self.acc(tv)?,
                rhs: init,
            });
        }
        Ok(())
    }

    fn emit_accumulate(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let op = self.red_op(ei)?;
        let dt = self.t(tv).dtype;
        let cidx = self.consumer_indices(tv);
        let cond = self.predicates(tv, &cidx, true);
        let acc = self.acc(tv)?;
        let x = self.operand(e, e.inputs[0], dt, &cidx)?;
        let rhs = match op {
            ReductionOp::Sum | ReductionOp::Mean => format!("{acc} + {x}"),
            ReductionOp::Prod => format!("{acc} * {x}"),
            ReductionOp::Max => format!("nvf_maximum({acc}, {x})"),
            ReductionOp::Min => format!("nvf_minimum({acc}, {x})"),
        };
        let st = Stmt::Assign {
            lhs: acc,
            rhs: format!("({})({rhs})", cuda_type(dt)),
        };
        out.push(if cond.is_empty() {
            st
        } else {
            Stmt::If {
                cond,
                body: vec![st],
            }
        });
        Ok(())
    }

    fn emit_reduction_finish(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let tv = self.s.exprs[ei].output;
        let op = self.red_op(ei)?;
        let t = self.t(tv);
        let dt = t.dtype;
        let acc = self.acc(tv)?;
        let tidx = t.domain.loop_dims.iter().any(|&l| {
            let d = t.domain.dom(l);
            d.kind == IterKind::Reduction && d.parallel == ParallelType::TIDx
        });
        if tidx {
            out.push(Stmt::BlockReduce {
                acc: acc.clone(),
                dtype: dt,
                op,
                init: init_value(op, dt),
                smem: format!("T{}_smem", tv.0),
            });
        }
        if op == ReductionOp::Mean {
            let mut n = Idx::Const(1);
            for &r in &t.domain.root {
                if t.domain.dom(r).kind == IterKind::Reduction {
                    n = n.mul(ext(&t.domain.dom(r).extent));
                }
            }
            out.push(Stmt::Assign {
                lhs: acc.clone(),
                rhs: format!("{acc} / ({})({n})", cuda_type(dt)),
            });
        }
        if t.memory == MemoryType::Global {
            let cidx = self.consumer_indices(tv);
            let mut cond = self.predicates(tv, &cidx, false);
            cond.extend(self.thread_guards(tv));
            let st = Stmt::Assign {
                lhs: format!("T{}[{}]", tv.0, self.store_offset(tv, &cidx)?),
                rhs: acc,
            };
            out.push(if cond.is_empty() {
                st
            } else {
                Stmt::If {
                    cond,
                    body: vec![st],
                }
            });
        }
        Ok(())
    }

    fn abi(&self, opts: &KernelOptions) -> KernelAbi {
        let f = self.sf.fusion();
        let mut params = Vec::new();
        let tensor = |v: ValId, input: bool, params: &mut Vec<Param>| {
            let t = self.t(v);
            params.push(Param {
                name: format!("T{}", v.0),
                kind: ParamKind::TensorData {
                    tensor: v,
                    dtype: t.dtype,
                    input,
                },
            });
            params.push(Param {
                name: format!("T{}_shape", v.0),
                kind: ParamKind::TensorShape {
                    tensor: v,
                    rank: t.contiguity.len(),
                },
            });
        };
        for &v in &self.s.inputs {
            if self.s.tensors.contains_key(&v) {
                tensor(v, true, &mut params);
            } else {
                params.push(Param {
                    name: scalar_name(v.0),
                    kind: ParamKind::Scalar {
                        val: v,
                        dtype: f.val(v).dtype,
                    },
                });
            }
        }
        for &v in &self.s.outputs {
            if !self.s.inputs.contains(&v) {
                tensor(v, false, &mut params);
            }
        }
        let mut index_type = opts.index_type;
        for t in self.s.tensors.values() {
            let mut n: i128 = 1;
            let mut all_const = true;
            for d in shape_doms(&t.domain) {
                match t.domain.dom(d).extent.as_const() {
                    Some(c) => n *= c as i128,
                    None => all_const = false,
                }
            }
            if all_const && n >= (1i128 << 31) {
                index_type = IndexType::I64;
            }
        }
        KernelAbi {
            name: opts.name.clone(),
            index_type,
            params,
        }
    }
}

fn shape_doms(d: &TensorDomain) -> Vec<DomId> {
    d.logical
        .iter()
        .copied()
        .filter(|&l| d.dom(l).kind != IterKind::Reduction)
        .collect()
}

fn is_reduction(d: &TensorDomain) -> bool {
    d.root.iter().any(|&r| d.dom(r).kind == IterKind::Reduction)
}

/// True when some split below root dim `r` is not provably divisible.
fn needs_predicate(d: &TensorDomain, r: DomId) -> bool {
    let mut below: HashSet<DomId> = HashSet::from([r]);
    for tr in &d.transforms {
        match tr {
            DomTransform::Split {
                input,
                outer,
                inner,
                factor,
                ..
            } => {
                if !below.contains(input) {
                    continue;
                }
                let e = &d.dom(*input).extent;
                let divisible = match (e.as_const(), factor.as_const()) {
                    (Some(a), Some(b)) => b != 0 && a % b == 0,
                    _ => false,
                };
                if !divisible && d.dom(*input).kind != IterKind::Broadcast {
                    return true;
                }
                below.insert(*outer);
                below.insert(*inner);
            }
            DomTransform::Merge { outer, inner, out } => {
                if below.contains(outer) || below.contains(inner) {
                    below.insert(*out);
                }
            }
        }
    }
    false
}

fn infix(b: BinaryOp) -> Option<&'static str> {
    use BinaryOp::*;
    Some(match b {
        Add => "+",
        Sub => "-",
        Mul => "*",
        Div | TrueDiv => "/",
        Eq => "==",
        Ne => "!=",
        Lt => "<",
        Le => "<=",
        Gt => ">",
        Ge => ">=",
        LogicalAnd => "&&",
        LogicalOr => "||",
        BitwiseAnd => "&",
        BitwiseOr => "|",
        BitwiseXor => "^",
        ShiftLeft => "<<",
        ShiftRight => ">>",
        _ => return None,
    })
}

/// A C++ literal of `v` in type `to` (a compute type: never f16/bf16 unless cast).
fn literal(v: ScalarValue, to: DataType) -> String {
    match to {
        DataType::Bool => format!("{}", v.as_f64() != 0.0),
        DataType::I32 => format!("{}", v.cast(DataType::I32).as_i64().unwrap_or(0)),
        DataType::I64 => {
            let i = v.cast(DataType::I64).as_i64().unwrap_or(0);
            if i == i64::MIN {
                "(-9223372036854775807LL - 1)".into()
            } else {
                format!("{i}LL")
            }
        }
        DataType::F64 => {
            let x = v.as_f64();
            if x.is_nan() {
                "__longlong_as_double(0x7ff8000000000000LL)".into()
            } else if x.is_infinite() {
                format!(
                    "{}__longlong_as_double(0x7ff0000000000000LL)",
                    if x < 0.0 { "-" } else { "" }
                )
            } else {
                format!("{x:?}")
            }
        }
        DataType::F32 => {
            let x = v.as_f64() as f32;
            if x.is_nan() {
                "__int_as_float(0x7fc00000)".into()
            } else if x.is_infinite() {
                format!(
                    "{}__int_as_float(0x7f800000)",
                    if x < 0.0 { "-" } else { "" }
                )
            } else {
                format!("{x:?}f")
            }
        }
        DataType::F16 | DataType::BF16 => {
            format!("({})({})", cuda_type(to), literal(v, DataType::F32))
        }
    }
}

fn init_value(op: ReductionOp, dt: DataType) -> String {
    let v = match op {
        ReductionOp::Sum | ReductionOp::Mean => ScalarValue::Int(0),
        ReductionOp::Prod => ScalarValue::Int(1),
        ReductionOp::Max => match dt {
            DataType::Bool => ScalarValue::Bool(false),
            DataType::I32 => ScalarValue::Int(i32::MIN as i64),
            DataType::I64 => ScalarValue::Int(i64::MIN),
            _ => ScalarValue::Float(f64::NEG_INFINITY),
        },
        ReductionOp::Min => match dt {
            DataType::Bool => ScalarValue::Bool(true),
            DataType::I32 => ScalarValue::Int(i32::MAX as i64),
            DataType::I64 => ScalarValue::Int(i64::MAX),
            _ => ScalarValue::Float(f64::INFINITY),
        },
    };
    let lit = literal(v, dt.compute_type());
    if dt.is_half() {
        format!("({})({lit})", cuda_type(dt))
    } else {
        lit
    }
}
