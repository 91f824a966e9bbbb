//! The Fusion IR: values and expressions in arenas, addressed by typed `u32` ids.
//!
//! A [`Fusion`] owns two vectors, one of [`Val`]s (tensors and scalars) and one of
//! [`Expr`]s. Each expression reads input values and defines output values; a value
//! has at most one defining expression. Expressions are appended after their inputs
//! exist, so the arena order is a topological order. Ids are cheap to copy, hash and
//! compare, and no lifetimes leak into the API.
//!
//! Architecture invariant: a `Fusion` is plain data. It holds no CUDA state, no caches
//! and no interior mutability; structural identity is computed from it on demand
//! (see [`structural`]).

pub mod bind;
mod cse;
mod extent;
mod ops;
pub mod reads;
pub mod structural;
mod unify;
mod verify;
mod views;
pub(crate) use unify::unify_input_dims;

pub use views::{ViewChain, ViewLayout};

use std::fmt;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

pub use extent::{Extent, ExtentOp, ExtentRef};
pub use ops::{
    BinaryOp, BinaryRule, Distribution, Op, ReductionOp, ScanOp, SizeArg, SliceRange, TernaryOp,
    UnaryOp, UnaryRule,
};

use crate::dtype::{DataType, ScalarValue};

/// The largest number of elements of a tensor, 2^48 (and so the largest size of one
/// dim). The builder refuses static shapes above it and the heuristics refuse run-time
/// sizes above it, so size arithmetic in the schedulers, the index math and the
/// evaluator (products of sizes, times element sizes, block sizes, unroll factors) stays
/// far from `i64` overflow.
pub const MAX_NUMEL: i64 = 1 << 48;

/// Id of a value (tensor or scalar) in its fusion's arena.
///
/// The low [`ValId::INDEX_BITS`] bits are the arena index. The high bits are the tag of
/// the [`FusionDefinition`](crate::builder::FusionDefinition) that handed the id out (0
/// for ids made by [`ValId::new`] or read from a [`Fusion`]), so that a definition can
/// refuse an id of another definition whose index happens to be in range. Equality,
/// ordering, hashing, printing and serialization look at the index only: a tagged id
/// and the plain id of the same value are the same id.
#[derive(Clone, Copy)]
pub struct ValId(u32);

impl PartialEq for ValId {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}
impl Eq for ValId {}
impl std::hash::Hash for ValId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}
impl PartialOrd for ValId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ValId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id().cmp(&other.id())
    }
}
impl fmt::Debug for ValId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ValId({})", self.id())
    }
}
impl Serialize for ValId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_newtype_struct("ValId", &self.id())
    }
}
impl<'de> Deserialize<'de> for ValId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "ValId")]
        struct Raw(u32);
        let Raw(i) = Raw::deserialize(d)?;
        if i > ValId::MAX_INDEX {
            return Err(serde::de::Error::custom(format!(
                "value id {i} is above the largest index {}",
                ValId::MAX_INDEX
            )));
        }
        Ok(ValId(i))
    }
}

/// Id of an expression in its fusion's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExprId(pub u32);

impl ValId {
    /// How many low bits hold the arena index; a fusion holds at most 2^24 values.
    pub const INDEX_BITS: u32 = 24;
    /// The largest arena index.
    pub const MAX_INDEX: u32 = (1 << Self::INDEX_BITS) - 1;

    /// The (untagged) id of arena position `index`, which must be at most
    /// [`ValId::MAX_INDEX`] (higher bits are dropped).
    pub const fn new(index: u32) -> ValId {
        ValId(index & Self::MAX_INDEX)
    }

    /// Position in the arena.
    pub fn index(self) -> usize {
        self.id() as usize
    }

    /// Position in the arena, as a `u32`.
    pub const fn id(self) -> u32 {
        self.0 & Self::MAX_INDEX
    }

    /// The tag of the definition that handed this id out (0: none).
    pub const fn tag(self) -> u8 {
        (self.0 >> Self::INDEX_BITS) as u8
    }

    /// This id with `tag` in its high bits.
    pub(crate) const fn tagged(self, tag: u8) -> ValId {
        ValId(self.id() | ((tag as u32) << Self::INDEX_BITS))
    }
}

