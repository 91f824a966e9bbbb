//! Grouping expressions into segments.
//!
//! Start from one group per node (tensor expression). Then:
//!
//! 1. **Level-based merging**, in rounds. A group's level is the length of the longest
//!    path to it from groups without producers. In a round, groups are visited by level;
//!    each group not yet paired picks the first neighbour (consumers, then producers)
//!    whose level differs by exactly one, that is not paired yet, not more than
//!    `LOPSIDED` times larger or smaller, and whose union with it the scheduler accepts.
//!    A direct edge between levels `L` and `L + 1` is the only path between its ends, so
//!    merging it cannot close a cycle. Several pairs merged in the same round could
//!    still close one, but only through "crossing" edges (from the lower end of one pair
//!    to the upper end of another pair on the same two levels; see `crossing`), so a
//!    pair with such an edge to an already chosen pair waits for the next round. Rounds
//!    repeat until one merges nothing. A chain of `n` groups halves in each round, so
//!    the work is `O(n log n)` in the total size of the checked unions.
//! 2. **Sibling merging**, in rounds: groups on one level that read a common producer
//!    group pair up the same way (no path joins two groups of one level). A group with
//!    many consumers then takes them in a few large merges instead of one per round.
//! 3. **Greedy producer-to-consumer merging**: in topological order, each group tries its
//!    consumers, nearest first, merging with each whose union is accepted and that no
//!    other path reaches (one ordered search per group serves all its candidates; see
//!    `greedy_visit`); sweeps repeat until one merges nothing.
//!
//! 4. **Input-sibling merging**: two groups that read a common fusion input tensor and
//!    that no path joins merge when the scheduler accepts their union (the column sums
//!    `dw` and `db` of a LayerNorm backward both read `dy`: one kernel reads it once).
//!    Without a path between them, no cycle can form.
//!
//! Edges that leave a `segment_set` are never merged. Rejections are remembered by
//! `(slot, version)`: a group that grows keeps the rejections of its slot (rejection is
//! assumed monotone), and a pair is asked again only when both sides changed. So a
//! group next to many incompatible groups is not re-checked against all of them after
//! each of its own merges.
//!
//! Cost: scheduler checks grow linearly with the fusion (about 1.1 to 1.4 per
//! expression in the `segment_bench` families), and so does the total size of the
//! checked unions.

use rustc_hash::{FxHashMap, FxHashSet};

use super::build::build;
use super::graph::Graph;
use crate::ir::{ExprId, Fusion, ValId};
use crate::scheduler::{Rejections, SchedulerKind};

/// Level rounds skip pairs where one group is more than this many times the other.
const LOPSIDED: usize = 4;

/// Input-sibling merging runs only when at most this many groups are left.
const MAX_INPUT_SIBLINGS: usize = 32;

/// Scheduler checks one group may make per sibling round.
const SIBLING_TRIES: usize = 4;

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
    /// Expressions in all the candidate unions checked (the work behind the checks).
    pub checked_exprs: usize,
    /// Level-based merge rounds that merged something.
    pub level_rounds: usize,
    /// Merges made by the level-based rounds.
    pub level_merges: usize,
    /// Merges of sibling groups (same level, a common producer).
    pub sibling_merges: usize,
    /// Merges made by the greedy pass.
    pub greedy_merges: usize,
    /// Merges of groups that read a common fusion input and no path joins.
    pub input_sibling_merges: usize,
    /// Expressions (graph nodes) segmented.
    pub nodes: usize,
}

