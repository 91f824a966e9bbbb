//! The CPU reference evaluator: the numerical oracle for every GPU test and the fallback
//! device.
//!
//! [`evaluate`] runs a [`Fusion`](crate::ir::Fusion) on [`HostTensor`]s and scalars; [`compare`] checks a
//! result against an expected tensor with dtype-aware [`Tolerance`]s. Nothing here
//! panics on user input: wrong inputs, shape mismatches, out-of-range indices and
//! integer division by zero are typed [`Error`](crate::Error)s.
//!
//! **This documentation is the specification of the IR's values.** Generated kernels
//! must match it (exactly for integers, bools and shapes; within [`Tolerance::for_dtype`]
//! for floats, unless stated otherwise).
//!
//! # Inputs
//!
//! `evaluate(fusion, inputs)` takes one [`EvalInput`] per fusion input, in order, and
//! checks each against its declaration:
//!
//! * the count (`evaluate: expected 2 inputs, found 3`);
//! * tensor versus scalar;
//! * a tensor's dtype (exact match), rank, declared static sizes, and that declared
//!   broadcast dims have size 1. Contiguity and stride order are memory-layout facts of
//!   device buffers; a `HostTensor` is a logical array, so they are not checked here.
//! * every extent the fusion equates (operands of one elementwise op, `cat`'s other
//!   dims, an `expand` size against a non-broadcast dim, a `gather` index against its
//!   input, ...), evaluated from the arguments ([`crate::ir::bind::check_sizes`], the
//!   check the GPU executor runs too);
//! * a scalar is converted to its declared dtype ([`crate::ir::bind::check_scalar`]): a
//!   bool or an integer may be given for any numeric type (floats round to nearest
//!   even), a float for an integer or bool input is an error, an integer outside i32
//!   range for an i32 input is an error, and only a bool is accepted for a bool input.
//!
//! # Value model
//!
//! * Floats of every dtype are computed in **f64**, and **every `f32`, `f16` or `bf16`
//!   value is rounded (correctly, to nearest even) to its dtype after the expression
//!   that produces it**: each op computes its exact result in f64 and rounds it once,
//!   as a generated kernel holds the value in a register of its dtype, and as PyTorch
//!   computes (half ops compute in f32 and round to half, nvFuser's rule). So `x * x`
//!   of an `f32` `3.4e38` is `inf` on both devices, and an RMSNorm of such a row is 0,
//!   as in PyTorch; a LayerNorm through `var_mean` keeps its finite mean and gives the
//!   bias. An `f64` value is the f64 result. A reduction accumulates in f64 and rounds
//!   its result once. Outputs and every public `HostTensor` hold values representable
//!   in their dtype. Random ops round each element to the dtype at once (see
//!   [`crate::philox`]).
//!   A generated kernel computes `f32` math in `f32`, so elementary ops (`+ - * /`,
//!   `sqrt`, casts) agree exactly and library functions (`exp`, `tanh`, ...) within a
//!   few ulps; sums differ by their order (hence the tolerances). Kernels are compiled
//!   without multiply-add contraction, so a value has one rounding at all its uses and
//!   cancels against itself exactly (`x - mean` over a one-element row is 0 on both
//!   devices, and its variance with correction 1 is `0/0 = NaN`, not the ±inf of an
//!   unrounded `fma(a, b, -mean)`).
//! * Integers are computed in i64 with two's-complement wrap-around; an `i32`-typed
//!   result is wrapped to i32 after every op.
//! * Bools are bools.
//!
//! # Elementwise ops
//!
//! Operands broadcast numpy-style (the builder makes rank extension explicit). Two dims
//! that meet in an op must have equal sizes unless one is a declared broadcast dim
//! (IR kind `Broadcast`, size 1); a symbolic dim whose runtime size happens to be 1 does
//! **not** broadcast. A mismatch between arguments is refused before anything runs, by
//! the check every device shares ([`crate::ir::bind::check_sizes`]), with an error
//! naming the arguments, dims and sizes, e.g. `argument 1 dim 1: size 5, but it must
//! equal argument 0 dim 1 (size 4): the fusion adds them`. (The evaluator's own check
//! of each op's operand shapes stays, e.g. `add: shape mismatch: expected size 4 at dim
//! 1 (non-broadcast dims must match), found size 5 (operand shapes [3, 4] and [3, 5])`,
//! for IR whose extents do not say it.)
//!
//! **Computation type.** Operands are converted to the op's computation type before the
//! op: the output type for arithmetic, bitwise, `where`, `clamp`, `threshold`, `lerp`,
//! `addcmul` and floating unary math (`exp` of an `i32` computes in `f32`); the promoted
//! type of the operands for comparisons (an `i32` compared with an `f32` compares in
//! `f32`); the operand's own type for `abs`, `neg`, `relu`, `sign`, rounding ops,
//! `isfinite`/`isinf`/`isnan`, `logical_not`, `bitwise_not`. The logical ops look at
//! each operand's nonzero-ness in its own type. A value already of the computation type
//! is used unrounded; any other converts as a cast would (an `i64` to `f16` rounds to
//! `f16`; a bool is 0 or 1), except that a scalar meeting `f16`/`bf16` math is rounded to
//! `f32`, not to the half type (PyTorch keeps scalars in its `f32` "opmath" type).
//!
//! **Floats** (IEEE f64 semantics, NaN and infinities propagate as in C):
//! `div`/`truediv` are IEEE division (`x/0` is ±inf or NaN); `fmod` is C `fmod` (sign of
//! the dividend); `remainder` is PyTorch's: `m = fmod(a, b)`, plus `b` when `m != 0` and
//! the signs of `m` and `b` differ; `pow` is C `pow`; `minimum`/`maximum` return NaN if
//! either operand is NaN (and order -0 below +0); `round` is half-to-even; `sign(NaN)` is
//! NaN and `sign(±0) = +0`; `relu(NaN)` is NaN; `frac(x) = x - trunc(x)`; `sigmoid(x) =
//! 1 / (1 + e^-x)`; `silu(x) = x / (1 + e^-x)`; `rsqrt(x) = 1 / sqrt(x)`; `gelu` is exact
//! (`x/2 (1 + erf(x/√2))`); `gelu_tanh` is `x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))`;
//! `erf`, `erfc`, `lgamma` are libm's; `erfinv` is accurate to a few ulps of f64
//! ([`erfinv`]), `erfinv(±1) = ±inf`, NaN outside `[-1, 1]`. Comparisons with NaN are
//! false except `ne`.
//!
//! **Integers:** `add`, `sub`, `mul`, `pow`, `neg`, `abs` wrap; `div` truncates toward
//! zero, `fmod` has the sign of the dividend, `remainder` the sign of the divisor
//! (Python); a zero divisor in `div`, `fmod` or `remainder` is an error (`div: invalid
//! argument: integer division by zero ...`), and `MIN / -1` wraps to `MIN`. `pow` with a
//! negative exponent is an error (as PyTorch); `pow(0, 0) = 1`. Shifts work in the
//! operand type's width w (32 for i32, 64 for i64): `shift_left` and
//! `logical_shift_right` (zero-filling the w-bit pattern) give 0 for amounts outside
//! `0..w` (negative amounts included), `shift_right` (arithmetic) gives 0 or -1 (the
//! sign) there. Rounding ops are the identity on integers; `isfinite` is true, `isinf`
//! and `isnan` are false.
//!
//! **Bools:** `add`/`maximum`/`bitwise_or` are or, `mul`/`minimum`/`bitwise_and` are and,
//! `bitwise_xor` is xor, comparisons order `false < true`; `abs`, `relu`, `sign` and the
//! rounding ops are the identity; `bitwise_not` is `!`.
//!
//! **Ternary:** `where(c, a, b)` picks by the truth of `c`; `lerp(s, e, w)` is PyTorch's
//! (`s + w (e - s)` for `|w| < 0.5`, else `e - (e - s)(1 - w)`, exact at both ends);
//! `clamp(x, lo, hi) = minimum(maximum(x, lo), hi)` (NaN-propagating; `hi` wins when
//! `lo > hi`); `threshold(x, t, v)` is `v` where `x <= t`, else `x` (so NaN stays NaN,
//! as PyTorch); `addcmul(x, t1, t2, v) = x + (v * t1) * t2`.
//!
//! # Casts and copies
//!
//! float → int truncates toward zero and out-of-range values and infinities saturate at
//! the target's bounds; NaN gives `i64::MIN` for i64, and for i32 0 from f16/bf16/f32 but
//! `i32::MIN` from f64: PyTorch's CUDA results, measured by
//! `scripts/semantics/torch_casts.py` (its CPU casts differ). int → i32 wraps. Anything
//! → bool is "nonzero" (NaN is true). bool → number is 0 or 1. Anything → float rounds
//! to nearest even in one step (integers too, e.g. `i64 → bf16`), also a cast to the type
//! the value already has. `segment_set` rounds like a cast to its own type (a segment
//! boundary stores the value to memory in its dtype); `set` copies the value unchanged.
//!
//! # fp8 (`f8e4m3` = PyTorch's `float8_e4m3fn`, `f8e5m2` = `float8_e5m2`)
//!
//! One byte each; the bit-level rules are in [`crate::fp8`], shared with the kernels'
//! preamble, so both devices give the same byte for the same `f32` value.
//!
//! * **f32 → e4m3fn**: round to nearest, ties to even. The format has no infinities: a
//!   value whose rounded magnitude exceeds 448 becomes NaN (PyTorch's non-saturating
//!   conversion: 449 → 448, 464 → 448 (the tie between 448 and the NaN pattern goes to
//!   the even 448), anything above 464 → NaN), and so do ±inf and NaN (sign kept,
//!   `0x7f`/`0xff`). Subnormals are kept down to `2^-9`; `-0.0` stays `-0.0`.
//! * **f32 → e5m2**: round to nearest, ties to even; a rounded magnitude past 57344
//!   (from 61440 on) is ±inf; inf → inf, NaN → NaN; subnormals down to `2^-16`.
//! * **fp8 → f32** is exact (and so is fp8 → f64/f16/bf16 where representable: f16
//!   holds every e4m3 value; e5m2's subnormals are f16 subnormals).
//! * **f64, integers, f16, bf16 → fp8 round to f32 first** (nearest even), then as above:
//!   PyTorch's `Float8_e4m3fn`/`Float8_e5m2` convert only from `float`, so a double
//!   or an `int64` becomes a `float` first (two roundings: `1 + 2^-4 + 2^-30` in f64
//!   lands on the e4m3 tie `1 + 2^-4` in f32 and rounds to 1.0). f16/bf16 → f32 is exact.
//!   fp8 → integer converts the exact value like an f32 (NaN → 0 for i32).
//! * **Math**: fp8 promotes with no other type (a tensor of another dtype, the other fp8
//!   type included, is a builder error asking for a cast); scalars leave an fp8 tensor's
//!   type alone and meet its math as f32, as with f16/bf16. Ops on fp8 compute in f32
//!   and round once to the fp8 type. Reductions and scans cast fp8 to f32 (sums and
//!   products accumulate in f32, then cast back; `max`/`min` select in f32, since e4m3
//!   has no infinity for their identity); random ops refuse fp8 outputs.
//!
//! # Reductions
//!
//! `sum`, `prod`, `max`, `min`, `mean` over the expression's `axes` compute in the
//! output type (the builder casts half inputs to `f32` and integer sums to `i64`); the
//! output shape drops the reduced axes (they are `Reduction` dims in the IR). Float sums
//! are pairwise in f64; `mean` is that sum rounded to the output type, divided by the
//! count (PyTorch's: an `f32` mean of values near `f32::MAX` overflows to `inf`, on both
//! devices). Over zero elements: `sum` is 0, `prod` is 1, `mean` is NaN, and `max`/`min`
//! have no value: the call is refused (`max: invalid argument: cannot reduce over an
//! empty dimension ...`) when an output with elements depends on one
//! ([`crate::ir::bind::observed_empty_reduction`], checked on the whole fusion before
//! anything runs and again on its results), so a softmax over an empty dim returns its
//! empty result, as PyTorch's does, while `max` of `[3, 0]` over dim 1 is refused.
//! `max`/`min` propagate NaN.
//! `var` is `M2 / max(0, n - correction)` with `M2 = Σ (x - mean)²` (two-pass), so
//! `n <= correction` gives `inf` (or NaN when `M2 = 0`), as PyTorch; `var_mean` returns
//! `(var, mean)`. `welford` returns `(mean, M2, count)` with `count` an `i64` tensor of
//! the output's shape; over zero elements the mean is NaN, `M2` is 0, `count` is 0.
//!
//! # Scans
//!
//! `cumsum`, `cumprod`, `cummax` and `cummin` along one `axis` (IR `Op::Scan`) are
//! **inclusive** scans: the output has the input's shape, and the element at position
//! `i` along the axis combines the input elements at positions `0..=i` of the same lane
//! (the other indices fixed), in that order; lanes are independent. Element 0 is the
//! input element itself, not an identity combined with it (a `-0.0` stays `-0.0`).
//!
//! * **Dtypes** (the builder's rules, as PyTorch): `cumsum`/`cumprod` of bool, i32 and
//!   i64 compute and return **i64** (a bool is 0 or 1, so a bool `cumsum` counts the
//!   trues so far and a bool `cumprod` is 1 up to the first false, 0 from it on); of
//!   f16/bf16 they cast to **f32**, scan in f32 and cast the result back (each element
//!   is the f32 scan value rounded to the half type once more); f32 and f64 scan in
//!   their own type. `cummax`/`cummin` keep any dtype; on bool they are the running
//!   `or` (any) and `and` (all).
//! * **Accumulation**: the reference keeps the running value in f64 (floats) or in
//!   i64 with two's-complement wrap-around (integers: an i64 `cumprod` that overflows
//!   wraps, `2^62 * 4 = 0`; an i32 result is wrapped to i32), combines in order
//!   `0, 1, ..., i` (sequential, not pairwise), and rounds each output element once
//!   to the scan's type (f32 for f16/bf16/f32 inputs). A kernel accumulates in the
//!   scan's type (f32) in any association order (per-thread runs, block carries), so
//!   float `cumsum`/`cumprod` agree within a tolerance that grows with the scanned
//!   length `n` and with the magnitude of the running value: about `n * 2^-24 *
//!   max |running value|` in f32 at worst, the bound of a sum over the same `n`
//!   elements ([`Tolerance::for_scan`]). Integer and bool scans, and `cummax`/`cummin`
//!   of every dtype (they select an element, never round), match exactly.
//! * **NaN and infinities**: `cummax`/`cummin` propagate NaN like `maximum`/`minimum`:
//!   from the first NaN of a lane on, every later element is NaN (the values of
//!   `torch.cummax`/`torch.cummin`). `cumsum`/`cumprod` follow IEEE arithmetic (a NaN
//!   stays, `inf + -inf` is NaN, `0 * inf` is NaN, from there on).
//! * **Signed zeros**: `cummax`/`cummin` order `-0` below `+0` as `maximum`/`minimum`
//!   do, so `cummax([-0, +0]) = [-0, +0]` and `cummax([+0, -0]) = [+0, +0]` (PyTorch's
//!   `cummax` keeps the later of equal values and gives `-0` there).
//! * **Shapes**: a scanned dim of size 0 gives an empty output (no identity is needed
//!   and nothing is refused, unlike `max`/`min` over an empty dim); a scanned dim of size
//!   1 returns the input (in the scan's type). A scanned broadcast dim stays a broadcast
//!   dim (the scan of one element is that element). A scanned **expanded** dim (a
//!   broadcast `expand`ed to size `n`, stride 0 in memory) becomes an ordinary dim whose
//!   elements differ: the `cumsum` of a value `c` expanded to `n` is `c, 2c, ..., nc`.
//!   Broadcast and expanded dims that are not scanned stay as they are (every lane
//!   along them is the same).
//! * **0-d tensors** take axis `0` or `-1` and are returned as they are (promoted as
//!   above: the `cumsum` of a 0-d bool is a 0-d i64); no scan expression is emitted.
//! * **Errors**: an axis outside `-rank..rank` is `Error::AxisOutOfRange` from the
//!   builder (`cumsum: axis 2 is out of range for a tensor of rank 2 (expected
//!   -2..2)`); the evaluator refuses an IR scan whose axis is not below the input's rank
//!   with the same error.
//!
//! # Sorting
//!
//! `sort`, `argsort` and `topk` along one `axis` (IR `Op::Sort`, two outputs: the values
//! in the input's dtype and their positions along the axis as **i64**) follow one
//! total order, the same on every device, bit for bit:
//!
//! * **Stable.** Each lane (the other indices fixed) is sorted as (key, index) pairs: a
//!   key before another by the order below, equal keys by the **lower index first**, in
//!   ascending and descending sorts alike (descending reverses the key order only).
//!   `topk(k, largest)` is the first `k` pairs of the descending (`largest`) or ascending
//!   order, so it is always sorted, and its ties go to the lower index.
//! * **Key order.** Integers and bools (`false < true`) by value. Floats (f16, bf16,
//!   f32, f64) by IEEE order, with **NaN above +inf** (every NaN equal to every other, so
//!   NaNs keep their index order) and **-0 equal to +0** (they keep their index order
//!   too). So an ascending sort puts NaNs last and a `topk` of the largest takes NaNs
//!   first, as PyTorch. fp8 tensors are refused by the builder (cast them first).
//! * **Values** are the input elements themselves (a `-0` stays `-0`, a NaN stays NaN);
//!   indices are exact. The comparison of both devices is exact.
//! * **Shapes.** The outputs have the input's shape, except that `topk` makes the sorted
//!   dim `k` long. `k` is a constant `0 <= k <= size`: a larger `k` is refused by the
//!   builder when the size is static, else by the argument checks of every device
//!   ([`crate::ir::bind::check_sizes`]: `argument 0 dim 1: size 3`, expected `be at
//!   least 5`, `topk takes k = 5 elements along dim 1`). `k = 0` and empty dims give
//!   empty outputs. 0-d tensors are refused.
//!
//! # Shape ops
//!
//! * `broadcast` inserts size-1 dims; `expand` turns size-1 broadcast dims into the given
//!   sizes (`-1` keeps a dim; a non-broadcast dim may only be "expanded" to its own
//!   size, else an error).
//! * `reshape` is row-major with at most one inferred `-1` (an error when the known
//!   sizes multiply to 0 or do not divide the element count); `permute` output dim `i`
//!   is input dim `perm[i]`; `squeeze` removes size-1 dims (an error on any other size).
//! * `slice`: constant bounds clamp as in Python (negative counts from the end,
//!   `i64::MAX` means "to the end", past-the-end clamps); bounds given by scalars must be
//!   within `0..=size` (an error otherwise); `stop <= start` gives an empty dim; length is
//!   `ceil((stop - start) / step)`.
//! * `pad` fills with its scalar converted to the tensor's dtype as a cast would; `cat`
//!   concatenates (non-axis dims must agree; declared broadcast dims broadcast).
//! * `full` fills with its scalar cast to the dtype; `iota` is `start + i * step` in the
//!   dtype (start and step converted to it first; integers wrap); `size` is the runtime
//!   size as an `i64` scalar. Negative sizes are errors.
//! * A size given by a scalar ([`crate::ir::SizeArg::Input`]) is the value of the
//!   expression's input at that position; it must be an integer.
//!
//! # Indexing
//!
//! Indices must lie in `0..size` (an error otherwise, naming the index, its position and
//! the dim; negative indices are errors for `index_select`, `gather` and
//! `take_along_axis`). `select` counts a negative index from the end. `index_select`
//! picks with a 1-D index; `gather` is `torch.gather` (the index may be smaller than the
//! input in the non-axis dims, never larger); `take_along_axis` broadcasts the index and
//! the input against each other in the non-axis dims.
//!
//! `scatter(x, axis, index, src)` (`torch.scatter`) and `scatter_add` (`torch.scatter_add`,
//! `scatter_reduce(reduce="sum")` including self) return a new tensor: a copy of `x` in
//! which, for every element `j` of the index taken in row-major order, the target `t`
//! (`t = j` but `t[axis] = index[j]`) is set to `src[j]` (scatter; `src` may be a scalar,
//! torch's `value` form) or set to `out[t] + src[j]` rounded to the dtype (scatter_add;
//! integers wrap, bool is refused). So when several index elements name one target,
//! **the last one in row-major order wins**, and a target's adds are made in row-major
//! order of the index, i.e. in increasing `j[axis]` (the other coordinates of every
//! contributor equal the target's): the result is deterministic and exact on both
//! devices, floats included. Shapes are PyTorch's: the index has `x`'s rank, is no
//! larger than `src` in any dim and no larger than `x` outside `axis` (a typed error
//! naming both sizes otherwise); an index value outside `0..x.size(axis)` (negatives
//! included) is an error, on the GPU a device-side check (`Error::DeviceAssert`), never a
//! write out of bounds. The GPU kernel computes each output element on its own: it
//! walks the index along `axis` at the element's other coordinates, keeping the last
//! match (or adding every match in order), then writes `src` at that match or `x`. One
//! kernel, no atomics and no second pass; its cost per output element is
//! `index.size(axis)` index reads, which suits short scatter axes.
//!
//! # Random numbers
//!
//! `uniform`/`normal` number their elements by row-major linear index over the output
//! shape and take them from [`crate::philox`] (seed and offset are integer scalars
//! reinterpreted as u64): `uniform_f32` for f32/f16/bf16 (bounds rounded to f32; the
//! f32 result rounded to f16/bf16; a result that rounds to `high` or above becomes
//! `low`, so the range is `[low, high)` as in PyTorch), `uniform_f64` (with the same
//! rule), `normal_f32_as_f64` rounded to the
//! dtype, `normal_f64`.
//!
//! # Outputs
//!
//! Outputs are returned in order, rounded to their dtype. An output that aliases an input
//! (`add_output_alias`) is simply returned: the in-place update is a device concern.
//!
//! # Performance
//!
//! Elementwise ops run one monomorphized closure over an `ndarray::Zip` of broadcast
//! views; intermediates are freed after their last use. Tensors of 10^7 elements are
//! fine.