impl ExprId {
    /// Position in the arena.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.id())
    }
}

/// What kind of iteration a dimension is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IterKind {
    /// An ordinary dimension.
    Iteration,
    /// A size-1 dimension that broadcasts against any size.
    Broadcast,
    /// A broadcast dimension with a real extent (stride 0 in memory).
    Expanded,
    /// A dimension that a reduction consumed; not part of the tensor's shape.
    Reduction,
}

/// One dimension of a tensor's logical domain.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IterDomain {
    /// Its size.
    pub extent: Extent,
    /// Its kind.
    pub kind: IterKind,
}

impl IterDomain {
    /// An ordinary dim.
    pub fn iteration(extent: Extent) -> Self {
        IterDomain {
            extent,
            kind: IterKind::Iteration,
        }
    }

    /// A size-1 broadcast dim.
    pub fn broadcast() -> Self {
        IterDomain {
            extent: Extent::Const(1),
            kind: IterKind::Broadcast,
        }
    }

    /// True for broadcast and expanded dims (they can stand against any size).
    pub fn is_broadcast_like(&self) -> bool {
        matches!(self.kind, IterKind::Broadcast | IterKind::Expanded)
    }

    /// True for reduction dims.
    pub fn is_reduction(&self) -> bool {
        self.kind == IterKind::Reduction
    }
}

/// Type of a tensor value: its logical domain and, for inputs, its memory layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    /// All logical dims, reduction dims included.
    pub domain: Vec<IterDomain>,
    /// Per shape dim (reduction dims excluded): `Some(true)` when the dim's stride is
    /// the size × stride of the next inner non-broadcast dim (1 for the innermost),
    /// `None` for broadcast and expanded dims.
    pub contiguity: Vec<Option<bool>>,
    /// Per shape dim: its rank in allocation order, 0 innermost (row-major 3-D is
    /// `[2, 1, 0]`).
    pub stride_order: Vec<usize>,
}

impl TensorType {
    /// A contiguous row-major tensor over `domain`.
    pub fn contiguous(domain: Vec<IterDomain>) -> Self {
        let shape: Vec<&IterDomain> = domain.iter().filter(|d| !d.is_reduction()).collect();
        let rank = shape.len();
        let contiguity = shape
            .iter()
            .map(|d| (!d.is_broadcast_like()).then_some(true))
            .collect();
        TensorType {
            domain,
            contiguity,
            stride_order: (0..rank).rev().collect(),
        }
    }

    /// The dims that make up the tensor's shape (reduction dims excluded).
    pub fn shape(&self) -> impl Iterator<Item = &IterDomain> + '_ {
        self.domain.iter().filter(|d| !d.is_reduction())
    }

    /// The dims that make up the shape, collected.
    pub fn shape_dims(&self) -> Vec<IterDomain> {
        self.shape().cloned().collect()
    }

    /// Number of shape dims.
    pub fn rank(&self) -> usize {
        self.shape().count()
    }

    /// The contiguity entries in allocation order, outermost first: how a
    /// `TensorSpec`, `#[layout(contiguity = ..)]` and nvFuser's `define_tensor` list
    /// them (the shape's order when the stride order is row-major).
    pub fn contiguity_in_allocation_order(&self) -> Vec<Option<bool>> {
        let rank = self.contiguity.len();
        let mut by_position = vec![None; rank];
        for (d, &c) in self.contiguity.iter().enumerate() {
            if let Some(&o) = self.stride_order.get(d) {
                if o < rank {
                    by_position[rank - 1 - o] = c;
                }
            }
        }
        by_position
    }

    /// True when the stride order is row-major.
    pub fn is_row_major(&self) -> bool {
        let r = self.stride_order.len();
        self.stride_order
            .iter()
            .enumerate()
            .all(|(i, &o)| o == r - 1 - i)
    }
}

/// What a value is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ValKind {
    /// A tensor.
    Tensor(TensorType),
    /// A scalar: a fusion input, a constant, or computed by an expression.
    Scalar(Option<ScalarValue>),
}

/// A value node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Val {
    /// Element type.
    pub dtype: DataType,
    /// Tensor or scalar.
    pub kind: ValKind,
    /// The expression that defines it; `None` for inputs and constants.
    pub definition: Option<ExprId>,
}

