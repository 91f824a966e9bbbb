//! The fusion classes the default schedule gained after `gpu_ops_more`: slice, reshape,
//! select, index_select, gather and take_along_axis of fusion inputs (feeding pointwise
//! math or a reduction), and reductions over middle dims or mixes of outer and middle
//! dims (one output element per thread). Each kernel compiles with NVRTC for sm_80 and
//! sm_90 (skipped without NVRTC, required with `NVFUSER_REQUIRE_NVRTC=1`), and runs on
//! the GPU through `FusionExecutorCache` against the CPU reference on random inputs of
//! several shapes, odd and empty ones included, twice: forced onto the default schedule
//! (`run_with_params(HeuristicParams::Default)`) and with the scheduler registry's
//! choice (skipped without a GPU, required with `NVFUSER_REQUIRE_GPU=1`). Index tensors hold in-range indices only (out of range,
//! the CPU reference errors while a kernel reads zero; `gpu_default_movement_errors`
//! tests that such values are typed errors before any launch).
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_default_movement -- --nocapture
//! ```

mod common;

use common::{finish, gpu, indices, int, out1, rnd, Tally};
use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::codegen::{self, KernelOptions};
use nvfuser_core::eval::EvalInput;
use nvfuser_core::ir::ReductionOp;
use nvfuser_core::scheduler::{default_schedule_kind, DefaultKind};
use nvfuser_core::{DataType, Fusion, FusionDefinition, ValId};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{nvrtc, GpuArch};

/// A fusion, the kernel shape the default schedule should pick, and its input sets.
struct Case {
    name: String,
    fusion: Fusion,
    kind: DefaultKind,
    inputs: Vec<Vec<EvalInput>>,
}

fn slice_cases() -> Vec<Case> {
    use DataType::*;
    let mut out = Vec::new();
    // relu(x[:, 1:-1]).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let sl = fd.slice(x, &[Slice::all(), Slice::range(1, -1)]).unwrap();
    let y = fd.relu(sl).unwrap();
    out.push(Case {
        name: "relu(x[:, 1:-1])".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [[1000, 129], [7, 3], [1, 300], [33, 257], [5, 2]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, i as u64)])
            .collect(),
    });
    // x[1::2, 3:stop] + 1 with a scalar stop.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let stop = fd.define_scalar(I64).unwrap();
    let sl = fd
        .slice(
            x,
            &[
                Slice::step(1, i64::MAX, 2),
                Slice::range(3, Size::Val(stop)),
            ],
        )
        .unwrap();
    let one = fd.constant(1.0);
    let y = fd.add(sl, one).unwrap();
    out.push(Case {
        name: "x[1::2, 3:stop] + 1".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: vec![
            vec![rnd(F32, &[1000, 129], 10), int(100)],
            vec![rnd(F32, &[7, 5], 11), int(5)],
            vec![rnd(F32, &[33, 257], 12), int(257)],
            vec![rnd(F32, &[2, 10], 13), int(2)],
        ],
    });
    // x[start:, :] * 3 with a scalar start (checked by the launcher: 0..=size).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let start = fd.define_scalar(I64).unwrap();
    let sl = fd
        .slice(x, &[Slice::range(Size::Val(start), i64::MAX), Slice::all()])
        .unwrap();
    let three = fd.constant(3.0);
    let y = fd.mul(sl, three).unwrap();
    out.push(Case {
        name: "x[start:, :] * 3".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: vec![
            vec![rnd(F32, &[1000, 129], 14), int(999)],
            vec![rnd(F32, &[7, 5], 15), int(0)],
            vec![rnd(F32, &[33, 257], 16), int(33)],
        ],
    });
    // bf16 rank 3: (x[1:, :-1, ::3] as f32 * 2) as bf16.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(BF16, &[-1, -1, -1]).unwrap();
    let sl = fd
        .slice(
            x,
            &[
                Slice::range(1, i64::MAX),
                Slice::range(0, -1),
                Slice::step(0, i64::MAX, 3),
            ],
        )
        .unwrap();
    let xf = fd.cast(sl, F32).unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(xf, two).unwrap();
    let y = fd.cast(y, BF16).unwrap();
    out.push(Case {
        name: "x[1:, :-1, ::3] * 2 bf16".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [[5, 7, 129], [3, 4, 1], [2, 2, 300], [17, 9, 13]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(BF16, s, 20 + i as u64)])
            .collect(),
    });
    // sum(x[:, 1:-1], 1): an inner reduction of a slice (empty rows give 0).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let sl = fd.slice(x, &[Slice::all(), Slice::range(1, -1)]).unwrap();
    let r = fd.sum(sl, &[1], false).unwrap();
    out.push(Case {
        name: "sum(x[:, 1:-1], 1)".into(),
        fusion: out1(fd, r),
        kind: DefaultKind::InnerReduction,
        inputs: [[1000, 129], [7, 2], [1, 300], [33, 1031]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, 30 + i as u64)])
            .collect(),
    });
    out
}

