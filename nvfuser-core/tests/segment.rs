//! Segmentation on the CPU: segments, their schedulers and their value maps (inputs,
//! outputs and extents), `segment_set`, and segments run one by one through the maps on
//! the CPU evaluator against the whole fusion.

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::{Extent, Fusion, Op};
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{can_schedule, Refusal, Rejection, Rejections, SchedulerKind};
use nvfuser_core::segment::{
    ExtentRef, SegmentOptions, SegmentValue, SegmentedFusion, WholeFusion,
};

type Verdict = Result<SchedulerKind, Rejections>;

fn reject(reason: &str) -> Verdict {
    Err(Rejections(vec![Rejection {
        kind: SchedulerKind::Default,
        reason: Refusal::Other {
            reason: reason.into(),
        },
    }]))
}

fn has_reduction(f: &Fusion) -> bool {
    f.exprs().any(|(_, e)| e.op.reduction_axes().is_some())
}

/// A non-persistent reduction scheduler: a reduction result may not be broadcast back
/// in the same kernel (the epilogue needs the full result).
fn no_broadcast_of_reduction(f: &Fusion) -> Verdict {
    let mut derived = vec![false; f.num_vals()];
    for (_, e) in f.exprs() {
        let from_reduction = e.inputs.iter().any(|i| derived[i.index()]);
        if from_reduction && matches!(e.op, Op::Broadcast { .. }) {
            return reject("a reduction result is broadcast");
        }
        if from_reduction || e.op.reduction_axes().is_some() {
            for o in &e.outputs {
                derived[o.index()] = true;
            }
        }
    }
    Ok(if has_reduction(f) {
        SchedulerKind::Reduction
    } else {
        SchedulerKind::Pointwise
    })
}

/// At most one reduction shape (input rank and axes) per kernel.
fn one_reduction_shape(f: &Fusion) -> Verdict {
    let mut shape = None;
    for (_, e) in f.exprs() {
        if let Some(axes) = e.op.reduction_axes() {
            let rank = f.tensor_type(e.inputs[0]).map_or(0, |t| t.rank());
            let s = (rank, axes.to_vec());
            match &shape {
                None => shape = Some(s),
                Some(x) if *x != s => return reject("two reductions of different shapes"),
                Some(_) => {}
            }
        }
    }
    Ok(if shape.is_some() {
        SchedulerKind::Reduction
    } else {
        SchedulerKind::Pointwise
    })
}

fn accept_all(f: &Fusion) -> Verdict {
    Ok(if has_reduction(f) {
        SchedulerKind::Reduction
    } else {
        SchedulerKind::Pointwise
    })
}

fn segment_with(f: &Fusion, rule: &dyn Fn(&Fusion) -> Verdict) -> SegmentedFusion {
    SegmentedFusion::with_scheduler(f, rule, SegmentOptions::default()).unwrap()
}

/// Random inputs for every fusion input (tensors of `sizes[i]` per tensor input in
/// order, scalars from `scalars`).
fn random_inputs(f: &Fusion, sizes: &[&[usize]], scalars: &[ScalarValue]) -> Vec<EvalInput> {
    let (mut t, mut s) = (0, 0);
    f.inputs()
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let val = f.val(i);
            if val.is_tensor() {
                t += 1;
                EvalInput::Tensor(HostTensor::random(val.dtype, sizes[t - 1], 1000 + k as u64))
            } else {
                s += 1;
                EvalInput::Scalar(scalars[s - 1])
            }
        })
        .collect()
}

