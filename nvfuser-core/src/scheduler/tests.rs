//! Which fusions the default schedule accepts, which it rejects and why.

use super::*;
use crate::builder::FusionDefinition;
use crate::dtype::DataType;
use crate::ir::{BinaryOp, Op, UnaryOp};

type R = std::result::Result<(), Box<dyn std::error::Error>>;

fn accepts(f: &Fusion, kind: DefaultKind) {
    let (sf, k) = default_schedule_kind(f).unwrap_or_else(|e| panic!("{e}\n{f}"));
    assert_eq!(k, kind);
    let kernel = codegen::generate(&sf, &KernelOptions::default()).unwrap();
    assert!(kernel.cuda_source().contains("__global__"));
}

fn rejects(f: &Fusion, needle: &str) {
    match default_schedule(f) {
        Ok(sf) => panic!("accepted:\n{}", sf.scheduled_ir()),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.starts_with("not supported by the default schedule") && msg.contains(needle),
                "{msg}"
            );
        }
    }
}

/// The fusions the default schedule is expected to accept, by name.
pub(crate) fn accepted_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use DefaultKind::*;
    let mut out = Vec::new();
    // a * 2 + b, rank 1.
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let two = fd.constant(2.0);
    let t = fd.mul(a, two)?;
    let y = fd.add(t, b)?;
    fd.add_output(y)?;
    out.push(("axpb", fd.finish()?, Pointwise));
    // [N, H] + [H], two outputs, a scalar input.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let b = fd.define_tensor(DataType::BF16, &[-1])?;
    let s = fd.define_scalar(DataType::F32)?;
    let y = fd.add(x, b)?;
    let z = fd.mul(y, s)?;
    let g = fd.unary(UnaryOp::Gelu, z)?;
    fd.add_output(y)?;
    fd.add_output(g)?;
    out.push(("bias_gelu_two_outputs", fd.finish()?, Pointwise));
    // Rank 0.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[])?;
    let y = fd.unary(UnaryOp::Exp, x)?;
    fd.add_output(y)?;
    out.push(("rank0", fd.finish()?, Pointwise));
    // Rank 3 with a cast and a where.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F16, &[-1, -1, -1])?;
    let c = fd.binary(BinaryOp::Gt, x, x)?;
    let xf = fd.cast(x, DataType::F32)?;
    let zero = fd.constant(0.0);
    let y = fd.where_(c, xf, zero)?;
    fd.add_output(y)?;
    out.push(("rank3_where_cast", fd.finish()?, Pointwise));
    // Inner sum.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[1], false)?;
    fd.add_output(r)?;
    out.push(("inner_sum", fd.finish()?, InnerReduction));
    // Softmax.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let m = fd.max(x, &[1], true)?;
    let d = fd.sub(x, m)?;
    let e = fd.exp(d)?;
    let s = fd.sum(e, &[1], true)?;
    let y = fd.div(e, s)?;
    fd.add_output(y)?;
    out.push(("softmax", fd.finish()?, InnerReduction));
    // RMSNorm-style: x * rsqrt(mean(x^2) + eps) * w, bf16 in and out.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let w = fd.define_tensor(DataType::BF16, &[-1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let ms = fd.mean(sq, &[1], true)?;
    let eps = fd.constant(1e-6);
    let v = fd.add(ms, eps)?;
    let r = fd.rsqrt(v)?;
    let n = fd.mul(xf, r)?;
    let wf = fd.cast(w, DataType::F32)?;
    let y = fd.mul(n, wf)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    out.push(("rms_norm", fd.finish()?, InnerReduction));
    // Rank 3 reduced over its two inner dims, and a full reduction of rank 1.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let r = fd.max(x, &[1, 2], false)?;
    fd.add_output(r)?;
    out.push(("max_inner2", fd.finish()?, InnerReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1])?;
    let r = fd.sum(x, &[0], false)?;
    fd.add_output(r)?;
    out.push(("full_sum", fd.finish()?, InnerReduction));
    out.extend(outer_corpus()?);
    out.extend(welford_corpus()?);
    out.extend(creation_corpus()?);
    out.extend(movement_corpus()?);
    out.extend(middle_corpus()?);
    out.extend(indexing_corpus()?);
    Ok(out)
}

