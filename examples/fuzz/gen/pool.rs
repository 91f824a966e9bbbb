//! The generator's value pool: declaring inputs, tracking the shape and magnitude of
//! every value, picking operands, and the two dispatchers that send a step to its
//! family's module (a proposal by the roll of the dice, a builder call by the step's
//! kind).

use nvfuser::prelude::*;

use super::{operands, Ax, Gen, InputSpec, Meta, Step, MAX_GROWTH};

/// True when two shapes broadcast against each other (right-aligned).
pub(super) fn compatible(a: &[Ax], b: &[Ax]) -> bool {
    let n = a.len().min(b.len());
    a[a.len() - n..]
        .iter()
        .zip(&b[b.len() - n..])
        .all(|(x, y)| x == y || *x == Ax::B || *y == Ax::B)
}

/// The shape two compatible shapes broadcast to.
pub(super) fn combined(a: &[Ax], b: &[Ax]) -> Vec<Ax> {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let off = long.len() - short.len();
    long.iter()
        .enumerate()
        .map(|(i, &x)| {
            if i >= off && x == Ax::B {
                short[i - off]
            } else {
                x
            }
        })
        .collect()
}

impl Gen {
    /// Declares an input and pushes its value and meta.
    pub(super) fn declare(&mut self, spec: &InputSpec) {
        let (id, meta) = match spec {
            InputSpec::Tensor { dtype, dims, .. } | InputSpec::Index { dtype, dims, .. } => {
                let contiguous = matches!(
                    spec,
                    InputSpec::Tensor {
                        contiguous: true,
                        ..
                    }
                );
                let sizes: Vec<i64> = dims
                    .iter()
                    .map(|d| match d {
                        Ax::B => 1,
                        Ax::U(k) => self.universe[*k].map_or(-1, |n| n as i64),
                        Ax::X(_) => -1,
                    })
                    .collect();
                // A static size of 1 is declared broadcast by the builder: track it so.
                let dims: Vec<Ax> = dims
                    .iter()
                    .zip(&sizes)
                    .map(|(&d, &s)| if s == 1 { Ax::B } else { d })
                    .collect();
                let spec = TensorSpec::new(*dtype, &sizes).contiguity(Contiguity::All(contiguous));
                let id = self.fd.define_tensor_spec(spec).ok();
                let bound = if dtype.is_float() { 2.0 } else { 8.0 };
                (
                    id,
                    Meta {
                        dims,
                        dtype: *dtype,
                        scalar: false,
                        exact: true,
                        bound,
                    },
                )
            }
            InputSpec::Scalar { dtype } => {
                let id = self.fd.define_scalar(*dtype).ok();
                (
                    id,
                    Meta {
                        dims: vec![],
                        dtype: *dtype,
                        scalar: true,
                        exact: true,
                        bound: 2.0,
                    },
                )
            }
        };
        self.ids.push(id);
        self.metas.push(meta);
        self.growth.push(1.0);
    }

    /// The growth of the value `step` makes: the sum of its operands' for a `cat`, the
    /// largest of them otherwise.
    fn growth_of(&self, step: &Step) -> f64 {
        let g = |i: &usize| self.growth.get(*i).copied().unwrap_or(1.0);
        match step {
            Step::Cat(a, b, _) => g(a) + g(b),
            Step::Pad(a, ..) | Step::PadScalar(a, ..) => g(a) * 1.5,
            _ => operands(step).iter().map(g).fold(1.0, f64::max),
        }
    }

    pub(super) fn fresh(&mut self) -> Ax {
        self.next_x += 1;
        Ax::X(self.next_x)
    }

    /// A fresh extent made from the dims `from` (a merge, slice, pad or cat of them):
    /// it spans their universe dims, so a shape holding it and one of those dims again
    /// is as large as a universe dim twice.
    pub(super) fn fresh_from(&mut self, from: &[Ax]) -> Ax {
        let mut span = Vec::new();
        for d in from {
            span.extend(self.span(*d));
        }
        let x = self.fresh();
        if let Ax::X(k) = x {
            self.spans.insert(k, span);
        }
        x
    }

    /// The universe dims a dim spans.
    fn span(&self, d: Ax) -> Vec<usize> {
        match d {
            Ax::U(k) => vec![k],
            Ax::B => vec![],
            Ax::X(k) => self.spans.get(&k).cloned().unwrap_or_default(),
        }
    }

    /// Pool values that are live tensors.
    fn tensors(&self) -> Vec<usize> {
        (0..self.metas.len())
            .filter(|&i| self.ids[i].is_some() && !self.metas[i].scalar)
            .collect()
    }