impl Val {
    /// The tensor type, if this is a tensor.
    pub fn tensor(&self) -> Option<&TensorType> {
        match &self.kind {
            ValKind::Tensor(t) => Some(t),
            ValKind::Scalar(_) => None,
        }
    }

    /// True for tensors.
    pub fn is_tensor(&self) -> bool {
        matches!(self.kind, ValKind::Tensor(_))
    }

    /// The constant value, if this is a constant scalar.
    pub fn constant(&self) -> Option<ScalarValue> {
        match &self.kind {
            ValKind::Scalar(c) => *c,
            ValKind::Tensor(_) => None,
        }
    }
}

/// An expression node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Expr {
    /// What it computes.
    pub op: Op,
    /// Values read, in the op's order.
    pub inputs: SmallVec<[ValId; 3]>,
    /// Values defined.
    pub outputs: SmallVec<[ValId; 1]>,
}

/// A fusion output: a value, optionally written in place into an input's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Output {
    /// The value.
    pub val: ValId,
    /// When set, the output is stored into this input tensor (an in-place update).
    pub alias_of: Option<ValId>,
}

/// Where one output of a fusion comes from once [`Fusion::forward_outputs`] has split off
/// the outputs that need no kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputSource {
    /// Output `k` of the kernel fusion.
    Kernel(usize),
    /// The fusion input at this position, returned as it is (a view, no copy).
    Input(usize),
    /// A view of an input's buffer: the layout-only ops of the chain applied to the
    /// input's layout ([`ViewChain::layout`]), no copy.
    View(ViewChain),
}

/// A whole fusion: arenas plus ordered inputs and outputs.
///
/// Equality and hashing are structural (see [`structural`]): two fusions built the
/// same way are equal even if their inputs were declared at different points.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fusion {
    pub(crate) vals: Vec<Val>,
    pub(crate) exprs: Vec<Expr>,
    pub(crate) inputs: Vec<ValId>,
    pub(crate) outputs: Vec<Output>,
    /// A segment of a larger fusion: its outputs may be intermediates of that fusion.
    /// Not part of the structural identity (equality and hashing).
    #[serde(default)]
    pub(crate) segment: bool,
    /// The seed and offset inputs fed from the device's random generator (stateful
    /// `rand_uniform`/`rand_normal`), when the fusion has any: they are its last two
    /// inputs, and a call that leaves them out gets them from the generator.
    #[serde(default)]
    pub(crate) generator: Option<GeneratorInputs>,
}

/// The two scalar inputs of a fusion that its device's random generator fills (the
/// stateful random ops), and how far one call advances the generator's offset.
///
/// Each stateful random op reads the seed and its own offset, `offset + k` for the
/// `k`-th op, so one call draws `draws` independent Philox streams; the next call
/// starts at `offset + draws`. A caller may still pass both values itself (to replay a
/// call): they are ordinary `i64` inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GeneratorInputs {
    /// The seed input (`i64`), second to last.
    pub seed: ValId,
    /// The offset input (`i64`), last.
    pub offset: ValId,
    /// Offsets one call uses: the number of stateful random ops.
    pub draws: u64,
}

impl Fusion {
    /// An empty fusion.
    pub fn new() -> Self {
        Fusion::default()
    }

    /// The same values, inputs and outputs with no expressions (no value has a
    /// definition): the start of a rewrite that re-adds the expressions it keeps.
    pub(crate) fn without_exprs(&self) -> Fusion {
        let mut nf = self.clone();
        nf.exprs.clear();
        // A rewrite is scheduled with every argument in hand: the generator's inputs
        // are ordinary ones there.
        nf.generator = None;
        for v in nf.vals.iter_mut() {
            v.definition = None;
        }
        nf
    }

    /// Whether this is a segment of a larger fusion (made by the segmenter): its outputs
    /// may be intermediates of the whole, so the rules that judge what the user sees
    /// (a `max` over an empty dim, [`crate::ir::bind::observed_empty_reduction`]) are
    /// left to the whole fusion's checks.
    pub fn is_segment(&self) -> bool {
        self.segment
    }

