//! One test per validation rule, plus replay and serde of recorded schedules.

use nvfuser_core::codegen::{corpus, generate, KernelArg, KernelOptions};
use nvfuser_core::prelude::*;
use nvfuser_core::sched::{ParallelType::*, Primitive, ScheduleError, ScheduledFusion};

fn pointwise(dtype: DataType, sizes: &[i64]) -> (ScheduledFusion, ValId, ValId) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, sizes).unwrap();
    let y = fd.neg(x).unwrap();
    fd.add_output(y).unwrap();
    (ScheduledFusion::new(fd.finish().unwrap()).unwrap(), x, y)
}

fn inner_sum() -> (ScheduledFusion, ValId, ValId) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let r = fd.sum(x, &[1], false).unwrap();
    fd.add_output(r).unwrap();
    (ScheduledFusion::new(fd.finish().unwrap()).unwrap(), x, r)
}

#[test]
fn vectorize_not_innermost() {
    let (mut s, x, _) = pointwise(DataType::F32, &[-1]);
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 4).unwrap();
    s.parallelize(c, 0, Vectorize).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::VectorizeNotInnermost { axis: 0, .. })
    ));
}

#[test]
fn vectorize_outer_logical_dim() {
    let (mut s, x, _) = pointwise(DataType::F32, &[-1, -1]);
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 4).unwrap();
    s.reorder(c, &[0, 2, 1]).unwrap();
    s.parallelize(c, 2, Vectorize).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::VectorizeNotInnermost { .. })
    ));
}

#[test]
fn vectorize_non_contiguous() {
    let mut fd = FusionDefinition::new();
    let spec = TensorSpec::new(DataType::F32, &[-1]).contiguity(Contiguity::All(false));
    let x = fd.define_tensor_spec(spec).unwrap();
    let y = fd.neg(x).unwrap();
    fd.add_output(y).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 4).unwrap();
    s.parallelize(c, 1, Vectorize).unwrap();
    assert_eq!(
        s.validate(),
        Err(ScheduleError::VectorizeNotContiguous {
            tensor: c,
            global: x
        })
    );
}

#[test]
fn vector_wider_than_16_bytes() {
    let (mut s, x, _) = pointwise(DataType::F32, &[-1]);
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 8).unwrap();
    s.parallelize(c, 1, Vectorize).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::VectorizeWidth {
            width: 8,
            elem_bytes: 4,
            ..
        })
    ));
}

#[test]
fn vector_width_not_power_of_two() {
    let (mut s, x, _) = pointwise(DataType::F16, &[-1]);
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 3).unwrap();
    s.parallelize(c, 1, Vectorize).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::VectorizeWidth { width: 3, .. })
    ));
}

#[test]
fn vectorize_a_computation() {
    let (mut s, _, y) = pointwise(DataType::F32, &[-1]);
    s.split(y, 0, 4).unwrap();
    s.parallelize(y, 1, Vectorize).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::VectorizeNotCopy { .. })
    ));
}

#[test]
fn vectorize_static_extent_not_divisible() {
    let (mut s, x, _) = pointwise(DataType::F32, &[10]);
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 4).unwrap();
    s.parallelize(c, 1, Vectorize).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::VectorizeNotDivisible { width: 4, .. })
    ));
}

#[test]
fn parallel_type_bound_to_two_extents() {
    let (mut s, x, y) = pointwise(DataType::F32, &[-1]);
    let c = s.cache_after(x).unwrap();
    s.split(y, 0, 128).unwrap();
    s.parallelize(y, 1, TIDx).unwrap();
    s.split(c, 0, 64).unwrap();
    s.parallelize(c, 1, TIDx).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::ParallelTypeConflict { ptype: TIDx, .. })
    ));
}

#[test]
fn parallel_type_twice_in_one_tensor() {
    let (mut s, _, y) = pointwise(DataType::F32, &[-1, -1]);
    s.parallelize(y, 0, BIDx).unwrap();
    s.parallelize(y, 1, BIDx).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::DuplicateParallelType {
            first: 0,
            second: 1,
            ..
        })
    ));
}

#[test]
fn inlining_past_a_reduction() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let r = fd.sum(x, &[1], false).unwrap();
    let y = fd.neg(r).unwrap();
    fd.add_output(y).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    s.reorder(r, &[1, 0]).unwrap();
    let err = s.compute_at(r, y, 1).unwrap_err();
    assert_eq!(
        err,
        ScheduleError::InlinePastReduction {
            tensor: r,
            pos: 1,
            axis: 0
        }
    );
}

