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

use std::collections::HashMap;

use nvfuser::builder::{Contiguity, Slice, TensorSpec};
use nvfuser::ir::{BinaryOp, UnaryOp};
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
    /// uniform(shape of `like`) with seed and offset.
    UniformLike(usize, u64, u64, DataType),
    IndexSelect(usize, usize, usize),
    TakeAlongAxis(usize, usize, usize),
    Gather(usize, usize, usize),
    Select(usize, usize, i64),
    /// `x * (size(x, axis) as dtype)` scaled down: scalar math on sizes.
    ScaleBySize(usize, usize),
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

const SIZES: [usize; 20] = [
    1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 32, 64, 100, 128, 255, 256, 1000, 1024, 2048, 4096,
];
/// The largest universe (elements) a call draws.
const MAX_UNIVERSE: usize = 1 << 21;
/// The most a value may grow past the universe's element count (cat, pad).
const MAX_GROWTH: f64 = 4.0;

impl Recipe {
    /// A random recipe from `seed`, with at most `max_steps` steps and `calls` calls.
    pub fn generate(seed: u64, max_steps: usize, calls: usize) -> Recipe {
        let mut rng = Rng::new(seed);
        let rank = rng.below(5); // 0..=4
        let universe: Vec<Option<usize>> = (0..rank)
            .map(|_| {
                if rng.chance(15) {
                    Some(rng.pick(&SIZES))
                } else {
                    None
                }
            })
            .collect();
        // Static dims that alone exceed the cap become symbolic.
        let mut universe = universe;
        while universe.iter().flatten().product::<usize>() > MAX_UNIVERSE {
            if let Some(u) = universe.iter_mut().find(|u| u.is_some()) {
                *u = None;
            }
        }
        let mut g = Gen {
            rng,
            universe: universe.clone(),
            metas: Vec::new(),
            next_x: 0,
            spans: HashMap::new(),
            fd: FusionDefinition::new(),
            ids: Vec::new(),
            growth: Vec::new(),
        };
        let mut inputs = Vec::new();
        let n_tensors = 1 + g.rng.below(3);
        let float_types = [
            DataType::F32,
            DataType::F32,
            DataType::F16,
            DataType::BF16,
            DataType::F64,
        ];
        for k in 0..n_tensors {
            let dtype = if g.rng.chance(12) {
                g.rng.pick(&[DataType::I32, DataType::I64, DataType::Bool])
            } else {
                g.rng.pick(&float_types)
            };
            let r = if k == 0 { rank } else { g.rng.below(rank + 1) };
            let dims: Vec<Ax> = (rank - r..rank)
                .map(|u| if g.rng.chance(12) { Ax::B } else { Ax::U(u) })
                .collect();
            let contiguous = g.rng.chance(50);
            inputs.push(InputSpec::Tensor {
                dtype,
                dims,
                contiguous,
            });
        }
        if rank > 0 && g.rng.chance(20) {
            let target = g.rng.below(rank);
            let dtype = g.rng.pick(&[DataType::I64, DataType::I32]);
            // A 1-D index (index_select) or a full-rank one (gather / take_along_axis).
            let dims = if g.rng.chance(50) {
                vec![Ax::U(g.rng.below(rank))]
            } else {
                (0..rank).map(Ax::U).collect()
            };
            inputs.push(InputSpec::Index {
                dtype,
                dims,
                target,
            });
        }
        if g.rng.chance(30) {
            let dtype = g.rng.pick(&[DataType::F32, DataType::F64, DataType::I64]);
            inputs.push(InputSpec::Scalar { dtype });
        }
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
        // Outputs: the last value, plus a few others (intermediates or inputs), tensors
        // only.
        let pool = g.metas.len();
        let mut outputs = vec![];
        let tensors: Vec<usize> = (0..pool).filter(|&i| !g.metas[i].scalar).collect();
        if let Some(&last) = tensors.last() {
            outputs.push(last);
        }
        let extra = g.rng.below(3);
        for _ in 0..extra {
            if let Some(&v) = tensors.get(g.rng.below(tensors.len().max(1))) {
                if !outputs.contains(&v) {
                    outputs.push(v);
                }
            }
        }
        let calls = (0..calls)
            .map(|c| {
                let mut sizes: Vec<usize> = universe
                    .iter()
                    .map(|u| match u {
                        Some(n) => *n,
                        None if g.rng.chance(3) => 0,
                        None => g.rng.pick(&SIZES),
                    })
                    .collect();
                shrink_to_cap(&mut sizes, &universe);
                let layouts = inputs
                    .iter()
                    .map(|spec| match spec {
                        InputSpec::Tensor {
                            contiguous: true, ..
                        } => {
                            if g.rng.chance(25) {
                                Layout::Offset(1 + g.rng.below(7))
                            } else {
                                Layout::Contiguous
                            }
                        }
                        InputSpec::Tensor { .. } | InputSpec::Index { .. } => {
                            match g.rng.below(4) {
                                0 => Layout::Contiguous,
                                1 => Layout::Offset(1 + g.rng.below(7)),
                                2 => Layout::Pitched(1 + g.rng.below(8)),
                                _ => Layout::Transposed,
                            }
                        }
                        InputSpec::Scalar { .. } => Layout::Contiguous,
                    })
                    .collect();
                Call {
                    sizes,
                    layouts,
                    data_seed: seed.wrapping_mul(31).wrapping_add(c as u64),
                }
            })
            .collect();
        Recipe {
            seed,
            universe,
            inputs,
            steps,
            outputs,
            calls,
        }
    }

