//! Grouping expressions into segments.
//!
//! Start from one group per node (tensor expression). Then:
//!
//! 1. **Level-based merging**, in rounds. A group's level is the length of the longest
//!    path to it from groups without producers. In a round, groups are visited by level;
//!    each group not yet paired picks the first neighbour (consumers, then producers)
//!    whose level differs by exactly one, that is not paired yet, and whose union with it
//!    the scheduler accepts. A direct edge between levels `L` and `L + 1` is the only
//!    path between its ends, so merging it cannot close a cycle. Several pairs merged in
//!    the same round could still close one, but only through "crossing" edges (from the
//!    lower end of one pair to the upper end of another pair on the same two levels; see
//!    `crossing`), so a pair with such an edge to an already chosen pair waits for the
//!    next round. Rounds repeat until one merges nothing. A chain of `n` groups halves in
//!    each round, so the work is `O(n log n)` scheduler checks of total size.
//! 2. **Greedy producer-to-consumer merging**: in topological order, each group tries its
//!    consumers (nearest first), merging with the first whose union is accepted and
//!    creates no cycle (no other path between the two); sweeps repeat until one merges
//!    nothing.
//!
//! Edges that leave a `segment_set` are never merged. A pair the scheduler rejected is
//! remembered by the groups' versions (a group gets a new version when it grows), so it
//! is not asked again until one side changes.

use rustc_hash::{FxHashMap, FxHashSet};

use super::build::build;
use super::graph::Graph;
use crate::ir::{ExprId, Fusion, ValId};
use crate::scheduler::{Rejections, SchedulerKind};

/// The acceptance check: a scheduler that takes the fusion, or every refusal.
pub(crate) type Accept<'a> = &'a dyn Fn(&Fusion) -> Result<SchedulerKind, Rejections>;

struct Group {
    /// Node indices, sorted (arena order).
    nodes: Vec<u32>,
    version: u64,
    kind: Option<SchedulerKind>,
    /// Neighbour slot -> the edge crosses a `segment_set`.
    producers: FxHashMap<u32, bool>,
    consumers: FxHashMap<u32, bool>,
    alive: bool,
}

/// Counters of one segmentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmenterStats {
    /// Calls of the acceptance check (the scheduler), the whole-fusion one included.
    pub scheduler_checks: usize,
    /// Checks that said yes.
    pub accepted: usize,
    /// Level-based merge rounds that merged something.
    pub level_rounds: usize,
    /// Merges made by the level-based rounds.
    pub level_merges: usize,
    /// Merges made by the greedy pass.
    pub greedy_merges: usize,
    /// Expressions (graph nodes) segmented.
    pub nodes: usize,
}

pub(crate) struct Segmenter<'g, 'f, 'a> {
    g: &'g Graph<'f>,
    accept: Accept<'a>,
    groups: Vec<Group>,
    group_of: Vec<u32>,
    next_version: u64,
    rejected: FxHashSet<(u64, u64)>,
    pub stats: SegmenterStats,
}

/// One final group: its nodes' expressions (arena order) and its scheduler, if known.
pub(crate) struct FinalGroup {
    pub exprs: Vec<ExprId>,
    pub kind: Option<SchedulerKind>,
}

impl<'g, 'f, 'a> Segmenter<'g, 'f, 'a> {
    pub fn new(g: &'g Graph<'f>, accept: Accept<'a>) -> Self {
        let n = g.nodes.len();
        let mut groups: Vec<Group> = (0..n)
            .map(|i| Group {
                nodes: vec![i as u32],
                version: i as u64,
                kind: None,
                producers: FxHashMap::default(),
                consumers: FxHashMap::default(),
                alive: true,
            })
            .collect();
        for c in 0..n {
            for &(p, barrier) in &g.producers[c] {
                groups[c].producers.insert(p, barrier);
                groups[p as usize].consumers.insert(c as u32, barrier);
            }
        }
        Segmenter {
            g,
            accept,
            groups,
            group_of: (0..n as u32).collect(),
            next_version: n as u64,
            rejected: FxHashSet::default(),
            stats: SegmenterStats {
                nodes: n,
                ..SegmenterStats::default()
            },
        }
    }

    /// Runs the acceptance check on an explicit fusion (counted in the stats).
    pub fn check(&mut self, fusion: &Fusion) -> Result<SchedulerKind, Rejections> {
        self.stats.scheduler_checks += 1;
        let r = (self.accept)(fusion);
        if r.is_ok() {
            self.stats.accepted += 1;
        }
        r
    }

    /// The groups after both merge phases, in a topological order.
    pub fn run(&mut self) -> Vec<FinalGroup> {
        self.level_rounds();
        self.greedy();
        let order = self.topo_order();
        let groups = order
            .into_iter()
            .map(|s| {
                let grp = &self.groups[s as usize];
                FinalGroup {
                    exprs: grp
                        .nodes
                        .iter()
                        .map(|&n| self.g.nodes[n as usize])
                        .collect(),
                    kind: grp.kind,
                }
            })
            .collect();
        groups
    }