/// Every segment is well formed and accepted by `rule` with the recorded scheduler; the
/// segments run one by one through the maps (by hand, with the public API, and with
/// `SegmentedFusion::evaluate`) equal the whole fusion on the evaluator.
fn check_against_whole(
    f: &Fusion,
    seg: &SegmentedFusion,
    rule: &dyn Fn(&Fusion) -> Verdict,
    inputs: &[EvalInput],
) {
    for (k, s) in seg.segments().iter().enumerate() {
        nvfuser_core::ir::verify(s.fusion()).unwrap_or_else(|e| panic!("segment {k}: {e}"));
        assert_eq!(rule(s.fusion()).ok(), Some(s.scheduler()), "segment {k}");
        assert_eq!(s.inputs().len(), s.fusion().inputs().len());
        assert_eq!(s.outputs().len(), s.fusion().outputs().len());
    }
    let whole = evaluate(f, inputs).unwrap();

    // By hand: an environment of original values, filled segment by segment.
    let mut env: std::collections::HashMap<ValId, EvalInput> = f
        .inputs()
        .iter()
        .copied()
        .zip(inputs.iter().cloned())
        .collect();
    for s in seg.segments() {
        let args = s.gather_inputs(&|v| env.get(&v).cloned()).unwrap();
        let outs = evaluate(s.fusion(), &args).unwrap();
        for (&v, t) in s.outputs().iter().zip(outs) {
            env.insert(v, EvalInput::Tensor(t));
        }
    }
    let by_hand: Vec<HostTensor> = f
        .outputs()
        .iter()
        .map(|o| match &env[&o.val] {
            EvalInput::Tensor(t) => t.clone(),
            EvalInput::Scalar(_) => panic!("scalar output"),
        })
        .collect();

    let segmented = seg.evaluate(inputs).unwrap();
    assert_eq!(segmented.len(), whole.len());
    for (k, ((a, b), w)) in segmented.iter().zip(&by_hand).zip(&whole).enumerate() {
        assert_eq!(
            a, b,
            "output {k}: evaluate and the hand-written loop differ"
        );
        let tol = Tolerance::for_dtype(w.dtype());
        compare(a, w, tol).unwrap_or_else(|m| panic!("output {k}: {m}"));
        // Not trivially equal: the inputs are random.
        assert!(
            w.numel() == 0
                || w.to_f64_vec().iter().any(|&x| x != w.to_f64_vec()[0])
                || w.numel() == 1
        );
    }
}

/// The input of segment `k` that carries `what`, as a segment value.
fn input_of(seg: &SegmentedFusion, k: usize, what: SegmentValue) -> ValId {
    seg.segments()[k]
        .input_of(what)
        .unwrap_or_else(|| panic!("segment {k} has no input {what:?}"))
}