    pub(super) fn pick_tensor(&mut self, pred: impl Fn(&Meta) -> bool) -> Option<usize> {
        let c: Vec<usize> = self
            .tensors()
            .into_iter()
            .filter(|&i| !self.metas[i].terminal() && pred(&self.metas[i]))
            .collect();
        if c.is_empty() {
            None
        } else {
            // Favour recent values: chains grow deeper.
            let k = c.len();
            let i = if self.rng.chance(60) {
                k - 1 - self.rng.below(k.min(3))
            } else {
                self.rng.below(k)
            };
            Some(c[i])
        }
    }

    /// Random axes of a value of rank `rank` for a reduction: each with even odds, at
    /// least one, sometimes counted from the end.
    pub(super) fn axes_of(&mut self, rank: usize) -> Vec<i64> {
        let mut axes: Vec<i64> = (0..rank as i64).filter(|_| self.rng.chance(50)).collect();
        if axes.is_empty() {
            axes.push(self.rng.below(rank) as i64);
        }
        if self.rng.chance(25) {
            // Negative axes too.
            axes = axes.iter().map(|&a| a - rank as i64).collect();
        }
        axes
    }

    /// A random step over the pool, or `None` when the roll found no operands. The roll
    /// picks the family: each range's share of 100 is how often that kind of step is
    /// proposed.
    pub(super) fn propose(&mut self, inputs: &[InputSpec]) -> Option<Step> {
        let roll = self.rng.below(100);
        match roll {
            0..=20 => self.propose_unary(roll),
            21..=35 => self.propose_binary(),
            36..=40 => self.propose_where(),
            41..=44 => self.propose_clamp(),
            45..=51 => self.propose_cast(),
            52..=58 => self.propose_reduce(),
            59..=61 => self.propose_scan(),
            62..=65 => self.propose_variance(),
            66..=69 => self.propose_broadcast(),
            70..=71 => self.propose_expand_like(),
            72..=75 => self.propose_permute(),
            76..=79 => self.propose_slice(),
            80..=81 => self.propose_pad(),
            82..=83 => self.propose_cat(),
            84..=85 => self.propose_reshape(),
            86 => self.propose_squeeze(),
            87 => Some(Step::Set(self.pick_tensor(|_| true)?)),
            88 => Some(Step::SegmentSet(self.pick_tensor(|_| true)?)),
            89 => self.propose_full_like(),
            90 => self.propose_iota(),
            91 => self.propose_uniform_like(),
            92..=94 => self.propose_indexing(inputs),
            95 => self
                .propose_indexing(inputs)
                .or_else(|| self.propose_select()),
            96..=97 => self.propose_scale_by_size(),
            98 => self.propose_triangle(),
            _ => self.propose_with_scalar(inputs),
        }
    }