    fn key(&self, a: u32, b: u32) -> (u64, u64) {
        let (x, y) = (
            self.groups[a as usize].version,
            self.groups[b as usize].version,
        );
        (x.min(y), x.max(y))
    }

    /// The union of groups `a` and `b` as a fusion, checked by the scheduler.
    fn try_union(&mut self, a: u32, b: u32) -> Result<SchedulerKind, Rejections> {
        let (na, nb) = (
            &self.groups[a as usize].nodes,
            &self.groups[b as usize].nodes,
        );
        let mut nodes = Vec::with_capacity(na.len() + nb.len());
        let (mut i, mut j) = (0, 0);
        while i < na.len() || j < nb.len() {
            if j == nb.len() || (i < na.len() && na[i] < nb[j]) {
                nodes.push(na[i]);
                i += 1;
            } else {
                nodes.push(nb[j]);
                j += 1;
            }
        }
        let inside = |n: u32| {
            let grp = self.group_of[n as usize];
            grp == a || grp == b
        };
        let (exprs, outputs) = self.exprs_and_outputs(&nodes, inside);
        let built = build(self.g, &exprs, &outputs);
        self.check(&built.fusion)
    }

    /// The expressions of `nodes` and the values they must output: fusion outputs and
    /// values read by nodes outside (`inside` says which nodes are inside).
    fn exprs_and_outputs(
        &self,
        nodes: &[u32],
        inside: impl Fn(u32) -> bool,
    ) -> (Vec<ExprId>, Vec<ValId>) {
        let g = self.g;
        let mut exprs = Vec::with_capacity(nodes.len());
        let mut outputs = Vec::new();
        for &n in nodes {
            let e = g.nodes[n as usize];
            exprs.push(e);
            for &o in &g.fusion.expr(e).outputs {
                if g.is_output[o.index()] || g.readers[o.index()].iter().any(|&r| !inside(r)) {
                    outputs.push(o);
                }
            }
        }
        outputs.sort_unstable();
        (exprs, outputs)
    }

    /// Merges `b` into `a` or `a` into `b` (the larger keeps its slot); returns the slot.
    fn merge(&mut self, a: u32, b: u32, kind: SchedulerKind) -> u32 {
        let (keep, gone) =
            if self.groups[a as usize].nodes.len() >= self.groups[b as usize].nodes.len() {
                (a, b)
            } else {
                (b, a)
            };
        let gone_nodes = std::mem::take(&mut self.groups[gone as usize].nodes);
        for &n in &gone_nodes {
            self.group_of[n as usize] = keep;
        }
        let mut nodes = std::mem::take(&mut self.groups[keep as usize].nodes);
        nodes.extend(gone_nodes);
        nodes.sort_unstable();
        let producers = std::mem::take(&mut self.groups[gone as usize].producers);
        let consumers = std::mem::take(&mut self.groups[gone as usize].consumers);
        for (x, barrier) in producers {
            if x == keep {
                continue;
            }
            let xg = &mut self.groups[x as usize];
            xg.consumers.remove(&gone);
            *xg.consumers.entry(keep).or_insert(false) |= barrier;
            *self.groups[keep as usize]
                .producers
                .entry(x)
                .or_insert(false) |= barrier;
        }
        for (x, barrier) in consumers {
            if x == keep {
                continue;
            }
            let xg = &mut self.groups[x as usize];
            xg.producers.remove(&gone);
            *xg.producers.entry(keep).or_insert(false) |= barrier;
            *self.groups[keep as usize]
                .consumers
                .entry(x)
                .or_insert(false) |= barrier;
        }
        let kg = &mut self.groups[keep as usize];
        kg.producers.remove(&gone);
        kg.consumers.remove(&gone);
        kg.nodes = nodes;
        kg.kind = Some(kind);
        kg.version = self.next_version;
        self.next_version += 1;
        self.groups[gone as usize].alive = false;
        keep
    }

