//! Which fusions the default schedule accepts, which it rejects and why.

use super::*;
use crate::builder::FusionDefinition;
use crate::dtype::DataType;
use crate::ir::{BinaryOp, UnaryOp};

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
    Ok(out)
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
fn rejects_outer_reductions() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[0], false)?;
    fd.add_output(r)?;
    rejects(&fd.finish()?, "only the innermost dims can be reduced");
    Ok(())
}

#[test]
fn rejects_ops_it_does_not_know() -> R {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.permute(x, &[1, 0])?;
    fd.add_output(y)?;
    rejects(&fd.finish()?, "the op permute");
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.var(x, &[1], 1, false)?;
    fd.add_output(y)?;
    rejects(&fd.finish()?, "var");
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