fn reshape_cases() -> Vec<Case> {
    use DataType::*;
    let mut out = Vec::new();
    // reshape(x, [-1, 48]) * 2 for x: [N, 6, 8].
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, 6, 8]).unwrap();
    let r = fd.reshape(x, &[Size::Const(-1), Size::Const(48)]).unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(r, two).unwrap();
    out.push(Case {
        name: "reshape([N, 6, 8], [-1, 48]) * 2".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [1, 7, 1000]
            .iter()
            .map(|&n| vec![rnd(F32, &[n, 6, 8], n as u64)])
            .collect(),
    });
    // reshape(x, [-1]) + y: a symbolic [N, H] flattened.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(F32, &[-1]).unwrap();
    let r = fd.reshape(x, &[Size::Const(-1)]).unwrap();
    let y = fd.add(r, b).unwrap();
    out.push(Case {
        name: "reshape([N, H], [-1]) + y".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [[33, 257], [1, 1], [129, 37]]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                vec![
                    rnd(F32, s, 40 + i as u64),
                    rnd(F32, &[s[0] * s[1]], 50 + i as u64),
                ]
            })
            .collect(),
    });
    // exp(reshape(x, [n, -1])) with a scalar row count, f16.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F16, &[-1]).unwrap();
    let n = fd.define_scalar(I64).unwrap();
    let r = fd.reshape(x, &[Size::Val(n), Size::Const(-1)]).unwrap();
    let y = fd.exp(r).unwrap();
    out.push(Case {
        name: "exp(reshape([L], [n, -1])) f16".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: vec![
            vec![rnd(F16, &[1032], 60), int(8)],
            vec![rnd(F16, &[129 * 37], 61), int(129)],
            vec![rnd(F16, &[5], 62), int(1)],
        ],
    });
    // reshape(x, [n, m]) with both sizes from scalars (checked by the launcher).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let n = fd.define_scalar(I64).unwrap();
    let m = fd.define_scalar(I64).unwrap();
    let r = fd.reshape(x, &[Size::Val(n), Size::Val(m)]).unwrap();
    let y = fd.abs(r).unwrap();
    out.push(Case {
        name: "abs(reshape([A, B], [n, m]))".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: vec![
            vec![rnd(F32, &[12, 35], 63), int(20), int(21)],
            vec![rnd(F32, &[1, 7], 64), int(7), int(1)],
        ],
    });
    // A static reshape [4, 12] -> [6, 8], then a column sum (an outer reduction).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[4, 12]).unwrap();
    let r = fd.reshape(x, &[Size::Const(6), Size::Const(8)]).unwrap();
    let s = fd.sum(r, &[0], false).unwrap();
    out.push(Case {
        name: "sum(reshape([4, 12], [6, 8]), 0)".into(),
        fusion: out1(fd, s),
        kind: DefaultKind::OuterReduction,
        inputs: vec![vec![rnd(F32, &[4, 12], 70)]],
    });
    out
}

