//! Segmentation on the CPU: segments, their schedulers and their value maps (inputs,
//! outputs and extents), `segment_set`, and segments run one by one through the maps on
//! the CPU evaluator against the whole fusion.

use nvfuser_core::ir::{Extent, Fusion};
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{can_schedule, SchedulerKind};
use nvfuser_core::segment::{ExtentRef, SegmentValue, SegmentedFusion, WholeFusion};

mod segment_common;
use segment_common::*;

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