    /// Builds `step`; pushes its value and meta. False (nothing pushed) when an operand
    /// is missing or the builder refuses.
    pub(super) fn apply(&mut self, step: &Step) -> bool {
        // A recipe edited by the shrinker may point a step at a value of another shape:
        // the tracked shape is then only a guess, so a panic here means "refused".
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.try_apply(step)))
            .ok()
            .flatten();
        match got {
            // A universe dim twice in one shape (two broadcasts meeting crosswise)
            // multiplies the size past the cap: not generated.
            Some((_, meta)) if self.spans_twice(&meta.dims) => false,
            Some(_) if self.growth_of(step) > MAX_GROWTH => false,
            Some((id, mut meta)) => {
                let growth = self.growth_of(step);
                self.growth.push(growth);
                // Keep the tracked rank honest.
                let rank = self.fd.fusion().tensor_type(id).map(|t| t.rank());
                match rank {
                    Some(r) if r != meta.dims.len() => {
                        meta.dims = (0..r).map(|_| self.fresh()).collect();
                    }
                    None => meta.scalar = true,
                    _ => {}
                }
                self.ids.push(Some(id));
                self.metas.push(meta);
                true
            }
            None => false,
        }
    }

    /// True when a shape spans some universe dim twice (two broadcasts meeting
    /// crosswise, or a merged dim meeting one of its parts).
    fn spans_twice(&self, dims: &[Ax]) -> bool {
        let mut seen = std::collections::HashSet::new();
        let mut xs = std::collections::HashSet::new();
        for &d in dims {
            // The same fresh extent in two positions (a cat of a value with itself
            // broadcast) counts once per position too.
            if let Ax::X(k) = d {
                if !xs.insert(k) {
                    return true;
                }
            }
            for u in self.span(d) {
                if !seen.insert(u) {
                    return true;
                }
            }
        }
        false
    }

    /// Builds `step` through its family's builder call: the new value and its meta, or
    /// `None` when an operand is missing or the builder refuses.
    fn try_apply(&mut self, step: &Step) -> Option<(ValId, Meta)> {
        match step {
            Step::Unary(op, a) => self.make_unary(*op, *a),
            Step::Binary(op, a, b) => self.make_binary(*op, *a, *b),
            Step::Where(c, a, b) => self.make_where(*c, *a, *b),
            Step::Clamp(a, lo, hi) => self.make_clamp(*a, *lo, *hi),
            Step::Cast(a, to) => self.make_cast(*a, *to),
            Step::Reduce(red, a, axes, keep) => self.make_reduce(*red, *a, axes, *keep),
            Step::Scan(op, a, axis) => self.make_scan(*op, *a, *axis),
            Step::Sort {
                a,
                axis,
                descending,
                k,
                pick,
                ties,
            } => self.make_sort(*a, *axis, *descending, *k, *pick, *ties),
            Step::Var(a, axes, corr, keep) => self.make_var(*a, axes, *corr, *keep),
            Step::VarMean(a, axes, corr, pick) => self.make_var_mean(*a, axes, *corr, *pick),
            Step::Welford(a, axes, pick) => self.make_welford(*a, axes, *pick),
            Step::Broadcast(a, mask) => self.make_broadcast(*a, mask),
            Step::ExpandLike(a, like) => self.make_expand_like(*a, *like),
            Step::Permute(a, perm) => self.make_permute(*a, perm),
            Step::Slice(a, axis, start, stop, step) => {
                self.make_slice(*a, *axis, *start, *stop, *step)
            }
            Step::SliceToSize(a, axis, k) => self.make_slice_to_size(*a, *axis, *k),
            Step::Pad(a, axis, lo, hi, value) => self.make_pad(*a, *axis, *lo, *hi, *value),
            Step::PadScalar(a, axis, hi) => self.make_pad_scalar(*a, *axis, *hi),
            Step::Cat(a, b, axis) => self.make_cat(*a, *b, *axis),
            Step::MergeDims(a, axis) => self.make_merge_dims(*a, *axis),
            Step::SplitDim(a, axis, k) => self.make_split_dim(*a, *axis, *k),
            Step::Squeeze(a, axes) => self.make_squeeze(*a, axes),
            Step::Set(a) => {
                let (x, m) = self.operand(*a)?;
                Some((self.fd.set(x).ok()?, m))
            }
            Step::SegmentSet(a) => {
                let (x, m) = self.operand(*a)?;
                Some((self.fd.segment_set(x).ok()?, m))
            }
            Step::FullLike(like, value, dt) => self.make_full_like(*like, *value, *dt),
            Step::Iota(a, axis, start, step, dt) => self.make_iota(*a, *axis, *start, *step, *dt),
            Step::UniformLike(like, seed, offset, dt, generator) => {
                self.make_uniform_like(*like, *seed, *offset, *dt, *generator)
            }
            Step::IndexSelect(x, axis, ix) => self.make_index_select(*x, *axis, *ix),
            Step::TakeAlongAxis(x, ix, axis) => self.make_take(*x, *ix, *axis, false),
            Step::Gather(x, ix, axis) => self.make_take(*x, *ix, *axis, true),
            Step::Scatter {
                x,
                index,
                src,
                axis,
                add,
            } => self.make_scatter(*x, *index, *src, *axis, *add),
            Step::Select(x, axis, index) => self.make_select(*x, *axis, *index),
            Step::ScaleBySize(x, axis) => self.make_scale_by_size(*x, *axis),
            Step::Triangle(x, upper, diagonal) => self.make_triangle(*x, *upper, *diagonal),
            Step::WithScalar(op, a, s) => self.make_with_scalar(*op, *a, *s),
        }
    }

    /// Pool value `i`: its builder value (`None` when it is missing or was refused) and
    /// its meta.
    pub(super) fn operand(&self, i: usize) -> Option<(ValId, Meta)> {
        let id = (*self.ids.get(i)?)?;
        let meta = self.metas.get(i).cloned()?;
        Some((id, meta))
    }

    /// `size()` scalars for every non-broadcast dim of `l` (1 for broadcast dims).
    pub(super) fn sizes_of(&mut self, l: ValId, dims: &[Ax]) -> Option<Vec<Size>> {
        dims.iter()
            .enumerate()
            .map(|(i, d)| {
                if *d == Ax::B {
                    Some(Size::Const(1))
                } else {
                    self.fd.size(l, i as i64).ok().map(Size::Val)
                }
            })
            .collect()
    }
}