#[test]
fn reduction_then_broadcast_epilogue_is_two_segments() {
    // T2 = sum(T0, [1]); T4 = T1 / broadcast(T2): the epilogue needs the full sum.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let w = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.sum(x, &[1], false).unwrap();
    let b = fd.broadcast(s, &[false, true]).unwrap();
    let y = fd.div(w, b).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let seg = segment_with(&f, &no_broadcast_of_reduction);
    let text = seg.to_string();
    println!("{text}");

    assert!(matches!(seg.whole_fusion(), WholeFusion::Rejected(_)));
    let segs = seg.segments();
    assert_eq!(segs.len(), 2);
    // Segment 0: the reduction. In: x. Out: s.
    assert_eq!(segs[0].scheduler(), SchedulerKind::Reduction);
    assert_eq!(segs[0].inputs(), &[SegmentValue::Val(x)]);
    assert_eq!(segs[0].outputs(), &[s]);
    // Segment 1: the epilogue. In: w, s, and x.size(0) (x itself is not an input, but
    // s's extent is x's dim 0).
    let x0 = ExtentRef { tensor: x, axis: 0 };
    assert_eq!(segs[1].scheduler(), SchedulerKind::Pointwise);
    assert_eq!(
        segs[1].inputs(),
        &[
            SegmentValue::Val(w),
            SegmentValue::Val(s),
            SegmentValue::Extent(x0)
        ]
    );
    assert_eq!(segs[1].outputs(), &[y]);
    // The extent table and its signed ids (values >= 0, extents < 0).
    assert_eq!(seg.extents(), &[x0]);
    assert_eq!(SegmentValue::Extent(x0).id(seg.extents()), Some(-1));
    assert_eq!(SegmentValue::Val(s).id(seg.extents()), Some(s.id() as i64));
    // In segment 1, s is declared with the extent input as its size.
    let s_in = input_of(&seg, 1, SegmentValue::Val(s));
    let x0_in = input_of(&seg, 1, SegmentValue::Extent(x0));
    let f1 = segs[1].fusion();
    assert_eq!(f1.val(x0_in).dtype, DataType::I64);
    let dims: Vec<Extent> = f1
        .tensor_type(s_in)
        .unwrap()
        .shape()
        .map(|d| d.extent.clone())
        .collect();
    assert_eq!(dims, vec![Extent::Scalar(x0_in)]);
    // w keeps its own dims, renumbered.
    let w_in = input_of(&seg, 1, SegmentValue::Val(w));
    let w_dims: Vec<Extent> = f1
        .tensor_type(w_in)
        .unwrap()
        .shape()
        .map(|d| d.extent.clone())
        .collect();
    assert_eq!(
        w_dims,
        vec![
            Extent::Dim {
                tensor: w_in,
                axis: 0
            },
            Extent::Dim {
                tensor: w_in,
                axis: 1
            }
        ]
    );
    assert_eq!(segs[1].segment_val(w), Some(w_in));
    assert_eq!(segs[1].segment_val(y), Some(f1.outputs()[0].val));
    // s is freed after its last reader, segment 1.
    assert!(seg.release_after(0).is_empty());
    assert_eq!(seg.release_after(1), &[s]);
    expect_test::expect![[r#"
        2 segments (the whole fusion was rejected: default: a reduction result is broadcast)
        segment 0: reduction; original exprs [0]
          inputs:  T0 <- T0
          outputs: T1 -> T2
          inputs:
            T0: f32[T0.size(0), T0.size(1)] (contiguity [true, true], order [1, 0])
          exprs:
            T1 = sum(T0, axes=[1]) : f32[T0.size(0), rT0.size(1)]
          outputs:
            T1
        segment 1: pointwise; original exprs [1, 2]
          inputs:  T0 <- T1, T1 <- T2, S2 <- T0.size(0) (extent id -1)
          outputs: T4 -> T4
          inputs:
            T0: f32[T0.size(0), T0.size(1)] (contiguity [true, true], order [1, 0])
            T1: f32[S2] (contiguity [true], order [0])
            S2: i64
          exprs:
            T3 = broadcast(T1, mask=[false, true]) : f32[S2, b1]
            T4 = T0 / T3 : f32[T0.size(0), T0.size(1)]
          outputs:
            T4
          then free: T2
    "#]]
    .assert_eq(&text);

    let inputs = random_inputs(&f, &[&[5, 7], &[5, 7]], &[]);
    check_against_whole(&f, &seg, &no_broadcast_of_reduction, &inputs);
}

/// `relu(x) -> sum over dim 1 -> * 2 -> sum over dim 0 -> + 1`: two reductions of
/// different shapes in one chain.
fn two_reduction_chain() -> (Fusion, [ValId; 7]) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.relu(x).unwrap();
    let r1 = fd.sum(a, &[1], false).unwrap();
    let two = fd.constant(2.0);
    let m = fd.mul(r1, two).unwrap();
    let r2 = fd.sum(m, &[0], false).unwrap();
    let one = fd.constant(1.0);
    let out = fd.add(r2, one).unwrap();
    fd.add_output(out).unwrap();
    (fd.finish().unwrap(), [x, a, r1, m, r2, out, two])
}

#[test]
fn chain_with_two_incompatible_reductions() {
    let (f, [x, _a, r1, _m, r2, out, _]) = two_reduction_chain();
    let seg = segment_with(&f, &one_reduction_shape);
    println!("{seg}");
    let segs = seg.segments();
    assert_eq!(segs.len(), 2);
    // {relu, sum} | {mul, sum, add}: the boundary is the first sum.
    assert_eq!(segs[0].inputs(), &[SegmentValue::Val(x)]);
    assert_eq!(segs[0].outputs(), &[r1]);
    assert_eq!(segs[0].exprs().len(), 2);
    let x0 = ExtentRef { tensor: x, axis: 0 };
    assert_eq!(
        segs[1].inputs(),
        &[SegmentValue::Val(r1), SegmentValue::Extent(x0)]
    );
    assert_eq!(segs[1].outputs(), &[out]);
    assert_eq!(segs[1].exprs().len(), 3);
    assert!(segs[1].segment_val(r2).is_some());
    for s in segs {
        let reductions = s
            .fusion()
            .exprs()
            .filter(|(_, e)| e.op.reduction_axes().is_some())
            .count();
        assert_eq!(reductions, 1);
        assert_eq!(s.scheduler(), SchedulerKind::Reduction);
    }
    // r1 is declared [x.size(0)] through the extent input.
    let r1_in = input_of(&seg, 1, SegmentValue::Val(r1));
    let x0_in = input_of(&seg, 1, SegmentValue::Extent(x0));
    let t = segs[1].fusion().tensor_type(r1_in).unwrap();
    assert_eq!(t.shape_dims()[0].extent, Extent::Scalar(x0_in));
    let inputs = random_inputs(&f, &[&[6, 9]], &[]);
    check_against_whole(&f, &seg, &one_reduction_shape, &inputs);
}

#[test]
fn chain_with_two_reductions_through_the_registry() {
    // Whatever the registry accepts today: the whole fusion when it can, otherwise
    // segments it accepts, and the same values either way.
    let (f, _) = two_reduction_chain();
    let seg = SegmentedFusion::new(&f).unwrap();
    println!("{seg}");
    match can_schedule(&f) {
        Ok(_) => assert_eq!(seg.segments().len(), 1),
        Err(_) => assert!(seg.segments().len() >= 2),
    }
    let inputs = random_inputs(&f, &[&[6, 9]], &[]);
    check_against_whole(&f, &seg, &can_schedule, &inputs);
}

#[test]
fn sum_over_dim_0_and_dim_1_with_a_joint_epilogue() {
    // y = x - broadcast(sum(x, [1])) - broadcast(sum(x, [0])): the epilogue reads both
    // reductions of different shapes.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let rows = fd.sum(x, &[1], true).unwrap();
    let cols = fd.sum(x, &[0], true).unwrap();
    let y = fd.sub(x, rows).unwrap();
    let y = fd.sub(y, cols).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let inputs = random_inputs(&f, &[&[7, 5]], &[]);
    for (name, rule) in [
        (
            "one reduction shape",
            &one_reduction_shape as &dyn Fn(&Fusion) -> Verdict,
        ),
        ("no broadcast of a reduction", &no_broadcast_of_reduction),
        ("registry", &can_schedule),
    ] {
        let seg = segment_with(&f, rule);
        println!("{name}:\n{seg}");
        if rule(&f).is_err() {
            assert!(seg.segments().len() >= 2, "{name}");
        }
        check_against_whole(&f, &seg, rule, &inputs);
    }
    let seg = segment_with(&f, &one_reduction_shape);
    assert_eq!(seg.segments().len(), 2);
    let seg = segment_with(&f, &no_broadcast_of_reduction);
    // Both reductions, then the epilogue: the reductions only share a fusion input (no
    // edge between them), so only input-sibling merging joins them.
    assert_eq!(seg.segments().len(), 2);
    assert_eq!(seg.segments()[0].outputs().len(), 2);
    assert_eq!(seg.segments()[1].inputs().len(), 3);
    assert_eq!(seg.stats().input_sibling_merges, 1);
}

#[test]
fn segment_set_forces_a_boundary() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 8]).unwrap();
    let a = fd.relu(x).unwrap();
    let z = fd.segment_set(a).unwrap();
    let w = fd.exp(z).unwrap();
    fd.add_output(w).unwrap();
    let f = fd.finish().unwrap();
    for rule in [&accept_all as &dyn Fn(&Fusion) -> Verdict, &can_schedule] {
        let seg = segment_with(&f, rule);
        println!("{seg}");
        assert_eq!(seg.whole_fusion(), &WholeFusion::ForcedBoundary);
        let segs = seg.segments();
        assert_eq!(segs.len(), 2);
        // relu and the segment_set write z; exp reads it.
        assert_eq!(segs[0].inputs(), &[SegmentValue::Val(x)]);
        assert_eq!(segs[0].outputs(), &[z]);
        // z is declared [x.size(0), 8]: x is not an input of segment 1, so its dim 0
        // arrives as an extent input.
        let x0 = ExtentRef { tensor: x, axis: 0 };
        assert_eq!(
            segs[1].inputs(),
            &[SegmentValue::Val(z), SegmentValue::Extent(x0)]
        );
        assert_eq!(segs[1].outputs(), &[w]);
        let z_in = input_of(&seg, 1, SegmentValue::Val(z));
        let t = segs[1].fusion().tensor_type(z_in).unwrap();
        assert_eq!(
            t.shape().map(|d| d.extent.clone()).collect::<Vec<_>>(),
            vec![
                Extent::Scalar(input_of(&seg, 1, SegmentValue::Extent(x0))),
                Extent::Const(8)
            ]
        );
        let inputs = random_inputs(&f, &[&[3, 8]], &[]);
        check_against_whole(&f, &seg, rule, &inputs);
    }
    // A segment_set whose output only leaves the fusion forces nothing.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let a = fd.relu(x).unwrap();
    let z = fd.segment_set(a).unwrap();
    fd.add_output(z).unwrap();
    let f = fd.finish().unwrap();
    let seg = segment_with(&f, &accept_all);
    assert_eq!(seg.whole_fusion(), &WholeFusion::Accepted);
    assert_eq!(seg.segments().len(), 1);
}

