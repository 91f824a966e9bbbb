//! Segmentation on the CPU, continued: half-precision values at segment boundaries,
//! scalar cones, reproducers of segments, refusals, broadcasts at boundaries, cheap
//! values recomputed per segment and repeated expressions computed once.

use nvfuser_core::eval::{compare, evaluate, EvalInput, Tolerance};
use nvfuser_core::ir::Fusion;
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{can_schedule, Refusal, Rejection, Rejections, SchedulerKind};
use nvfuser_core::segment::{SegmentOptions, SegmentValue, SegmentedFusion, WholeFusion};

mod segment_common;
use segment_common::*;

/// bf16 LayerNorm-like: x (bf16) upcast, a row sum broadcast back, output bf16.
fn half_norm(out_dtype: DataType) -> (Fusion, ValId, ValId) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let s = fd.sum(xf, &[1], false).unwrap();
    let b = fd.broadcast(s, &[false, true]).unwrap();
    let y = fd.div(xf, b).unwrap();
    let y = fd.cast(y, out_dtype).unwrap();
    fd.add_output(y).unwrap();
    (fd.finish().unwrap(), x, xf)
}

#[test]
fn upcasts_of_half_cross_boundaries_in_half() {
    let (f, x, xf) = half_norm(DataType::BF16);
    // Private copies off: the cast is computed once and crosses the boundary.
    let plain = SegmentOptions {
        private_cones: false,
        ..SegmentOptions::default()
    };
    let seg = SegmentedFusion::with_scheduler(&f, &no_broadcast_of_reduction, plain).unwrap();
    println!("{seg}");
    let segs = seg.segments();
    assert_eq!(segs.len(), 2);
    // The epilogue reads x (bf16) and recomputes the cast instead of reading xf (f32).
    let h = seg.half_boundaries();
    assert_eq!(h.len(), 1);
    assert_eq!((h[0].value, h[0].stored), (xf, x));
    assert!(segs[1].inputs().contains(&SegmentValue::Val(x)));
    assert!(!segs[1].inputs().contains(&SegmentValue::Val(xf)));
    let cast = f.val(xf).definition.unwrap();
    assert_eq!(segs[1].recomputed(), &[cast]);
    // The reduction segment no longer outputs xf.
    assert!(!segs[0].outputs().contains(&xf));
    let inputs = random_inputs(&f, &[&[4, 33]], &[]);
    check_against_whole(&f, &seg, &no_broadcast_of_reduction, &inputs);

    // Off by option, or when no output is half: xf crosses in f32.
    let off = SegmentedFusion::with_scheduler(
        &f,
        &no_broadcast_of_reduction,
        SegmentOptions {
            half_boundaries: false,
            private_cones: false,
        },
    )
    .unwrap();
    assert!(off.half_boundaries().is_empty());
    assert!(off.segments()[1].inputs().contains(&SegmentValue::Val(xf)));
    check_against_whole(&f, &off, &no_broadcast_of_reduction, &inputs);
    let (f32_out, _, xf32) = half_norm(DataType::F32);
    let seg = SegmentedFusion::with_scheduler(&f32_out, &no_broadcast_of_reduction, plain).unwrap();
    assert!(seg.half_boundaries().is_empty());
    assert!(seg.segments()[1]
        .inputs()
        .contains(&SegmentValue::Val(xf32)));

    // With private copies (the default) each segment casts x itself: only x crosses.
    let seg = segment_with(&f, &no_broadcast_of_reduction);
    assert!(seg.half_boundaries().is_empty());
    let segs = seg.segments();
    assert_eq!(segs.len(), 2);
    assert!(segs[1].inputs().contains(&SegmentValue::Val(x)));
    assert!(!segs[1].inputs().contains(&SegmentValue::Val(xf)));
    assert!(!segs[0].outputs().contains(&xf));
    check_against_whole(&f, &seg, &no_broadcast_of_reduction, &inputs);
}