fn indexing_cases() -> Vec<Case> {
    use DataType::*;
    let mut out = Vec::new();
    // select(x, 0, 1) + y.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(F32, &[-1]).unwrap();
    let sel = fd.select(x, 0, Size::Const(1)).unwrap();
    let y = fd.add(sel, b).unwrap();
    out.push(Case {
        name: "select(x, 0, 1) + y".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [[7, 129], [2, 1], [1000, 37]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, 80 + i as u64), rnd(F32, &[s[1]], 90 + i as u64)])
            .collect(),
    });
    // -select(x, 1, i) with a scalar index, negative ones counting from the end.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1, -1]).unwrap();
    let i = fd.define_scalar(I64).unwrap();
    let sel = fd.select(x, 1, Size::Val(i)).unwrap();
    let y = fd.neg(sel).unwrap();
    out.push(Case {
        name: "-select(x, 1, i)".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: vec![
            vec![rnd(F32, &[5, 7, 129], 100), int(-1)],
            vec![rnd(F32, &[3, 4, 1], 101), int(2)],
            vec![rnd(F32, &[1, 9, 13], 102), int(0)],
            vec![rnd(F32, &[2, 9, 13], 103), int(-9)],
        ],
    });
    // index_select(x, 0, rows) * 2 and index_select(x, 1, cols) bf16.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let rows = fd.define_tensor(I64, &[-1]).unwrap();
    let g = fd.index_select(x, 0, rows).unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(g, two).unwrap();
    out.push(Case {
        name: "index_select(x, 0, rows) * 2".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [(1000, 129, 77), (7, 1, 20), (33, 257, 1)]
            .iter()
            .enumerate()
            .map(|(i, &(n, h, m))| {
                vec![
                    rnd(F32, &[n, h], 110 + i as u64),
                    indices(I64, &[m], n, 120 + i as u64),
                ]
            })
            .collect(),
    });
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(BF16, &[-1, -1]).unwrap();
    let cols = fd.define_tensor(I32, &[-1]).unwrap();
    let g = fd.index_select(x, 1, cols).unwrap();
    out.push(Case {
        name: "index_select(x, 1, cols) bf16, i32 indices".into(),
        fusion: out1(fd, g),
        kind: DefaultKind::Pointwise,
        inputs: [(129, 1000, 300), (1, 7, 9), (37, 3, 1)]
            .iter()
            .enumerate()
            .map(|(i, &(n, h, k))| {
                vec![
                    rnd(BF16, &[n, h], 130 + i as u64),
                    indices(I32, &[k], h, 140 + i as u64),
                ]
            })
            .collect(),
    });
    // gather(x, 1, idx) bf16 with i32 indices, and gather(x, 0, idx) f32 with i64 ones
    // (the index may be smaller than x in the other dim).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(BF16, &[-1, -1]).unwrap();
    let idx = fd.define_tensor(I32, &[-1, -1]).unwrap();
    let g = fd.gather(x, 1, idx).unwrap();
    out.push(Case {
        name: "gather(x, 1, idx) bf16".into(),
        fusion: out1(fd, g),
        kind: DefaultKind::Pointwise,
        inputs: [([33, 257], [33, 50]), ([7, 3], [5, 9]), ([1, 300], [1, 1])]
            .iter()
            .enumerate()
            .map(|(i, (xs, is))| {
                vec![
                    rnd(BF16, xs, 150 + i as u64),
                    indices(I32, is, xs[1], 160 + i as u64),
                ]
            })
            .collect(),
    });
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let idx = fd.define_tensor(I64, &[-1, -1]).unwrap();
    let g = fd.gather(x, 0, idx).unwrap();
    out.push(Case {
        name: "gather(x, 0, idx) f32".into(),
        fusion: out1(fd, g),
        kind: DefaultKind::Pointwise,
        inputs: [
            ([100, 37], [150, 20]),
            ([7, 129], [7, 129]),
            ([1, 5], [3, 5]),
        ]
        .iter()
        .enumerate()
        .map(|(i, (xs, is))| {
            vec![
                rnd(F32, xs, 170 + i as u64),
                indices(I64, is, xs[0], 180 + i as u64),
            ]
        })
        .collect(),
    });
    // exp(take_along_axis(x, idx, 1)).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let idx = fd.define_tensor(I64, &[-1, -1]).unwrap();
    let g = fd.take_along_axis(x, idx, 1).unwrap();
    let y = fd.exp(g).unwrap();
    out.push(Case {
        name: "exp(take_along_axis(x, idx, 1))".into(),
        fusion: out1(fd, y),
        kind: DefaultKind::Pointwise,
        inputs: [
            ([33, 257], [33, 64]),
            ([7, 3], [7, 11]),
            ([1000, 1], [1000, 2]),
        ]
        .iter()
        .enumerate()
        .map(|(i, (xs, is))| {
            vec![
                rnd(F32, xs, 190 + i as u64),
                indices(I64, is, xs[1], 200 + i as u64),
            ]
        })
        .collect(),
    });
    // sum(index_select(x, 0, rows), 0): an outer reduction over picked rows.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let rows = fd.define_tensor(I64, &[-1]).unwrap();
    let g = fd.index_select(x, 0, rows).unwrap();
    let r = fd.sum(g, &[0], false).unwrap();
    out.push(Case {
        name: "sum(index_select(x, 0, rows), 0)".into(),
        fusion: out1(fd, r),
        kind: DefaultKind::OuterReduction,
        inputs: [(1000, 129, 77), (7, 1, 20), (33, 257, 1), (5, 9, 0)]
            .iter()
            .enumerate()
            .map(|(i, &(n, h, m))| {
                vec![
                    rnd(F32, &[n, h], 210 + i as u64),
                    indices(I64, &[m], n, 220 + i as u64),
                ]
            })
            .collect(),
    });
    out
}

