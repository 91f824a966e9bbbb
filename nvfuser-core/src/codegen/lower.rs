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

use super::abi::{cuda_type, IndexType, KernelAbi, Param, ParamKind, WorkKind};
use super::checks::{self, CheckKind, DeviceCheck};
use super::index::Idx;
use super::kir::{Requirement, Stmt};
use super::{Kernel, KernelOptions, LaunchDims};
use crate::dtype::{promote, DataType, Operand, ScalarValue};
use crate::ir::{
    BinaryOp, BinaryRule, Distribution, Extent, IterKind, Op, ReductionOp, SizeArg, TernaryOp,
    UnaryRule, ValId,
};
use crate::sched::{
    DomId, DomTransform, MemoryType, ParallelType, SExpr, SchedResult, Schedule, ScheduleError,
    ScheduledFusion, TensorDomain, TensorSchedule, STATIC_SHARED_LIMIT,
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
    /// Shared tensors written since the last `__syncthreads()`.
    pending_sync: HashSet<ValId>,
    /// Work buffers of grid reductions, as ABI parameters.
    work: Vec<Param>,
    bound: BTreeMap<ParallelType, Extent>,
    requirements: Vec<Requirement>,
    /// Device-side check sites (see `checks`), in code order.
    checks: Vec<DeviceCheck>,
    /// The check site of each checked expression, by output.
    check_site: HashMap<ValId, usize>,
    /// The fingerprint of `checks`.
    check_fingerprint: u32,
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

/// The size a dim has in the fusion: 1 for a broadcast, whatever extent the schedule
/// gave its loop (a broadcast a reference resolves spans the reference's extent).
fn logical_extent(d: &crate::sched::Dom) -> Extent {
    if is_broadcast(d) {
        Extent::Const(1)
    } else {
        d.extent.clone()
    }
}

fn is_broadcast(d: &crate::sched::Dom) -> bool {
    d.kind == IterKind::Broadcast
}

fn logical_ext(d: &crate::sched::Dom) -> Idx {
    ext(&logical_extent(d))
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
        pending_sync: HashSet::new(),
        work: Vec::new(),
        bound: BTreeMap::new(),
        requirements: Vec::new(),
        checks: Vec::new(),
        check_site: HashMap::new(),
        check_fingerprint: 0,
    };
    l.plan_checks();
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
        reads: crate::ir::reads::ReadChecks::of(sf.fusion()),
    })
}

impl<'a> Lower<'a> {
    /// Assigns a check site to every data-dependent read (gather, take_along_axis,
    /// index_select) and integer division (div, fmod, remainder) before anything is
    /// emitted, so the table's fingerprint is known to every site.
    fn plan_checks(&mut self) {
        for e in &self.s.exprs {
            let kind = match &e.op {
                Op::Gather { axis } | Op::TakeAlongAxis { axis } | Op::IndexSelect { axis } => {
                    CheckKind::Index { axis: *axis }
                }
                Op::Binary(_) if self.int_division(e).is_some() => CheckKind::DivisionByZero,
                _ => continue,
            };
            if self.check_site.contains_key(&e.output) {
                continue;
            }
            self.check_site.insert(e.output, self.checks.len());
            self.checks.push(DeviceCheck {
                op: e.op.name().to_string(),
                kind,
                expr: self.expr_text(e),
            });
        }
        self.check_fingerprint = checks::fingerprint(&self.checks);
    }

    /// The error code of the check site of `e`'s output, as a C++ literal.
    fn check_code(&self, e: &SExpr) -> Option<String> {
        let site = *self.check_site.get(&e.output)?;
        Some(format!(
            "0x{:016x}ull",
            checks::code(self.check_fingerprint, site)
        ))
    }