#[test]
fn segment_set_extent_inputs() {
    // exp(segment_set(relu(x))) + y: segment 1 receives z (declared through x's
    // extents) and y.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.relu(x).unwrap();
    let z = fd.segment_set(a).unwrap();
    let e = fd.exp(z).unwrap();
    let o = fd.add(e, y).unwrap();
    fd.add_output(o).unwrap();
    let f = fd.finish().unwrap();
    let seg = segment_with(&f, &accept_all);
    println!("{seg}");
    let x0 = ExtentRef { tensor: x, axis: 0 };
    let x1 = ExtentRef { tensor: x, axis: 1 };
    let segs = seg.segments();
    assert_eq!(
        segs[1].inputs(),
        &[
            SegmentValue::Val(y),
            SegmentValue::Val(z),
            SegmentValue::Extent(x0),
            SegmentValue::Extent(x1)
        ]
    );
    assert_eq!(seg.extents(), &[x0, x1]);
    assert_eq!(SegmentValue::Extent(x1).id(seg.extents()), Some(-2));
    let z_in = input_of(&seg, 1, SegmentValue::Val(z));
    let t = segs[1].fusion().tensor_type(z_in).unwrap();
    let dims: Vec<Extent> = t.shape().map(|d| d.extent.clone()).collect();
    assert_eq!(
        dims,
        vec![
            Extent::Scalar(input_of(&seg, 1, SegmentValue::Extent(x0))),
            Extent::Scalar(input_of(&seg, 1, SegmentValue::Extent(x1)))
        ]
    );
    let inputs = random_inputs(&f, &[&[4, 3], &[4, 3]], &[]);
    check_against_whole(&f, &seg, &accept_all, &inputs);
}

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
    let mut env: std::collections::HashMap<ValId, EvalInput> = f
        .inputs()
        .iter()
        .copied()
        .zip(inputs.iter().cloned())
        .collect();
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