fn reduce(fd: &mut FusionDefinition, op: ReductionOp, x: ValId, axes: &[i64]) -> ValId {
    match op {
        ReductionOp::Sum => fd.sum(x, axes, false),
        ReductionOp::Max => fd.max(x, axes, false),
        ReductionOp::Min => fd.min(x, axes, false),
        ReductionOp::Mean => fd.mean(x, axes, false),
        ReductionOp::Prod => fd.prod(x, axes, false),
    }
    .unwrap()
}

const ODD_3D: [[usize; 3]; 5] = [
    [5, 7, 129],
    [3, 4, 1],
    [1, 300, 2],
    [17, 9, 13],
    [2, 1, 300],
];

fn middle_cases() -> Vec<Case> {
    use DataType::*;
    let mut out = Vec::new();
    let three_d = |seed: u64| -> Vec<Vec<EvalInput>> {
        ODD_3D
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, seed + i as u64)])
            .collect()
    };
    for (k, op) in [
        ReductionOp::Sum,
        ReductionOp::Max,
        ReductionOp::Min,
        ReductionOp::Mean,
        ReductionOp::Prod,
    ]
    .into_iter()
    .enumerate()
    {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(F32, &[-1, -1, -1]).unwrap();
        let r = reduce(&mut fd, op, x, &[1]);
        out.push(Case {
            name: format!("{op:?} over the middle dim of [A, B, C]"),
            fusion: out1(fd, r),
            kind: DefaultKind::OuterReduction,
            inputs: three_d(300 + 10 * k as u64),
        });
    }
    // Two middle dims of rank 4, and outer + middle dims of rank 3.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1, -1, -1]).unwrap();
    let r = fd.max(x, &[1, 2], false).unwrap();
    out.push(Case {
        name: "max over dims 1, 2 of rank 4".into(),
        fusion: out1(fd, r),
        kind: DefaultKind::OuterReduction,
        inputs: [[3, 5, 7, 129], [2, 1, 1, 33], [1, 9, 4, 2]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, 400 + i as u64)])
            .collect(),
    });
    for (name, axes) in [
        ("sum over dims 0, 2 of rank 3", &[0i64, 2][..]),
        ("sum over dims 0, 1 of rank 4 (outer)", &[0, 1][..]),
    ] {
        let mut fd = FusionDefinition::new();
        let rank = if axes == [0, 2] { 3 } else { 4 };
        let x = fd.define_tensor(F32, &vec![-1; rank]).unwrap();
        let r = fd.sum(x, axes, false).unwrap();
        let shapes: Vec<Vec<usize>> = if rank == 3 {
            ODD_3D.iter().map(|s| s.to_vec()).collect()
        } else {
            vec![vec![3, 5, 7, 33], vec![1, 2, 1, 129]]
        };
        out.push(Case {
            name: name.into(),
            fusion: out1(fd, r),
            kind: DefaultKind::OuterReduction,
            inputs: shapes
                .iter()
                .enumerate()
                .map(|(i, s)| vec![rnd(F32, s, 500 + i as u64)])
                .collect(),
        });
    }
    // bf16 in, f32 math: sqrt(sum(x * x, 1)) as bf16.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(BF16, &[-1, -1, -1]).unwrap();
    let xf = fd.cast(x, F32).unwrap();
    let sq = fd.mul(xf, xf).unwrap();
    let s = fd.sum(sq, &[1], false).unwrap();
    let n = fd.sqrt(s).unwrap();
    let n = fd.cast(n, BF16).unwrap();
    out.push(Case {
        name: "middle norm bf16".into(),
        fusion: out1(fd, n),
        kind: DefaultKind::OuterReduction,
        inputs: ODD_3D
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(BF16, s, 600 + i as u64)])
            .collect(),
    });
    // Centering over the middle dim, with the mean as a second output.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1, -1]).unwrap();
    let m = fd.mean(x, &[1], false).unwrap();
    let mb = fd.broadcast(m, &[false, true, false]).unwrap();
    let y = fd.sub(x, mb).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(m).unwrap();
    out.push(Case {
        name: "x - mean(x, 1) with the mean".into(),
        fusion: finish(fd),
        kind: DefaultKind::OuterReduction,
        inputs: three_d(700),
    });
    // Welford-style reductions over outer and middle dims (serial Welford per thread).
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let v = fd.var(x, &[0], 1, false).unwrap();
    out.push(Case {
        name: "var over the outer dim, correction 1".into(),
        fusion: out1(fd, v),
        kind: DefaultKind::OuterReduction,
        inputs: [[1000, 129], [2, 1], [33, 257], [129, 37]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, 900 + i as u64)])
            .collect(),
    });
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1]).unwrap();
    let (avg, m2, n) = fd.welford(x, &[0]).unwrap();
    fd.add_output(avg).unwrap();
    fd.add_output(m2).unwrap();
    fd.add_output(n).unwrap();
    out.push(Case {
        name: "welford over the outer dim".into(),
        fusion: finish(fd),
        kind: DefaultKind::OuterReduction,
        inputs: [[1000, 129], [7, 1], [1, 300], [33, 257]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(F32, s, 910 + i as u64)])
            .collect(),
    });
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1, -1]).unwrap();
    let (v, m) = fd.var_mean(x, &[1], 0, false).unwrap();
    fd.add_output(v).unwrap();
    fd.add_output(m).unwrap();
    out.push(Case {
        name: "var_mean over the middle dim".into(),
        fusion: finish(fd),
        kind: DefaultKind::OuterReduction,
        inputs: three_d(920),
    });
    // Channel normalization of [N, C, L] over C, bf16 in and out, with the mean.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(BF16, &[-1, -1, -1]).unwrap();
    let xf = fd.cast(x, F32).unwrap();
    let (var, mean) = fd.var_mean(xf, &[1], 0, false).unwrap();
    let mb = fd.broadcast(mean, &[false, true, false]).unwrap();
    let xc = fd.sub(xf, mb).unwrap();
    let eps = fd.constant(1e-5);
    let ve = fd.add(var, eps).unwrap();
    let rstd = fd.rsqrt(ve).unwrap();
    let rb = fd.broadcast(rstd, &[false, true, false]).unwrap();
    let y = fd.mul(xc, rb).unwrap();
    let y = fd.cast(y, BF16).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(mean).unwrap();
    out.push(Case {
        name: "channel norm over the middle dim, bf16".into(),
        fusion: finish(fd),
        kind: DefaultKind::OuterReduction,
        inputs: [[5, 7, 129], [3, 4, 1], [2, 300, 2], [17, 9, 13]]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![rnd(BF16, s, 930 + i as u64)])
            .collect(),
    });
    // A middle dim of size 0: sums are 0.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(F32, &[-1, -1, -1]).unwrap();
    let r = fd.sum(x, &[1], false).unwrap();
    out.push(Case {
        name: "sum over an empty middle dim".into(),
        fusion: out1(fd, r),
        kind: DefaultKind::OuterReduction,
        inputs: vec![vec![rnd(F32, &[3, 0, 5], 800)]],
    });
    out
}