#[test]
fn computed_half_values_are_not_narrowed() {
    // h = bf16(x * 2) is rounded by its cast, so f32(h) may cross as h; but f32(x * 2)
    // computed in bf16 math without a cast is not held in half and crosses in f32.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let two = fd.constant(2.0);
    let m = fd.mul(x, two).unwrap(); // bf16 math, not rounded in the reference
    let mf = fd.cast(m, DataType::F32).unwrap();
    let s = fd.sum(mf, &[1], false).unwrap();
    let b = fd.broadcast(s, &[false, true]).unwrap();
    let y = fd.div(mf, b).unwrap();
    let y = fd.cast(y, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let seg = segment_with(&f, &no_broadcast_of_reduction);
    println!("{seg}");
    assert!(seg.half_boundaries().is_empty());
    let inputs = random_inputs(&f, &[&[3, 10]], &[]);
    check_against_whole(&f, &seg, &no_broadcast_of_reduction, &inputs);
}

#[test]
fn scalar_cones_are_recomputed_where_needed() {
    // eps is an input scalar, c = eps * 3 + n where n = size(relu(x), 1) (a scalar
    // computed from an intermediate tensor): both segments that need c recompute it.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let eps = fd.define_scalar(DataType::F64).unwrap();
    let a = fd.relu(x).unwrap();
    let n = fd.size(a, 1).unwrap();
    let three = fd.constant(3.0);
    let c = fd.mul(eps, three).unwrap();
    let c = fd.add(c, n).unwrap();
    let a2 = fd.mul(a, c).unwrap();
    let s = fd.sum(a2, &[1], false).unwrap();
    let b = fd.broadcast(s, &[false, true]).unwrap();
    let y = fd.sub(a2, b).unwrap();
    let y = fd.div(y, c).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let seg = segment_with(&f, &no_broadcast_of_reduction);
    println!("{seg}");
    assert_eq!(seg.segments().len(), 2);
    for s in seg.segments() {
        // Scalar inputs come from the original scalar input, never from a segment.
        for x in s.inputs() {
            if let SegmentValue::Val(v) = x {
                assert!(f.val(*v).is_tensor() || f.inputs().contains(v));
            }
        }
    }
    let last = &seg.segments()[1];
    assert!(last.inputs().contains(&SegmentValue::Val(eps)));
    assert!(last.segment_val(c).is_some(), "the epilogue recomputes c");
    let inputs = random_inputs(&f, &[&[4, 6]], &[ScalarValue::Float(0.25)]);
    check_against_whole(&f, &seg, &no_broadcast_of_reduction, &inputs);
}

#[test]
fn reproducers_rebuild_each_segment() {
    let (f, _) = two_reduction_chain();
    let seg = segment_with(&f, &one_reduction_shape);
    let inputs = random_inputs(&f, &[&[5, 4]], &[]);
    let mut env = input_env(&f, &inputs);
    for (k, src) in seg.to_reproducers("chain").iter().enumerate() {
        println!("{src}");
        let s = &seg.segments()[k];
        let rebuilt = nvfuser_core::dsl::build_str(src).unwrap_or_else(|e| panic!("{src}\n{e:?}"));
        let rebuilt = &rebuilt[0].0;
        assert_eq!(rebuilt.inputs().len(), s.fusion().inputs().len());
        let args = s.gather_inputs(&|v| env.get(&v).cloned()).unwrap();
        let a = evaluate(rebuilt, &args).unwrap();
        let b = evaluate(s.fusion(), &args).unwrap();
        assert_eq!(a, b, "segment {k}");
        for (&v, t) in s.outputs().iter().zip(b) {
            env.insert(v, EvalInput::Tensor(t));
        }
    }
    assert!(seg.to_reproducers("chain")[1].starts_with("fn chain_seg1("));
}

#[test]
fn an_expression_no_scheduler_takes_is_an_error() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.exp(x).unwrap();
    let z = fd.relu(y).unwrap();
    fd.add_output(z).unwrap();
    let f = fd.finish().unwrap();
    let no_exp = |f: &Fusion| {
        if f.exprs().any(|(_, e)| e.op.name() == "exp") {
            reject("no exp")
        } else {
            accept_all(f)
        }
    };
    let err = SegmentedFusion::with_scheduler(&f, &no_exp, SegmentOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("T1 = exp(T0)") && text.contains("no exp"),
        "{text}"
    );
}