#[test]
fn compute_at_mismatched_extent() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let a = fd.neg(x).unwrap();
    let y = fd.exp(a).unwrap();
    fd.add_output(y).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    s.split(y, 0, 128).unwrap();
    assert!(matches!(
        s.compute_at(a, y, 1),
        Err(ScheduleError::ComputeAtMismatch { axis: 0, .. })
    ));
}

#[test]
fn reduction_dim_on_block_index() {
    let (mut s, _, r) = inner_sum();
    s.parallelize(r, 1, BIDx).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::ReductionParallel {
            axis: 1,
            ptype: BIDx,
            ..
        })
    ));
}

#[test]
fn block_reduction_not_a_warp_multiple() {
    let (mut s, _, r) = inner_sum();
    s.split(r, 1, 100).unwrap();
    s.parallelize(r, 2, TIDx).unwrap();
    assert_eq!(
        s.validate(),
        Err(ScheduleError::BlockReduceWidth {
            tensor: r,
            extent: 100
        })
    );
}

#[test]
fn register_tensor_read_across_threads() {
    let (mut s, x, y) = pointwise(DataType::F32, &[-1]);
    let c = s.cache_after(x).unwrap();
    s.split(c, 0, 128).unwrap();
    s.parallelize(c, 1, TIDx).unwrap();
    let _ = y;
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::ThreadMismatch { ptype: TIDx, .. })
    ));
}

#[test]
fn inputs_stay_in_global_memory() {
    let (mut s, x, _) = pointwise(DataType::F32, &[-1]);
    assert!(matches!(
        s.set_memory_type(x, nvfuser_core::sched::MemoryType::Local),
        Err(ScheduleError::MemoryType { .. })
    ));
}

#[test]
fn bad_primitive_arguments() {
    let (mut s, _, y) = pointwise(DataType::F32, &[-1]);
    assert!(matches!(
        s.split(y, 3, 4),
        Err(ScheduleError::AxisOutOfRange { axis: 3, .. })
    ));
    assert!(matches!(
        s.split(y, 0, 0),
        Err(ScheduleError::InvalidArgument { .. })
    ));
    assert!(matches!(
        s.merge(y, 0),
        Err(ScheduleError::AxisOutOfRange { .. })
    ));
    let (mut s, _, r) = inner_sum();
    assert!(
        matches!(
            s.rfactor(r, &[1]),
            Err(ScheduleError::InvalidArgument { .. })
        ),
        "all reduction axes"
    );
    assert!(
        matches!(
            s.rfactor(r, &[0]),
            Err(ScheduleError::InvalidArgument { .. })
        ),
        "not a reduction axis"
    );
}

#[test]
fn schedules_replay_and_round_trip_through_serde() {
    for (name, sf) in corpus::all().unwrap() {
        let json = serde_json::to_string(sf.history()).unwrap();
        let back: Vec<Primitive> = serde_json::from_str(&json).unwrap();
        let replayed = ScheduledFusion::replay(sf.fusion().clone(), &back).unwrap();
        assert_eq!(replayed.schedule(), sf.schedule(), "{name}");
        assert_eq!(replayed.scheduled_ir(), sf.scheduled_ir(), "{name}");
    }
}

#[test]
fn abi_packs_in_signature_order_and_checks_arguments() {
    let sf = corpus::pointwise_split128().unwrap();
    let k = generate(&sf, &KernelOptions::default()).unwrap();
    let names: Vec<&str> = k.abi.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["T0", "T0_shape", "T1", "T1_shape", "T2", "T2_shape"]
    );
    let t = |ptr| KernelArg::Tensor {
        ptr,
        sizes: vec![4, 8],
        strides: vec![8, 1],
    };
    let mut args: std::collections::BTreeMap<ValId, KernelArg> = [
        (ValId::new(0), t(0x1000)),
        (ValId::new(1), t(0x2000)),
        (ValId::new(2), t(0x3000)),
    ]
    .into_iter()
    .collect();
    let packed = k.abi.pack(&args).unwrap();
    assert_eq!(packed.len(), 6);
    assert_eq!(packed[0], 0x1000u64.to_le_bytes());
    assert_eq!(packed[1].len(), 16); // 2 sizes + 2 strides, 32-bit
    assert!(k.cuda_source().contains(&k.abi.signature()));
    args.insert(
        ValId::new(1),
        KernelArg::Tensor {
            ptr: 0,
            sizes: vec![4],
            strides: vec![1],
        },
    );
    assert!(k.abi.pack(&args).is_err(), "rank mismatch is rejected");
    args.insert(
        ValId::new(1),
        KernelArg::Tensor {
            ptr: 0,
            sizes: vec![1 << 40, 1],
            strides: vec![1, 1],
        },
    );
    assert!(
        k.abi.pack(&args).is_err(),
        "32-bit index overflow is rejected"
    );
}

