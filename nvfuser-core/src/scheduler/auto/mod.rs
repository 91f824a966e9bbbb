//! The tuned schedulers: pointwise, inner reduction, inner persistent normalization,
//! outer reduction and transpose. Each has a *plan* (the fusion-level analysis, which
//! is the compile-time check: an `Err` is the reason in plain words), a heuristic that
//! turns the plan and the call's [`RuntimeInfo`](super::RuntimeInfo) into params, and a
//! schedule that applies params to the plan with the scheduling primitives.

pub(crate) mod inner;
pub(crate) mod inner_outer;
pub(crate) mod outer;
pub(crate) mod pointwise;
mod rewrites;
pub(crate) mod scan;
pub(crate) mod transpose;

use crate::ir::{Extent, ExtentOp, Fusion, IterKind, ValId, ValKind};
use crate::sched::{ParallelType, ScheduledFusion};

use super::info::{RuntimeInfo, TensorInfo};
use super::unfit::Unfit;

/// Result of a plan or heuristic: the typed reason on refusal.
pub(crate) type Plan<T> = Result<T, Unfit>;

/// Shape-dim kinds of a scheduled tensor's logical domain (reduction dims included).
pub(crate) fn logical_kinds(s: &ScheduledFusion, tv: ValId) -> Vec<IterKind> {
    let t = &s.schedule().tensors[&tv];
    t.domain
        .logical
        .iter()
        .map(|&l| t.domain.dom(l).kind)
        .collect()
}

/// The output with the most non-broadcast dims (the first on ties).
pub(crate) fn reference_output(f: &Fusion) -> Option<ValId> {
    f.outputs().iter().map(|o| o.val).max_by_key(|&v| {
        let n = f.tensor_type(v).map_or(0, |t| {
            t.shape().filter(|d| d.kind != IterKind::Broadcast).count()
        });
        (n, std::cmp::Reverse(v))
    })
}

/// Largest power of two, at most `max`, dividing `n` (`n > 0`); `max` when `n == 0`.
pub(crate) fn pow2_dividing(n: i64, max: i64) -> i64 {
    let mut v = max.max(1);
    while v > 1 && n % v != 0 {
        v /= 2;
    }
    v
}

/// Rounds `n` up to a multiple of `m` (`m >= 1`), saturating at the largest multiple
/// of `m` that fits (sizes reach the schedulers bounded by
/// [`MAX_NUMEL`](crate::ir::MAX_NUMEL), so saturation only guards against misuse).
pub(crate) fn round_up(n: i64, m: i64) -> i64 {
    let m = m.max(1);
    let q = ceil_div(n, m);
    q.checked_mul(m).unwrap_or(i64::MAX / m * m)
}

/// Ceiling division for non-negative `a` and positive `b`; it cannot overflow (`b < 1`
/// is taken as 1).
pub(crate) fn ceil_div(a: i64, b: i64) -> i64 {
    let b = b.max(1);
    a / b + i64::from(a % b > 0)
}

/// The widest element (bytes) among the fusion's tensor inputs and outputs.
pub(crate) fn widest_io_bytes(f: &Fusion) -> usize {
    f.inputs()
        .iter()
        .copied()
        .chain(f.outputs().iter().map(|o| o.val))
        .filter(|&v| f.val(v).is_tensor())
        .map(|v| f.val(v).dtype.size_bytes())
        .max()
        .unwrap_or(4)
}

/// True when an input's innermost dim is declared contiguous and innermost in memory,
/// as vector loads need (an input declared otherwise is read element by element,
/// whatever its strides at run time: the kernel indexes by the declared layout).
pub(crate) fn vector_readable(t: &crate::ir::TensorType) -> bool {
    t.contiguity
        .len()
        .checked_sub(1)
        .is_some_and(|l| t.contiguity[l] == Some(true) && t.stride_order[l] == 0)
}

/// How many elements a vector access of `tensor` may hold, given that the vectorized
/// dim is its innermost dim with `inner` elements: the innermost stride must be 1 (or
/// the dim size 1), the size divisible and the address aligned; capped at `max`.
pub(crate) fn vector_limit(t: &TensorInfo, inner: i64, max: i64) -> i64 {
    let Some(&stride) = t.strides.last() else {
        return 1;
    };
    if stride != 1 && inner > 1 {
        return 1;
    }
    let bytes = t.dtype.size_bytes() as i64;
    let by_align = (t.alignment as i64 / bytes).max(1);
    // Every row must start aligned too: the outer strides times the element size.
    let mut v = pow2_dividing(inner, max.min(by_align));
    for &s in &t.strides[..t.strides.len() - 1] {
        v = pow2_dividing(s.max(1), v);
    }
    v.max(1)
}