#[test]
fn nothing_to_compute_is_no_segments() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    fd.add_output(x).unwrap();
    let f = fd.finish().unwrap();
    let seg = SegmentedFusion::new(&f).unwrap();
    assert_eq!(seg.whole_fusion(), &WholeFusion::Empty);
    assert!(seg.segments().is_empty());
    let inputs = random_inputs(&f, &[&[3]], &[]);
    assert_eq!(
        seg.evaluate(&inputs).unwrap(),
        evaluate(&f, &inputs).unwrap()
    );
}

#[test]
fn whole_fusion_accepted_is_one_segment_with_identity_maps() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.add(x, b).unwrap();
    let y = fd.relu(y).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let seg = SegmentedFusion::new(&f).unwrap();
    assert_eq!(seg.whole_fusion(), &WholeFusion::Accepted);
    assert_eq!(seg.segments().len(), 1);
    let s = &seg.segments()[0];
    assert_eq!(s.inputs(), &[SegmentValue::Val(x), SegmentValue::Val(b)]);
    assert_eq!(s.outputs(), &[y]);
    assert_eq!(s.fusion(), &f);
    assert!(seg.extents().is_empty());
}

#[test]
fn broadcasts_at_boundaries_cross_unbroadcast() {
    // r = sum(x, [1], keepdim) is sum + broadcast; the column sum of x * r needs another
    // segment. The boundary carries the sum [N], and the consumer recomputes the
    // broadcast [N, 1].
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let r = fd.sum(x, &[1], true).unwrap();
    let m = fd.mul(x, r).unwrap();
    let c = fd.sum(m, &[0], false).unwrap();
    fd.add_output(c).unwrap();
    let f = fd.finish().unwrap();
    let bcast = f.val(r).definition.unwrap();
    let sum = f.expr(bcast).inputs[0];
    let seg = segment_with(&f, &one_reduction_shape);
    println!("{seg}");
    let segs = seg.segments();
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[0].outputs(), &[sum]);
    assert_eq!(segs[1].recomputed(), &[bcast]);
    assert!(segs[1].inputs().contains(&SegmentValue::Val(sum)));
    assert!(!segs[1].inputs().contains(&SegmentValue::Val(r)));
    assert!(seg.half_boundaries().is_empty());
    let inputs = random_inputs(&f, &[&[6, 5]], &[]);
    check_against_whole(&f, &seg, &one_reduction_shape, &inputs);
}

/// Fuzzer seed 81: a select of a broadcast dim whose result is also an output and is
/// broadcast again for another output.
#[test]
fn fuzz_81_select_of_broadcast_reduction_segments() {
    let src = r#"
fn fuzz_case(
    #[layout(contiguity = [false, false])] t0: Tensor<f16, [_, _]>,
    _t1: Tensor<f32, [_]>,
    t2: Tensor<bf16, [_, _]>,
    _s3: i64,
) -> (Tensor<bf16, [_, 1, 1]>, Tensor<bf16, [_, 1]>, Tensor<bf16, [1, _, 1]>) {
    let t4 = t2.broadcast([true, false, false]);
    let t5 = t2 as f64;
    let t6 = t2 == t2;
    let t9 = clamp(t4, -1.9170809019133732, 0.6311716685810023);
    let t11 = t0.pad([(1, 1), (0, 0)], 0.5);
    let t12 = t9.max([2]);
    let t13 = t12.broadcast([false, false, true]);
    let t14 = t13.atan();
    let t15 = t14.erfc();
    let t16 = t13.select(0, 0);
    let t17 = t14 - t14;
    let t18 = t16.broadcast([false, false, true]);
    (t18, t16, t15)
}
"#;
    let f = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    // The default reduction schedule of a segment rfactored the cache of a reduction
    // that is both an output and read again (a tensor the schedule added), looking it
    // up in the fusion: an index out of bounds.
    let seg = SegmentedFusion::new(&f).unwrap();
    println!("{seg}");
    let inputs = random_inputs(&f, &[&[5, 7], &[7], &[5, 7]], &[ScalarValue::Int(1)]);
    let whole = evaluate(&f, &inputs).unwrap();
    let segmented = seg.evaluate(&inputs).unwrap();
    assert_eq!(segmented.len(), whole.len());
    for (k, (a, w)) in segmented.iter().zip(&whole).enumerate() {
        compare(a, w, Tolerance::for_dtype(w.dtype()))
            .unwrap_or_else(|m| panic!("output {k}: {m}"));
    }
}

