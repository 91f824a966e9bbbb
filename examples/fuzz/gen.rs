//! Random fusions as replayable recipes.
//!
//! A [`Recipe`] is plain data: the input declarations, the steps (each makes one value
//! from earlier ones), the outputs, and the calls to make (sizes of the shared dims and
//! the memory layout of every tensor argument). [`Recipe::build`] replays it through the
//! builder, so a recipe with steps removed (the shrinker's edits) still builds: a step
//! whose operands are gone, or that the builder refuses, is dropped with everything that
//! depends on it.
//!
//! Shapes are drawn from one *universe* of up to four dims `[U0, U1, U2, U3]`,
//! right-aligned like broadcasting: an input of rank r takes the last r universe dims,
//! some of them declared broadcast. Each step tracks the shape it makes in universe dims
//! (or fresh extents, after a slice, pad or cat), so that binary ops pick operands that
//! broadcast. Values also carry an estimate of their magnitude and whether they are
//! exact (no rounding since the inputs): discontinuous ops (comparisons, floor, casts to
//! integers) only take exact values, so that f32-versus-f64 rounding never flips them,
//! and functions that amplify errors (exp, sin, division) only take bounded operands.
//!
//! This file holds the recipe's data and its two entry points ([`Recipe::generate`],
//! [`Recipe::build`]); the generator itself lives in the modules under `gen/`: `pool`
//! (the value pool, its bookkeeping, and the dispatch of a step to its family), then
//! `pointwise`, `reduction` (with the scans), `shape`, `create` and `index` (each
//! family's proposals and builder calls).

mod create;
mod index;
mod pointwise;
mod pool;
mod reduction;
mod shape;

use std::collections::HashMap;

use nvfuser::ir::{BinaryOp, ScanOp, UnaryOp};
use nvfuser::prelude::*;

/// SplitMix64: small, deterministic, good enough for choices.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x2545_f491_4f6c_dd1d)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One dim of a tracked shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ax {
    /// Universe dim k.
    U(usize),
    /// A broadcast dim (size 1).
    B,
    /// An extent made inside the fusion (slice, pad, cat, reshape), unique per id.
    X(u32),
}

/// An input declaration.
#[derive(Clone, Debug)]
pub enum InputSpec {
    /// A tensor over universe dims (or broadcast dims).
    Tensor {
        dtype: DataType,
        dims: Vec<Ax>,
        /// Declared contiguous (then only contiguous layouts are passed).
        contiguous: bool,
    },
    /// An integer tensor of indices into universe dim `target` (values in range).
    Index {
        dtype: DataType,
        dims: Vec<Ax>,
        target: usize,
    },
    /// A scalar argument.
    Scalar { dtype: DataType },
}

/// Reductions.
#[derive(Clone, Copy, Debug)]
pub enum Red {
    Sum,
    Prod,
    Max,
    Min,
    Mean,
}