// ----- shared memory, multi-output, grid reductions, resize ops -----

use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::codegen::WorkKind;
use nvfuser_core::sched::MemoryType;

fn softmax_like(width: i64) -> (ScheduledFusion, ValId, ValId) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, width]).unwrap();
    let m = fd.max(x, &[1], false).unwrap();
    let mb = fd.broadcast(m, &[false, true]).unwrap();
    let y = fd.sub(x, mb).unwrap();
    fd.add_output(y).unwrap();
    (ScheduledFusion::new(fd.finish().unwrap()).unwrap(), x, y)
}

#[test]
fn shared_memory_over_48_kib() {
    let (mut s, x, y) = softmax_like(16384);
    let xc = s.cache_after(x).unwrap();
    s.split(y, 1, 256).unwrap();
    s.parallelize(y, 0, BIDx).unwrap();
    s.parallelize(y, 2, TIDx).unwrap();
    let others: Vec<ValId> = s
        .schedule()
        .tensors
        .keys()
        .copied()
        .filter(|&v| v != x && v != y)
        .collect();
    s.transform_like(y, &others).unwrap();
    s.parallelize_like(y, &others).unwrap();
    s.set_memory_type(xc, MemoryType::Shared).unwrap();
    s.inline_most().unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::SharedMemoryTooLarge {
            bytes: 65536,
            limit: 49152,
            ..
        })
    ));
}

#[test]
fn buffer_over_a_symbolic_extent() {
    let (mut s, x, _) = pointwise(DataType::F32, &[-1, -1]);
    let c = s.cache_after(x).unwrap();
    s.set_memory_type(c, MemoryType::Shared).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::SymbolicAllocation {
            axis: 0,
            memory: MemoryType::Shared,
            ..
        })
    ));
}

#[test]
fn shared_tensor_read_across_blocks() {
    let (mut s, x, y) = pointwise(DataType::F32, &[-1, 64]);
    let c = s.cache_after(x).unwrap();
    s.set_memory_type(c, MemoryType::Shared).unwrap();
    s.parallelize(c, 0, BIDx).unwrap();
    s.parallelize(y, 0, BIDy).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::BlockMismatch { ptype: BIDx, .. })
    ));
}

#[test]
fn resize_op_reading_registers() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[1000]).unwrap();
    let sl = fd.slice(x, &[Slice::range(1, -1)]).unwrap();
    fd.add_output(sl).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    let c = s.cache_after(x).unwrap();
    assert_eq!(
        s.validate(),
        Err(ScheduleError::ResizeInputInRegisters {
            op: "slice",
            producer: c,
            consumer: sl
        })
    );
    // From shared memory it is fine.
    s.set_memory_type(c, MemoryType::Shared).unwrap();
    s.validate().unwrap();
    let src = generate(&s, &KernelOptions::default())
        .unwrap()
        .cuda_source();
    assert!(src.contains("__syncthreads();"), "{src}");
}

/// A block reduction over `threadIdx.y` takes a constant power-of-two extent and
/// all-reduces through one shared slot per thread; the store is made by the threads at
/// `threadIdx.y == 0`. Other extents, a reduction over both x and y, and `threadIdx.z`
/// are refused.
#[test]
fn block_reduction_over_thread_y() {
    let (mut s, _, r) = inner_sum();
    s.split(r, 1, 32).unwrap();
    s.split(r, 0, 32).unwrap();
    s.parallelize(r, 0, BIDx).unwrap();
    s.parallelize(r, 1, TIDx).unwrap();
    s.parallelize(r, 3, TIDy).unwrap();
    s.validate().unwrap();
    let src = generate(&s, &KernelOptions::default())
        .unwrap()
        .cuda_source();
    assert!(src.contains("__shared__ float T1_smem[1024];"), "{src}");
    assert!(
        src.contains("nvf_block_allreduce_y(T1_acc, NvfSum(), T1_smem)"),
        "{src}"
    );
    assert!(src.contains("threadIdx.y == 0"), "{src}");

    let (mut s, _, r) = inner_sum();
    s.split(r, 1, 24).unwrap();
    s.parallelize(r, 2, TIDy).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::ReductionParallel { ptype: TIDy, .. })
    ));

    let (mut s, _, r) = inner_sum();
    s.split(r, 1, 32).unwrap();
    s.split(r, 1, 4).unwrap();
    s.parallelize(r, 2, TIDy).unwrap();
    s.parallelize(r, 3, TIDx).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::ReductionParallel { .. })
    ));

    let (mut s, _, r) = inner_sum();
    s.split(r, 1, 32).unwrap();
    s.parallelize(r, 2, TIDz).unwrap();
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::ReductionParallel { ptype: TIDz, .. })
    ));
}

