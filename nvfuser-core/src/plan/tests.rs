use super::*;
use crate::builder::Size;
use crate::scheduler::{DeviceInfo, SchedulerKind};
use crate::{DataType, FusionDefinition};

fn h100(inputs: &[(DataType, &[i64])]) -> RuntimeInfo {
    RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), inputs)
}

#[test]
fn a_norm_is_one_segment_with_its_kernel() {
    let f = crate::workloads::layer_norm(DataType::BF16).unwrap();
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[
            (DataType::BF16, &[4096, 8192]),
            (DataType::BF16, &[8192]),
            (DataType::BF16, &[8192]),
        ],
    );
    let p = plan(&f, &info).unwrap();
    assert!(!p.segmented);
    assert_eq!(p.segments.len(), 1);
    let s = &p.segments[0];
    assert_eq!(s.scheduler, "inner persistent");
    assert_eq!(s.params.kind(), SchedulerKind::InnerPersistent);
    assert_eq!(s.inputs.len(), f.inputs().len());
    assert_eq!(p.kernels().count(), 1);
    let text = p.to_string();
    assert!(
        text.starts_with("execution plan: 1 segment, 1 kernel"),
        "{text}"
    );
    assert!(text.contains("pointwise: refused"), "{text}");
}

#[test]
fn a_forced_boundary_gives_segments_with_value_maps() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.relu(x).unwrap();
    let y = fd.segment_set(y).unwrap();
    let s = fd.sum(y, &[1], false).unwrap();
    fd.add_output(s).unwrap();
    let f = fd.finish().unwrap();
    let p = plan(&f, &h100(&[(DataType::F32, &[1024, 1024])])).unwrap();
    assert!(p.segmented);
    assert_eq!(p.segments.len(), 2);
    // The second segment reads what the first wrote.
    let SegmentValue::Val(mid) = p.segments[1].inputs[0] else {
        panic!("{:?}", p.segments[1].inputs)
    };
    assert_eq!(p.segments[0].outputs, [mid]);
    assert_eq!(p.segments[1].outputs, [f.outputs()[0].val]);
    assert!(p.segments[1].release.contains(&mid) || p.segments[0].release.contains(&mid));
    assert_eq!(p.segments[1].params.kind(), SchedulerKind::Reduction);
    let text = p.to_string();
    assert!(
        text.contains("(segmented)") && text.contains("inputs:"),
        "{text}"
    );
}

#[test]
fn host_scalars_are_part_of_the_plan() {
    // full([n * 2], x.size(0)) + iota: the length is computed on the host.
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let two = fd.constant(crate::ScalarValue::Int(2));
    let m = fd.mul(n, two).unwrap();
    let c = fd.constant(crate::ScalarValue::Float(1.5));
    let t = fd.full(&[Size::Val(m)], c, DataType::F32).unwrap();
    fd.add_output(t).unwrap();
    let f = fd.finish().unwrap();
    let info = RuntimeInfo {
        device: DeviceInfo::h100_for_tests(),
        inputs: vec![InputInfo::Scalar(crate::ScalarValue::Int(512))],
    };
    let p = plan(&f, &info).unwrap();
    let host = p.host.as_ref().expect("a host program");
    assert_eq!(host.computed().len(), 1);
    assert!(p.to_string().contains("host scalars"), "{p}");
    // The kernel fusion takes the computed length as its second input.
    assert_eq!(p.segments[0].inputs.len(), 2);
}

#[test]
fn plans_serialize_as_records() {
    let f = crate::workloads::softmax(DataType::F32).unwrap();
    let p = plan(&f, &h100(&[(DataType::F32, &[256, 1024])])).unwrap();
    let json = serde_json::to_string(&p).unwrap();
    let back: PlanRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p.record());
    let k = back.segments[0].kernel.as_ref().unwrap();
    assert!(k.cuda.contains("extern \"C\" __global__"), "{}", k.cuda);
    assert!(!k.wide);
}

#[test]
fn decisions_for_new_sizes_say_whether_a_plan_serves_them() {
    let f = crate::workloads::gelu_tanh(DataType::BF16).unwrap();
    let planner = FusionPlanner::new(f);
    let small = h100(&[(DataType::BF16, &[1024, 1024])]);
    let d = planner.decide(&small, None, false).unwrap();
    let p = planner.lower(&d).unwrap();
    assert!(d.same_kernels(&p));
    // The same layout at other sizes may or may not run the same kernel; a 64-bit call
    // never does.
    let d_wide = planner.decide(&small, None, true).unwrap();
    assert!(!d_wide.same_kernels(&p));
}