/// One step: makes one value from earlier values (indices into the value pool, inputs
/// first).
#[derive(Clone, Debug)]
pub enum Step {
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    Where(usize, usize, usize),
    Clamp(usize, f64, f64),
    Cast(usize, DataType),
    Reduce(Red, usize, Vec<i64>, bool),
    /// An inclusive scan along one axis (negative from the end); a float `cumprod`
    /// scans factors near 1 made from the operand (see `make_scan`).
    Scan(ScanOp, usize, i64),
    /// A sort along one axis (negative from the end), descending or not, keeping the
    /// first `k` (`topk`) or all (`sort`), and output `pick` (0 values, 1 indices:
    /// `argsort` without `k`); `ties` first rounds a float operand to halves (see
    /// `make_sort`).
    Sort {
        a: usize,
        axis: i64,
        descending: bool,
        k: Option<i64>,
        pick: usize,
        ties: bool,
    },
    Var(usize, Vec<i64>, i64, bool),
    /// var_mean, keeping output `pick` (0 var, 1 mean).
    VarMean(usize, Vec<i64>, i64, usize),
    /// welford, keeping output `pick` (0 mean, 1 var_sum, 2 count).
    Welford(usize, Vec<i64>, usize),
    Broadcast(usize, Vec<bool>),
    /// Expands broadcast dims to the sizes of `like`'s dims (by `size()` scalars).
    ExpandLike(usize, usize),
    Permute(usize, Vec<i64>),
    /// Slice one axis: start, stop (from the end when negative), step.
    Slice(usize, usize, i64, i64, i64),
    /// Slice one axis up to `size(x, axis) - k` (a scalar expression of a size).
    SliceToSize(usize, usize, i64),
    Pad(usize, usize, i64, i64, f64),
    /// A pad of `axis` whose widths are scalar expressions over the sizes:
    /// `(size % 3, size % 2 + hi)`.
    PadScalar(usize, usize, i64),
    Cat(usize, usize, usize),
    /// Merges dims `axis` and `axis + 1` (reshape with a `-1`).
    MergeDims(usize, usize),
    /// Splits dim `axis` into `[k, -1]`.
    SplitDim(usize, usize, i64),
    Squeeze(usize, Vec<i64>),
    Set(usize),
    SegmentSet(usize),
    /// full(shape of `like`, value).
    FullLike(usize, f64, DataType),
    /// iota(size(x, axis), start, step) broadcast to rank 1.
    Iota(usize, usize, f64, f64, DataType),
    /// uniform(shape of `like`) with seed and offset, or (`true`) `rand_uniform` from
    /// the device's generator.
    UniformLike(usize, u64, u64, DataType, bool),
    IndexSelect(usize, usize, usize),
    TakeAlongAxis(usize, usize, usize),
    Gather(usize, usize, usize),
    /// `scatter` (false) or `scatter_add` (true) into `x` along `axis` by the index
    /// input, of a source tensor (cast to x's dtype) or, for `scatter`, of a constant.
    Scatter {
        x: usize,
        index: usize,
        src: Option<usize>,
        axis: usize,
        add: bool,
    },
    Select(usize, usize, i64),
    /// `x * (size(x, axis) as dtype)` scaled down: scalar math on sizes.
    ScaleBySize(usize, usize),
    /// `triu` (true) or `tril` (false) of a tensor of rank 2 or more, with a diagonal.
    Triangle(usize, bool, i64),
    /// `x op scalar input`.
    WithScalar(BinaryOp, usize, usize),
}

/// One call: universe sizes and a layout per input.
#[derive(Clone, Debug)]
pub struct Call {
    pub sizes: Vec<usize>,
    pub layouts: Vec<Layout>,
    pub data_seed: u64,
}

/// How a tensor argument sits in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Dense row-major.
    Contiguous,
    /// Dense row-major at an element offset into a larger buffer.
    Offset(usize),
    /// The innermost dim's rows padded by `pad` elements (a slice of a wider tensor).
    Pitched(usize),
    /// Allocated in reverse dim order and permuted back.
    Transposed,
}

/// A whole case.
#[derive(Clone, Debug)]
pub struct Recipe {
    pub seed: u64,
    /// Universe dims: `Some(n)` static size, `None` symbolic.
    pub universe: Vec<Option<usize>>,
    pub inputs: Vec<InputSpec>,
    pub steps: Vec<Step>,
    pub outputs: Vec<usize>,
    /// An output (pool index, among `outputs`) stored in place into an input (pool
    /// index) of the same dtype and dims (`add_output_alias`).
    pub in_place: Option<(usize, usize)>,
    pub calls: Vec<Call>,
}

/// What a recipe builds to.
pub struct Built {
    pub fusion: Fusion,
}

/// Tracked facts about a pool value during generation.
#[derive(Clone, Debug)]
struct Meta {
    dims: Vec<Ax>,
    dtype: DataType,
    scalar: bool,
    exact: bool,
    bound: f64,
}

impl Meta {
    /// An fp8 value that may differ between the devices (math rounded to fp8 after f32
    /// results one f32 ulp apart): one fp8 unit in the last place is 6 to 25%, which
    /// no later op's tolerance could tell from a wrong value, so it is only an output
    /// (compared by `compare::compare_fp8`), never an operand.
    fn terminal(&self) -> bool {
        self.dtype.is_fp8() && !self.exact
    }
}