/// A register result of a grid reduction read by math in the same kernel: every block
/// computes the math, only the last block to finish (which holds the final value)
/// stores it, with no `blockIdx.x == 0` guard for the reduced block dim.
#[test]
fn grid_reduction_read_in_the_kernel_stores_from_the_last_block() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let r = fd.sum(x, &[1], false).unwrap();
    let y = fd.neg(r).unwrap();
    fd.add_output(y).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    s.split(r, 1, 128).unwrap();
    s.parallelize(r, 0, BIDy).unwrap();
    s.parallelize(r, 1, BIDx).unwrap();
    s.parallelize(r, 2, TIDx).unwrap();
    s.parallelize(y, 0, BIDy).unwrap();
    let k = generate(&s, &KernelOptions::default()).unwrap();
    let src = k.cuda_source();
    let store = src
        .lines()
        .position(|l| l.trim_start().starts_with("T2["))
        .expect("a store of T2");
    let guard = src.lines().nth(store - 1).unwrap_or_default();
    assert!(guard.contains("T1_last"), "{guard}\n{src}");
    assert!(!guard.contains("blockIdx.x == 0"), "{guard}");
}

#[test]
fn grid_reduction_abi_lists_work_buffers() {
    let sf = corpus::inner_sum_grid().unwrap();
    let k = generate(&sf, &KernelOptions::default()).unwrap();
    let wb = k.abi.work_buffers();
    assert_eq!(wb.len(), 2);
    assert_eq!(wb[0].name, "T1_work");
    assert_eq!(wb[0].kind, WorkKind::Partials(DataType::F32));
    assert!(!wb[0].kind.zeroed());
    assert_eq!(wb[1].name, "T1_sem");
    assert_eq!(wb[1].kind, WorkKind::Semaphore);
    assert!(wb[1].kind.zeroed());
    // One partial per block (8 × rows), one semaphore per row.
    let eval = |e: &nvfuser_core::ir::Extent| {
        e.eval(&|_, a| Some(if a == 0 { 5 } else { 3000 }), &|_| None)
    };
    assert_eq!(eval(&wb[0].elements), Some(40));
    assert_eq!(eval(&wb[1].elements), Some(5));
    assert_eq!(wb[1].bytes(5), 20);
    let src = k.cuda_source();
    assert!(src.contains(&k.abi.signature()));
    assert!(src.contains("unsigned int* __restrict__ T1_sem"));
    let args: std::collections::BTreeMap<ValId, KernelArg> = [
        (
            ValId::new(0),
            KernelArg::Tensor {
                ptr: 0x1000,
                sizes: vec![5, 3000],
                strides: vec![3000, 1],
            },
        ),
        (
            ValId::new(1),
            KernelArg::Tensor {
                ptr: 0x2000,
                sizes: vec![5],
                strides: vec![1],
            },
        ),
    ]
    .into_iter()
    .collect();
    assert!(k.abi.pack(&args).is_err(), "work buffers must be given");
    let packed = k.abi.pack_with_buffers(&args, &[0x3000, 0x4000]).unwrap();
    assert_eq!(packed.len(), k.abi.params.len());
    assert_eq!(packed[wb[0].param], 0x3000u64.to_le_bytes());
    assert_eq!(packed[wb[1].param], 0x4000u64.to_le_bytes());
}

#[test]
fn multi_output_siblings_are_scheduled_together() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let (avg, m2, n) = fd.welford(x, &[1]).unwrap();
    for t in [avg, m2, n] {
        fd.add_output(t).unwrap();
    }
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    s.split(m2, 1, 64).unwrap();
    s.parallelize(n, 2, TIDx).unwrap();
    let d = |t| s.tensor(t).unwrap().domain.clone();
    assert_eq!(d(avg), d(m2));
    assert_eq!(d(avg), d(n));
    assert_eq!(s.schedule().sibling_group(m2), vec![m2, avg, n]);
    let ir = s.scheduled_ir();
    assert!(
        ir.contains(&format!(
            "(T{}_g f32, T{}_g f32, T{}_g i64) = welford(",
            avg.id(),
            m2.id(),
            n.id()
        )),
        "{ir}"
    );
    s.validate().unwrap();
}