/// Outer reductions (one thread per output column), by name.
pub(crate) fn outer_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use crate::ir::ReductionOp;
    use DefaultKind::*;
    let mut out = Vec::new();
    for (name, op) in [
        ("outer_sum", ReductionOp::Sum),
        ("outer_max", ReductionOp::Max),
        ("outer_min", ReductionOp::Min),
        ("outer_mean", ReductionOp::Mean),
        ("outer_prod", ReductionOp::Prod),
    ] {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let r = match op {
            ReductionOp::Sum => fd.sum(x, &[0], false)?,
            ReductionOp::Max => fd.max(x, &[0], false)?,
            ReductionOp::Min => fd.min(x, &[0], false)?,
            ReductionOp::Mean => fd.mean(x, &[0], false)?,
            ReductionOp::Prod => fd.prod(x, &[0], false)?,
        };
        fd.add_output(r)?;
        out.push((name, fd.finish()?, OuterReduction));
    }
    // bf16 in, f32 math: sum(x * x) over rows, then a per-column sqrt.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let s = fd.sum(sq, &[0], false)?;
    let n = fd.sqrt(s)?;
    fd.add_output(n)?;
    out.push(("outer_norm_bf16", fd.finish()?, OuterReduction));
    // Rank 3 reduced over its two outer dims, and over one outer dim of two inner ones.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let r = fd.mean(x, &[0, 1], false)?;
    fd.add_output(r)?;
    out.push(("outer_mean_2of3", fd.finish()?, OuterReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let r = fd.max(x, &[0], false)?;
    fd.add_output(r)?;
    out.push(("outer_max_1of3", fd.finish()?, OuterReduction));
    // Column centering: x - mean(x, 0), with the mean as a second output.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let m = fd.mean(x, &[0], true)?;
    let y = fd.sub(x, m)?;
    fd.add_output(y)?;
    out.push(("outer_center", fd.finish()?, OuterReduction));
    Ok(out)
}

/// Var, var_mean and welford over the innermost dims (block Welford), by name.
pub(crate) fn welford_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use DefaultKind::*;
    let mut out = Vec::new();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let v = fd.var(x, &[1], 1, false)?;
    fd.add_output(v)?;
    out.push(("var_inner", fd.finish()?, InnerReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let (v, m) = fd.var_mean(x, &[1, 2], 0, false)?;
    fd.add_output(v)?;
    fd.add_output(m)?;
    out.push(("var_mean_inner2", fd.finish()?, InnerReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let (avg, m2, n) = fd.welford(x, &[1])?;
    fd.add_output(avg)?;
    fd.add_output(m2)?;
    fd.add_output(n)?;
    out.push(("welford_three_outputs", fd.finish()?, InnerReduction));
    // LayerNorm forward, bf16 in and out, any row length.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let w = fd.define_tensor(DataType::BF16, &[-1])?;
    let b = fd.define_tensor(DataType::BF16, &[-1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let (var, mean) = fd.var_mean(xf, &[1], 0, false)?;
    let mb = fd.broadcast(mean, &[false, true])?;
    let xc = fd.sub(xf, mb)?;
    let eps = fd.constant(1e-5);
    let ve = fd.add(var, eps)?;
    let rstd = fd.rsqrt(ve)?;
    let rb = fd.broadcast(rstd, &[false, true])?;
    let xn = fd.mul(xc, rb)?;
    let wf = fd.cast(w, DataType::F32)?;
    let bf = fd.cast(b, DataType::F32)?;
    let yw = fd.mul(xn, wf)?;
    let y = fd.add(yw, bf)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    fd.add_output(mean)?;
    fd.add_output(rstd)?;
    out.push(("layer_norm_bf16", fd.finish()?, InnerReduction));
    Ok(out)
}

/// Creation ops with no tensor input, as pointwise fusions, by name.
pub(crate) fn creation_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use crate::builder::Size;
    use DefaultKind::*;
    let mut out = Vec::new();
    // full([n, 7], v) * 2, with the row count and the value as scalar inputs.
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64)?;
    let v = fd.define_scalar(DataType::F32)?;
    let t = fd.full(&[Size::Val(n), Size::Const(7)], v, DataType::F32)?;
    let two = fd.constant(2.0);
    let y = fd.mul(t, two)?;
    fd.add_output(y)?;
    out.push(("full_times_two", fd.finish()?, Pointwise));
    // iota(n, start, step) as i64 and as f32 (exp of it).
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64)?;
    let start = fd.define_scalar(DataType::I64)?;
    let step = fd.define_scalar(DataType::I64)?;
    let i = fd.iota(Size::Val(n), start, step, DataType::I64)?;
    fd.add_output(i)?;
    out.push(("iota_i64", fd.finish()?, Pointwise));
    // uniform and normal [n, m] f32, plus their sum.
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64)?;
    let m = fd.define_scalar(DataType::I64)?;
    let seed = fd.define_scalar(DataType::I64)?;
    let off = fd.define_scalar(DataType::I64)?;
    let lo = fd.constant(-1.0);
    let hi = fd.constant(3.0);
    let u = fd.uniform(
        &[Size::Val(n), Size::Val(m)],
        lo,
        hi,
        seed,
        off,
        DataType::F32,
    )?;
    let g = fd.normal(
        &[Size::Val(n), Size::Val(m)],
        lo,
        hi,
        seed,
        off,
        DataType::F32,
    )?;
    let y = fd.add(u, g)?;
    fd.add_output(u)?;
    fd.add_output(g)?;
    fd.add_output(y)?;
    out.push(("uniform_normal", fd.finish()?, Pointwise));
    Ok(out)
}

#[test]
fn creation_ops_are_rejected_next_to_reductions() -> R {
    use crate::builder::Size;
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64)?;
    let v = fd.define_scalar(DataType::F32)?;
    let t = fd.full(&[Size::Val(n), Size::Const(7)], v, DataType::F32)?;
    let r = fd.sum(t, &[1], false)?;
    fd.add_output(r)?;
    rejects(&fd.finish()?, "creation ops");
    Ok(())
}

#[test]
fn accepts_pointwise_and_inner_reductions() -> R {
    for (name, f, kind) in accepted_corpus()? {
        eprintln!("{name}");
        accepts(&f, kind);
    }
    Ok(())
}

#[test]
fn rejects_mixed_inner_outer_reductions() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let a = fd.sum(x, &[0], false)?;
    let b = fd.sum(x, &[1], false)?;
    fd.add_output(a)?;
    fd.add_output(b)?;
    rejects(&fd.finish()?, "only the innermost dims can be reduced");
    Ok(())
}

