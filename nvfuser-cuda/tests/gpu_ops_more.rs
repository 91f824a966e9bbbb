//! The fusion classes the default schedule gained after `gpu_ops`: outer reductions
//! (one thread per output column, a serial loop over the rows), var / var_mean /
//! welford over the innermost dims (block Welford), the creation ops full / iota /
//! uniform / normal, and permute / pad / cat of fusion inputs feeding pointwise math. Each kernel compiles with NVRTC for
//! sm_90 (skipped without NVRTC, required with `NVFUSER_REQUIRE_NVRTC=1`), and runs on
//! the GPU through `FusionExecutorCache` against the CPU reference on random inputs of
//! several shapes, odd ones included (skipped without a GPU, required with
//! `NVFUSER_REQUIRE_GPU=1`).
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_ops_more -- --nocapture
//! ```

use nvfuser_core::builder::Size;
use nvfuser_core::codegen::{self, KernelOptions};
use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::ReductionOp;
use nvfuser_core::scheduler::{default_schedule_kind, DefaultKind};
use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue};
use nvfuser_cuda::testing::{require_gpu, require_nvrtc};
use nvfuser_cuda::{nvrtc, Arg, Device, FusionExecutorCache, GpuArch, Tensor};

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// Tolerance for an output. Reductions: the GPU accumulates in f32 (serially per thread,
/// then across the block); the CPU reference accumulates in f64 (pairwise sums, two-pass
/// moments). The rounding of the f32 accumulation grows with the reduced length, so f32
/// outputs get rtol/atol 1e-4 (rows here are at most ~1000 long); f16/bf16 outputs get
/// two units in the last place (the f32 result can round to the neighbour of the f64
/// one). Normal random numbers: the Box-Muller log/sqrt/sin/cos of the GPU's libm and
/// the host's differ by a few ulp, covered by the same f32 tolerance. Integers
/// (welford's count, iota) stay exact.
fn tolerance(dtype: DataType) -> Tolerance {
    match dtype {
        DataType::F32 => Tolerance::new(1e-4, 1e-4),
        DataType::F16 => Tolerance::new(2e-3, 1e-4),
        DataType::BF16 => Tolerance::new(1.6e-2, 1e-3),
        other => Tolerance::for_dtype(other),
    }
}

#[derive(Default)]
struct Tally {
    compared: usize,
    mismatches: Vec<String>,
    unsupported: Vec<String>,
}

impl Tally {
    /// Runs `fusion` on the GPU and the CPU and compares every output.
    fn check(&mut self, device: &Device, name: &str, fusion: &Fusion, inputs: &[EvalInput]) {
        let want = evaluate(fusion, inputs).unwrap();
        let tensors: Vec<Option<Tensor>> = inputs
            .iter()
            .map(|i| match i {
                EvalInput::Tensor(h) => Some(device.tensor_from_host(h).unwrap()),
                _ => None,
            })
            .collect();
        let args: Vec<Arg<'_>> = inputs
            .iter()
            .zip(&tensors)
            .map(|(i, t)| match (i, t) {
                (_, Some(t)) => Arg::from(t),
                (EvalInput::Scalar(v), None) => Arg::Scalar(*v),
                _ => unreachable!("a tensor input has a device tensor"),
            })
            .collect();
        let exec = FusionExecutorCache::new(fusion.clone());
        let got = match exec.run(device, &args) {
            Ok(g) => g,
            Err(e) => {
                self.unsupported.push(format!("{name}: {e}"));
                return;
            }
        };
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let g = g.to_host_tensor().unwrap();
            self.compared += 1;
            if let Err(m) = compare(&g, w, tolerance(w.dtype())) {
                self.mismatches.push(format!("{name} output {i}: {m}"));
            }
        }
    }

    fn finish(self, what: &str) {
        println!(
            "{what}: {} outputs compared, {} mismatches, {} not run",
            self.compared,
            self.mismatches.len(),
            self.unsupported.len()
        );
        assert!(
            self.mismatches.is_empty() && self.unsupported.is_empty(),
            "{what}: mismatches:\n{}\nnot run:\n{}",
            self.mismatches.join("\n"),
            self.unsupported.join("\n")
        );
        assert!(self.compared > 0);
    }
}