#[test]
fn cache_fork_needs_an_output_that_is_read() {
    let (mut s, _, y) = pointwise(DataType::F32, &[-1]);
    assert!(matches!(
        s.cache_fork(y),
        Err(ScheduleError::InvalidArgument {
            op: "cache_fork",
            ..
        })
    ));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let a = fd.neg(x).unwrap();
    let b = fd.exp(a).unwrap();
    fd.add_output(a).unwrap();
    fd.add_output(b).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    let c = s.cache_fork(a).unwrap();
    let sch = s.schedule();
    assert_eq!(sch.exprs[sch.definition(a).unwrap()].inputs, vec![c]);
    assert_eq!(sch.exprs[sch.definition(b).unwrap()].inputs, vec![c]);
    assert_eq!(sch.tensors[&c].memory, MemoryType::Local);
}

#[test]
fn uniform_maps_high_to_low_after_rounding() {
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let lo = fd.constant(1.0);
    let hi = fd.constant(2.0);
    let seed = fd.define_scalar(DataType::I64).unwrap();
    let off = fd.define_scalar(DataType::I64).unwrap();
    let u = fd
        .uniform(&[Size::Val(n)], lo, hi, seed, off, DataType::BF16)
        .unwrap();
    fd.add_output(u).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    s.split(u, 0, 128).unwrap();
    s.parallelize(u, 0, BIDx).unwrap();
    s.parallelize(u, 1, TIDx).unwrap();
    let src = generate(&s, &KernelOptions::default())
        .unwrap()
        .cuda_source();
    assert!(src.contains("nvf_uniform<nvf_bfloat>("), "{src}");
    assert!(src.contains("(float)v >= (float)hi_t ? lo_t : v"));
}

#[test]
fn hoist_in_nest_moves_a_load_to_the_start_of_its_own_nest() {
    // a = neg(x) is one loop nest; b = exp(x) + set(z) another, with z's load (the set,
    // after exp in the fusion's order) computed in it.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[16]).unwrap();
    let z = fd.define_tensor(DataType::F32, &[16]).unwrap();
    let a = fd.neg(x).unwrap();
    let t = fd.exp(x).unwrap();
    let cz = fd.set(z).unwrap();
    let b = fd.add(t, cz).unwrap();
    fd.add_output(a).unwrap();
    fd.add_output(b).unwrap();
    let fusion = fd.finish().unwrap();
    let mut s = ScheduledFusion::new(fusion.clone()).unwrap();
    let order = |s: &ScheduledFusion| -> Vec<ValId> {
        s.schedule().exprs.iter().map(|e| e.output).collect()
    };
    assert_eq!(order(&s), vec![a, t, cz, b]);
    // Not computed at a consumer: no nest to hoist in.
    assert!(matches!(
        s.hoist_in_nest(cz),
        Err(ScheduleError::InvalidArgument {
            op: "hoist_in_nest",
            ..
        })
    ));
    // Not a load.
    s.compute_at(t, b, 1).unwrap();
    assert!(s.hoist_in_nest(t).is_err());
    s.compute_at(cz, b, 1).unwrap();
    s.hoist_in_nest(cz).unwrap();
    // Ahead of exp (b's nest), not of neg (a's nest), as `hoist` would put it.
    assert_eq!(order(&s), vec![a, cz, t, b]);
    let history = s.history().to_vec();
    assert!(history.contains(&Primitive::HoistInNest { tensor: cz }));
    let replayed = ScheduledFusion::replay(fusion, &history).unwrap();
    assert_eq!(replayed.schedule(), s.schedule());
    s.validate().unwrap();
}

#[test]
fn compute_with_refuses_a_reader_and_a_cycle() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.neg(x).unwrap();
    let b = fd.exp(a).unwrap();
    let c = fd.sin(x).unwrap();
    fd.add_output(b).unwrap();
    fd.add_output(c).unwrap();
    let mut s = ScheduledFusion::new(fd.finish().unwrap()).unwrap();
    // `b` reads `a`: its loops cannot hold `a`'s start.
    assert!(matches!(
        s.compute_with(a, b, 1),
        Err(ScheduleError::ComputeAtMismatch { .. })
    ));
    // `c` runs in `b`'s loop; `b` cannot then run in `c`'s (the loop would be its own).
    s.compute_with(c, b, 1).unwrap();
    let err = s.compute_with(b, c, 1).unwrap_err();
    assert!(
        matches!(&err, ScheduleError::ComputeAtMismatch { reason, .. } if reason.contains("cycle")),
        "{err:?}"
    );
    // A refused primitive changes nothing.
    assert!(s.schedule().tensors[&b].compute_with.is_none());
    assert!(s.schedule().tensors[&c].compute_with.is_some());
}