    /// Splits off the outputs that need no kernel: an output that is an input is the
    /// input itself (as in PyTorch, the same tensor), an output that layout-only ops
    /// make from an input is a view of the input's buffer where every call allows it
    /// ([`ViewChain::of`]), and a value listed twice is computed once. Returns the fusion
    /// a kernel must compute (the same values and inputs, each remaining output once)
    /// and, per original output, where it comes from; `None` when every output needs
    /// its own kernel output. In-place outputs are kept (unless their value is an
    /// input), and so is every view of an input that an output updates in place: outputs
    /// other than the in-place one hold the input's values from before the call (an
    /// output that is such an input is copied by the runtime before the store).
    pub fn forward_outputs(&self) -> Option<(Fusion, Vec<OutputSource>)> {
        let mut kept: Vec<Output> = Vec::new();
        let mut sources = Vec::with_capacity(self.outputs.len());
        let updated: Vec<usize> = self
            .outputs
            .iter()
            .filter_map(|o| self.input_position(o.alias_of?))
            .collect();
        for o in &self.outputs {
            let free = o.alias_of.is_none() && self.val(o.val).is_tensor();
            let view = || {
                free.then(|| ViewChain::of(self, o.val))
                    .flatten()
                    .filter(|c| !updated.contains(&c.input))
            };
            let source = match self.input_position(o.val) {
                // The input itself (the executor copies it first where another output
                // updates it, or stores nothing where it updates itself).
                Some(p) if self.val(o.val).is_tensor() => OutputSource::Input(p),
                None if let Some(chain) = view() => OutputSource::View(chain),
                _ => match kept.iter().position(|k| *k == *o) {
                    Some(k) => OutputSource::Kernel(k),
                    None => {
                        kept.push(*o);
                        OutputSource::Kernel(kept.len() - 1)
                    }
                },
            };
            sources.push(source);
        }
        if kept.len() == self.outputs.len() {
            return None;
        }
        let mut kernel = self.clone();
        kernel.outputs = kept;
        Some((kernel, sources))
    }

    /// The same fusion with every in-place output made a plain output, or `None` when
    /// none is in place: what GPU kernels compute. The runtime stores those outputs
    /// into their inputs after the kernels (see [`Output::alias_of`]).
    pub fn without_output_aliases(&self) -> Option<Fusion> {
        if self.outputs.iter().all(|o| o.alias_of.is_none()) {
            return None;
        }
        let mut plain = self.clone();
        for o in &mut plain.outputs {
            o.alias_of = None;
        }
        Some(plain)
    }

    /// The value behind an id. Ids come from this fusion; a foreign id is a logic error
    /// that the verifier reports, and this accessor panics on it.
    pub fn val(&self, id: ValId) -> &Val {
        &self.vals[id.index()]
    }

    /// The value behind an id, or `None` if the id is out of range.
    pub fn get_val(&self, id: ValId) -> Option<&Val> {
        self.vals.get(id.index())
    }