mod compare;
mod convert;
mod interp;
mod math;
mod pointwise;
mod reduce;
mod shape;
mod sort;
mod tensor;

pub use crate::dtype::round_to;
pub use compare::{compare, Mismatch, Tolerance};
pub use interp::evaluate;
pub use math::erfinv;
pub use tensor::{Element, HostData, HostTensor, MAX_HOST_BYTES};

use crate::dtype::ScalarValue;

/// One input of [`evaluate`]: a tensor or a scalar.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalInput {
    /// A tensor input.
    Tensor(HostTensor),
    /// A scalar input.
    Scalar(ScalarValue),
}

impl From<HostTensor> for EvalInput {
    fn from(t: HostTensor) -> Self {
        EvalInput::Tensor(t)
    }
}

impl From<&HostTensor> for EvalInput {
    /// Clones the tensor.
    fn from(t: &HostTensor) -> Self {
        EvalInput::Tensor(t.clone())
    }
}

impl From<ScalarValue> for EvalInput {
    fn from(v: ScalarValue) -> Self {
        EvalInput::Scalar(v)
    }
}

macro_rules! scalar_input {
    ($($t:ty),*) => {
        $(impl From<$t> for EvalInput {
            fn from(v: $t) -> Self {
                EvalInput::Scalar(ScalarValue::from(v))
            }
        })*
    };
}

scalar_input!(bool, i32, i64, f32, f64);
