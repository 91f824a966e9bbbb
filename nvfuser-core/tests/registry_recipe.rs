//! The "add a scheduler" recipe (ARCHITECTURE.md): a scheduler defined outside the
//! crate, registered with one line, takes the fusions it accepts; the rest fall through
//! to the standard list, with typed refusals.

use nvfuser_core::codegen::{self, IndexType, KernelOptions};
use nvfuser_core::ir::{Fusion, Op};
use nvfuser_core::prelude::*;
use nvfuser_core::sched::{ParallelType, ScheduledFusion};
use nvfuser_core::scheduler::{
    Analysis, CompileParams, DeviceInfo, HeuristicParams, LaunchParams, PointwiseParams, Refusal,
    Registry, RuntimeInfo, Scheduler, SchedulerError, SchedulerKind,
};

/// One thread per element of a flattened single-output elementwise fusion, 64 threads
/// a block, scheduled with the public primitives. It hands out pointwise params (the
/// params enum is closed; its own fields would be a new variant).
struct FlatElementwise;

impl Scheduler for FlatElementwise {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Pointwise
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        let elementwise = fusion
            .exprs()
            .all(|(_, e)| matches!(e.op, Op::Unary(_) | Op::Binary(_) | Op::Cast));
        if !elementwise || fusion.outputs().len() != 1 {
            return Err(Refusal::Other {
                reason: "not one elementwise output".into(),
            });
        }
        Ok(Analysis::new(fusion.clone()))
    }

    fn heuristics(&self, _: &Analysis, _: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        Ok(HeuristicParams::Pointwise(PointwiseParams {
            break_point: 0,
            vectorize: 1,
            unroll: 1,
            threads: 64,
            threads_y: 1,
            z_loops: 1,
            rows_per_thread: 1,
            launch: LaunchParams {
                grid: [1, 1, 1],
                block: [64, 1, 1],
            },
            compile: CompileParams {
                index_type: IndexType::I32,
                min_blocks_per_sm: None,
            },
        }))
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::Pointwise(p) if p.threads == 64 && p.vectorize == 1)
    }

    fn schedule(
        &self,
        analysis: &Analysis,
        _: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        let fusion: &Fusion = analysis.get().expect("this scheduler's analysis");
        let mut s = ScheduledFusion::new(fusion.clone())?;
        let y = fusion.outputs()[0].val;
        let rank = fusion.tensor_type(y).map_or(0, |t| t.rank());
        for _ in 1..rank {
            s.merge(y, 0)?;
        }
        s.split(y, 0, 64)?;
        s.parallelize(y, 0, ParallelType::BIDx)?;
        s.parallelize(y, 1, ParallelType::TIDx)?;
        let others: Vec<_> = s
            .schedule()
            .tensors
            .keys()
            .copied()
            .filter(|&t| t != y && !s.schedule().is_input(t))
            .collect();
        s.transform_like(y, &others)?;
        s.parallelize_like(y, &others)?;
        s.inline_most()?;
        Ok(s)
    }
}

static FLAT: FlatElementwise = FlatElementwise;

fn info(shapes: &[&[i64]]) -> RuntimeInfo {
    let shapes: Vec<(DataType, &[i64])> = shapes.iter().map(|s| (DataType::F32, *s)).collect();
    RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes)
}

#[test]
fn a_registered_scheduler_takes_what_it_accepts() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::standard().with_first(&FLAT);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let z = fd.add(x, y)?;
    let z = fd.exp(z)?;
    fd.add_output(z)?;
    let f = fd.finish()?;
    let decision = registry.decide(&f, &info(&[&[100, 30], &[100, 30]]))?;
    assert_eq!(decision.kind(), SchedulerKind::Pointwise);
    let sf = decision.schedule()?;
    let ir = sf.scheduled_ir();
    assert!(ir.contains("by 64"), "{ir}");
    let cuda = codegen::generate(&sf, &KernelOptions::default())?.cuda_source();
    assert!(cuda.contains("blockIdx.x * 64 + threadIdx.x"), "{cuda}");
    // Its params schedule through the same registry; the standard one schedules them
    // with its own pointwise scheduler instead.
    let again = registry.schedule_with(&f, decision.params())?;
    assert_eq!(again.scheduled_ir(), ir);
    let standard = Registry::standard().decide(&f, &info(&[&[100, 30], &[100, 30]]))?;
    assert_ne!(standard.schedule()?.scheduled_ir(), ir);

    // A reduction is refused by it (typed) and taken by the standard reduction scheduler.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let s = fd.sum(x, &[1], false)?;
    fd.add_output(s)?;
    let f = fd.finish()?;
    assert_eq!(registry.can_schedule(&f)?, SchedulerKind::Reduction);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let p = fd.permute(x, &[1, 0])?;
    let s = fd.sum(p, &[0], false)?;
    let m = fd.max(x, &[1], false)?;
    fd.add_output(s)?;
    fd.add_output(m)?;
    let rejections = registry.can_schedule(&fd.finish()?).unwrap_err();
    assert!(matches!(
        rejections.0[0].reason,
        Refusal::Other { ref reason } if reason == "not one elementwise output"
    ));
    assert!(rejections
        .0
        .iter()
        .any(|r| matches!(r.reason, Refusal::NoReductionShape { .. })));
    Ok(())
}