    /// `div`, `fmod` or `remainder` computed on integers: the checked helper's name.
    fn int_division(&self, e: &SExpr) -> Option<&'static str> {
        let Op::Binary(b) = &e.op else { return None };
        let helper = match b {
            BinaryOp::Div => "nvf_div_checked",
            BinaryOp::Fmod => "nvf_fmod_checked",
            BinaryOp::Remainder => "nvf_remainder_checked",
            _ => return None,
        };
        let ops: Vec<Operand> = e
            .inputs
            .iter()
            .take(2)
            .map(|&v| Operand {
                dtype: self.val_dtype_any(v),
                is_scalar: !self.s.tensors.contains_key(&v),
            })
            .collect();
        let out_dt = self.t(e.output).dtype;
        let c = promote(&ops).unwrap_or(out_dt).compute_type();
        matches!(c, DataType::I32 | DataType::I64).then_some(helper)
    }

    /// The fusion value a scheduled value stands for: a cache made by `cache_after` /
    /// `cache_before` is named after the fusion tensor it copies.
    fn origin(&self, v: ValId) -> ValId {
        let f = self.sf.fusion();
        let mut v = v;
        for _ in 0..8 {
            if f.get_val(v).is_some() {
                return v;
            }
            let producer = self
                .s
                .exprs
                .iter()
                .find(|x| x.output == v && matches!(x.op, Op::Set))
                .map(|x| x.inputs[0]);
            let consumer = self
                .s
                .exprs
                .iter()
                .find(|x| matches!(x.op, Op::Set) && x.inputs.first() == Some(&v))
                .map(|x| x.output);
            match producer.or(consumer) {
                Some(next) => v = next,
                None => return v,
            }
        }
        v
    }

    /// An expression as the math printer writes it (`T3 = T1 / T2`), for error messages.
    fn expr_text(&self, e: &SExpr) -> String {
        let f = self.sf.fusion();
        let name = |v: ValId| -> String {
            let o = self.origin(v);
            match f.get_val(o) {
                Some(x) if !self.s.tensors.contains_key(&v) => match x.constant() {
                    Some(c) => format!("{c}"),
                    None => format!("S{}", o.id()),
                },
                _ => format!("T{}", o.id()),
            }
        };
        let out = name(e.output);
        let ins: Vec<String> = e.inputs.iter().map(|&v| name(v)).collect();
        let arg = |i: usize| ins.get(i).cloned().unwrap_or_default();
        match &e.op {
            Op::Binary(BinaryOp::Div) => format!("{out} = {} / {}", arg(0), arg(1)),
            Op::Gather { axis } | Op::TakeAlongAxis { axis } | Op::IndexSelect { axis } => {
                format!(
                    "{out} = {}({}, {}, axis={axis})",
                    e.op.name(),
                    arg(0),
                    arg(1)
                )
            }
            op => format!("{out} = {}({})", op.name(), ins.join(", ")),
        }
    }

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
                    tv.id()
                ));
            }
            // An output this kernel writes is read back by it only by the thread that
            // stored the element; otherwise nothing orders the store and the load (a
            // broadcast or reduced output is stored by one thread only). Schedulers give
            // other readers a register copy (`cache_fork`).
            if t.memory == MemoryType::Global && self.s.definition(tv).is_some() {
                // A store from a register cache may be deferred past the reader (the
                // pointwise schedule stores its vectors in a loop after the math).
                let cached_store = self.s.definition(tv).is_some_and(|d| {
                    let e = &self.s.exprs[d];
                    matches!(e.op, Op::Set)
                        && e.inputs.first().is_some_and(|&i| {
                            self.s
                                .tensors
                                .get(&i)
                                .is_some_and(|x| x.memory != MemoryType::Global)
                        })
                });
                for u in self.s.uses(tv) {
                    let reader = self.s.exprs[u].output;
                    if cached_store || !self.same_thread(tv, reader) {
                        return unsupported(format!(
                            "T{} is stored to global memory and read back by T{} in the same kernel by other threads (cache_fork it)",
                            tv.id(), reader.id()
                        ));
                    }
                }
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

    /// True when every element of `producer` that `reader` reads is stored by the
    /// reading thread itself: both bind the same parallel types, to iteration dims
    /// (no dim of the producer bound to a thread or block index is a broadcast or a
    /// reduction, which one thread stores for all).
    fn same_thread(&self, producer: ValId, reader: ValId) -> bool {
        let bound = |tv: ValId| -> Vec<(ParallelType, IterKind)> {
            let d = &self.t(tv).domain;
            let mut v: Vec<(ParallelType, IterKind)> = d
                .loop_dims
                .iter()
                .map(|&l| d.dom(l))
                .filter(|x| x.parallel.is_thread())
                .map(|x| (x.parallel, x.kind))
                .collect();
            v.sort_by_key(|x| format!("{:?}", x.0));
            v
        };
        let p = bound(producer);
        let r: Vec<_> = bound(reader)
            .into_iter()
            .filter(|x| x.1 != IterKind::Broadcast)
            .collect();
        p.iter().all(|x| x.1 == IterKind::Iteration)
            && p.len() == r.len()
            && p.iter().zip(&r).all(|(a, b)| a.0 == b.0)
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
        // Values defined inside each open loop (outermost first).
        let mut defined_in: Vec<HashSet<ValId>> = Vec::new();
        for (ei, e) in self.s.exprs.iter().enumerate() {
            let nest = self.nest(e.output);
            let common = open.iter().zip(&nest).take_while(|(a, b)| a == b).count();
            // An expression outside the open loops that reads nothing computed in them
            // (a per-row scalar between two parts of a row loop) goes right before
            // them, so the loop stays open for the expressions after it.
            let hoist = nest.len() == common
                && common < open.len()
                && e.inputs
                    .iter()
                    .all(|v| defined_in[common..].iter().all(|d| !d.contains(v)));
            if hoist {
                let mut scope = &mut root;
                for _ in 0..common {
                    match scope.last_mut() {
                        Some(Node::Loop { body, .. }) => scope = body,
                        _ => return unsupported("loop nest bookkeeping".into()),
                    }
                }
                let at = scope.len().saturating_sub(1);
                scope.insert(at, Node::Expr(ei));
                continue;
            }
            defined_in.truncate(common);
            for k in open.drain(common..) {
                closed.insert(k);
            }
            for k in &nest[common..] {
                if closed.contains(k) {
                    return unsupported(format!(
                        "T{} needs loop {} of T{} again after it was closed; inline its producers or reorder",
                        e.output.id(), k.1, k.0 .id()
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
                defined_in.push(HashSet::new());
            }
            for d in defined_in.iter_mut() {
                d.extend(e.outputs());
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
            for o in e.outputs() {
                match self.t(o).memory {
                    MemoryType::Global => {}
                    MemoryType::Shared => {
                        let (_, exts) = self.padded_alloc_dims(o)?;
                        let n = exts.iter().product::<i64>().max(1);
                        self.shared
                            .push((format!("T{}", o.id()), self.t(o).dtype, n));
                    }
                    MemoryType::Local => {
                        let scope = self.alloc_scope(o);
                        self.allocs.entry(scope).or_default().push(o);
                    }
                }
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
                let welford = is_welford(&e.op);
                if red_parallel(&t.domain, ParallelType::TIDx) {
                    let e = self.bound[&ParallelType::TIDx].clone();
                    if e.as_const().is_none() {
                        self.requirements.push(Requirement::Divisible {
                            extent: e,
                            by: 32,
                            why: format!("block reduction of T{} over threadIdx.x", tv.id()),
                        });
                    }
                    if welford {
                        for (suffix, dt) in
                            [("avg", t.dtype), ("m2", t.dtype), ("n", DataType::I64)]
                        {
                            self.shared
                                .push((format!("T{}_smem_{suffix}", tv.id()), dt, 32));
                        }
                    } else {
                        self.shared
                            .push((format!("T{}_smem", tv.id()), t.dtype, 32));
                    }
                }
                if grid_dims(&t.domain).next().is_some() {
                    self.plan_grid_reduction(ei)?;
                }
            }
        }
        let total: i64 = self
            .shared
            .iter()
            .map(|(_, dt, n)| n * dt.size_bytes() as i64)
            .sum();
        if total > STATIC_SHARED_LIMIT {
            return Err(ScheduleError::SharedMemoryTooLarge {
                bytes: total,
                limit: STATIC_SHARED_LIMIT,
                detail: self
                    .shared
                    .iter()
                    .map(|(n, dt, c)| format!("{n}: {}", c * dt.size_bytes() as i64))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(())
    }

    /// Size of a register or shared tensor and the loop positions it spans.
    fn alloc_dims(&self, tv: ValId) -> SchedResult<(Vec<usize>, Vec<i64>)> {
        self.t(tv).alloc_dims(tv)
    }

    fn alloc_stmt(&self, tv: ValId) -> SchedResult<Stmt> {
        let (_, exts) = self.alloc_dims(tv)?;
        Ok(Stmt::Alloc {
            name: format!("T{}", tv.id()),
            dtype: self.t(tv).dtype,
            size: exts.iter().product::<i64>().max(1),
        })
    }

    /// Shared-memory tensors written and read by the expressions under `n`.
    fn shared_access(&self, n: &Node, w: &mut HashSet<ValId>, r: &mut HashSet<ValId>) {
        match n {
            Node::Expr(ei) => {
                let e = &self.s.exprs[*ei];
                let shared = |v: &ValId| {
                    self.s
                        .tensors
                        .get(v)
                        .is_some_and(|t| t.memory == MemoryType::Shared)
                };
                w.extend(e.outputs().into_iter().filter(shared));
                r.extend(e.inputs.iter().copied().filter(shared));
            }
            Node::Loop { body, .. } => {
                for c in body {
                    self.shared_access(c, w, r);
                }
            }
        }
    }

    /// `__syncthreads()` before code that reads a shared tensor written since the last
    /// barrier (read-after-write across threads).
    fn sync_before_reads(&mut self, n: &Node, out: &mut Vec<Stmt>) {
        let (mut w, mut r) = (HashSet::new(), HashSet::new());
        self.shared_access(n, &mut w, &mut r);
        if r.iter().any(|v| self.pending_sync.contains(v)) {
            let mut names: Vec<ValId> = r.intersection(&self.pending_sync).copied().collect();
            names.sort();
            out.push(Stmt::Sync(format!(
                "{} written by other threads",
                names
                    .iter()
                    .map(|v| format!("T{}", v.id()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
            self.pending_sync.clear();
        }
    }

    fn emit_node(&mut self, n: &Node, out: &mut Vec<Stmt>) -> SchedResult<()> {
        self.sync_before_reads(n, out);
        match n {
            Node::Expr(ei) => {
                if self.anchored.contains(ei) {
                    self.emit_accumulate(*ei, out)?;
                } else {
                    self.emit_expr(*ei, out)?;
                }
                let mut w = HashSet::new();
                self.shared_access(n, &mut w, &mut HashSet::new());
                self.pending_sync.extend(w);
                Ok(())
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
                // Write-after-read across iterations: the next iteration overwrites a
                // shared tensor that other threads may still be reading.
                let (mut w, mut r) = (HashSet::new(), HashSet::new());
                self.shared_access(n, &mut w, &mut r);
                if w.iter().any(|v| r.contains(v)) {
                    inner.push(Stmt::Sync(
                        "before the next iteration overwrites shared memory".into(),
                    ));
                    self.pending_sync.clear();
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
                p.id(),
                pshape.len(),
                e.output.id(),
                root.len()
            ));
        }
        Ok(map)
    }

    fn global_offset(&self, tv: ValId, shape_idx: &[Idx]) -> Idx {
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
                    Idx::var(format!("T{}_shape.stride[{j}]", tv.id()))
                };
            off = off.add(shape_idx[j].clone().mul(stride));
        }
        off
    }

    /// [`Self::alloc_dims`], with the rows of a shared-memory tile padded by one
    /// element when they span a multiple of 32 banks: a tile read down its columns (a
    /// transpose) then hits 32 different banks instead of one. Not for tiles accessed
    /// with vectors (a padded row would break their alignment).
    fn padded_alloc_dims(&self, tv: ValId) -> SchedResult<(Vec<usize>, Vec<i64>)> {
        let (dims, mut exts) = self.alloc_dims(tv)?;
        let t = self.t(tv);
        let vectorized = t
            .domain
            .loop_dims
            .iter()
            .any(|&l| t.domain.dom(l).parallel == ParallelType::Vectorize);
        if t.memory == MemoryType::Shared && exts.len() >= 2 && !vectorized {
            if let Some(last) = exts.last_mut() {
                let bytes = *last * t.dtype.size_bytes() as i64;
                if bytes % 128 == 0 && t.dtype.size_bytes() == 4 {
                    *last += 1;
                }
            }
        }
        Ok((dims, exts))
    }

    fn local_offset(&self, tv: ValId, loop_idx: &dyn Fn(usize) -> Idx) -> SchedResult<Idx> {
        let (dims, exts) = self.padded_alloc_dims(tv)?;
        let mut off = Idx::Const(0);
        for (n, &i) in dims.iter().enumerate() {
            let stride: i64 = exts[n + 1..].iter().product();
            off = off.add(loop_idx(i).mul(Idx::Const(stride)));
        }
        Ok(off)
    }

    /// The element of input tensor `p` read by expression `e` at the current indices.
    fn read(&self, e: &SExpr, p: ValId, cidx: &HashMap<DomId, Idx>) -> SchedResult<String> {
        let off = self.read_offset(e, p, cidx)?;
        Ok(self.element(p, &off))
    }

    /// `T3[off]`; for an output this kernel stores and reads back (by the storing
    /// thread: `collect_bindings`, `read_offset`), a volatile load, since NVRTC merged
    /// `c ? in[i] : out[i]` into one read-only load issued before the store.
    fn element(&self, p: ValId, off: &Idx) -> String {
        if self.t(p).memory == MemoryType::Global && self.s.definition(p).is_some() {
            format!("nvf_load_volatile(&T{}[{off}])", p.id())
        } else {
            format!("T{}[{off}]", p.id())
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
            // A grid reduction's result is written by the last block, whichever it is.
            let grid_reduced = p.is_bid() && red_parallel(d, p);
            if !used && !grid_reduced {
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
                    None => (scalar_name(v.id()), x.dtype),
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

    /// `v` as an operand of math whose type is `sem`, in `sem`'s computation type: a
    /// tensor of another type converts as a cast to `sem` would first (an `i32` meeting
    /// `f16` math rounds to `f16`), a scalar does not (PyTorch keeps scalars in its
    /// `f32` opmath type); see the evaluator's spec.
    fn operand_in(
        &self,
        e: &SExpr,
        v: ValId,
        sem: DataType,
        cidx: &HashMap<DomId, Idx>,
    ) -> SchedResult<String> {
        let to = sem.compute_type();
        let half = matches!(sem, DataType::F16 | DataType::BF16);
        let from = self.val_dtype_any(v);
        if half && self.s.tensors.contains_key(&v) && from != sem && from != DataType::Bool {
            let inner = self.operand(e, v, from, cidx)?;
            return Ok(format!(
                "({})(({})({inner}))",
                cuda_type(to),
                cuda_type(sem)
            ));
        }
        self.operand(e, v, to, cidx)
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
            // Float to integer: the explicit rule for NaN and out-of-range values.
            Op::Cast
                if !out_dt.is_float()
                    && out_dt != DataType::Bool
                    && self.val_dtype_any(ins[0]).is_float() =>
            {
                let pd = self.val_dtype_any(ins[0]);
                let wide = pd == DataType::F64;
                let x = self.operand(
                    e,
                    ins[0],
                    if wide { DataType::F64 } else { DataType::F32 },
                    cidx,
                )?;
                match (out_dt, wide) {
                    (DataType::I32, false) => format!("nvf_f2i32_f32({x})"),
                    (DataType::I32, true) => format!("nvf_f2i32_f64({x})"),
                    _ => format!("nvf_f2i64({x})"),
                }
            }
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
                let sem = match u.rule() {
                    UnaryRule::FloatMath | UnaryRule::FloatOnly => out_dt,
                    _ => inp,
                };
                format!(
                    "nvf_{}({})",
                    u.name(),
                    self.operand_in(e, ins[0], sem, cidx)?
                )
            }
            Op::Binary(b) => {
                let sem = match b.rule() {
                    BinaryRule::FloatMath => out_dt,
                    _ => promoted(&ins[..2]),
                };
                let (x, y) = (
                    self.operand_in(e, ins[0], sem, cidx)?,
                    self.operand_in(e, ins[1], sem, cidx)?,
                );
                match (self.int_division(e), self.check_code(e), infix(*b)) {
                    (Some(helper), Some(code), _) => format!("{helper}(nvf_err, {code}, {x}, {y})"),
                    (_, _, Some(op)) => format!("{x} {op} {y}"),
                    _ => format!("nvf_{}({x}, {y})", b.name()),
                }
            }
            Op::Ternary(t) => match t {
                TernaryOp::Where => {
                    let cond = self.operand(e, ins[0], DataType::Bool, cidx)?;
                    format!(
                        "{cond} ? {} : {}",
                        self.operand_in(e, ins[1], out_dt, cidx)?,
                        self.operand_in(e, ins[2], out_dt, cidx)?
                    )
                }
                _ => {
                    let a: Vec<String> = ins
                        .iter()
                        .map(|&v| self.operand_in(e, v, out_dt, cidx))
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
            },
            Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Cat { .. }
            | Op::Reshape { .. }
            | Op::Select { .. }
            | Op::IndexSelect { .. }
            | Op::Gather { .. }
            | Op::TakeAlongAxis { .. } => self.resize_value(e, cidx)?,
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
                    lin = lin.mul(logical_ext(d.dom(r))).add(x);
                }
                let seed = self.operand(e, ins[2], DataType::I64, cidx)?;
                let off = self.operand(e, ins[3], DataType::I64, cidx)?;
                let wide = out_dt == DataType::F64;
                let uniform_t = format!("nvf_uniform<{}>", cuda_type(out_dt));
                let (f, pt) = match (dist, wide) {
                    (Distribution::Uniform, false) => (uniform_t.as_str(), DataType::F32),
                    (Distribution::Uniform, true) => ("nvf_uniform_f64_op", DataType::F64),
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

    /// Reads tensor `p` (global or shared) at the given indices of its shape dims.
    fn read_at(&self, e: &SExpr, p: ValId, shape_idx: &[Idx]) -> SchedResult<String> {
        let pt = self.t(p);
        match pt.memory {
            MemoryType::Global => Ok(self.element(p, &self.global_offset(p, shape_idx))),
            MemoryType::Shared => {
                let pd = &pt.domain;
                let mut pidx: HashMap<DomId, Idx> = HashMap::new();
                for (j, &pdim) in shape_doms(pd).iter().enumerate() {
                    let i = if pd.dom(pdim).kind != IterKind::Broadcast {
                        shape_idx.get(j).cloned().unwrap_or(Idx::Const(0))
                    } else {
                        Idx::Const(0)
                    };
                    pidx.insert(pdim, i);
                }
                forward_indices(pd, &mut pidx);
                let off = self.local_offset(p, &|i| {
                    pidx.get(&pd.loop_dims[i]).cloned().unwrap_or(Idx::Const(0))
                })?;
                Ok(format!("T{}[{off}]", p.id()))
            }
            MemoryType::Local => Err(ScheduleError::ResizeInputInRegisters {
                op: e.op.name(),
                producer: p,
                consumer: e.output,
            }),
        }
    }

    /// The value of a resize or indexing op: its input's indices computed from the
    /// output's, with bounds conditions where an element may come from nowhere.
    fn resize_value(&self, e: &SExpr, cidx: &HashMap<DomId, Idx>) -> SchedResult<String> {
        let od = &self.t(e.output).domain;
        let out_dt = self.t(e.output).dtype;
        let oi: Vec<Idx> = od
            .root
            .iter()
            .map(|r| {
                if od.dom(*r).kind != IterKind::Broadcast {
                    cidx.get(r).cloned().unwrap_or(Idx::Const(0))
                } else {
                    Idx::Const(0)
                }
            })
            .collect();
        let oext: Vec<Idx> = od.root.iter().map(|r| logical_ext(od.dom(*r))).collect();
        let x = e.inputs[0];
        let xd = &self.t(x).domain;
        let xext: Vec<Extent> = shape_doms(xd)
            .iter()
            .map(|&d| logical_extent(xd.dom(d)))
            .collect();
        let size_arg = |a: SizeArg| -> Extent {
            match a {
                SizeArg::Const(c) => Extent::Const(c),
                SizeArg::Input(k) => Extent::Scalar(e.inputs[k as usize]),
            }
        };
        let idx_of = |v: String| Idx::var(format!("(nvfuser_index_t)({v})"));
        Ok(match &e.op {
            Op::Slice { ranges } => {
                // in = start + out * step, start normalized like the builder's extents.
                let xi: Vec<Idx> = ranges
                    .iter()
                    .zip(&xext)
                    .zip(&oi)
                    .map(|((r, size), o)| {
                        let start = match r.start {
                            SizeArg::Const(c) if c < 0 => {
                                (size.clone() + Extent::Const(c)).max(Extent::Const(0))
                            }
                            // 0 <= start: min(0, size) is 0.
                            SizeArg::Const(0) => Extent::Const(0),
                            a => size_arg(a).min(size.clone()),
                        };
                        ext(&start).add(o.clone().mul(Idx::Const(r.step)))
                    })
                    .collect();
                self.read_at(e, x, &xi)?
            }
            Op::Pad { widths } => {
                // in = out - before; outside 0 <= in < size, the pad value.
                let mut conds = Vec::new();
                let mut xi = Vec::new();
                for ((&(lo, hi), size), o) in widths.iter().zip(&xext).zip(&oi) {
                    if lo == 0 && hi == 0 {
                        xi.push(o.clone());
                        continue;
                    }
                    let i = Idx::Sub(Box::new(o.clone()), Box::new(Idx::Const(lo)));
                    let i = if lo == 0 { o.clone() } else { i };
                    if lo > 0 {
                        conds.push(format!("{o} >= {lo}"));
                    }
                    if hi > 0 {
                        conds.push(format!("{i} < {}", ext(size)));
                    }
                    xi.push(i);
                }
                let fill = self.operand(e, e.inputs[1], out_dt, cidx)?;
                let v = self.read_at(e, x, &xi)?;
                if conds.is_empty() {
                    v
                } else {
                    format!("({}) ? {v} : {fill}", conds.join(" && "))
                }
            }
            Op::Cat { axis } => {
                // The input whose range along `axis` holds the output index.
                let mut offset = Extent::Const(0);
                let mut pieces = Vec::new();
                for &p in e.inputs.iter() {
                    let pd = &self.t(p).domain;
                    let pshape = shape_doms(pd);
                    let len = logical_extent(pd.dom(pshape[*axis]));
                    let mut xi = oi.clone();
                    xi[*axis] = if offset == Extent::Const(0) {
                        oi[*axis].clone()
                    } else {
                        Idx::Sub(Box::new(oi[*axis].clone()), Box::new(ext(&offset)))
                    };
                    offset = offset + len;
                    pieces.push((ext(&offset), self.read_at(e, p, &xi)?));
                }
                let mut v = pieces.pop().map(|(_, r)| r).unwrap_or_default();
                while let Some((end, r)) = pieces.pop() {
                    v = format!("{} < {end} ? {r} : ({v})", oi[*axis]);
                }
                v
            }
            Op::Reshape { .. } => {
                // Row-major: linearize the output index, split it over the input dims.
                let mut lin = Idx::Const(0);
                for (o, n) in oi.iter().zip(&oext) {
                    lin = lin.mul(n.clone()).add(o.clone());
                }
                let mut xi = vec![Idx::Const(0); xext.len()];
                let mut inner = Idx::Const(1);
                for j in (0..xext.len()).rev() {
                    let n = ext(&xext[j]);
                    xi[j] = lin.clone().div(inner.clone()).rem(n.clone());
                    if j == 0 {
                        xi[j] = lin.clone().div(inner.clone());
                    }
                    inner = inner.mul(n);
                }
                self.read_at(e, x, &xi)?
            }
            Op::Select { axis, index } => {
                let size = ext(&xext[*axis]);
                let i = match index {
                    SizeArg::Const(c) if *c < 0 => ext(&(xext[*axis].clone() + Extent::Const(*c))),
                    SizeArg::Const(c) => Idx::Const(*c),
                    SizeArg::Input(k) => {
                        let v = self.operand(e, e.inputs[*k as usize], DataType::I64, cidx)?;
                        Idx::var(format!("nvf_wrap_index({v}, {size})"))
                    }
                };
                let mut xi = oi.clone();
                xi.insert(*axis, i);
                self.read_at(e, x, &xi)?
            }
            Op::IndexSelect { axis } | Op::Gather { axis } | Op::TakeAlongAxis { axis } => {
                let index = e.inputs[1];
                let raw = match &e.op {
                    Op::IndexSelect { .. } => self.read_at(e, index, &[oi[*axis].clone()])?,
                    _ => self.read_at(e, index, &oi)?,
                };
                let size = ext(&xext[*axis]);
                let i = idx_of(raw.clone());
                let mut xi = oi.clone();
                xi[*axis] = i.clone();
                // An index outside the input reads nothing (the element is zero) and
                // sets the error flag, checked in the index's own type (before the
                // narrowing to the index type); the CPU reference rejects such an index.
                let check = match self.check_code(e) {
                    Some(code) => format!(
                        "nvf_check_index(nvf_err, {code}, (long long)({raw}), (long long)({size}))"
                    ),
                    None => format!("nvf_in_range({i}, {size})"),
                };
                format!(
                    "{check} ? {} : ({})(0)",
                    self.read_at(e, x, &xi)?,
                    cuda_type(out_dt)
                )
            }
            other => return unsupported(format!("{} is not a resize op", other.name())),
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
        // Register math on register operands needs no bounds predicate: an element
        // outside the tensor is computed from values that are never read back (every
        // load into registers, every store and every reduction stays predicated), and
        // skipping the condition keeps index arithmetic out of the math loop. Checked
        // expressions (integer division) stay predicated: an element outside the tensor
        // must not report an error.
        let register_only = t.memory == MemoryType::Local
            && !self.check_site.contains_key(&tv)
            && !matches!(
                e.op,
                Op::Reshape { .. }
                    | Op::Permute { .. }
                    | Op::Slice { .. }
                    | Op::Pad { .. }
                    | Op::Cat { .. }
                    | Op::IndexSelect { .. }
                    | Op::Select { .. }
                    | Op::Gather { .. }
                    | Op::TakeAlongAxis { .. }
            )
            && e.inputs.iter().all(|&i| {
                self.s
                    .tensors
                    .get(&i)
                    .is_none_or(|it| it.memory == MemoryType::Local)
            });
        let mut cond = if register_only {
            Vec::new()
        } else {
            self.predicates(tv, &cidx, false)
        };
        if t.memory == MemoryType::Global {
            cond.extend(self.thread_guards(tv));
        }
        let lhs = format!("T{}[{}]", tv.id(), self.store_offset(tv, &cidx)?);
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
                            why: format!("vectorized access of T{} by {width}", g.id()),
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
            return Ok(format!("T{}_acc", tv.id()));
        }
        let cidx = self.consumer_indices(tv);
        Ok(format!("T{}[{}]", tv.id(), self.store_offset(tv, &cidx)?))
    }

    fn emit_reduction_init(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let tv = self.s.exprs[ei].output;
        let dt = self.t(tv).dtype;
        if is_welford(&self.s.exprs[ei].op) {
            let c = cuda_type(dt);
            let zero = literal(ScalarValue::Int(0), dt.compute_type());
            out.push(Stmt::Comment(format!(
                "Welford accumulator of T{}: running mean, sum of squared deviations, count",
                tv.id()
            )));
            out.push(Stmt::Assign {
                lhs: format!("{c} T{}_avg", tv.id()),
                rhs: zero.clone(),
            });
            out.push(Stmt::Assign {
                lhs: format!("{c} T{}_m2", tv.id()),
                rhs: zero,
            });
            out.push(Stmt::Assign {
                lhs: format!("long long T{}_n", tv.id()),
                rhs: "0".into(),
            });
            return Ok(());
        }
        let op = self.red_op(ei)?;
        let init = init_value(op, dt);
        if self.t(tv).memory == MemoryType::Global {
            out.push(Stmt::Comment(format!("accumulator of T{}", tv.id())));
            out.push(Stmt::Assign {
                lhs: format!("{} T{}_acc", cuda_type(dt), tv.id()),
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
        let dt = self.t(tv).dtype;
        let cidx = self.consumer_indices(tv);
        let cond = self.predicates(tv, &cidx, true);
        let x = self.operand(e, e.inputs[0], dt, &cidx)?;
        let st = if is_welford(&e.op) {
            Stmt::Call(format!(
                "nvf_welford_update(T{0}_avg, T{0}_m2, T{0}_n, {x})",
                tv.id()
            ))
        } else {
            let op = self.red_op(ei)?;
            let acc = self.acc(tv)?;
            let rhs = match op {
                ReductionOp::Sum | ReductionOp::Mean => format!("{acc} + {x}"),
                ReductionOp::Prod => format!("{acc} * {x}"),
                ReductionOp::Max => format!("nvf_maximum({acc}, {x})"),
                ReductionOp::Min => format!("nvf_minimum({acc}, {x})"),
            };
            Stmt::Assign {
                lhs: acc,
                rhs: format!("({})({rhs})", cuda_type(dt)),
            }
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

    /// Stores `value` into output `o` of a reduction at the current indices (guarded
    /// for global outputs; `extra` conditions are and-ed in).
    fn store_result(
        &self,
        o: ValId,
        value: String,
        extra: &[String],
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        let t = self.t(o);
        let cidx = self.consumer_indices(o);
        let mut cond = Vec::new();
        if t.memory == MemoryType::Global {
            cond = self.predicates(o, &cidx, false);
            cond.extend(self.thread_guards(o));
            cond.extend(extra.iter().cloned());
        }
        let st = Stmt::Assign {
            lhs: format!("T{}[{}]", o.id(), self.store_offset(o, &cidx)?),
            rhs: format!("({})({value})", cuda_type(t.dtype)),
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

    fn emit_welford_finish(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        let n = tv.id();
        if red_parallel(&t.domain, ParallelType::TIDx) {
            out.push(Stmt::Call(format!(
                "nvf_block_welford_x(T{n}_avg, T{n}_m2, T{n}_n, T{n}_smem_avg, T{n}_smem_m2, T{n}_smem_n)"
            )));
        }
        let c = cuda_type(t.dtype.compute_type());
        // As the reference: the variance divides by max(0, n - correction) (NaN or inf
        // when n <= correction) and the mean of no elements is NaN (0 / 0).
        let var = |corr: i64| {
            let count = if corr == 0 {
                format!("T{n}_n")
            } else {
                format!("(T{n}_n > {corr} ? T{n}_n - {corr} : 0)")
            };
            format!("T{n}_m2 / ({c})({count})")
        };
        let mean = format!("T{n}_avg / ({c})(T{n}_n != 0)");
        let values: Vec<String> = match &e.op {
            Op::Var { correction, .. } => vec![var(*correction)],
            Op::VarMean { correction, .. } => vec![var(*correction), mean],
            Op::Welford { .. } => vec![mean, format!("T{n}_m2"), format!("T{n}_n")],
            other => return unsupported(format!("{} is not a Welford reduction", other.name())),
        };
        for (o, v) in e.outputs().into_iter().zip(values) {
            self.store_result(o, v, &[], out)?;
        }
        Ok(())
    }

    fn emit_reduction_finish(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        if is_welford(&self.s.exprs[ei].op) {
            return self.emit_welford_finish(ei, out);
        }
        let tv = self.s.exprs[ei].output;
        let op = self.red_op(ei)?;
        let t = self.t(tv);
        let dt = t.dtype;
        let acc = self.acc(tv)?;
        let tidx = red_parallel(&t.domain, ParallelType::TIDx);
        if tidx {
            out.push(Stmt::BlockReduce {
                acc: acc.clone(),
                dtype: dt,
                op,
                init: init_value(op, dt),
                smem: format!("T{}_smem", tv.id()),
            });
        }
        let mut last = Vec::new();
        if grid_dims(&t.domain).next().is_some() {
            last.push(self.emit_grid_reduce(tv, op, &acc, tidx, out));
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
            cond.extend(last);
            let st = Stmt::Assign {
                lhs: format!("T{}[{}]", tv.id(), self.store_offset(tv, &cidx)?),
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

    /// Checks a grid reduction and adds its work buffers to the ABI.
    fn plan_grid_reduction(&mut self, ei: usize) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        if !matches!(e.op, Op::Reduction { .. }) {
            return unsupported(format!(
                "T{}: grid (cross-block) {} reductions; only sum/prod/max/min/mean reduce across blocks",
                tv.id(),
                e.op.name()
            ));
        }
        if t.memory != MemoryType::Global {
            return unsupported(format!(
                "T{}: the result of a grid reduction is only known to the last block to finish; make it a fusion output (consumers in the same kernel would need a grid-wide barrier)",
                tv.id()
            ));
        }
        let d = &t.domain;
        let reduced = |p: ParallelType| red_parallel(d, p);
        let mut partials = Extent::Const(1);
        let mut segments = Extent::Const(1);
        for (&p, x) in &self.bound {
            if p.is_bid() {
                partials = partials * x.clone();
                if !reduced(p) {
                    segments = segments * x.clone();
                }
            } else if !reduced(p) {
                partials = partials * x.clone();
            }
        }
        self.work.push(Param {
            name: format!("T{}_work", tv.id()),
            kind: ParamKind::WorkBuffer {
                tensor: tv,
                kind: WorkKind::Partials(t.dtype),
                elements: partials,
            },
        });
        self.work.push(Param {
            name: format!("T{}_sem", tv.id()),
            kind: ParamKind::WorkBuffer {
                tensor: tv,
                kind: WorkKind::Semaphore,
                elements: segments,
            },
        });
        Ok(())
    }

    /// Emits the grid reduction of `acc`; returns the name of the flag that is true in
    /// the one block that holds the final value.
    fn emit_grid_reduce(
        &self,
        tv: ValId,
        op: ReductionOp,
        acc: &str,
        tidx: bool,
        out: &mut Vec<Stmt>,
    ) -> String {
        let d = &self.t(tv).domain;
        let dt = self.t(tv).dtype;
        let lin = |pts: &[ParallelType], want_reduced: bool, size: bool| -> Idx {
            let mut v = Idx::Const(if size { 1 } else { 0 });
            for &p in pts {
                if !self.bound.contains_key(&p) || red_parallel(d, p) != want_reduced {
                    continue;
                }
                let name = p.cuda_index().unwrap_or("0");
                let dim = if p.is_bid() {
                    name.replace("blockIdx", "gridDim")
                } else {
                    name.replace("threadIdx", "blockDim")
                };
                v = if size {
                    v.mul(Idx::var(dim))
                } else {
                    v.mul(Idx::var(dim)).add(Idx::var(name))
                };
            }
            v
        };
        use ParallelType::*;
        let bids = [BIDz, BIDy, BIDx];
        let tids = [TIDz, TIDy, TIDx];
        let f = reduction_functor(op);
        let reduced: Vec<String> = bids
            .iter()
            .filter(|&&p| red_parallel(d, p))
            .map(|p| p.to_string())
            .collect();
        out.push(Stmt::Comment(format!(
            "grid reduction of T{0} over {1}: each block stores its partial in T{0}_work and counts itself in T{0}_sem; the last block to arrive combines the partials",
            tv.id(),
            reduced.join(", ")
        )));
        let flag = format!("T{}_last", tv.id());
        out.push(Stmt::Assign {
            lhs: format!("const bool {flag}"),
            rhs: format!(
                "nvf_grid_reduce({acc}, {f}, {init}, T{n}_work, T{n}_sem, {seg}, {nblocks}, {rank}, {slot}, {nslots}, {tidx}, {smem})",
                init = init_value(op, dt),
                n = tv.id(),
                seg = lin(&bids, false, false),
                nblocks = lin(&bids, true, true),
                rank = lin(&bids, true, false),
                slot = lin(&tids, false, false),
                nslots = lin(&tids, false, true),
                smem = if tidx {
                    format!("T{}_smem", tv.id())
                } else {
                    format!("({}*)nullptr", cuda_type(dt))
                },
            ),
        });
        flag
    }

    fn abi(&self, opts: &KernelOptions) -> KernelAbi {
        let f = self.sf.fusion();
        let mut params = Vec::new();
        let tensor = |v: ValId, input: bool, params: &mut Vec<Param>| {
            let t = self.t(v);
            params.push(Param {
                name: format!("T{}", v.id()),
                kind: ParamKind::TensorData {
                    tensor: v,
                    dtype: t.dtype,
                    input,
                },
            });
            params.push(Param {
                name: format!("T{}_shape", v.id()),
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
                    name: scalar_name(v.id()),
                    kind: ParamKind::Scalar {
                        val: v,
                        dtype: f.val(v).dtype,
                    },
                });
            }
        }
        for (k, &v) in self.s.outputs.iter().enumerate() {
            // A tensor is one parameter pair even when the fusion returns it twice (the
            // launcher returns the repeat as a view of the first).
            if !self.s.inputs.contains(&v) && !self.s.outputs[..k].contains(&v) {
                tensor(v, false, &mut params);
            }
        }
        params.extend(self.work.iter().cloned());
        if !self.checks.is_empty() {
            params.push(Param {
                name: "nvf_err".into(),
                kind: ParamKind::ErrorFlag {
                    checks: self.checks.clone(),
                },
            });
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

/// Pushes logical indices forward through a tensor's transforms (split: div/mod,
/// merge: linearize), filling in the loop dims' indices.
fn forward_indices(d: &TensorDomain, idx: &mut HashMap<DomId, Idx>) {
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

/// True for the Welford family (`var`, `var_mean`, `welford`).
fn is_welford(op: &Op) -> bool {
    matches!(op, Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. })
}

/// True when a reduction loop dim of `d` is bound to `p`.
fn red_parallel(d: &TensorDomain, p: ParallelType) -> bool {
    d.loop_dims.iter().any(|&l| {
        let x = d.dom(l);
        x.kind == IterKind::Reduction && x.parallel == p
    })
}

/// The block indices a reduction of `d` runs over (a grid reduction).
fn grid_dims(d: &TensorDomain) -> impl Iterator<Item = ParallelType> + '_ {
    d.loop_dims
        .iter()
        .map(|&l| d.dom(l))
        .filter(|x| x.kind == IterKind::Reduction && x.parallel.is_bid())
        .map(|x| x.parallel)
}

/// The preamble's functor of a reduction.
pub(super) fn reduction_functor(op: ReductionOp) -> &'static str {
    match op {
        ReductionOp::Sum | ReductionOp::Mean => "NvfSum()",
        ReductionOp::Prod => "NvfProd()",
        ReductionOp::Max => "NvfMax()",
        ReductionOp::Min => "NvfMin()",
    }
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
        DataType::I32 => {
            // `-2147483648` is the negation of a `long` literal in C++: spell i32::MIN
            // as an `int` expression.
            let i = v.cast(DataType::I32).as_i64().unwrap_or(0);
            if i == i64::from(i32::MIN) {
                "(-2147483647 - 1)".into()
            } else {
                format!("{i}")
            }
        }
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
    // The init is passed next to the accumulator to the templated block/grid reduce
    // helpers (`T init`): cast it to the accumulator's own C++ type so that template
    // deduction sees one type for every dtype.
    let lit = literal(v, dt.compute_type());
    format!("({})({lit})", cuda_type(dt))
}