const SIZES: [usize; 20] = [
    1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 32, 64, 100, 128, 255, 256, 1000, 1024, 2048, 4096,
];
/// The longest universe dim (the largest of [`SIZES`]).
const MAX_DIM: usize = SIZES[SIZES.len() - 1];
/// The largest universe (elements) a call draws.
const MAX_UNIVERSE: usize = 1 << 21;
/// The most a value may grow past the universe's element count (cat, pad).
const MAX_GROWTH: f64 = 4.0;

impl Recipe {
    /// A random recipe from `seed`, with at most `max_steps` steps and `calls` calls.
    pub fn generate(seed: u64, max_steps: usize, calls: usize) -> Recipe {
        let mut rng = Rng::new(seed);
        let universe = draw_universe(&mut rng);
        let mut g = Gen::new(rng, universe.clone());
        let inputs = draw_inputs(&mut g.rng, universe.len());
        for spec in &inputs {
            g.declare(spec);
        }
        let n_steps = 1 + g.rng.below(max_steps.max(1));
        let mut steps = Vec::new();
        for _ in 0..n_steps {
            for _try in 0..20 {
                let Some(step) = g.propose(&inputs) else {
                    continue;
                };
                if g.apply(&step) {
                    steps.push(step);
                    break;
                }
            }
        }
        let mut outputs = g.draw_outputs();
        // From an RNG of its own, so that the calls drawn below stay those of the seed.
        let in_place = g.draw_in_place(&mut Rng::new(seed ^ 0x1a_91ace), &inputs);
        if let Some((v, _)) = in_place {
            if !outputs.contains(&v) {
                outputs.push(v);
            }
        }
        let calls = (0..calls)
            .map(|c| {
                let data_seed = seed.wrapping_mul(31).wrapping_add(c as u64);
                draw_call(&mut g.rng, &universe, &inputs, data_seed)
            })
            .collect();
        Recipe {
            seed,
            universe,
            inputs,
            steps,
            outputs,
            in_place,
            calls,
        }
    }

    /// Replays the recipe through the builder.
    pub fn build(&self) -> Option<Built> {
        let mut g = Gen::new(Rng::new(0), self.universe.clone());
        for spec in &self.inputs {
            g.declare(spec);
        }
        for step in &self.steps {
            if !g.apply(step) {
                g.ids.push(None);
                g.growth.push(1.0);
                g.metas.push(Meta {
                    dims: vec![],
                    dtype: DataType::F32,
                    scalar: true,
                    exact: false,
                    bound: 0.0,
                });
            }
        }
        let mut kept = 0;
        for &o in &self.outputs {
            let Some(Some(id)) = g.ids.get(o) else {
                continue;
            };
            let target = self
                .in_place
                .filter(|&(v, _)| v == o)
                .and_then(|(_, i)| g.ids.get(i).copied().flatten());
            let added = match target {
                Some(x) => g.fd.add_output_alias(*id, x).is_ok() || g.fd.add_output(*id).is_ok(),
                None => g.fd.add_output(*id).is_ok(),
            };
            if added {
                kept += 1;
            }
        }
        if kept == 0 {
            return None;
        }
        let fusion = g.fd.finish().ok()?;
        Some(Built { fusion })
    }
}

/// The universe: up to four dims, each static (drawn from [`SIZES`]) or symbolic.
fn draw_universe(rng: &mut Rng) -> Vec<Option<usize>> {
    let rank = rng.below(5); // 0..=4
    let mut universe: Vec<Option<usize>> = (0..rank)
        .map(|_| {
            if rng.chance(15) {
                Some(rng.pick(&SIZES))
            } else {
                None
            }
        })
        .collect();
    // Static dims that alone exceed the cap become symbolic.
    while universe.iter().flatten().product::<usize>() > MAX_UNIVERSE {
        if let Some(u) = universe.iter_mut().find(|u| u.is_some()) {
            *u = None;
        }
    }
    universe
}