#[test]
fn user_params_that_do_not_fit_are_invalid() {
    let f = crate::workloads::softmax(DataType::F32).unwrap();
    let planner = FusionPlanner::new(f);
    let info = h100(&[(DataType::F32, &[256, 1024])]);
    let err = planner
        .decide(&info, Some(&HeuristicParams::NoOp), false)
        .unwrap_err();
    assert!(matches!(err, PlanError::InvalidParams(_)), "{err:?}");
}

/// An input declared non-contiguous (`#[layout(contiguity = [false, false])]`) whose
/// call happens to pass dense strides: the inner schedules read it without vectors
/// (the kernel indexes by the declared layout). They used to vectorize it from the
/// strides, fail validation and fall to the default schedule, or refuse the fusion
/// outright with a creation op beside the reduction (GPU fuzz seed 9900000's run).
#[test]
fn an_input_declared_strided_is_read_without_vectors_by_the_inner_schedules() {
    for (body, scheduler) in [
        (
            "let u = uniform([x.size(0), x.size(1)], 0.0, 1.0, seed, offset, f32); (u, (x + u).sum([1]))",
            "reduction",
        ),
        (
            "let s = x.sum([1], keepdim = true); (x * 2.0f32, x / s)",
            "inner persistent",
        ),
    ] {
        let out = if scheduler == "reduction" { "[_]" } else { "[N, H]" };
        let src = format!(
            "fn f(#[layout(contiguity = [false, false])] x: Tensor<f32, [N, H]>, seed: i64, offset: i64) \
             -> (Tensor<f32, [N, H]>, Tensor<f32, {out}>) {{ {body} }}"
        );
        let f = crate::dsl::build_str(&src).unwrap().remove(0).0;
        let mut info = h100(&[(DataType::F32, &[64, 1024])]);
        info.inputs.push(crate::scheduler::InputInfo::Scalar(1i64.into()));
        info.inputs.push(crate::scheduler::InputInfo::Scalar(2i64.into()));
        let p = plan(&f, &info).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(p.segments.len(), 1, "{body}:\n{p}");
        let s = &p.segments[0];
        assert_eq!(s.scheduler, scheduler, "{body}:\n{p}");
        assert!(s.fallback.is_none(), "{body}:\n{p}");
    }
}

/// A creation op beside a normalization over two symbolic dims (a `uniform` sized from
/// host scalars: CI fuzz refusal). The persistent schedule accepted it and could not
/// schedule it (its register buffer spanned a symbolic extent), so the planner
/// segmented the creation op apart; the persistent heuristics now decline reduced
/// extents of several symbolic dims (`Unfit::ReducedSymbolicDims`) and the inner
/// persistent scheduler streams the rows: one tuned kernel, no fallback.
#[test]
fn a_creation_op_beside_a_two_dim_normalization_is_one_streamed_kernel() {
    let f = crate::dsl::build_str(
        "fn f(x: Tensor<f32, [A, B, C]>) -> Tensor<f32, [A, B, C]> {
            let u = uniform([x.size(0), x.size(1), x.size(2)], 0.0, 1.0, 1, 2, f32);
            let y = x * u;
            y - y.mean([1, 2], keepdim = true)
        }",
    )
    .unwrap()
    .remove(0)
    .0;
    let p = plan(&f, &h100(&[(DataType::F32, &[3, 5, 77])])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.segments.len(), 1, "{p}");
    let s = &p.segments[0];
    assert!(
        matches!(s.params, crate::scheduler::HeuristicParams::Reduction(_)),
        "{p}"
    );
    assert!(s.fallback.is_none(), "{p}");
}

/// An uncorrected f32 `var` without its mean (CPU fuzz seed 13200097): the inner
/// persistent schedule's two-pass rewrite made the mean a cast of an f64 mean, and gave
/// that cast the reduced dims of `var`'s type (its mean existed only in the rewritten
/// fusion, whose type it did not read), so the lowering took the cast for a reduction
/// ("lowering of cast is not implemented yet") and the fusion fell back or was refused.
#[test]
fn an_uncorrected_f32_var_alone_is_one_inner_persistent_kernel() {
    for (src, inputs) in [
        (
            "fn f(t1: Tensor<f16, [_]>) -> (Tensor<f16, []>, Tensor<f16, [1]>) {
                let t5 = (t1 as f32).var([0], 0) as f16;
                let t6 = t5.broadcast([true]);
                (t6.min([0]), t6)
            }",
            &[(DataType::F16, &[64i64][..])][..],
        ),
        (
            "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> {
                x - x.var([1], 0, keepdim = true)
            }",
            &[(DataType::F32, &[128, 1024][..])][..],
        ),
    ] {
        let f = crate::dsl::build_str(src).unwrap().remove(0).0;
        let p = plan(&f, &h100(inputs)).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_eq!(p.segments.len(), 1, "{p}");
        let s = &p.segments[0];
        assert_eq!(s.scheduler, "inner persistent", "{p}");
        assert!(s.fallback.is_none(), "{p}");
    }
}