#[test]
fn outer_reductions_loop_over_rows_per_thread() -> R {
    for (name, f, kind) in outer_corpus()? {
        let (sf, k) = default_schedule_kind(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(k, kind, "{name}");
        let src = codegen::generate(&sf, &KernelOptions::default())?.cuda_source();
        assert!(
            src.contains("threadIdx.x") && src.contains("blockIdx.x"),
            "{name}\n{src}"
        );
        // No block reduction: each thread owns its column (the preamble has helpers).
        let body = src.split("__global__").nth(1).ok_or("no kernel")?;
        assert!(!body.contains("__syncthreads"), "{name}\n{body}");
    }
    Ok(())
}

#[test]
fn rejects_ops_it_does_not_know() -> R {
    let mut fd = FusionDefinition::new();
    // A squeeze of a fusion input is a view the kernels read; a squeeze of a padded
    // (computed, not elementwise) value is not scheduled.
    let x = fd.define_tensor(DataType::F32, &[-1, 1, -1])?;
    let zero = fd.constant(0.0f64);
    let p = fd.pad(x, &[(0, 0), (0, 0), (1, 1)], zero)?;
    let y = fd.squeeze(p, &[1])?;
    fd.add_output(y)?;
    rejects(&fd.finish()?, "the op squeeze");
    Ok(())
}

#[test]
fn rejects_values_computed_before_a_broadcast() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let e = fd.exp(b)?;
    let y = fd.add(x, e)?;
    fd.add_output(y)?;
    // Accepted: the broadcast moves above the exp.
    accepts(&fd.finish()?, DefaultKind::Pointwise);
    // Two outputs of different shapes are not.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let e = fd.exp(b)?;
    let y = fd.add(x, e)?;
    fd.add_output(y)?;
    fd.add_output(e)?;
    rejects(&fd.finish()?, "computed before a broadcast");
    Ok(())
}