#[test]
fn cheap_values_are_recomputed_by_each_segment() {
    // LayerNorm backward: xhat and g feed both the row reductions of dx and the column
    // sums. With private copies each segment recomputes them from the inputs, and the
    // two column sums (both reading dy) share one segment.
    let f = nvfuser_core::dsl::build_str(nvfuser_core::workloads::LAYER_NORM_BWD)
        .unwrap()
        .remove(0)
        .0;
    let computed = |seg: &SegmentedFusion| -> Vec<ValId> {
        seg.segments()
            .iter()
            .flat_map(|s| s.inputs().iter())
            .filter_map(|x| match x {
                SegmentValue::Val(v) if f.input_position(*v).is_none() => Some(*v),
                _ => None,
            })
            .collect()
    };
    // The inner-outer schedule would take it whole (when its heuristics accept the
    // sizes); this rule keeps row and column reductions apart, as the planner does when
    // they refuse.
    let apart = |g: &Fusion| -> Verdict {
        let axes: Vec<Vec<usize>> = g
            .exprs()
            .filter_map(|(_, e)| e.op.reduction_axes().map(|a| a.to_vec()))
            .collect();
        if axes.contains(&vec![0]) && axes.contains(&vec![1]) {
            return Err(Rejections(vec![Rejection {
                kind: SchedulerKind::Default,
                reason: Refusal::Other {
                    reason: "row and column reductions apart".into(),
                },
            }]));
        }
        can_schedule(g)
    };
    let seg = segment_with(&f, &apart);
    println!("{seg}");
    assert_eq!(seg.segments().len(), 2);
    assert_eq!(computed(&seg), Vec::<ValId>::new());
    assert_eq!(seg.stats().input_sibling_merges, 1);
    let inputs = random_inputs(&f, &[&[6, 40], &[6, 40], &[40], &[6, 1], &[6, 1]], &[]);
    check_against_whole(&f, &seg, &apart, &inputs);

    // Without them, computed [N, H] tensors cross between segments.
    let plain = SegmentedFusion::with_scheduler(
        &f,
        &apart,
        SegmentOptions {
            private_cones: false,
            ..SegmentOptions::default()
        },
    )
    .unwrap();
    assert!(!computed(&plain).is_empty());
    check_against_whole(&f, &plain, &apart, &inputs);
}

#[test]
fn repeated_expressions_are_computed_once() {
    // exp(x) written twice is one exp; an expression defining an output stays.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.exp(x).unwrap();
    let b = fd.exp(x).unwrap();
    let c = fd.add(a, b).unwrap();
    let d = fd.exp(x).unwrap();
    let e = fd.mul(c, d).unwrap();
    fd.add_output(e).unwrap();
    fd.add_output(d).unwrap();
    let f = fd.finish().unwrap();
    let (g, replaced) = f.dedup_exprs().unwrap();
    assert_eq!(replaced.len(), 1);
    assert_eq!(replaced.get(&b), Some(&a));
    let live = |f: &Fusion| f.live_exprs().iter().filter(|&&l| l).count();
    assert_eq!((live(&f), live(&g)), (5, 4));
    nvfuser_core::ir::verify(&g).unwrap();
    let inputs = random_inputs(&f, &[&[3, 7]], &[]);
    let (want, got) = (
        evaluate(&f, &inputs).unwrap(),
        evaluate(&g, &inputs).unwrap(),
    );
    for (w, g) in want.iter().zip(&got) {
        compare(g, w, Tolerance::exact()).unwrap();
    }
    assert!(g.dedup_exprs().is_none());
}