    /// Replays the recipe through the builder.
    pub fn build(&self) -> Option<Built> {
        let mut g = Gen {
            rng: Rng::new(0),
            universe: self.universe.clone(),
            metas: Vec::new(),
            next_x: 0,
            spans: HashMap::new(),
            fd: FusionDefinition::new(),
            ids: Vec::new(),
            growth: Vec::new(),
        };
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
            if g.fd.add_output(*id).is_ok() {
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

fn compatible(a: &[Ax], b: &[Ax]) -> bool {
    let n = a.len().min(b.len());
    a[a.len() - n..]
        .iter()
        .zip(&b[b.len() - n..])
        .all(|(x, y)| x == y || *x == Ax::B || *y == Ax::B)
}

fn combined(a: &[Ax], b: &[Ax]) -> Vec<Ax> {
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

const FLOAT_UNARY_BOUNDED: [UnaryOp; 14] = [
    UnaryOp::Exp,
    UnaryOp::Exp2,
    UnaryOp::Expm1,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Erf,
    UnaryOp::Erfc,
    UnaryOp::Asinh,
    UnaryOp::Gelu,
    UnaryOp::GeluTanh,
    UnaryOp::Silu,
];
const FLOAT_UNARY_SAFE: [UnaryOp; 5] = [
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Atan,
    UnaryOp::Relu,
    UnaryOp::Abs,
];
const EXACT_UNARY: [UnaryOp; 7] = [
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Trunc,
    UnaryOp::Sign,
    UnaryOp::IsFinite,
    UnaryOp::IsNan,
];

impl Gen {
    fn declare(&mut self, spec: &InputSpec) {
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
            Step::Pad(a, ..) => g(a) * 1.5,
            _ => operands(step).iter().map(g).fold(1.0, f64::max),
        }
    }

    fn fresh(&mut self) -> Ax {
        self.next_x += 1;
        Ax::X(self.next_x)
    }

    /// A fresh extent made from the dims `from` (a merge, slice, pad or cat of them):
    /// it spans their universe dims, so a shape holding it and one of those dims again
    /// is as large as a universe dim twice.
    fn fresh_from(&mut self, from: &[Ax]) -> Ax {
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

    fn pick_tensor(&mut self, pred: impl Fn(&Meta) -> bool) -> Option<usize> {
        let c: Vec<usize> = self
            .tensors()
            .into_iter()
            .filter(|&i| pred(&self.metas[i]))
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

    fn axes_of(&mut self, rank: usize) -> Vec<i64> {
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

    fn propose(&mut self, inputs: &[InputSpec]) -> Option<Step> {
        let float = |m: &Meta| m.dtype.is_float();
        let roll = self.rng.below(100);
        Some(match roll {
            0..=9 => {
                let a = self.pick_tensor(|m| float(m) && m.bound <= 20.0)?;
                let op = self.rng.pick(&FLOAT_UNARY_BOUNDED);
                // tan is ill-conditioned near its poles: only on |x| <= 1.
                if op == UnaryOp::Tan && self.metas[a].bound > 1.0 {
                    return None;
                }
                Step::Unary(op, a)
            }
            10..=17 => {
                let a = self.pick_tensor(float)?;
                Step::Unary(self.rng.pick(&FLOAT_UNARY_SAFE), a)
            }
            18..=20 => {
                let a = self.pick_tensor(|m| m.exact)?;
                let op = if self.metas[a].dtype.is_float() {
                    self.rng.pick(&EXACT_UNARY)
                } else {
                    self.rng.pick(&[UnaryOp::Abs, UnaryOp::Neg, UnaryOp::Sign])
                };
                Step::Unary(op, a)
            }
            21..=35 => {
                let a = self.pick_tensor(|m| m.dtype != DataType::Bool)?;
                let da = self.metas[a].dims.clone();
                let b =
                    self.pick_tensor(|m| compatible(&m.dims, &da) && m.dtype != DataType::Bool)?;
                let (ma, mb) = (&self.metas[a], &self.metas[b]);
                let ints = !ma.dtype.is_float() && !mb.dtype.is_float();
                let mut ops = vec![BinaryOp::Add, BinaryOp::Maximum, BinaryOp::Minimum];
                // A float difference of large values (a welford var_sum minus its mean)
                // cancels, and a sum of it cancels again: the result is tiny while its
                // rounding error scales with the operands, beyond what a comparison scaled
                // by the output can tell from a wrong value.
                if ints || (ma.bound <= 1e3 && mb.bound <= 1e3) {
                    ops.push(BinaryOp::Sub);
                }
                if ma.bound * mb.bound < 1e6 {
                    ops.push(BinaryOp::Mul);
                }
                if ints {
                    ops.extend([
                        BinaryOp::BitwiseAnd,
                        BinaryOp::BitwiseXor,
                        BinaryOp::Div,
                        BinaryOp::Remainder,
                    ]);
                } else if ma.bound < 100.0 && mb.bound < 100.0 && ma.exact && mb.exact {
                    // atan2 jumps across the negative x axis and at the origin: only on
                    // operands both devices compute bit for bit (atan2(m, m) of a mean
                    // that is 0 on the CPU and 1e-17 on the GPU differs by pi/4).
                    ops.push(BinaryOp::Atan2);
                }
                if ma.exact && mb.exact {
                    ops.extend([BinaryOp::Lt, BinaryOp::Ge, BinaryOp::Eq, BinaryOp::Ne]);
                }
                Step::Binary(self.rng.pick(&ops), a, b)
            }
            36..=40 => {
                let c = self.pick_tensor(|m| m.dtype == DataType::Bool)?;
                let dc = self.metas[c].dims.clone();
                let a = self.pick_tensor(|m| compatible(&m.dims, &dc))?;
                let da = combined(&dc, &self.metas[a].dims);
                let b = self.pick_tensor(|m| compatible(&m.dims, &da))?;
                Step::Where(c, a, b)
            }
            41..=44 => {
                let a = self.pick_tensor(|m| m.dtype.is_float())?;
                Step::Clamp(a, -1.0 - self.rng.unit(), 0.5 + self.rng.unit())
            }
            45..=51 => {
                let a = self.pick_tensor(|_| true)?;
                let m = &self.metas[a];
                let to = if m.exact {
                    self.rng.pick(&[
                        DataType::F16,
                        DataType::BF16,
                        DataType::F32,
                        DataType::F64,
                        DataType::I32,
                        DataType::I64,
                        DataType::Bool,
                    ])
                } else {
                    self.rng
                        .pick(&[DataType::F16, DataType::BF16, DataType::F32, DataType::F64])
                };
                Step::Cast(a, to)
            }
            52..=61 => {
                let a = self.pick_tensor(|m| !m.dims.is_empty() && m.dtype != DataType::Bool)?;
                let axes = self.axes_of(self.metas[a].dims.len());
                let keep = self.rng.chance(50);
                let float = self.metas[a].dtype.is_float();
                let red = match self.rng.below(6) {
                    0 if float && self.metas[a].bound <= 20.0 => Red::Prod,
                    1 => Red::Max,
                    2 => Red::Min,
                    3 if float => Red::Mean,
                    _ => Red::Sum,
                };
                Step::Reduce(red, a, axes, keep)
            }
            62..=65 => {
                let a = self
                    .pick_tensor(|m| !m.dims.is_empty() && m.dtype.is_float() && m.bound < 1e3)?;
                let axes = self.axes_of(self.metas[a].dims.len());
                match self.rng.below(3) {
                    0 => Step::Var(a, axes, self.rng.below(2) as i64, self.rng.chance(50)),
                    1 => Step::VarMean(a, axes, self.rng.below(2) as i64, self.rng.below(2)),
                    _ => Step::Welford(a, axes, self.rng.below(3)),
                }
            }
            66..=69 => {
                let a = self.pick_tensor(|m| m.dims.len() < 4)?;
                let r = self.metas[a].dims.len();
                let at = self.rng.below(r + 1);
                let mask: Vec<bool> = (0..=r).map(|i| i == at).collect();
                Step::Broadcast(a, mask)
            }
            70..=71 => {
                let a = self.pick_tensor(|m| m.dims.contains(&Ax::B))?;
                let da = self.metas[a].dims.clone();
                let like = self.pick_tensor(|m| {
                    m.dims.len() == da.len() && compatible(&m.dims, &da) && m.dims != da
                })?;
                Step::ExpandLike(a, like)
            }
            72..=75 => {
                let a = self.pick_tensor(|m| m.dims.len() >= 2)?;
                let r = self.metas[a].dims.len();
                let mut perm: Vec<i64> = (0..r as i64).collect();
                for i in (1..r).rev() {
                    let j = self.rng.below(i + 1);
                    perm.swap(i, j);
                }
                Step::Permute(a, perm)
            }
            76..=79 => {
                let a = self.pick_tensor(|m| !m.dims.is_empty())?;
                let axis = self.rng.below(self.metas[a].dims.len());
                if self.rng.chance(30) {
                    Step::SliceToSize(a, axis, self.rng.below(3) as i64)
                } else {
                    let start = self.rng.below(3) as i64;
                    let stop = if self.rng.chance(50) {
                        i64::MAX
                    } else {
                        -(self.rng.below(3) as i64) - 1
                    };
                    Step::Slice(a, axis, start, stop, 1 + self.rng.below(2) as i64)
                }
            }
            80..=81 => {
                let a = self.pick_tensor(|m| !m.dims.is_empty())?;
                let axis = self.rng.below(self.metas[a].dims.len());
                Step::Pad(
                    a,
                    axis,
                    self.rng.below(3) as i64,
                    self.rng.below(3) as i64,
                    0.5,
                )
            }
            82..=83 => {
                let a = self.pick_tensor(|m| !m.dims.is_empty())?;
                let da = self.metas[a].dims.clone();
                let axis = self.rng.below(da.len());
                let b = self.pick_tensor(|m| {
                    m.dims.len() == da.len()
                        && m.dims
                            .iter()
                            .zip(&da)
                            .enumerate()
                            .all(|(i, (x, y))| i == axis || x == y)
                })?;
                Step::Cat(a, b, axis)
            }
            84..=85 => {
                let a = self.pick_tensor(|m| m.dims.len() >= 2)?;
                let r = self.metas[a].dims.len();
                if self.rng.chance(50) {
                    Step::MergeDims(a, self.rng.below(r - 1))
                } else {
                    Step::SplitDim(a, self.rng.below(r), self.rng.pick(&[1, 2, 4]))
                }
            }
            86 => {
                let a = self.pick_tensor(|m| m.dims.contains(&Ax::B))?;
                let axes: Vec<i64> = self.metas[a]
                    .dims
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| **d == Ax::B)
                    .map(|(i, _)| i as i64)
                    .collect();
                Step::Squeeze(a, axes)
            }
            87 => Step::Set(self.pick_tensor(|_| true)?),
            88 => Step::SegmentSet(self.pick_tensor(|_| true)?),
            89 => {
                let like = self.pick_tensor(|_| true)?;
                let dt = self
                    .rng
                    .pick(&[DataType::F32, DataType::F16, DataType::I64]);
                Step::FullLike(like, 1.5, dt)
            }
            90 => {
                let a = self.pick_tensor(|m| !m.dims.is_empty())?;
                let axis = self.rng.below(self.metas[a].dims.len());
                let dt =
                    self.rng
                        .pick(&[DataType::I32, DataType::I64, DataType::F32, DataType::F64]);
                Step::Iota(a, axis, 100.0, self.rng.pick(&[1.0, 2.0, -3.0]), dt)
            }
            91 => {
                let like = self.pick_tensor(|_| true)?;
                let dt = self
                    .rng
                    .pick(&[DataType::F32, DataType::F64, DataType::BF16]);
                Step::UniformLike(
                    like,
                    self.rng.next() % 1000,
                    self.rng.below(4) as u64 * 4,
                    dt,
                )
            }
            92..=94 => {
                // Indexing with an index input.
                let (ix, spec) = inputs
                    .iter()
                    .enumerate()
                    .find(|(_, s)| matches!(s, InputSpec::Index { .. }))?;
                let InputSpec::Index {
                    dims: idims,
                    target,
                    ..
                } = spec
                else {
                    return None;
                };
                let target = *target;
                let x = self.pick_tensor(|m| m.dims.contains(&Ax::U(target)))?;
                let dx = self.metas[x].dims.clone();
                let axis = dx.iter().position(|&d| d == Ax::U(target))?;
                if idims.len() == 1 {
                    Step::IndexSelect(x, axis, ix)
                } else if dx.len() == idims.len() {
                    if self.rng.chance(50) {
                        Step::TakeAlongAxis(x, ix, axis)
                    } else {
                        Step::Gather(x, ix, axis)
                    }
                } else {
                    return None;
                }
            }
            95 => {
                let a = self.pick_tensor(|m| !m.dims.is_empty())?;
                let axis = self.rng.below(self.metas[a].dims.len());
                Step::Select(a, axis, 0)
            }
            96..=97 => {
                let a = self.pick_tensor(|m| m.dtype.is_float() && !m.dims.is_empty())?;
                let axis = self.rng.below(self.metas[a].dims.len());
                Step::ScaleBySize(a, axis)
            }
            _ => {
                let s = (0..self.metas.len())
                    .find(|&i| self.metas[i].scalar && self.ids[i].is_some() && i < inputs.len())?;
                let a = self.pick_tensor(|m| m.dtype != DataType::Bool)?;
                let op = self
                    .rng
                    .pick(&[BinaryOp::Add, BinaryOp::Mul, BinaryOp::Sub]);
                Step::WithScalar(op, a, s)
            }
        })
    }

    /// Builds `step`; pushes its value and meta. False (nothing pushed) when an operand
    /// is missing or the builder refuses.
    fn apply(&mut self, step: &Step) -> bool {
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

    fn try_apply(&mut self, step: &Step) -> Option<(ValId, Meta)> {
        let id = |g: &Gen, i: usize| -> Option<ValId> { *g.ids.get(i)? };
        let meta = |g: &Gen, i: usize| -> Option<Meta> { g.metas.get(i).cloned() };
        match step {
            Step::Unary(op, a) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = self.fd.unary(*op, x).ok()?;
                let dtype = self.fd.fusion().val(v).dtype;
                let exact = m.exact
                    && matches!(
                        op,
                        UnaryOp::Abs
                            | UnaryOp::Neg
                            | UnaryOp::Relu
                            | UnaryOp::Floor
                            | UnaryOp::Ceil
                            | UnaryOp::Round
                            | UnaryOp::Trunc
                            | UnaryOp::Sign
                            | UnaryOp::IsFinite
                            | UnaryOp::IsNan
                    );
                let bound = match op {
                    UnaryOp::Exp | UnaryOp::Sinh | UnaryOp::Cosh => m.bound.exp(),
                    UnaryOp::Exp2 => m.bound.exp2(),
                    UnaryOp::Expm1 => m.bound.exp(),
                    UnaryOp::Tan => 1.6,
                    UnaryOp::Tanh
                    | UnaryOp::Sigmoid
                    | UnaryOp::Sin
                    | UnaryOp::Cos
                    | UnaryOp::Erf
                    | UnaryOp::Sign => 1.0,
                    UnaryOp::Erfc | UnaryOp::Atan => 2.0,
                    _ => m.bound + 1.0,
                };
                Some((
                    v,
                    Meta {
                        dtype,
                        exact,
                        bound,
                        ..m
                    },
                ))
            }
            Step::Binary(op, a, b) => {
                let (x, ma) = (id(self, *a)?, meta(self, *a)?);
                let (y, mb) = (id(self, *b)?, meta(self, *b)?);
                let ints = !ma.dtype.is_float() && !mb.dtype.is_float();
                let v = match op {
                    // Integer division and remainder by |b| + 1 (never zero).
                    BinaryOp::Div | BinaryOp::Remainder if ints => {
                        let ab = self.fd.abs(y).ok()?;
                        let one = self.fd.constant(1i64);
                        let d = self.fd.add(ab, one).ok()?;
                        self.fd.binary(*op, x, d).ok()?
                    }
                    _ => self.fd.binary(*op, x, y).ok()?,
                };
                let dtype = self.fd.fusion().val(v).dtype;
                let exact = ma.exact
                    && mb.exact
                    && (ints
                        || matches!(
                            op,
                            BinaryOp::Maximum
                                | BinaryOp::Minimum
                                | BinaryOp::Lt
                                | BinaryOp::Ge
                                | BinaryOp::Eq
                                | BinaryOp::Ne
                        ));
                let bound = match op {
                    BinaryOp::Mul => ma.bound * mb.bound,
                    BinaryOp::Atan2 => 4.0,
                    BinaryOp::Lt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne => 1.0,
                    BinaryOp::Remainder | BinaryOp::Div => ma.bound.max(mb.bound),
                    _ => ma.bound + mb.bound,
                };
                let dims = combined(&ma.dims, &mb.dims);
                Some((
                    v,
                    Meta {
                        dims,
                        dtype,
                        scalar: false,
                        exact,
                        bound,
                    },
                ))
            }
            Step::Where(c, a, b) => {
                let (cv, mc) = (id(self, *c)?, meta(self, *c)?);
                let (x, ma) = (id(self, *a)?, meta(self, *a)?);
                let (y, mb) = (id(self, *b)?, meta(self, *b)?);
                let v = self.fd.where_(cv, x, y).ok()?;
                let dtype = self.fd.fusion().val(v).dtype;
                let dims = combined(&combined(&mc.dims, &ma.dims), &mb.dims);
                Some((
                    v,
                    Meta {
                        dims,
                        dtype,
                        scalar: false,
                        exact: mc.exact && ma.exact && mb.exact,
                        bound: ma.bound.max(mb.bound),
                    },
                ))
            }
            Step::Clamp(a, lo, hi) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let lo = self.fd.constant(*lo);
                let hi = self.fd.constant(*hi);
                let v = self.fd.clamp(x, lo, hi).ok()?;
                Some((
                    v,
                    Meta {
                        exact: false,
                        bound: 2.0,
                        ..m
                    },
                ))
            }
            Step::Cast(a, to) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = self.fd.cast(x, *to).ok()?;
                // Narrowing float casts round: exact only when widening or to integers
                // of exact values.
                let exact = m.exact
                    && (!to.is_float()
                        || to.size_bytes() >= m.dtype.size_bytes()
                        || !m.dtype.is_float());
                let bound = if *to == DataType::Bool { 1.0 } else { m.bound };
                Some((
                    v,
                    Meta {
                        dtype: *to,
                        exact,
                        bound,
                        ..m
                    },
                ))
            }
            Step::Reduce(red, a, axes, keep) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = match red {
                    Red::Sum => self.fd.sum(x, axes, *keep),
                    Red::Prod => {
                        // Products of values near 1 stay finite. An f32 product is
                        // accumulated in f32 on the GPU but in f64 by the reference (the
                        // value model), so its factors stay within 1 +- 2^-16: over the
                        // largest universe (2^21 elements) the product stays below e^32,
                        // far from f32's range, where the two would part (inf against a
                        // finite value). f16/bf16 results round to their dtype on both
                        // sides, and f64 is f64 on both.
                        let t = self.fd.tanh(x).ok()?;
                        let f32_math = self.fd.fusion().val(t).dtype == DataType::F32;
                        let k = self
                            .fd
                            .constant(if f32_math { 1.0 / 65536.0 } else { 0.01 });
                        let t = self.fd.mul(t, k).ok()?;
                        let one = self.fd.constant(1.0);
                        let t = self.fd.add(t, one).ok()?;
                        self.fd.prod(t, axes, *keep)
                    }
                    Red::Max => self.fd.max(x, axes, *keep),
                    Red::Min => self.fd.min(x, axes, *keep),
                    Red::Mean => self.fd.mean(x, axes, *keep),
                }
                .ok()?;
                let dtype = self.fd.fusion().val(v).dtype;
                let dims = reduced_dims(&m.dims, axes, *keep);
                let exact = m.exact && (matches!(red, Red::Max | Red::Min) || !dtype.is_float());
                let bound = match red {
                    Red::Sum => m.bound * 4096.0,
                    Red::Prod => 1e30,
                    _ => m.bound,
                };
                Some((
                    v,
                    Meta {
                        dims,
                        dtype,
                        scalar: false,
                        exact,
                        bound,
                    },
                ))
            }
            Step::Var(a, axes, corr, keep) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = self.fd.var(x, axes, *corr, *keep).ok()?;
                let dtype = self.fd.fusion().val(v).dtype;
                Some((
                    v,
                    Meta {
                        dims: reduced_dims(&m.dims, axes, *keep),
                        dtype,
                        scalar: false,
                        exact: false,
                        bound: m.bound * m.bound,
                    },
                ))
            }
            Step::VarMean(a, axes, corr, pick) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let (var, mean) = self.fd.var_mean(x, axes, *corr, false).ok()?;
                let v = if *pick == 0 { var } else { mean };
                let dtype = self.fd.fusion().val(v).dtype;
                Some((
                    v,
                    Meta {
                        dims: reduced_dims(&m.dims, axes, false),
                        dtype,
                        scalar: false,
                        exact: false,
                        bound: m.bound * m.bound,
                    },
                ))
            }
            Step::Welford(a, axes, pick) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let (mean, var_sum, count) = self.fd.welford(x, axes).ok()?;
                let v = [mean, var_sum, count][*pick];
                let dtype = self.fd.fusion().val(v).dtype;
                Some((
                    v,
                    Meta {
                        dims: reduced_dims(&m.dims, axes, false),
                        dtype,
                        scalar: false,
                        exact: *pick == 2,
                        bound: m.bound * m.bound * 4096.0,
                    },
                ))
            }
            Step::Broadcast(a, mask) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = self.fd.broadcast(x, mask).ok()?;
                let mut it = m.dims.iter();
                let dims = mask
                    .iter()
                    .map(|&b| {
                        if b {
                            Ax::B
                        } else {
                            *it.next().unwrap_or(&Ax::B)
                        }
                    })
                    .collect();
                Some((v, Meta { dims, ..m }))
            }
            Step::ExpandLike(a, like) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let (l, ml) = (id(self, *like)?, meta(self, *like)?);
                if ml.dims.len() != m.dims.len() {
                    return None;
                }
                let mut sizes = Vec::new();
                for (i, d) in m.dims.iter().enumerate() {
                    if *d == Ax::B && ml.dims[i] != Ax::B {
                        sizes.push(Size::Val(self.fd.size(l, i as i64).ok()?));
                    } else {
                        sizes.push(Size::Const(-1));
                    }
                }
                let v = self.fd.expand(x, &sizes).ok()?;
                Some((
                    v,
                    Meta {
                        dims: combined(&m.dims, &ml.dims),
                        ..m
                    },
                ))
            }
            Step::Permute(a, perm) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = self.fd.permute(x, perm).ok()?;
                let dims = perm.iter().map(|&p| m.dims[p as usize]).collect();
                Some((v, Meta { dims, ..m }))
            }
            Step::Slice(a, axis, start, stop, step) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let ranges: Vec<Slice> = (0..m.dims.len())
                    .map(|i| {
                        if i == *axis {
                            Slice::step(*start, *stop, *step)
                        } else {
                            Slice::all()
                        }
                    })
                    .collect();
                let v = self.fd.slice(x, &ranges).ok()?;
                let mut dims = m.dims.clone();
                dims[*axis] = self.fresh_from(&[m.dims[*axis]]);
                Some((v, Meta { dims, ..m }))
            }
            Step::SliceToSize(a, axis, k) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let n = self.fd.size(x, *axis as i64).ok()?;
                let kk = self.fd.constant(*k);
                let end = self.fd.sub(n, kk).ok()?;
                let ranges: Vec<Slice> = (0..m.dims.len())
                    .map(|i| {
                        if i == *axis {
                            Slice::range(0i64, Size::Val(end))
                        } else {
                            Slice::all()
                        }
                    })
                    .collect();
                let v = self.fd.slice(x, &ranges).ok()?;
                let mut dims = m.dims.clone();
                dims[*axis] = self.fresh_from(&[m.dims[*axis]]);
                Some((v, Meta { dims, ..m }))
            }
            Step::Pad(a, axis, lo, hi, value) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let widths: Vec<(i64, i64)> = (0..m.dims.len())
                    .map(|i| if i == *axis { (*lo, *hi) } else { (0, 0) })
                    .collect();
                let value = self.fd.constant(*value);
                let v = self.fd.pad(x, &widths, value).ok()?;
                let mut dims = m.dims.clone();
                dims[*axis] = self.fresh_from(&[m.dims[*axis]]);
                Some((
                    v,
                    Meta {
                        dims,
                        bound: m.bound.max(1.0),
                        ..m
                    },
                ))
            }
            Step::Cat(a, b, axis) => {
                let (x, ma) = (id(self, *a)?, meta(self, *a)?);
                let (y, mb) = (id(self, *b)?, meta(self, *b)?);
                let v = self.fd.cat(&[x, y], *axis as i64).ok()?;
                let dtype = self.fd.fusion().val(v).dtype;
                let mut dims = combined(&ma.dims, &mb.dims);
                dims[*axis] = self.fresh_from(&[ma.dims[*axis], mb.dims[*axis]]);
                Some((
                    v,
                    Meta {
                        dims,
                        dtype,
                        scalar: false,
                        exact: ma.exact && mb.exact,
                        bound: ma.bound.max(mb.bound),
                    },
                ))
            }
            Step::MergeDims(a, axis) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let mut sizes = Vec::new();
                for i in 0..m.dims.len() {
                    if i == *axis {
                        sizes.push(Size::Const(-1));
                    } else if i != axis + 1 {
                        sizes.push(Size::Val(self.fd.size(x, i as i64).ok()?));
                    }
                }
                let v = self.fd.reshape(x, &sizes).ok()?;
                let mut dims = m.dims.clone();
                let parts = [dims[*axis], dims[*axis + 1]];
                dims.remove(axis + 1);
                dims[*axis] = self.fresh_from(&parts);
                Some((v, Meta { dims, ..m }))
            }
            Step::SplitDim(a, axis, k) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let mut sizes = Vec::new();
                for i in 0..m.dims.len() {
                    if i == *axis {
                        sizes.push(Size::Const(*k));
                        sizes.push(Size::Const(-1));
                    } else {
                        sizes.push(Size::Val(self.fd.size(x, i as i64).ok()?));
                    }
                }
                let v = self.fd.reshape(x, &sizes).ok()?;
                let mut dims = m.dims.clone();
                let f1 = if *k == 1 { Ax::B } else { self.fresh() };
                let f2 = self.fresh_from(&[m.dims[*axis]]);
                dims[*axis] = f2;
                dims.insert(*axis, f1);
                Some((v, Meta { dims, ..m }))
            }
            Step::Squeeze(a, axes) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let v = self.fd.squeeze(x, axes).ok()?;
                let dims = m
                    .dims
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(&(*i as i64)))
                    .map(|(_, d)| *d)
                    .collect();
                Some((v, Meta { dims, ..m }))
            }
            Step::Set(a) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                Some((self.fd.set(x).ok()?, m))
            }
            Step::SegmentSet(a) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                Some((self.fd.segment_set(x).ok()?, m))
            }
            Step::FullLike(like, value, dt) => {
                let (l, m) = (id(self, *like)?, meta(self, *like)?);
                let sizes = self.sizes_of(l, &m.dims)?;
                let value = self.fd.constant(*value);
                let v = self.fd.full(&sizes, value, *dt).ok()?;
                Some((
                    v,
                    Meta {
                        dims: m
                            .dims
                            .iter()
                            .map(|d| if *d == Ax::B { Ax::B } else { *d })
                            .collect(),
                        dtype: *dt,
                        scalar: false,
                        exact: true,
                        bound: 2.0,
                    },
                ))
            }
            Step::Iota(a, axis, start, step, dt) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let n = self.fd.size(x, *axis as i64).ok()?;
                let (s, st) = if dt.is_float() {
                    (self.fd.constant(*start), self.fd.constant(*step))
                } else {
                    (
                        self.fd.constant(*start as i64),
                        self.fd.constant(*step as i64),
                    )
                };
                let v = self.fd.iota(Size::Val(n), s, st, *dt).ok()?;
                let d = m.dims[*axis];
                Some((
                    v,
                    Meta {
                        dims: vec![if d == Ax::B { Ax::B } else { d }],
                        dtype: *dt,
                        scalar: false,
                        exact: true,
                        bound: 100.0 + 3.0 * 4096.0,
                    },
                ))
            }
            Step::UniformLike(like, seed, offset, dt) => {
                let (l, m) = (id(self, *like)?, meta(self, *like)?);
                let sizes = self.sizes_of(l, &m.dims)?;
                let lo = self.fd.constant(-1.0);
                let hi = self.fd.constant(1.0);
                let seed = self.fd.constant(*seed as i64);
                let offset = self.fd.constant(*offset as i64);
                let v = self.fd.uniform(&sizes, lo, hi, seed, offset, *dt).ok()?;
                Some((
                    v,
                    Meta {
                        dims: m.dims.clone(),
                        dtype: *dt,
                        scalar: false,
                        exact: true,
                        bound: 1.0,
                    },
                ))
            }
            Step::IndexSelect(x, axis, ix) => {
                let (xv, m) = (id(self, *x)?, meta(self, *x)?);
                let (iv, mi) = (id(self, *ix)?, meta(self, *ix)?);
                let v = self.fd.index_select(xv, *axis as i64, iv).ok()?;
                let mut dims = m.dims.clone();
                dims[*axis] = mi.dims[0];
                Some((v, Meta { dims, ..m }))
            }
            Step::TakeAlongAxis(x, ix, axis) | Step::Gather(x, ix, axis) => {
                let (xv, m) = (id(self, *x)?, meta(self, *x)?);
                let (iv, mi) = (id(self, *ix)?, meta(self, *ix)?);
                let v = if matches!(step, Step::Gather(..)) {
                    self.fd.gather(xv, *axis as i64, iv).ok()?
                } else {
                    self.fd.take_along_axis(xv, iv, *axis as i64).ok()?
                };
                Some((
                    v,
                    Meta {
                        dims: combined(&mi.dims, &m.dims),
                        ..m
                    },
                ))
            }
            Step::Select(x, axis, index) => {
                let (xv, m) = (id(self, *x)?, meta(self, *x)?);
                let v = self.fd.select(xv, *axis as i64, Size::Const(*index)).ok()?;
                let mut dims = m.dims.clone();
                dims.remove(*axis);
                Some((v, Meta { dims, ..m }))
            }
            Step::ScaleBySize(x, axis) => {
                let (xv, m) = (id(self, *x)?, meta(self, *x)?);
                let n = self.fd.size(xv, *axis as i64).ok()?;
                let one = self.fd.constant(1i64);
                let n1 = self.fd.add(n, one).ok()?;
                let nf = self.fd.cast(n1, m.dtype).ok()?;
                let r = self.fd.reciprocal(nf).ok()?;
                let v = self.fd.mul(xv, r).ok()?;
                Some((v, Meta { exact: false, ..m }))
            }
            Step::WithScalar(op, a, s) => {
                let (x, m) = (id(self, *a)?, meta(self, *a)?);
                let (sv, ms) = (id(self, *s)?, meta(self, *s)?);
                if !ms.scalar {
                    return None;
                }
                let v = self.fd.binary(*op, x, sv).ok()?;
                let dtype = self.fd.fusion().val(v).dtype;
                let bound = if *op == BinaryOp::Mul {
                    m.bound * 8.0
                } else {
                    m.bound + 8.0
                };
                Some((
                    v,
                    Meta {
                        dtype,
                        exact: m.exact && ms.exact && !dtype.is_float(),
                        bound,
                        ..m
                    },
                ))
            }
        }
    }

    /// `size()` scalars for every non-broadcast dim of `l` (1 for broadcast dims).
    fn sizes_of(&mut self, l: ValId, dims: &[Ax]) -> Option<Vec<Size>> {
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

fn reduced_dims(dims: &[Ax], axes: &[i64], keep: bool) -> Vec<Ax> {
    let r = dims.len() as i64;
    let norm: Vec<usize> = axes
        .iter()
        .map(|&a| if a < 0 { (a + r) as usize } else { a as usize })
        .collect();
    dims.iter()
        .enumerate()
        .filter_map(|(i, &d)| {
            if norm.contains(&i) {
                keep.then_some(Ax::B)
            } else {
                Some(d)
            }
        })
        .collect()
}

/// The pool values a step reads.
pub fn operands(s: &Step) -> Vec<usize> {
    match s {
        Step::Unary(_, a)
        | Step::Clamp(a, ..)
        | Step::Cast(a, _)
        | Step::Reduce(_, a, ..)
        | Step::Var(a, ..)
        | Step::VarMean(a, ..)
        | Step::Welford(a, ..)
        | Step::Broadcast(a, _)
        | Step::Permute(a, _)
        | Step::Slice(a, ..)
        | Step::SliceToSize(a, ..)
        | Step::Pad(a, ..)
        | Step::MergeDims(a, _)
        | Step::SplitDim(a, ..)
        | Step::Squeeze(a, _)
        | Step::Set(a)
        | Step::SegmentSet(a)
        | Step::Select(a, ..)
        | Step::ScaleBySize(a, _)
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
    }
}