#[test]
fn rejects_outputs_that_are_inputs_and_in_place_outputs() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1])?;
    fd.add_output(x)?;
    rejects(&fd.finish()?, "is an input");
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1])?;
    let y = fd.relu(x)?;
    fd.add_output_alias(y, x)?;
    rejects(&fd.finish()?, "in-place");
    Ok(())
}

#[test]
fn rejects_mixed_reduction_shapes() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let a = fd.sum(x, &[2], false)?;
    let b = fd.sum(x, &[1, 2], false)?;
    fd.add_output(a)?;
    fd.add_output(b)?;
    rejects(&fd.finish()?, "reductions of different shapes");
    Ok(())
}

#[test]
fn recompute_keeps_inputs_and_outputs() -> R {
    let (_, f, _) = accepted_corpus()?
        .into_iter()
        .find(|(n, _, _)| *n == "softmax")
        .ok_or("softmax")?;
    let g = recompute::recompute_per_use(&f)?;
    assert_eq!(g.inputs(), f.inputs());
    assert_eq!(g.outputs(), f.outputs());
    crate::ir::verify(&g)?;
    // exp is computed once for the sum and once for the division.
    let exps = g
        .exprs()
        .filter(|(_, e)| e.op == Op::Unary(UnaryOp::Exp))
        .count();
    assert_eq!(exps, 2, "{g}");
    Ok(())
}

/// A reduction result that is both an output and read by the kernel is read from a
/// register copy, never back from global memory (only thread 0 stores it).
#[test]
fn reduction_outputs_read_by_the_kernel_are_forked() -> R {
    for (name, f, _) in welford_corpus()? {
        let sf = default_schedule(&f)?;
        let src = codegen::generate(&sf, &KernelOptions::default())?.cuda_source();
        let body = src.split("__global__").nth(1).ok_or("no kernel")?;
        let outputs: Vec<&str> = body
            .lines()
            .filter(|l| l.contains("* __restrict__ T") && !l.contains("const"))
            .filter_map(|l| l.split_whitespace().last())
            .map(|t| t.trim_end_matches(','))
            .collect();
        assert!(!outputs.is_empty(), "{name}\n{body}");
        for o in outputs {
            assert!(
                !body.contains(&format!("({o}[")),
                "{name} reads {o}\n{body}"
            );
        }
    }
    Ok(())
}

/// Permute, pad and cat of fusion inputs feeding pointwise math, one output.
pub(crate) fn movement_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use DefaultKind::*;
    let mut out = Vec::new();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let p = fd.permute(x, &[1, 0])?;
    let t = fd.add(p, y)?;
    fd.add_output(t)?;
    out.push(("permute_add", fd.finish()?, Pointwise));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let zero = fd.constant(0.0);
    let pd = fd.pad(x, &[(0, 0), (2, 3)], zero)?;
    let ct = fd.cat(&[x, y], 1)?;
    let t = fd.add(pd, ct)?;
    fd.add_output(t)?;
    out.push(("pad_plus_cat", fd.finish()?, Pointwise));
    Ok(out)
}