/// The fusion with every `Dim { tensor, axis }` in `fixed` replaced by a constant in
/// every value's type (extents re-folded). Used to compile a kernel for one reduced
/// extent, so per-thread buffers have constant sizes.
pub(crate) fn specialize(f: &Fusion, fixed: &[(ValId, u32, i64)]) -> Fusion {
    fn subst(e: &Extent, fixed: &[(ValId, u32, i64)]) -> Extent {
        match e {
            Extent::Dim { tensor, axis } => fixed
                .iter()
                .find(|(t, a, _)| t == tensor && a == axis)
                .map_or_else(|| e.clone(), |&(_, _, v)| Extent::Const(v)),
            Extent::Op(op, a, b) => Extent::binary(*op, subst(a, fixed), subst(b, fixed)),
            other => other.clone(),
        }
    }
    let mut nf = f.clone();
    for v in nf.vals.iter_mut() {
        if let ValKind::Tensor(t) = &mut v.kind {
            for d in t.domain.iter_mut() {
                d.extent = subst(&d.extent, fixed);
            }
        }
    }
    nf
}

/// The plain input dims an extent is made of, when it is a product of them.
pub(crate) fn product_dims(e: &Extent, out: &mut Vec<(ValId, u32)>) -> bool {
    match e {
        Extent::Dim { tensor, axis } => {
            out.push((*tensor, *axis));
            true
        }
        Extent::Const(_) => true,
        Extent::Op(ExtentOp::Mul, a, b) => product_dims(a, out) && product_dims(b, out),
        _ => false,
    }
}

/// The product of the constant factors of an extent that [`product_dims`] accepts (1 for
/// a plain dim): the reduced extent `T0.size(0) * 256` has the factor 256, so its one
/// input dim is the extent divided by 256.
pub(crate) fn const_factor(e: &Extent) -> i64 {
    match e {
        Extent::Const(c) => *c,
        Extent::Op(ExtentOp::Mul, a, b) => const_factor(a).saturating_mul(const_factor(b)),
        _ => 1,
    }
}

/// Marks the innermost loop dim of every tensor in `vectorized` as a vector access and
/// of every tensor in `unrolled` as an unrolled loop (when `v > 1`).
pub(crate) fn mark_vector_dims(
    s: &mut ScheduledFusion,
    v: i64,
    vectorized: &[ValId],
    unrolled: &[ValId],
) -> Result<(), crate::sched::ScheduleError> {
    if v <= 1 {
        return Ok(());
    }
    for &tv in vectorized {
        s.parallelize(tv, -1, ParallelType::Vectorize)?;
    }
    for &tv in unrolled {
        s.parallelize(tv, -1, ParallelType::Unroll)?;
    }
    Ok(())
}

/// The tensor arguments of a call with their fusion input ids.
pub(crate) fn tensor_inputs<'a>(
    f: &'a Fusion,
    info: &'a RuntimeInfo,
) -> impl Iterator<Item = (ValId, &'a TensorInfo)> + 'a {
    f.inputs()
        .iter()
        .filter_map(move |&v| info.tensor(f, v).map(|t| (v, t)))
}

/// The fusion's output values, each once, in order (a fusion may return one tensor
/// twice; it is stored once).
pub(crate) fn distinct_outputs(f: &Fusion) -> Vec<ValId> {
    let mut outs: Vec<ValId> = Vec::with_capacity(f.outputs().len());
    for o in f.outputs() {
        if !outs.contains(&o.val) {
            outs.push(o.val);
        }
    }
    outs
}

/// Fusion-level conditions of every tuned scheduler: tensor outputs, none written in
/// place or equal to an input, and no live expression computing a scalar (only tensor
/// math runs in kernels).
pub(crate) fn check_fusion(f: &Fusion) -> Plan<()> {
    if f.outputs().is_empty() {
        return Err(Unfit::NoOutputs);
    }
    for o in f.outputs() {
        let value = o.val;
        if !f.val(value).is_tensor() {
            return Err(Unfit::ScalarOutput { value });
        }
        if o.alias_of.is_some() {
            return Err(Unfit::InPlaceOutput { value });
        }
        if f.input_position(value).is_some() {
            return Err(Unfit::OutputIsInput { value });
        }
    }
    let live = f.live_exprs();
    for (id, e) in f.exprs() {
        if live[id.index()] {
            if let Some(&s) = e.outputs.iter().find(|&&o| !f.val(o).is_tensor()) {
                return Err(Unfit::ScalarMath {
                    op: e.op.name().into(),
                    value: s,
                });
            }
        }
    }
    Ok(())
}

/// A scheduling error before any schedule (the fusion cannot be scheduled at all), as
/// an analysis' refusal.
pub(crate) fn unschedulable(e: crate::sched::ScheduleError) -> Unfit {
    Unfit::Unschedulable {
        error: e.to_string(),
    }
}