pub(crate) struct Segmenter<'g, 'f, 'a> {
    g: &'g Graph<'f>,
    accept: Accept<'a>,
    groups: Vec<Group>,
    group_of: Vec<u32>,
    next_version: u64,
    /// `(slot, version)`: the group in `slot` (at any later size) was rejected with the
    /// group of that version.
    rejected: FxHashSet<(u32, u64)>,
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
        self.sibling_rounds();
        self.greedy();
        self.input_siblings();
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

    /// Whether the pair was rejected before, assuming rejection is monotone: a group
    /// that was rejected with `b` is still rejected with `b` after it grew (merging more
    /// into a group rarely makes an unschedulable union schedulable, and a path that
    /// made a merge cyclic stays), so only a pair whose both sides changed is asked
    /// again. This keeps a group with many incompatible neighbours from being re-checked
    /// against all of them after each of its merges.
    fn is_rejected(&self, a: u32, b: u32) -> bool {
        let (va, vb) = (
            self.groups[a as usize].version,
            self.groups[b as usize].version,
        );
        self.rejected.contains(&(a, vb)) || self.rejected.contains(&(b, va))
    }

    fn reject(&mut self, a: u32, b: u32) {
        let (va, vb) = (
            self.groups[a as usize].version,
            self.groups[b as usize].version,
        );
        self.rejected.insert((a, vb));
        self.rejected.insert((b, va));
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
        self.stats.checked_exprs += exprs.len();
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
                    if self.lopsided(lo, hi) || self.crossing(lo, hi, &role, &level) {
                        continue;
                    }
                    if self.is_rejected(lo, hi) {
                        continue;
                    }
                    match self.try_union(lo, hi) {
                        Ok(kind) => {
                            pairs.push((lo, hi, kind));
                            role[lo as usize] = 1;
                            role[hi as usize] = 2;
                            break;
                        }
                        Err(_) => self.reject(lo, hi),
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

    /// Whether one group is more than [`LOPSIDED`] times the other. Level rounds leave
    /// such pairs to the later passes, so that a group with many consumers (a hub) does
    /// not absorb them one per round, each time re-checking its whole self: its
    /// consumers first merge among themselves (`sibling_rounds`), then the hub takes
    /// them in a few large merges.
    fn lopsided(&self, a: u32, b: u32) -> bool {
        let (x, y) = (
            self.groups[a as usize].nodes.len(),
            self.groups[b as usize].nodes.len(),
        );
        x.max(y) > LOPSIDED * x.min(y)
    }

    /// Sibling merging, in rounds: groups on the same level that read a common producer
    /// group are paired (each group with at most one partner per round, at most
    /// [`SIBLING_TRIES`] scheduler checks per group and round) when the scheduler
    /// accepts the union. Two groups on one level have no path between them, and a
    /// merged pair stays on that level, so every edge still climbs and no cycle can form.
    fn sibling_rounds(&mut self) {
        loop {
            let (order, level) = self.topo_levels();
            let mut paired = vec![false; self.groups.len()];
            let mut pairs: Vec<(u32, u32, SchedulerKind)> = Vec::new();
            for &p in &order {
                let mut sibs: Vec<u32> = self.groups[p as usize]
                    .consumers
                    .keys()
                    .copied()
                    .filter(|&c| !paired[c as usize])
                    .collect();
                if sibs.len() < 2 {
                    continue;
                }
                sibs.sort_by_key(|&c| (level[c as usize], self.groups[c as usize].nodes[0]));
                for i in 0..sibs.len() {
                    let a = sibs[i];
                    if paired[a as usize] {
                        continue;
                    }
                    let mut tries = 0;
                    for &b in &sibs[i + 1..] {
                        if level[b as usize] != level[a as usize] || tries == SIBLING_TRIES {
                            break;
                        }
                        if paired[b as usize] || self.is_rejected(a, b) {
                            continue;
                        }
                        tries += 1;
                        match self.try_union(a, b) {
                            Ok(kind) => {
                                paired[a as usize] = true;
                                paired[b as usize] = true;
                                pairs.push((a, b, kind));
                                break;
                            }
                            Err(_) => self.reject(a, b),
                        }
                    }
                }
            }
            if pairs.is_empty() {
                break;
            }
            self.stats.sibling_merges += pairs.len();
            for (a, b, kind) in pairs {
                self.merge(a, b, kind);
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

    /// Greedy merging: sweeps of [`Self::greedy_visit`] over the groups in a
    /// topological order until a sweep merges nothing.
    ///
    /// A merge can leave the topological numbering stale: a producer of the merged
    /// consumer may sit between the two in it, and a later visit trusting the old
    /// numbering would miss a path through it and merge into a cycle (fuzz seed
    /// 9810677). So the numbering is recomputed after every visit that merged, and the
    /// sweep goes on with the groups it has not visited yet.
    fn greedy(&mut self) {
        loop {
            let mut visited: FxHashSet<u32> = FxHashSet::default();
            let mut merged_in_sweep = false;
            'sweep: loop {
                let order = self.topo_order();
                let mut pos = vec![u32::MAX; self.groups.len()];
                for (k, &x) in order.iter().enumerate() {
                    pos[x as usize] = k as u32;
                }
                for &s in &order {
                    if !self.groups[s as usize].alive || !visited.insert(s) {
                        continue;
                    }
                    if self.greedy_visit(s, &pos) {
                        merged_in_sweep = true;
                        continue 'sweep;
                    }
                }
                break;
            }
            if !merged_in_sweep {
                break;
            }
        }
    }

    /// Merges group `s` with the consumers it can take, nearest (in the topological
    /// numbering `pos`) first. A consumer is mergeable when no other path leads to it
    /// from `s`. Such paths are found by one search shared by all of `s`'s candidates:
    /// nodes come off a heap in `pos` order, never past the candidate under test (a path
    /// only climbs in `pos`, and the numbering stays valid for paths outside the merged
    /// group); a direct consumer that stays separate passes reachability on to its
    /// consumers, and a merged one passes nothing (its consumers become direct ones).
    fn greedy_visit(&mut self, mut s: u32, pos: &[u32]) -> bool {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut merged = false;
        // (pos, slot, direct): direct consumers of `s`, and nodes behind one of them.
        let mut heap: BinaryHeap<Reverse<(u32, u32, bool)>> = BinaryHeap::new();
        let mut pushed_direct: FxHashSet<u32> = FxHashSet::default();
        let mut pushed_reached: FxHashSet<u32> = FxHashSet::default();
        let mut reach: FxHashSet<u32> = FxHashSet::default();
        for &d in self.groups[s as usize].consumers.keys() {
            pushed_direct.insert(d);
            heap.push(Reverse((pos[d as usize], d, true)));
        }
        let mut tried: FxHashSet<u32> = FxHashSet::default();
        loop {
            let next = self.groups[s as usize]
                .consumers
                .iter()
                .filter(|(&c, &barrier)| !barrier && !tried.contains(&c))
                .map(|(&c, _)| c)
                .min_by_key(|&c| pos[c as usize]);
            let Some(c) = next else { break };
            tried.insert(c);
            if self.is_rejected(s, c) {
                continue;
            }
            while let Some(&Reverse((p, x, direct))) = heap.peek() {
                if p >= pos[c as usize] {
                    break;
                }
                heap.pop();
                if !direct {
                    reach.insert(x);
                }
                for &y in self.groups[x as usize].consumers.keys() {
                    if pushed_reached.insert(y) {
                        heap.push(Reverse((pos[y as usize], y, false)));
                    }
                }
            }
            // Entries at `c`'s own position: `c` behind another consumer.
            while let Some(&Reverse((p, x, direct))) = heap.peek() {
                if p != pos[c as usize] || x != c {
                    break;
                }
                heap.pop();
                if !direct {
                    reach.insert(x);
                }
            }
            let behind: Vec<u32> = self.groups[c as usize]
                .consumers
                .keys()
                .copied()
                .filter(|&y| y != s)
                .collect();
            let verdict = if reach.contains(&c) {
                None
            } else {
                Some(self.try_union(s, c))
            };
            match verdict {
                Some(Ok(kind)) => {
                    s = self.merge(s, c, kind);
                    for y in behind {
                        if pushed_direct.insert(y) {
                            heap.push(Reverse((pos[y as usize], y, true)));
                        }
                    }
                    self.stats.greedy_merges += 1;
                    merged = true;
                }
                _ => {
                    // `c` stays apart: what it feeds is behind it.
                    self.reject(s, c);
                    for y in behind {
                        if pushed_reached.insert(y) {
                            heap.push(Reverse((pos[y as usize], y, false)));
                        }
                    }
                }
            }
        }
        merged
    }

    /// Input-sibling merging (see the module documentation): pairs of groups with no
    /// path between them that read a common fusion input tensor, merged when the
    /// scheduler accepts the union, until no pair merges. Runs on at most
    /// [`MAX_INPUT_SIBLINGS`] groups (the pairs are all checked).
    fn input_siblings(&mut self) {
        loop {
            let order = self.topo_order();
            if order.len() < 2 || order.len() > MAX_INPUT_SIBLINGS {
                return;
            }
            let n = order.len();
            let mut at = FxHashMap::default();
            for (k, &s) in order.iter().enumerate() {
                at.insert(s, k);
            }
            // reach[k]: the groups (by position) a path from group k leads to.
            let mut reach = vec![vec![false; n]; n];
            for k in (0..n).rev() {
                for c in self.groups[order[k] as usize].consumers.keys() {
                    let j = at[c];
                    reach[k][j] = true;
                    let (lo, hi) = reach.split_at_mut(j);
                    for (r, &x) in lo[k].iter_mut().zip(hi[0].iter()) {
                        *r |= x;
                    }
                }
            }
            let inputs: Vec<Vec<ValId>> = order.iter().map(|&s| self.inputs_read(s)).collect();
            let mut merged = false;
            'pairs: for a in 0..n {
                for b in a + 1..n {
                    let (sa, sb) = (order[a], order[b]);
                    if reach[a][b]
                        || reach[b][a]
                        || !inputs[a].iter().any(|v| inputs[b].binary_search(v).is_ok())
                        || self.is_rejected(sa, sb)
                    {
                        continue;
                    }
                    match self.try_union(sa, sb) {
                        Ok(kind) => {
                            self.merge(sa, sb, kind);
                            self.stats.input_sibling_merges += 1;
                            merged = true;
                            break 'pairs;
                        }
                        Err(_) => self.reject(sa, sb),
                    }
                }
            }
            if !merged {
                return;
            }
        }
    }

    /// The fusion input tensors the nodes of group `s` read, sorted.
    fn inputs_read(&self, s: u32) -> Vec<ValId> {
        let g = self.g;
        let mut v: Vec<ValId> = self.groups[s as usize]
            .nodes
            .iter()
            .flat_map(|&n| g.fusion.expr(g.nodes[n as usize]).inputs.iter().copied())
            .filter(|&i| g.is_input[i.index()] && g.fusion.val(i).is_tensor())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}