/// A fusion, the dtypes of its tensor inputs, and the shapes to run it on (one list of
/// input shapes per case).
struct Case {
    name: String,
    fusion: Fusion,
    kind: DefaultKind,
    dtypes: Vec<DataType>,
    shapes: Vec<Vec<Vec<usize>>>,
    /// For fusions with only scalar inputs: one list of scalar arguments per case.
    scalars: Vec<Vec<ScalarValue>>,
}

fn reduce(
    fd: &mut FusionDefinition,
    op: ReductionOp,
    x: nvfuser_core::ValId,
    axes: &[i64],
) -> nvfuser_core::ValId {
    match op {
        ReductionOp::Sum => fd.sum(x, axes, false),
        ReductionOp::Max => fd.max(x, axes, false),
        ReductionOp::Min => fd.min(x, axes, false),
        ReductionOp::Mean => fd.mean(x, axes, false),
        ReductionOp::Prod => fd.prod(x, axes, false),
    }
    .unwrap()
}

const ODD_2D: [[usize; 2]; 5] = [[1000, 129], [7, 1], [1, 300], [33, 257], [129, 37]];

fn outer_cases() -> Vec<Case> {
    let mut out = Vec::new();
    let two_d = || ODD_2D.iter().map(|s| vec![s.to_vec()]).collect::<Vec<_>>();
    for op in [
        ReductionOp::Sum,
        ReductionOp::Max,
        ReductionOp::Min,
        ReductionOp::Mean,
        ReductionOp::Prod,
    ] {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let r = reduce(&mut fd, op, x, &[0]);
        fd.add_output(r).unwrap();
        out.push(Case {
            name: format!("outer {op:?} [N, H] f32"),
            fusion: fd.finish().unwrap(),
            kind: DefaultKind::OuterReduction,
            scalars: Vec::new(),
            dtypes: vec![DataType::F32],
            shapes: two_d(),
        });
    }
    // bf16 in, f32 math, a per-column sqrt after the reduction, bf16 out.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let sq = fd.mul(xf, xf).unwrap();
    let s = fd.sum(sq, &[0], false).unwrap();
    let n = fd.sqrt(s).unwrap();
    let n = fd.cast(n, DataType::BF16).unwrap();
    fd.add_output(n).unwrap();
    out.push(Case {
        name: "outer column norm bf16".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::OuterReduction,
        scalars: Vec::new(),
        dtypes: vec![DataType::BF16],
        shapes: two_d(),
    });
    // Rank 3: two outer dims reduced, and one.
    let three_d = vec![
        vec![vec![5, 7, 129]],
        vec![vec![3, 4, 1]],
        vec![vec![1, 1, 300]],
        vec![vec![17, 9, 13]],
    ];
    for (name, axes) in [
        ("outer mean 2 of 3", &[0i64, 1][..]),
        ("outer max 1 of 3", &[0][..]),
    ] {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1, -1]).unwrap();
        let op = if axes.len() == 2 {
            ReductionOp::Mean
        } else {
            ReductionOp::Max
        };
        let r = reduce(&mut fd, op, x, axes);
        fd.add_output(r).unwrap();
        out.push(Case {
            name: name.into(),
            fusion: fd.finish().unwrap(),
            kind: DefaultKind::OuterReduction,
            scalars: Vec::new(),
            dtypes: vec![DataType::F32],
            shapes: three_d.clone(),
        });
    }
    // Column centering with the column mean as a second output.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let m = fd.mean(x, &[0], false).unwrap();
    let mb = fd.broadcast(m, &[true, false]).unwrap();
    let y = fd.sub(x, mb).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(m).unwrap();
    out.push(Case {
        name: "outer column centering".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::OuterReduction,
        scalars: Vec::new(),
        dtypes: vec![DataType::F32],
        shapes: two_d(),
    });
    out
}