fn compile_all(cases: &[Case]) {
    let mut kernels = Vec::new();
    for c in cases {
        let (sf, kind) =
            default_schedule_kind(&c.fusion).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(kind, c.kind, "{}", c.name);
        let k = codegen::generate(&sf, &KernelOptions::default()).unwrap();
        kernels.push((&c.name, k));
    }
    if require_nvrtc().is_none() {
        return;
    }
    for (name, k) in &kernels {
        for arch in [GpuArch::SM80, GpuArch::SM90] {
            nvrtc::compile(&k.cuda_source(), &k.abi.name, arch)
                .unwrap_or_else(|e| panic!("{name} ({arch}): {e}"));
        }
    }
    println!("{} kernels compiled for sm_80 and sm_90", kernels.len());
}

fn run_all(what: &str, cases: &[Case]) {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for c in cases {
        for inputs in &c.inputs {
            let shapes: Vec<String> = inputs
                .iter()
                .map(|i| match i {
                    EvalInput::Tensor(t) => format!("{:?}", t.shape()),
                    EvalInput::Scalar(s) => format!("{s}"),
                })
                .collect();
            tally.check_default_and_registry(
                &device,
                &format!("{} [{}]", c.name, shapes.join(", ")),
                &c.fusion,
                inputs,
            );
        }
    }
    tally.finish(what);
}