/// The input declarations over a universe of `rank` dims: one to three tensors, maybe an
/// index tensor, maybe a scalar.
fn draw_inputs(rng: &mut Rng, rank: usize) -> Vec<InputSpec> {
    let mut inputs = Vec::new();
    let n_tensors = 1 + rng.below(3);
    let float_types = [
        DataType::F32,
        DataType::F32,
        DataType::F16,
        DataType::BF16,
        DataType::F64,
    ];
    for k in 0..n_tensors {
        let dtype = if rng.chance(12) {
            rng.pick(&[DataType::I32, DataType::I64, DataType::Bool])
        } else if rng.chance(8) {
            rng.pick(&[DataType::F8E4M3, DataType::F8E5M2])
        } else {
            rng.pick(&float_types)
        };
        let r = if k == 0 { rank } else { rng.below(rank + 1) };
        let dims: Vec<Ax> = (rank - r..rank)
            .map(|u| if rng.chance(12) { Ax::B } else { Ax::U(u) })
            .collect();
        let contiguous = rng.chance(50);
        inputs.push(InputSpec::Tensor {
            dtype,
            dims,
            contiguous,
        });
    }
    if rank > 0 && rng.chance(35) {
        let target = rng.below(rank);
        let dtype = rng.pick(&[DataType::I64, DataType::I32]);
        // A 1-D index (index_select) or a full-rank one (gather / take_along_axis,
        // scatter / scatter_add).
        let dims = if rng.chance(40) {
            vec![Ax::U(rng.below(rank))]
        } else {
            (0..rank).map(Ax::U).collect()
        };
        inputs.push(InputSpec::Index {
            dtype,
            dims,
            target,
        });
    }
    if rng.chance(30) {
        let dtype = rng.pick(&[DataType::F32, DataType::F64, DataType::I64]);
        inputs.push(InputSpec::Scalar { dtype });
    }
    inputs
}

/// One call: a size for every universe dim (the static ones keep theirs) and a layout
/// for every input.
fn draw_call(
    rng: &mut Rng,
    universe: &[Option<usize>],
    inputs: &[InputSpec],
    data_seed: u64,
) -> Call {
    let mut sizes: Vec<usize> = universe
        .iter()
        .map(|u| match u {
            Some(n) => *n,
            None if rng.chance(3) => 0,
            None => rng.pick(&SIZES),
        })
        .collect();
    shrink_to_cap(&mut sizes, universe);
    let layouts = inputs
        .iter()
        .map(|spec| match spec {
            InputSpec::Tensor {
                contiguous: true, ..
            } => {
                if rng.chance(25) {
                    Layout::Offset(1 + rng.below(7))
                } else {
                    Layout::Contiguous
                }
            }
            InputSpec::Tensor { .. } | InputSpec::Index { .. } => match rng.below(4) {
                0 => Layout::Contiguous,
                1 => Layout::Offset(1 + rng.below(7)),
                2 => Layout::Pitched(1 + rng.below(8)),
                _ => Layout::Transposed,
            },
            InputSpec::Scalar { .. } => Layout::Contiguous,
        })
        .collect();
    Call {
        sizes,
        layouts,
        data_seed,
    }
}

/// Halves the largest symbolic sizes until the universe fits the cap.
pub fn shrink_to_cap(sizes: &mut [usize], universe: &[Option<usize>]) {
    // An empty dim does not make the other dims small: an input broadcast along it
    // still has all their elements.
    while sizes.iter().map(|&n| n.max(1)).product::<usize>() > MAX_UNIVERSE {
        let Some(k) = (0..sizes.len())
            .filter(|&k| universe[k].is_none() && sizes[k] > 1)
            .max_by_key(|&k| sizes[k])
        else {
            break;
        };
        sizes[k] = (sizes[k] / 2).max(1);
    }
}

struct Gen {
    rng: Rng,
    universe: Vec<Option<usize>>,
    metas: Vec<Meta>,
    next_x: u32,
    /// The universe dims each fresh extent spans (see [`Gen::fresh_from`]).
    spans: HashMap<u32, Vec<usize>>,
    fd: FusionDefinition,
    ids: Vec<Option<ValId>>,
    /// Per pool value: its element count relative to the universe's, bounded (a chain
    /// of `cat`s doubles it each time).
    growth: Vec<f64>,
}