fn welford_cases() -> Vec<Case> {
    let mut out = Vec::new();
    let two_d = || ODD_2D.iter().map(|s| vec![s.to_vec()]).collect::<Vec<_>>();
    for correction in [0, 1] {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let v = fd.var(x, &[1], correction, false).unwrap();
        fd.add_output(v).unwrap();
        out.push(Case {
            name: format!("var correction {correction}"),
            fusion: fd.finish().unwrap(),
            kind: DefaultKind::InnerReduction,
            scalars: Vec::new(),
            dtypes: vec![DataType::F32],
            // Rows of length 1 with correction 1 divide by zero; the CPU and the GPU
            // both give inf/nan there, which `compare` does not match reliably.
            shapes: if correction == 0 {
                two_d()
            } else {
                vec![
                    vec![vec![1000, 129]],
                    vec![vec![1, 300]],
                    vec![vec![33, 257]],
                ]
            },
        });
    }
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1]).unwrap();
    let (v, m) = fd.var_mean(x, &[1, 2], 0, false).unwrap();
    fd.add_output(v).unwrap();
    fd.add_output(m).unwrap();
    out.push(Case {
        name: "var_mean over 2 inner dims".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::InnerReduction,
        scalars: Vec::new(),
        dtypes: vec![DataType::F32],
        shapes: vec![
            vec![vec![5, 7, 129]],
            vec![vec![3, 4, 1]],
            vec![vec![1, 1, 300]],
            vec![vec![17, 9, 13]],
        ],
    });
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let (avg, m2, n) = fd.welford(x, &[1]).unwrap();
    fd.add_output(avg).unwrap();
    fd.add_output(m2).unwrap();
    fd.add_output(n).unwrap();
    out.push(Case {
        name: "welford three outputs".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::InnerReduction,
        scalars: Vec::new(),
        dtypes: vec![DataType::F32],
        shapes: two_d(),
    });
    // LayerNorm forward, bf16 in and out, any row length; mean and rstd as outputs.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let w = fd.define_tensor(DataType::BF16, &[-1]).unwrap();
    let b = fd.define_tensor(DataType::BF16, &[-1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let (var, mean) = fd.var_mean(xf, &[1], 0, false).unwrap();
    let mb = fd.broadcast(mean, &[false, true]).unwrap();
    let xc = fd.sub(xf, mb).unwrap();
    let eps = fd.constant(1e-5);
    let ve = fd.add(var, eps).unwrap();
    let rstd = fd.rsqrt(ve).unwrap();
    let rb = fd.broadcast(rstd, &[false, true]).unwrap();
    let xn = fd.mul(xc, rb).unwrap();
    let wf = fd.cast(w, DataType::F32).unwrap();
    let bf = fd.cast(b, DataType::F32).unwrap();
    let yw = fd.mul(xn, wf).unwrap();
    let y = fd.add(yw, bf).unwrap();
    let y = fd.cast(y, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(mean).unwrap();
    fd.add_output(rstd).unwrap();
    out.push(Case {
        name: "layer norm bf16".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::InnerReduction,
        scalars: Vec::new(),
        dtypes: vec![DataType::BF16; 3],
        shapes: ODD_2D
            .iter()
            .map(|&[n, h]| vec![vec![n, h], vec![h], vec![h]])
            .collect(),
    });
    out
}

fn creation_cases() -> Vec<Case> {
    use ScalarValue::{Float, Int};
    let mut out = Vec::new();
    // full([n, 7], v) * 2.
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let v = fd.define_scalar(DataType::F32).unwrap();
    let t = fd
        .full(&[Size::Val(n), Size::Const(7)], v, DataType::F32)
        .unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(t, two).unwrap();
    fd.add_output(y).unwrap();
    out.push(Case {
        name: "full * 2".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::Pointwise,
        scalars: vec![
            vec![Int(1), Float(1.5)],
            vec![Int(37), Float(-0.25)],
            vec![Int(1000), Float(3.0)],
        ],
        dtypes: Vec::new(),
        shapes: Vec::new(),
    });
    // iota in i64 and f32.
    for dtype in [DataType::I64, DataType::F32] {
        let mut fd = FusionDefinition::new();
        let n = fd.define_scalar(DataType::I64).unwrap();
        let start = fd.define_scalar(DataType::I64).unwrap();
        let step = fd.define_scalar(DataType::I64).unwrap();
        let i = fd.iota(Size::Val(n), start, step, dtype).unwrap();
        fd.add_output(i).unwrap();
        out.push(Case {
            name: format!("iota {dtype}"),
            fusion: fd.finish().unwrap(),
            kind: DefaultKind::Pointwise,
            scalars: vec![
                vec![Int(1), Int(0), Int(1)],
                vec![Int(129), Int(-5), Int(3)],
                vec![Int(1000), Int(7), Int(-2)],
            ],
            dtypes: Vec::new(),
            shapes: Vec::new(),
        });
    }
    // uniform and normal [n, m] f32 and their sum.
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let m = fd.define_scalar(DataType::I64).unwrap();
    let seed = fd.define_scalar(DataType::I64).unwrap();
    let off = fd.define_scalar(DataType::I64).unwrap();
    let lo = fd.constant(-1.0);
    let hi = fd.constant(3.0);
    let sizes = [Size::Val(n), Size::Val(m)];
    let u = fd
        .uniform(&sizes, lo, hi, seed, off, DataType::F32)
        .unwrap();
    let g = fd.normal(&sizes, lo, hi, seed, off, DataType::F32).unwrap();
    let y = fd.add(u, g).unwrap();
    fd.add_output(u).unwrap();
    fd.add_output(g).unwrap();
    fd.add_output(y).unwrap();
    out.push(Case {
        name: "uniform + normal".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::Pointwise,
        scalars: vec![
            vec![Int(1), Int(1), Int(0), Int(0)],
            vec![Int(37), Int(129), Int(42), Int(4)],
            vec![Int(5), Int(1000), Int(7), Int(0)],
        ],
        dtypes: Vec::new(),
        shapes: Vec::new(),
    });
    out
}

/// Permute, pad and cat of fusion inputs feeding pointwise math.
fn movement_cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let p = fd.permute(x, &[1, 0]).unwrap();
    let t = fd.add(p, y).unwrap();
    fd.add_output(t).unwrap();
    out.push(Case {
        name: "permute(x) + y".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::Pointwise,
        scalars: Vec::new(),
        dtypes: vec![DataType::F32; 2],
        shapes: ODD_2D
            .iter()
            .map(|&[n, h]| vec![vec![n, h], vec![h, n]])
            .collect(),
    });
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let zero = fd.constant(0.0);
    let pd = fd.pad(x, &[(0, 0), (2, 3)], zero).unwrap();
    let ct = fd.cat(&[x, y], 1).unwrap();
    let t = fd.add(pd, ct).unwrap();
    fd.add_output(t).unwrap();
    out.push(Case {
        name: "pad(x, (2, 3)) + cat([x, y], 1)".into(),
        fusion: fd.finish().unwrap(),
        kind: DefaultKind::Pointwise,
        scalars: Vec::new(),
        dtypes: vec![DataType::F32; 2],
        // cat's y has the 5 columns the pad adds.
        shapes: ODD_2D
            .iter()
            .map(|&[n, h]| vec![vec![n, h], vec![n, 5]])
            .collect(),
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
        nvrtc::compile(&k.cuda_source(), &k.abi.name, GpuArch::SM90)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    println!("{} kernels compiled for sm_90", kernels.len());
}

fn run_all(what: &str, cases: &[Case]) {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for (ci, c) in cases.iter().enumerate() {
        for (si, shapes) in c.shapes.iter().enumerate() {
            let inputs: Vec<EvalInput> = shapes
                .iter()
                .zip(&c.dtypes)
                .enumerate()
                .map(|(i, (s, &dt))| {
                    EvalInput::Tensor(HostTensor::random(dt, s, (ci * 100 + si * 10 + i) as u64))
                })
                .collect();
            tally.check(
                &device,
                &format!("{} {shapes:?}", c.name),
                &c.fusion,
                &inputs,
            );
        }
        for scalars in &c.scalars {
            let inputs: Vec<EvalInput> = scalars.iter().map(|&v| EvalInput::Scalar(v)).collect();
            tally.check(
                &device,
                &format!("{} {scalars:?}", c.name),
                &c.fusion,
                &inputs,
            );
        }
    }
    tally.finish(what);
}

#[test]
fn outer_reduction_kernels_compile_with_nvrtc() {
    compile_all(&outer_cases());
}

#[test]
fn outer_reductions_match_the_cpu() {
    run_all("outer reductions", &outer_cases());
}

#[test]
fn creation_kernels_compile_with_nvrtc() {
    compile_all(&creation_cases());
}

#[test]
fn full_iota_uniform_normal_match_the_cpu() {
    run_all("full / iota / uniform / normal", &creation_cases());
}

#[test]
fn movement_kernels_compile_with_nvrtc() {
    compile_all(&movement_cases());
}

#[test]
fn permute_pad_cat_match_the_cpu() {
    run_all("permute / pad / cat", &movement_cases());
}

#[test]
fn welford_kernels_compile_with_nvrtc() {
    compile_all(&welford_cases());
}

#[test]
fn var_var_mean_welford_match_the_cpu() {
    run_all("var / var_mean / welford", &welford_cases());
}
