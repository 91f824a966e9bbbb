//! Loop nests: the launch bindings of thread and block dims, the loop key of each loop
//! dim (shared with the consumer below a compute-at position), the tree of loops and
//! expressions, and its emission as statements.

use std::collections::HashSet;

use super::{ext, unsupported, Key, Lower, Node};
use crate::codegen::index::Idx;
use crate::codegen::kir::Stmt;
use crate::ir::{Extent, IterKind, Op, ValId};
use crate::sched::{MemoryType, ParallelType, SchedResult, Schedule};

impl<'a> Lower<'a> {
    pub(super) fn collect_bindings(&mut self) -> SchedResult<()> {
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

    pub(super) fn key(&self, tv: ValId, i: usize) -> Key {
        loop_key(self.s, tv, i)
    }

    pub(super) fn key_dom(&self, k: Key) -> &'a crate::sched::Dom {
        self.t(k.0).domain.loop_dom(k.1)
    }

    pub(super) fn makes_loop(&self, k: Key) -> bool {
        makes_loop(self.s, k)
    }

    fn nest(&self, tv: ValId) -> Vec<Key> {
        nest(self.s, tv)
    }

    pub(super) fn build_tree(&self) -> SchedResult<Vec<Node>> {
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

    pub(super) fn emit_node(&mut self, n: &Node, out: &mut Vec<Stmt>) -> SchedResult<()> {
        self.sync_before_reads(n, out);
        match n {
            Node::Expr(ei) => {
                if self.scans.contains_key(ei) {
                    self.emit_scan_step(*ei, out)?;
                } else if self.anchored.contains(ei) {
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
                let scans = self.scan_at.get(key).cloned().unwrap_or_default();
                for &(ei, carry) in &scans {
                    self.emit_scan_init(ei, carry, out)?;
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
                for &(ei, carry) in &scans {
                    if !carry && self.scans[&ei].block {
                        self.emit_scan_finish(ei, out)?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// The loop that dim `i` of `tv`'s loop domain runs in: the consumer's, below the
/// compute-at position, else the compute-with tensor's, below its position.
pub(super) fn loop_key(s: &Schedule, tv: ValId, i: usize) -> Key {
    let t = &s.tensors[&tv];
    match (t.compute_at, t.compute_with) {
        (Some(ca), _) if i < ca.pos => loop_key(s, ca.consumer, i),
        (_, Some(cw)) if i < cw.pos => loop_key(s, cw.consumer, i),
        _ => (tv, i),
    }
}

/// Whether the loop `k` is a loop of the kernel (not a thread or vector dim, a
/// broadcast, or one iteration).
pub(super) fn makes_loop(s: &Schedule, k: Key) -> bool {
    let d = s.tensors[&k.0].domain.loop_dom(k.1);
    !d.parallel.is_thread()
        && d.parallel != ParallelType::Vectorize
        && d.kind != IterKind::Broadcast
        && d.extent != Extent::Const(1)
}

/// The loops `tv` is computed in, outermost first.
pub(super) fn nest(s: &Schedule, tv: ValId) -> Vec<Key> {
    (0..s.tensors[&tv].domain.loop_dims.len())
        .map(|i| loop_key(s, tv, i))
        .filter(|&k| makes_loop(s, k))
        .collect()
}