impl Gen {
    /// An empty pool over `universe`, drawing from `rng`.
    fn new(rng: Rng, universe: Vec<Option<usize>>) -> Gen {
        Gen {
            rng,
            universe,
            metas: Vec::new(),
            next_x: 0,
            spans: HashMap::new(),
            fd: FusionDefinition::new(),
            ids: Vec::new(),
            growth: Vec::new(),
        }
    }

    /// The outputs: the last tensor, plus a few others (intermediates or inputs).
    /// One case in three: a value (an output, or made one) stored in place into a tensor
    /// input with its dtype and dims. Computed values first; the input itself (a store
    /// of nothing) one time in ten, or when nothing else matches.
    fn draw_in_place(&self, rng: &mut Rng, inputs: &[InputSpec]) -> Option<(usize, usize)> {
        if !rng.chance(33) {
            return None;
        }
        let (mut computed, mut itself) = (Vec::new(), Vec::new());
        for (v, m) in self.metas.iter().enumerate() {
            for (i, spec) in inputs.iter().enumerate() {
                let n = &self.metas[i];
                if matches!(spec, InputSpec::Scalar { .. })
                    || m.scalar
                    || m.dtype != n.dtype
                    || m.dims != n.dims
                    || self.ids.get(v).copied().flatten().is_none()
                {
                    continue;
                }
                if v == i {
                    itself.push((v, i));
                } else if v >= inputs.len() {
                    computed.push((v, i));
                }
            }
        }
        let pool = if computed.is_empty() || (!itself.is_empty() && rng.chance(10)) {
            itself
        } else {
            computed
        };
        (!pool.is_empty()).then(|| pool[rng.below(pool.len())])
    }

    fn draw_outputs(&mut self) -> Vec<usize> {
        let pool = self.metas.len();
        let mut outputs = vec![];
        let tensors: Vec<usize> = (0..pool).filter(|&i| !self.metas[i].scalar).collect();
        if let Some(&last) = tensors.last() {
            outputs.push(last);
        }
        // Every inexact fp8 value is an output: nothing else reads it.
        for v in tensors
            .iter()
            .copied()
            .filter(|&v| self.metas[v].terminal())
        {
            if !outputs.contains(&v) {
                outputs.push(v);
            }
        }
        let extra = self.rng.below(3);
        for _ in 0..extra {
            if let Some(&v) = tensors.get(self.rng.below(tensors.len().max(1))) {
                if !outputs.contains(&v) {
                    outputs.push(v);
                }
            }
        }
        outputs
    }
}