#[test]
fn slice_kernels_compile_with_nvrtc() {
    compile_all(&slice_cases());
}

#[test]
fn slices_match_the_cpu() {
    run_all("slice", &slice_cases());
}

#[test]
fn reshape_kernels_compile_with_nvrtc() {
    compile_all(&reshape_cases());
}

#[test]
fn reshapes_match_the_cpu() {
    run_all("reshape", &reshape_cases());
}

#[test]
fn indexing_kernels_compile_with_nvrtc() {
    compile_all(&indexing_cases());
}

#[test]
fn select_index_select_gather_take_along_axis_match_the_cpu() {
    run_all(
        "select / index_select / gather / take_along_axis",
        &indexing_cases(),
    );
}

#[test]
fn middle_reduction_kernels_compile_with_nvrtc() {
    compile_all(&middle_cases());
}

#[test]
fn middle_and_mixed_reductions_match_the_cpu() {
    run_all("middle and mixed reductions", &middle_cases());
}

/// The CPU reference runs every case (so the GPU comparisons above compare with real
/// values, not errors): in-range indices, scalar bounds within the dims.
#[test]
fn every_case_runs_on_the_cpu_reference() {
    for c in slice_cases()
        .into_iter()
        .chain(reshape_cases())
        .chain(indexing_cases())
        .chain(middle_cases())
    {
        for inputs in &c.inputs {
            nvfuser_core::eval::evaluate(&c.fusion, inputs)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        }
    }
}