/// Reductions over dims other than the innermost ones: middle dims and mixes of outer
/// and middle dims (one output element per thread, like outer reductions).
pub(crate) fn middle_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use DefaultKind::*;
    let mut out = Vec::new();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let r = fd.sum(x, &[1], false)?;
    fd.add_output(r)?;
    out.push(("middle_sum_1of3", fd.finish()?, OuterReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1, -1])?;
    let r = fd.max(x, &[1, 2], false)?;
    fd.add_output(r)?;
    out.push(("middle_max_2of4", fd.finish()?, OuterReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let r = fd.min(x, &[0, 2], false)?;
    fd.add_output(r)?;
    out.push(("mixed_min_0_2of3", fd.finish()?, OuterReduction));
    // bf16 in, f32 math: sqrt(sum(x * x, [1])) as bf16.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1, -1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let s = fd.sum(sq, &[1], false)?;
    let n = fd.sqrt(s)?;
    let n = fd.cast(n, DataType::BF16)?;
    fd.add_output(n)?;
    out.push(("middle_norm_bf16", fd.finish()?, OuterReduction));
    // Centering over the middle dim, with the mean as a second output.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let m = fd.mean(x, &[1], false)?;
    let mb = fd.broadcast(m, &[false, true, false])?;
    let y = fd.sub(x, mb)?;
    fd.add_output(y)?;
    fd.add_output(m)?;
    out.push(("middle_center", fd.finish()?, OuterReduction));
    // Welford-style reductions over outer and middle dims: a serial Welford update per
    // thread, no combine.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let v = fd.var(x, &[0], 1, false)?;
    fd.add_output(v)?;
    out.push(("outer_var", fd.finish()?, OuterReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let (avg, m2, n) = fd.welford(x, &[0])?;
    fd.add_output(avg)?;
    fd.add_output(m2)?;
    fd.add_output(n)?;
    out.push(("outer_welford_three_outputs", fd.finish()?, OuterReduction));
    // Normalization over the middle dim of [N, C, L] (channels), bf16 in and out.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1, -1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let (var, mean) = fd.var_mean(xf, &[1], 0, false)?;
    let mb = fd.broadcast(mean, &[false, true, false])?;
    let xc = fd.sub(xf, mb)?;
    let eps = fd.constant(1e-5);
    let ve = fd.add(var, eps)?;
    let rstd = fd.rsqrt(ve)?;
    let rb = fd.broadcast(rstd, &[false, true, false])?;
    let y = fd.mul(xc, rb)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    fd.add_output(mean)?;
    out.push(("middle_norm_var_mean_bf16", fd.finish()?, OuterReduction));
    Ok(out)
}

/// Slice, reshape and the indexing ops over fusion inputs, feeding pointwise math or a
/// reduction.
pub(crate) fn indexing_corpus() -> crate::Result<Vec<(&'static str, Fusion, DefaultKind)>> {
    use crate::builder::{Size, Slice};
    use DefaultKind::*;
    let mut out = Vec::new();
    // relu(x[:, 1:-1]).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let sl = fd.slice(x, &[Slice::all(), Slice::range(1, -1)])?;
    let t = fd.relu(sl)?;
    fd.add_output(t)?;
    out.push(("slice_relu", fd.finish()?, Pointwise));
    // x[1::2, 3:s] + 1 with a scalar stop.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let stop = fd.define_scalar(DataType::I64)?;
    let sl = fd.slice(
        x,
        &[
            Slice::step(1, i64::MAX, 2),
            Slice::range(3, Size::Val(stop)),
        ],
    )?;
    let one = fd.constant(1.0);
    let t = fd.add(sl, one)?;
    fd.add_output(t)?;
    out.push(("slice_step_scalar_stop", fd.finish()?, Pointwise));
    // reshape(x, [-1, 48]) * 2 for x: [N, 6, 8], as the corpus `reshape_view`.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 6, 8])?;
    let r = fd.reshape(x, &[Size::Const(-1), Size::Const(48)])?;
    let two = fd.constant(2.0);
    let z = fd.mul(r, two)?;
    fd.add_output(z)?;
    out.push(("reshape_mul", fd.finish()?, Pointwise));
    // reshape(x, [-1]) + y: a symbolic [N, H] flattened.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1])?;
    let r = fd.reshape(x, &[Size::Const(-1)])?;
    let z = fd.add(r, y)?;
    fd.add_output(z)?;
    out.push(("reshape_flatten_add", fd.finish()?, Pointwise));
    // select(x, 0, 1) + y, and select by a scalar index (negative wraps).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1])?;
    let sel = fd.select(x, 0, Size::Const(1))?;
    let z = fd.add(sel, y)?;
    fd.add_output(z)?;
    out.push(("select_add", fd.finish()?, Pointwise));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let i = fd.define_scalar(DataType::I64)?;
    let sel = fd.select(x, 1, Size::Val(i))?;
    let z = fd.neg(sel)?;
    fd.add_output(z)?;
    out.push(("select_scalar_index", fd.finish()?, Pointwise));
    // index_select(x, 0, rows) * 2.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let rows = fd.define_tensor(DataType::I64, &[-1])?;
    let g = fd.index_select(x, 0, rows)?;
    let two = fd.constant(2.0);
    let z = fd.mul(g, two)?;
    fd.add_output(z)?;
    out.push(("index_select_mul", fd.finish()?, Pointwise));
    // gather(x, 1, idx) and take_along_axis(x, idx, 1) with i32 indices.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let idx = fd.define_tensor(DataType::I32, &[-1, -1])?;
    let g = fd.gather(x, 1, idx)?;
    fd.add_output(g)?;
    out.push(("gather_bf16", fd.finish()?, Pointwise));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let idx = fd.define_tensor(DataType::I64, &[-1, -1])?;
    let g = fd.take_along_axis(x, idx, 1)?;
    let e = fd.exp(g)?;
    fd.add_output(e)?;
    out.push(("take_along_axis_exp", fd.finish()?, Pointwise));
    // Data movement under reductions: sum over the sliced rows, and a column sum of
    // selected rows.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let sl = fd.slice(x, &[Slice::all(), Slice::range(1, -1)])?;
    let r = fd.sum(sl, &[1], false)?;
    fd.add_output(r)?;
    out.push(("slice_inner_sum", fd.finish()?, InnerReduction));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let rows = fd.define_tensor(DataType::I64, &[-1])?;
    let g = fd.index_select(x, 0, rows)?;
    let r = fd.sum(g, &[0], false)?;
    fd.add_output(r)?;
    out.push(("index_select_outer_sum", fd.finish()?, OuterReduction));
    Ok(out)
}

#[test]
fn middle_and_mixed_reductions_loop_over_reduced_dims_per_thread() -> R {
    for (name, f, kind) in middle_corpus()? {
        let (sf, k) = default_schedule_kind(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(k, kind, "{name}");
        let src = codegen::generate(&sf, &KernelOptions::default())?.cuda_source();
        let body = src.split("__global__").nth(1).ok_or("no kernel")?;
        assert!(
            body.contains("threadIdx.x") && body.contains("blockIdx.x"),
            "{name}\n{body}"
        );
        assert!(!body.contains("__syncthreads"), "{name}\n{body}");
    }
    Ok(())
}

#[test]
fn indexing_ops_read_their_inputs_from_global_memory() -> R {
    for (name, f, kind) in indexing_corpus()? {
        let (sf, k) = default_schedule_kind(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(k, kind, "{name}");
        let src = codegen::generate(&sf, &KernelOptions::default())?.cuda_source();
        let body = src.split("__global__").nth(1).ok_or("no kernel")?;
        // The data-movement input (T0) is indexed in global memory.
        assert!(body.contains("T0["), "{name}\n{body}");
    }
    Ok(())
}

#[test]
fn movement_ops_need_input_operands_and_one_output() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let e = fd.exp(x)?;
    let p = fd.permute(e, &[1, 0])?;
    fd.add_output(p)?;
    rejects(&fd.finish()?, "must read fusion inputs");
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let p = fd.permute(x, &[1, 0])?;
    let e = fd.exp(x)?;
    fd.add_output(p)?;
    fd.add_output(e)?;
    rejects(&fd.finish()?, "more than one output");
    // Indexing of a computed value, and a gather whose index is computed.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let e = fd.exp(x)?;
    let sl = fd.slice(
        e,
        &[
            crate::builder::Slice::all(),
            crate::builder::Slice::range(1, -1),
        ],
    )?;
    fd.add_output(sl)?;
    rejects(&fd.finish()?, "must read fusion inputs");
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let idx = fd.define_tensor(DataType::I64, &[-1, -1])?;
    let one = fd.constant(1i64);
    let i2 = fd.add(idx, one)?;
    let g = fd.gather(x, 1, i2)?;
    fd.add_output(g)?;
    rejects(&fd.finish()?, "must read fusion inputs");
    Ok(())
}

/// Data movement whose reads depend on runtime values (a scalar slice start, reshape
/// sizes from scalars or constants against symbolic sizes) is accepted: the launcher
/// checks those values before each launch.
#[test]
fn accepts_movement_with_runtime_bounds() -> R {
    use crate::builder::{Size, Slice};
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let start = fd.define_scalar(DataType::I64)?;
    let sl = fd.slice(x, &[Slice::all(), Slice::range(Size::Val(start), i64::MAX)])?;
    fd.add_output(sl)?;
    accepts(&fd.finish()?, DefaultKind::Pointwise);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let n = fd.define_scalar(DataType::I64)?;
    let m = fd.define_scalar(DataType::I64)?;
    let r = fd.reshape(x, &[Size::Val(n), Size::Val(m)])?;
    fd.add_output(r)?;
    accepts(&fd.finish()?, DefaultKind::Pointwise);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.reshape(x, &[Size::Const(6), Size::Const(8)])?;
    fd.add_output(r)?;
    accepts(&fd.finish()?, DefaultKind::Pointwise);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[4, 12])?;
    let r = fd.reshape(x, &[Size::Const(6), Size::Const(8)])?;
    fd.add_output(r)?;
    accepts(&fd.finish()?, DefaultKind::Pointwise);
    Ok(())
}

/// A tensor broadcast in some of the reduced dims but not the innermost ones (`[A, 1]`
/// or `[1, B, 1]` beside the rows) is scheduled by the reduction scheduler and
/// generates: the broadcast dim split by the vector width kept the reference's extent
/// (`sched::domain`'s split of a resolved broadcast), so the tensor is inlined in the
/// reference's loops (CPU fuzz seed 12332149: "T26 in Local memory spans loop axis 0
/// of symbolic extent"; such reductions fell to the default schedule).
#[test]
fn broadcast_in_the_last_reduced_dim_is_a_tuned_reduction() {
    type Shapes<'a> = &'a [(DataType, &'a [i64])];
    let cases: [(&str, Shapes); 3] = [
        (
            "fn k(x: Tensor<f32, [_, _]>, w: Tensor<f32, [_, 1]>) -> Tensor<f32, []> { (x * w).sum([0, 1]) }",
            &[(DataType::F32, &[17, 31]), (DataType::F32, &[17, 1])],
        ),
        (
            "fn k(x: Tensor<f32, [_, _, _]>, w: Tensor<f32, [_, 1]>) -> Tensor<f32, [_]> { (x * w).sum([1, 2]) }",
            &[(DataType::F32, &[64, 17, 31]), (DataType::F32, &[17, 1])],
        ),
        (
            "fn k(a: Tensor<i64, [_]>, b: Tensor<i64, [_]>, x: Tensor<f32, [_, _]>) -> Tensor<f64, []> {
                let m = b.broadcast([true, false]) - a.broadcast([false, true]) <= 1;
                (where_(m, x, 0.0f32) as f64).min([0, 1])
            }",
            &[(DataType::I64, &[17]), (DataType::I64, &[31]), (DataType::F32, &[17, 31])],
        ),
    ];
    for (src, shapes) in cases {
        let f = crate::dsl::build_str(src).unwrap().remove(0).0;
        for big in [1, 1000] {
            let shapes: Vec<(DataType, Vec<i64>)> = shapes
                .iter()
                .map(|(d, s)| {
                    (
                        *d,
                        s.iter().map(|&x| if x > 1 { x * big } else { x }).collect(),
                    )
                })
                .collect();
            let refs: Vec<(DataType, &[i64])> =
                shapes.iter().map(|(d, s)| (*d, s.as_slice())).collect();
            let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &refs);
            let params = compute_heuristics(&f, &info).unwrap();
            assert!(
                matches!(params, HeuristicParams::Reduction(_)),
                "{src} {shapes:?}: {params:?}"
            );
            schedule_with(&f, &params).unwrap_or_else(|e| panic!("{src} {shapes:?}: {e}"));
        }
    }
}