#[test]
fn params_are_checked_by_the_scheduler_that_takes_them() -> Result<(), Box<dyn std::error::Error>> {
    use nvfuser_core::scheduler::check_fits;
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.exp(x)?;
    fd.add_output(y)?;
    let f = fd.finish()?;
    let call = info(&[&[64, 1024]]);
    // No-op params for a fusion that computes: refused, not a runtime that skips the work.
    assert!(matches!(
        check_fits(&f, &HeuristicParams::NoOp, &call),
        Err(SchedulerError::NotApplicable {
            kind: SchedulerKind::NoOp,
            ..
        })
    ));
    assert!(check_fits(&f, &HeuristicParams::Default, &call).is_ok());
    let decided = Registry::standard().decide(&f, &call)?;
    assert!(check_fits(&f, decided.params(), &call).is_ok());
    Ok(())
}

#[test]
fn refusals_carry_typed_reasons() -> Result<(), Box<dyn std::error::Error>> {
    use nvfuser_core::scheduler::{
        can_schedule_kind, ReducedSide, Rejections, SizeQuantity, SizeRefusal, SizeSubject, Takes,
        Unfit,
    };
    // A row sum: the pointwise and transpose schedulers name the op they do not take
    // (and what they take).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let s = fd.sum(x, &[1], false)?;
    fd.add_output(s)?;
    let row_sum = fd.finish()?;
    let decision = Registry::standard().decide(&row_sum, &info(&[&[64, 256]]))?;
    assert_eq!(decision.kind(), SchedulerKind::Reduction);
    let pointwise = can_schedule_kind(SchedulerKind::Pointwise, &row_sum).unwrap_err();
    assert!(
        matches!(&pointwise, Refusal::Fusion { reason: Unfit::NotPointwise { op } } if op == "sum"),
        "{pointwise:?}"
    );
    assert_eq!(
        can_schedule_kind(SchedulerKind::Transpose, &row_sum),
        Err(Refusal::Fusion {
            reason: Unfit::Op {
                op: "sum".into(),
                takes: Takes::PermuteThenPointwise
            }
        })
    );
    // A sum over the middle dim of a rank-3 tensor: both reduction analyses say why,
    // with the axes and the side they reduce.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
    let s = fd.sum(x, &[1], false)?;
    fd.add_output(s)?;
    let middle = fd.finish()?;
    match can_schedule_kind(SchedulerKind::Reduction, &middle) {
        Err(Refusal::NoReductionShape { inner, outer }) => {
            assert_eq!(
                *inner,
                Unfit::ReductionAxes {
                    op: "sum".into(),
                    axes: vec![1],
                    rank: 3,
                    side: ReducedSide::Innermost
                }
            );
            assert!(
                matches!(
                    *outer,
                    Unfit::ReductionAxes {
                        side: ReducedSide::Outermost,
                        ..
                    }
                ),
                "{outer:?}"
            );
        }
        other => panic!("expected both reduction analyses to refuse: {other:?}"),
    }
    // Sizes beyond 2^48 elements are refused before planning, with the input and shape.
    let err = Registry::standard()
        .decide(&row_sum, &info(&[&[1 << 25, 1 << 24]]))
        .map(|_| ())
        .unwrap_err();
    let Rejections(all) = &err;
    assert!(
        all.iter().any(|r| r.reason
            == Refusal::Sizes {
                reason: SizeRefusal::TooLarge {
                    subject: SizeSubject::Input(0),
                    quantity: SizeQuantity::ElementCount,
                    shape: vec![Some(1 << 25), Some(1 << 24)],
                    limit: 1 << 48,
                }
            }),
        "{err}"
    );
    // Refusals are data: they round-trip through serde.
    let text = serde_json::to_string(&err)?;
    let back: Rejections = serde_json::from_str(&text)?;
    assert_eq!(back, err);
    assert!(
        err.to_string()
            .contains("input 0: the element count of shape [33554432, 16777216]: expected at most"),
        "{err}"
    );
    Ok(())
}

/// The outer reduction scheduler takes Welford statistics over the rows and per-column
/// math after them (finished by the last block of its grid split), and refuses any
/// tensor with elements along the reduced dims computed from a reduction (normalized
/// rows, or an expand of the statistics): only the last block holds the result, so
/// those run in a kernel of their own.
#[test]
fn outer_statistics_and_their_readers() -> Result<(), Box<dyn std::error::Error>> {
    use nvfuser_core::scheduler::{can_schedule_kind, Unfit};
    let build = |src: &str| nvfuser_core::dsl::build_str(src).map(|mut f| f.remove(0).0);
    let stats = build(
        "fn k(x: Tensor<f32, [_, _]>) -> (Tensor<f32, [_]>, Tensor<f32, [_]>) {
            let (var, mean) = x.var_mean([0], correction = 0);
            (mean * 2.0f32, (var + 1e-5f32).rsqrt())
        }",
    )
    .map_err(|e| format!("{e:?}"))?;
    assert_eq!(can_schedule_kind(SchedulerKind::Reduction, &stats), Ok(()));
    for src in [
        "fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> {
            let (var, mean) = x.var_mean([0], correction = 0, keepdim = true);
            (x - mean) * rsqrt(var + 1e-5f32)
        }",
        "fn k(x: Tensor<f32, [64, _]>) -> Tensor<f32, [64, _]> {
            x.max([0]).broadcast([true, false]).expand([64, -1])
        }",
    ] {
        let f = build(src).map_err(|e| format!("{e:?}"))?;
        let r = can_schedule_kind(SchedulerKind::Reduction, &f).unwrap_err();
        assert!(
            matches!(&r, Refusal::NoReductionShape { outer, .. } if matches!(**outer, Unfit::OuterNormalization { .. })),
            "{r:?}"
        );
    }
    Ok(())
}