/// The pool values a step reads.
pub fn operands(s: &Step) -> Vec<usize> {
    match s {
        Step::Unary(_, a)
        | Step::Clamp(a, ..)
        | Step::Cast(a, _)
        | Step::Reduce(_, a, ..)
        | Step::Scan(_, a, _)
        | Step::Sort { a, .. }
        | Step::Var(a, ..)
        | Step::VarMean(a, ..)
        | Step::Welford(a, ..)
        | Step::Broadcast(a, _)
        | Step::Permute(a, _)
        | Step::Slice(a, ..)
        | Step::SliceToSize(a, ..)
        | Step::Pad(a, ..)
        | Step::PadScalar(a, ..)
        | Step::MergeDims(a, _)
        | Step::SplitDim(a, ..)
        | Step::Squeeze(a, _)
        | Step::Set(a)
        | Step::SegmentSet(a)
        | Step::Select(a, ..)
        | Step::ScaleBySize(a, _)
        | Step::Triangle(a, ..)
        | Step::FullLike(a, ..)
        | Step::Iota(a, ..)
        | Step::UniformLike(a, ..) => vec![*a],
        Step::Binary(_, a, b)
        | Step::Cat(a, b, _)
        | Step::ExpandLike(a, b)
        | Step::WithScalar(_, a, b)
        | Step::IndexSelect(a, _, b)
        | Step::TakeAlongAxis(a, b, _)
        | Step::Gather(a, b, _) => vec![*a, *b],
        Step::Where(a, b, c) => vec![*a, *b, *c],
        Step::Scatter { x, index, src, .. } => {
            let mut v = vec![*x, *index];
            v.extend(src);
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fp8 is drawn: inputs, casts to fp8, fp8 outputs (every inexact fp8 value is one,
    /// `Meta::terminal`).
    #[test]
    fn fp8_inputs_casts_and_outputs_are_drawn() {
        let (mut fusions, mut inputs, mut casts, mut outputs) = (0, 0, 0, 0);
        for seed in 123_000..123_400 {
            let recipe = Recipe::generate(seed, 12, 1);
            let Some(built) = recipe.build() else {
                continue;
            };
            let f = &built.fusion;
            let fp8 = |v: ValId| f.val(v).dtype.is_fp8();
            if !f.vals().any(|(_, v)| v.dtype.is_fp8()) {
                continue;
            }
            fusions += 1;
            inputs += f.inputs().iter().filter(|&&v| fp8(v)).count();
            for (_, e) in f.exprs() {
                if e.op == nvfuser::ir::Op::Cast && fp8(e.outputs[0]) {
                    casts += 1;
                }
            }
            outputs += f.outputs().iter().filter(|o| fp8(o.val)).count();
        }
        eprintln!("fp8 in {fusions} of 400 recipes: {inputs} inputs, {casts} casts to fp8, {outputs} outputs");
        assert!(fusions >= 20 && inputs >= 10 && casts >= 20 && outputs >= 10);
    }

    /// `scatter`, `scatter_add` (of tensors and of a constant) and pads with widths
    /// given by scalars are drawn.
    #[test]
    fn scatters_and_scalar_pad_widths_are_drawn() {
        use nvfuser::ir::{Op, SizeArg};
        let (mut scatters, mut adds, mut values, mut pads) = (0, 0, 0, 0);
        let mut proposed = 0;
        for seed in 1..=2000 {
            let recipe = Recipe::generate(seed, 12, 1);
            proposed += recipe
                .steps
                .iter()
                .filter(|s| matches!(s, Step::Scatter { .. }))
                .count();
            let Some(built) = recipe.build() else {
                continue;
            };
            let f = &built.fusion;
            for (_, e) in f.exprs() {
                match &e.op {
                    Op::Scatter { add, .. } => {
                        if *add {
                            adds += 1;
                        } else {
                            scatters += 1;
                        }
                        if !f.val(e.inputs[2]).is_tensor() {
                            values += 1;
                        }
                    }
                    Op::Pad { widths }
                        if widths.iter().any(|w| {
                            matches!(w, (SizeArg::Input(_), _) | (_, SizeArg::Input(_)))
                        }) =>
                    {
                        pads += 1
                    }
                    _ => {}
                }
            }
        }
        eprintln!(
            "in 2000 recipes: {proposed} scatter steps, {scatters} scatters ({values} of a constant), {adds} scatter_adds, {pads} pads with scalar widths"
        );
        assert!(scatters >= 20 && adds >= 20 && values >= 5 && pads >= 50);
    }

    /// Sorts are drawn: sort, argsort and topk, in both directions, and live (some
    /// output depends on them).
    #[test]
    fn sorts_are_drawn() {
        let (mut fusions, mut topks, mut sorts, mut desc) = (0, 0, 0, 0);
        for seed in 1..401 {
            let recipe = Recipe::generate(seed, 12, 1);
            let Some(built) = recipe.build() else {
                continue;
            };
            let f = &built.fusion;
            let live = f.live_exprs();
            let mut any = false;
            for (id, e) in f.exprs() {
                if let nvfuser::ir::Op::Sort { k, descending, .. } = e.op {
                    if !live[id.index()] {
                        continue;
                    }
                    any = true;
                    if k.is_some() {
                        topks += 1;
                    } else {
                        sorts += 1;
                    }
                    desc += usize::from(descending);
                }
            }
            fusions += usize::from(any);
        }
        eprintln!("live sorts in {fusions} of 400 recipes: {sorts} sort/argsort, {topks} topk, {desc} descending");
        assert!(fusions >= 20 && topks >= 10 && sorts >= 10 && desc >= 10);
    }
}