    /// Live group slots in a topological order (ties by first node), and per slot its
    /// level (longest path from a group without producers).
    fn topo_levels(&self) -> (Vec<u32>, Vec<u32>) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut indeg = vec![0usize; self.groups.len()];
        let mut level = vec![0u32; self.groups.len()];
        let mut heap = BinaryHeap::new();
        for (s, grp) in self.groups.iter().enumerate() {
            if grp.alive {
                indeg[s] = grp.producers.len();
                if indeg[s] == 0 {
                    heap.push(Reverse((grp.nodes[0], s as u32)));
                }
            }
        }
        let mut order = Vec::new();
        while let Some(Reverse((_, s))) = heap.pop() {
            order.push(s);
            for &c in self.groups[s as usize].consumers.keys() {
                let c = c as usize;
                level[c] = level[c].max(level[s as usize] + 1);
                indeg[c] -= 1;
                if indeg[c] == 0 {
                    heap.push(Reverse((self.groups[c].nodes[0], c as u32)));
                }
            }
        }
        (order, level)
    }

    fn topo_order(&self) -> Vec<u32> {
        self.topo_levels().0
    }

    fn level_rounds(&mut self) {
        loop {
            let (order, level) = self.topo_levels();
            let mut by_level = order.clone();
            by_level.sort_by_key(|&s| (level[s as usize], self.groups[s as usize].nodes[0]));
            // 0: free, 1: lower end of a chosen pair, 2: upper end.
            let mut role = vec![0u8; self.groups.len()];
            let mut pairs: Vec<(u32, u32, SchedulerKind)> = Vec::new();
            for &s in &by_level {
                if role[s as usize] != 0 {
                    continue;
                }
                let l = level[s as usize];
                let grp = &self.groups[s as usize];
                let mut cands: Vec<(u32, u32, u32)> = Vec::new();
                for (&c, &barrier) in &grp.consumers {
                    if !barrier && level[c as usize] == l + 1 && role[c as usize] == 0 {
                        cands.push((0, s, c));
                    }
                }
                for (&p, &barrier) in &grp.producers {
                    if !barrier && level[p as usize] + 1 == l && role[p as usize] == 0 {
                        cands.push((1, p, s));
                    }
                }
                cands.sort_by_key(|&(side, lo, hi)| {
                    let other = if side == 0 { hi } else { lo };
                    (side, self.groups[other as usize].nodes[0])
                });
                for (_, lo, hi) in cands {
                    if self.crossing(lo, hi, &role, &level) {
                        continue;
                    }
                    let key = self.key(lo, hi);
                    if self.rejected.contains(&key) {
                        continue;
                    }
                    match self.try_union(lo, hi) {
                        Ok(kind) => {
                            pairs.push((lo, hi, kind));
                            role[lo as usize] = 1;
                            role[hi as usize] = 2;
                            break;
                        }
                        Err(_) => {
                            self.rejected.insert(key);
                        }
                    }
                }
            }
            if pairs.is_empty() {
                break;
            }
            self.stats.level_rounds += 1;
            self.stats.level_merges += pairs.len();
            for (lo, hi, kind) in pairs {
                self.merge(lo, hi, kind);
            }
        }
    }

    /// Whether pairing `lo` (level `L`) with its consumer `hi` (level `L + 1`) in this
    /// round could close a cycle with pairs already chosen: an edge from `lo` to the
    /// upper end of another pair on the same levels, or from the lower end of another
    /// such pair to `hi`. (A cycle through merged pairs needs such an edge: every edge
    /// climbs at least one level and a merged pair can only step one level down.)
    fn crossing(&self, lo: u32, hi: u32, role: &[u8], level: &[u32]) -> bool {
        let (ll, lh) = (level[lo as usize], level[hi as usize]);
        self.groups[lo as usize]
            .consumers
            .keys()
            .any(|&x| x != hi && role[x as usize] == 2 && level[x as usize] == lh)
            || self.groups[hi as usize]
                .producers
                .keys()
                .any(|&y| y != lo && role[y as usize] == 1 && level[y as usize] == ll)
    }

    fn greedy(&mut self) {
        let positions = |order: &[u32], n: usize| {
            let mut pos = vec![u32::MAX; n];
            for (k, &x) in order.iter().enumerate() {
                pos[x as usize] = k as u32;
            }
            pos
        };
        loop {
            let mut merged_in_sweep = false;
            let mut order = self.topo_order();
            let mut pos = positions(&order, self.groups.len());
            let mut i = 0;
            while i < order.len() {
                let s = order[i];
                let mut cands: Vec<u32> = self.groups[s as usize]
                    .consumers
                    .iter()
                    .filter(|(_, &barrier)| !barrier)
                    .map(|(&c, _)| c)
                    .collect();
                cands.sort_by_key(|&c| pos[c as usize]);
                let mut merged = None;
                for c in cands {
                    let key = self.key(s, c);
                    if self.rejected.contains(&key) {
                        continue;
                    }
                    if self.other_path(s, c, &pos) {
                        self.rejected.insert(key);
                        continue;
                    }
                    match self.try_union(s, c) {
                        Ok(kind) => {
                            merged = Some(self.merge(s, c, kind));
                            break;
                        }
                        Err(_) => {
                            self.rejected.insert(key);
                        }
                    }
                }
                match merged {
                    Some(keep) => {
                        self.stats.greedy_merges += 1;
                        merged_in_sweep = true;
                        order = self.topo_order();
                        pos = positions(&order, self.groups.len());
                        i = pos[keep as usize] as usize;
                    }
                    None => i += 1,
                }
            }
            if !merged_in_sweep {
                break;
            }
        }
    }

    /// Whether some path from `p` reaches its consumer `c` other than the direct edge
    /// (merging them would then close a cycle). `pos` is a topological numbering: such
    /// a path only visits groups numbered below `c`.
    fn other_path(&self, p: u32, c: u32, pos: &[u32]) -> bool {
        let limit = pos[c as usize];
        let mut seen: FxHashSet<u32> = FxHashSet::default();
        let mut stack: Vec<u32> = self.groups[p as usize]
            .consumers
            .keys()
            .copied()
            .filter(|&x| x != c)
            .collect();
        while let Some(x) = stack.pop() {
            if pos[x as usize] >= limit || !seen.insert(x) {
                continue;
            }
            for &y in self.groups[x as usize].consumers.keys() {
                if y == c {
                    return true;
                }
                stack.push(y);
            }
        }
        false
    }
}
