//! Helpers shared by the segmentation tests (`segment`, `segment_boundaries`): toy
//! scheduler rules, random inputs, and segments run one by one through their maps on
//! the CPU evaluator against the whole fusion.

#![allow(dead_code, unused_imports)]

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::{Extent, Fusion, Op};
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{can_schedule, Refusal, Rejection, Rejections, SchedulerKind};
use nvfuser_core::segment::{
    ExtentRef, SegmentOptions, SegmentValue, SegmentedFusion, WholeFusion,
};

pub type Verdict = Result<SchedulerKind, Rejections>;

pub fn reject(reason: &str) -> Verdict {
    Err(Rejections(vec![Rejection {
        kind: SchedulerKind::Default,
        reason: Refusal::Other {
            reason: reason.into(),
        },
    }]))
}

pub fn has_reduction(f: &Fusion) -> bool {
    f.exprs().any(|(_, e)| e.op.reduction_axes().is_some())
}

/// A non-persistent reduction scheduler: a reduction result may not be broadcast back
/// in the same kernel (the epilogue needs the full result).
pub fn no_broadcast_of_reduction(f: &Fusion) -> Verdict {
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
pub fn one_reduction_shape(f: &Fusion) -> Verdict {
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

pub fn accept_all(f: &Fusion) -> Verdict {
    Ok(if has_reduction(f) {
        SchedulerKind::Reduction
    } else {
        SchedulerKind::Pointwise
    })
}

pub fn segment_with(f: &Fusion, rule: &dyn Fn(&Fusion) -> Verdict) -> SegmentedFusion {
    SegmentedFusion::with_scheduler(f, rule, SegmentOptions::default()).unwrap()
}

/// Random inputs for every fusion input (tensors of `sizes[i]` per tensor input in
/// order, scalars from `scalars`).
pub fn random_inputs(f: &Fusion, sizes: &[&[usize]], scalars: &[ScalarValue]) -> Vec<EvalInput> {
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
pub fn check_against_whole(
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
    let mut env = input_env(f, inputs);
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
pub fn input_of(seg: &SegmentedFusion, k: usize, what: SegmentValue) -> ValId {
    seg.segments()[k]
        .input_of(what)
        .unwrap_or_else(|| panic!("segment {k} has no input {what:?}"))
}

/// `relu(x) -> sum over dim 1 -> * 2 -> sum over dim 0 -> + 1`: two reductions of
/// different shapes in one chain.
pub fn two_reduction_chain() -> (Fusion, [ValId; 7]) {
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

/// The fusion's inputs bound to `inputs`, as the environment of original values that
/// segments are run in one by one.
pub fn input_env(f: &Fusion, inputs: &[EvalInput]) -> std::collections::HashMap<ValId, EvalInput> {
    f.inputs()
        .iter()
        .copied()
        .zip(inputs.iter().cloned())
        .collect()
}