    /// The expression behind an id.
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.index()]
    }

    /// All values, in arena order.
    pub fn vals(&self) -> impl ExactSizeIterator<Item = (ValId, &Val)> + '_ {
        self.vals
            .iter()
            .enumerate()
            .map(|(i, v)| (ValId(i as u32), v))
    }

    /// All expressions, in arena (topological) order.
    pub fn exprs(&self) -> impl ExactSizeIterator<Item = (ExprId, &Expr)> + '_ {
        self.exprs
            .iter()
            .enumerate()
            .map(|(i, e)| (ExprId(i as u32), e))
    }

    /// Number of values.
    pub fn num_vals(&self) -> usize {
        self.vals.len()
    }

    /// Number of expressions.
    pub fn num_exprs(&self) -> usize {
        self.exprs.len()
    }

    /// Inputs, in order.
    pub fn inputs(&self) -> &[ValId] {
        &self.inputs
    }

    /// The inputs a caller passes: all of them, but the generator's seed and offset
    /// ([`Fusion::generator_inputs`]), which a call may leave to the device's generator.
    pub fn user_inputs(&self) -> &[ValId] {
        match self.generator {
            Some(_) => &self.inputs[..self.inputs.len().saturating_sub(2)],
            None => &self.inputs,
        }
    }

    /// The seed and offset inputs the device's random generator fills, if the fusion
    /// has stateful random ops.
    pub fn generator_inputs(&self) -> Option<GeneratorInputs> {
        self.generator
    }

    /// Outputs, in order.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    /// The tensor type of `id`, if it is a tensor.
    pub fn tensor_type(&self, id: ValId) -> Option<&TensorType> {
        self.get_val(id).and_then(Val::tensor)
    }

    /// The position of `id` among the inputs.
    pub fn input_position(&self, id: ValId) -> Option<usize> {
        self.inputs.iter().position(|&i| i == id)
    }

    /// Every input extent, as nvFuser's `FusionDefinition.extents()` lists them: each
    /// dim of each tensor input, inputs in order (scalar inputs skipped), dims in order.
    /// Entry `k` has nvFuser's signed id `-(k + 1)` ([`Fusion::extent_id`]); values have
    /// ids `>= 0`, so the two never collide. Broadcast and expanded dims are listed too
    /// (an expanded dim by its expanded size, as nvFuser does).
    pub fn extents(&self) -> Vec<ExtentRef> {
        self.inputs
            .iter()
            .filter_map(|&v| self.tensor_type(v).map(|t| (v, t.rank())))
            .flat_map(|(tensor, rank)| (0..rank as u32).map(move |axis| ExtentRef { tensor, axis }))
            .collect()
    }

    /// nvFuser's signed id of an input extent: `-(k + 1)` for entry `k` of
    /// [`Fusion::extents`], `None` when `e` is not an input tensor's dim.
    pub fn extent_id(&self, e: ExtentRef) -> Option<i64> {
        let mut k = 0i64;
        for &v in &self.inputs {
            let Some(t) = self.tensor_type(v) else {
                continue;
            };
            if v == e.tensor {
                return ((e.axis as usize) < t.rank()).then(|| -(k + e.axis as i64) - 1);
            }
            k += t.rank() as i64;
        }
        None
    }

    /// For each value, the expressions that read it (in arena order).
    pub fn uses(&self) -> Vec<Vec<ExprId>> {
        let mut uses = vec![Vec::new(); self.vals.len()];
        for (id, e) in self.exprs() {
            for &i in &e.inputs {
                if let Some(u) = uses.get_mut(i.index()) {
                    if u.last() != Some(&id) {
                        u.push(id);
                    }
                }
            }
        }
        uses
    }

    /// Which expressions contribute to some output, as a mask over the expr arena.
    pub fn live_exprs(&self) -> Vec<bool> {
        let mut live_val = vec![false; self.vals.len()];
        for o in &self.outputs {
            if let Some(l) = live_val.get_mut(o.val.index()) {
                *l = true;
            }
        }
        let mut live = vec![false; self.exprs.len()];
        for (i, e) in self.exprs.iter().enumerate().rev() {
            if e.outputs.iter().any(|o| live_val[o.index()]) {
                live[i] = true;
                for &inp in &e.inputs {
                    live_val[inp.index()] = true;
                    if let ValKind::Tensor(t) = &self.vals[inp.index()].kind {
                        for d in &t.domain {
                            d.extent.for_each_val(&mut |v| live_val[v.index()] = true);
                        }
                    }
                }
            }
        }
        live
    }

    /// Appends `val`. The builder refuses a fusion of more than [`ValId::MAX_INDEX`]
    /// values before it gets here; internal rewrites stay far below it.
    pub(crate) fn push_val(&mut self, val: Val) -> ValId {
        assert!(
            self.vals.len() <= ValId::MAX_INDEX as usize,
            "a fusion holds at most 2^24 values"
        );
        let id = ValId(self.vals.len() as u32);
        self.vals.push(val);
        id
    }

    /// The value `id`, to change in place (a rewrite giving a kept id a new type).
    pub(crate) fn val_mut(&mut self, id: ValId) -> &mut Val {
        &mut self.vals[id.index()]
    }

    pub(crate) fn push_expr(&mut self, expr: Expr) -> ExprId {
        let id = ExprId(self.exprs.len() as u32);
        for &o in &expr.outputs {
            self.vals[o.index()].definition = Some(id);
        }
        self.exprs.push(expr);
        id
    }
}

pub use verify::verify;
