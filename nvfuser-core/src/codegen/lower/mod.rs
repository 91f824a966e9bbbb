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
//!
//! The lowering is one `Lower` walk over the scheduled expressions, split by phase:
//! `sites` (device-side check sites), `loops` (launch bindings, loop keys, the loop
//! tree and its emission), `alloc` (register and shared allocations, reduction
//! anchors, barriers), `indexing` (index math and offsets), `predicates` (bounds
//! checks and thread guards), `exprs` (values and their statements), `resize`
//! (resize and indexing ops), and `reductions` (block, Welford and grid reductions).
//! This file holds the walk's state, the entry point and the kernel's parameters.

mod alloc;
mod exprs;
mod indexing;
mod loops;
mod order;
mod predicates;
mod reductions;
mod resize;
mod scan;
mod sites;
pub(super) mod sort;

use std::collections::{BTreeMap, HashMap, HashSet};

use super::abi::{IndexType, KernelAbi, Param, ParamKind};
use super::checks::DeviceCheck;
use super::index::{Idx, ShapeField};
use super::kir::Requirement;
use super::{Kernel, KernelOptions, LaunchDims};
use crate::dtype::DataType;
use crate::ir::{Extent, IterKind, ValId};
use crate::sched::{
    DomId, ParallelType, SchedResult, Schedule, ScheduleError, ScheduledFusion, TensorSchedule,
};
use indexing::shape_doms;

/// Where an expression's value is computed.
#[derive(Clone, Copy)]
pub(super) enum At<'c> {
    /// In its loop nest: the indices of every dim of its output's domain.
    Loop(&'c HashMap<DomId, Idx>),
    /// At these indices of its output's shape dims (a recomputed tensor).
    Index(&'c [Idx]),
}

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
    /// Scans, with the loops their running values live in.
    scans: HashMap<usize, scan::ScanLoops>,
    /// Scans whose running value is declared before a loop (`true`: the tile carry;
    /// `false`: the per-thread value, whose block scan follows the loop).
    scan_at: HashMap<Key, Vec<(usize, bool)>>,
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
    /// Per tensor, the grid reductions it is computed from (not itself): see
    /// `reductions::grid_sources`.
    grid_deps: HashMap<ValId, Vec<ValId>>,
    /// Whether some grid all-reduce synchronizes the whole grid (the kernel must be
    /// launched cooperatively).
    grid_sync: bool,
}

fn unsupported<T>(m: String) -> SchedResult<T> {
    Err(ScheduleError::Unsupported(m))
}

/// `T3_shape.size[1]` or `.stride[1]`: a field of a tensor's shape parameter.
fn shape_field(t: u32, field: ShapeField, axis: usize) -> Idx {
    Idx::Shape {
        param: format!("T{t}_shape"),
        field,
        axis,
    }
}

fn dim_size(t: u32, a: u32) -> Idx {
    shape_field(t, ShapeField::Size, a as usize)
}

fn scalar_idx(v: u32) -> Idx {
    Idx::Var(scalar_name(v))
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
    Idx::from_extent(e, &dim_size, &scalar_idx)
}

pub(super) fn lower(sf: &ScheduledFusion, opts: &KernelOptions) -> SchedResult<Kernel> {
    let s = sf.schedule();
    let first = match lower_in(sf, s, opts) {
        Ok(k) => return Ok(k),
        Err(e) => e,
    };
    // The schedule's topological order put an expression between a producer and the
    // consumer whose loops it shares: the same schedule with each inlined producer
    // pulled to its first reader (see `order`). The first error stands if that fails
    // too or changes nothing.
    // Then with the expressions of each outermost loop kept together (`grouped_order`).
    // Last, with every loop's expressions together at every depth (`nested_order`).
    let pulled_order = order::emission_order(s);
    let grouped = order::grouped_order(s, &pulled_order);
    let nested = order::nested_order(s, &pulled_order);
    for order in [Some(pulled_order), Some(grouped), nested]
        .into_iter()
        .flatten()
    {
        if order.iter().enumerate().all(|(i, &e)| i == e) {
            continue;
        }
        let mut pulled = s.clone();
        pulled.exprs = order.into_iter().map(|i| s.exprs[i].clone()).collect();
        if let Ok(k) = lower_in(sf, &pulled, opts) {
            return Ok(k);
        }
    }
    Err(first)
}

/// [`lower`] with the expressions of `s` (`sf`'s schedule, possibly reordered).
fn lower_in(sf: &ScheduledFusion, s: &Schedule, opts: &KernelOptions) -> SchedResult<Kernel> {
    let mut l = Lower {
        sf,
        s,
        env: HashMap::new(),
        next_var: 0,
        allocs: HashMap::new(),
        anchors: HashMap::new(),
        anchored: HashSet::new(),
        scans: HashMap::new(),
        scan_at: HashMap::new(),
        shared: Vec::new(),
        pending_sync: HashSet::new(),
        work: Vec::new(),
        bound: BTreeMap::new(),
        requirements: Vec::new(),
        checks: Vec::new(),
        check_site: HashMap::new(),
        check_fingerprint: 0,
        grid_deps: HashMap::new(),
        grid_sync: false,
    };
    l.plan_checks();
    l.plan_grid_deps();
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
    // Sibling nests over the same rows (two column sums, an output stored beside its
    // own sum) share one loop and one load of each input element.
    super::kir::fuse::fuse_sibling_loops(&mut body);
    // Index math that reshape chains made too large to spell inline gets names.
    super::kir::bind::bind_large_indices(&mut body);
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
        grid_sync: l.grid_sync,
        min_blocks_per_sm: opts.min_blocks_per_sm,
        dynamic_shared: 0,
    })
}

impl<'a> Lower<'a> {
    fn t(&self, tv: ValId) -> &'a TensorSchedule {
        &self.s.tensors[&tv]
    }

    fn val_dtype(&self, v: ValId) -> DataType {
        self.sf.fusion().val(v).dtype
    }

    /// True for tensors: scheduled ones and those recomputed at each use.
    fn is_tensor(&self, v: ValId) -> bool {
        self.s.tensors.contains_key(&v) || self.s.recomputed(v).is_some()
    }

    /// The kinds of `v`'s shape dims (logical, no reduction dims).
    fn shape_kinds(&self, v: ValId) -> Vec<IterKind> {
        match self.s.tensors.get(&v) {
            Some(t) => shape_doms(&t.domain)
                .iter()
                .map(|&d| t.domain.dom(d).kind)
                .collect(),
            None => self
                .sf
                .fusion()
                .tensor_type(v)
                .map(|t| t.shape().map(|d| d.kind).collect())
                .unwrap_or_default(),
        }
    }

    /// The sizes of `v`'s shape dims as the fusion sees them (1 for a broadcast).
    fn shape_extents(&self, v: ValId) -> Vec<Extent> {
        match self.s.tensors.get(&v) {
            Some(t) => shape_doms(&t.domain)
                .iter()
                .map(|&d| logical_extent(t.domain.dom(d)))
                .collect(),
            None => self
                .sf
                .fusion()
                .tensor_type(v)
                .map(|t| {
                    t.shape()
                        .map(|d| {
                            if d.kind == IterKind::Broadcast {
                                Extent::Const(1)
                            } else {
                                d.extent.clone()
                            }
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    fn val_dtype_any(&self, v: ValId) -> DataType {
        match self.s.tensors.get(&v) {
            Some(t) => t.dtype,
            None => self.val_dtype(v),
        }
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
