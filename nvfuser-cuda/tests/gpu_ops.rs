//! Every unary, binary and ternary op and every cast, run on the GPU through
//! `FusionExecutorCache` (the default schedule) and compared with the CPU reference on
//! random inputs: odd sizes, size 1, broadcast, expanded, permuted and sliced views,
//! 0-d and empty tensors. Plus the runtime cache and reduction (softmax, RMSNorm) checks.
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_ops -- --nocapture
//! ```

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::{BinaryOp, TernaryOp, UnaryOp, UnaryRule};
use nvfuser_core::{DataType, Fusion, FusionDefinition, ValId};
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache, Tensor};

const DTYPES: [DataType; 7] = [
    DataType::Bool,
    DataType::I32,
    DataType::I64,
    DataType::F16,
    DataType::BF16,
    DataType::F32,
    DataType::F64,
];

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// A device view of a random tensor in one of several layouts, with its logical sizes.
fn view(device: &Device, dtype: DataType, layout: &str, seed: u64) -> Tensor {
    view_of(device, dtype, layout, seed, false)
}

/// Random data whose integer values are >= 1 (divisors and exponents of integer ops).
fn positive_host(dtype: DataType, shape: &[usize], seed: u64) -> HostTensor {
    let h = HostTensor::random(dtype, shape, seed);
    let v: Vec<i64> = h.to_f64_vec().iter().map(|x| x.abs() as i64 + 1).collect();
    match dtype {
        DataType::I32 => {
            HostTensor::from_vec(v.iter().map(|&x| x as i32).collect(), shape).unwrap()
        }
        DataType::I64 => HostTensor::from_vec(v, shape).unwrap(),
        _ => h,
    }
}

fn positive_host_or_random(
    dtype: DataType,
    shape: &[usize],
    seed: u64,
    positive: bool,
) -> HostTensor {
    if positive {
        positive_host(dtype, shape, seed)
    } else {
        HostTensor::random(dtype, shape, seed)
    }
}

fn view_of(device: &Device, dtype: DataType, layout: &str, seed: u64, positive: bool) -> Tensor {
    let up = |shape: &[usize]| {
        let h = if positive {
            positive_host(dtype, shape, seed)
        } else {
            HostTensor::random(dtype, shape, seed)
        };
        device.tensor_from_host(&h).unwrap()
    };
    match layout {
        "contiguous" => up(&[37, 129]),
        "size1" => up(&[1, 1]),
        "rank0" => up(&[]),
        "empty" => up(&[0, 7]),
        "permuted" => up(&[129, 37]).permute(&[1, 0]).unwrap(),
        "sliced" => up(&[37, 140]).slice(1, 3, 132, 1).unwrap(),
        "expanded" => up(&[1, 129]).expand(&[37, 129]).unwrap(),
        other => panic!("unknown layout {other}"),
    }
}

const LAYOUTS: [&str; 7] = [
    "contiguous",
    "size1",
    "rank0",
    "empty",
    "permuted",
    "sliced",
    "expanded",
];

fn declare(fd: &mut FusionDefinition, t: &Tensor) -> ValId {
    let sizes: Vec<i64> = t.sizes().iter().map(|&s| s as i64).collect();
    let strides: Vec<i64> = t.strides().iter().map(|&s| s as i64).collect();
    fd.define_tensor_from_strides(t.dtype(), &sizes, &strides, false)
        .unwrap()
}

/// Tolerance for an output: dtype-aware; loosened only for transcendental ops on float
/// dtypes, where the GPU's libm and the host's differ by a few ulp: f32 rtol 1e-4
/// (about 1000 ulp is never needed; 1e-4 covers lgamma/tan/erfinv near their poles),
/// f16 rtol 2e-3 (two f16 ulp), bf16 rtol 1.6e-2 (two bf16 ulp), f64 rtol 1e-10.
fn tolerance(dtype: DataType, transcendental: bool) -> Tolerance {
    if !transcendental {
        return Tolerance::for_dtype(dtype);
    }
    match dtype {
        DataType::F32 => Tolerance::new(1e-4, 1e-5),
        DataType::F16 => Tolerance::new(2e-3, 1e-4),
        DataType::BF16 => Tolerance::new(1.6e-2, 1e-3),
        DataType::F64 => Tolerance::new(1e-10, 1e-12),
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
    fn check(
        &mut self,
        device: &Device,
        name: &str,
        fusion: Fusion,
        args: &[Arg<'_>],
        transcendental: bool,
    ) {
        let inputs: Vec<EvalInput> = args
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) => EvalInput::Tensor(t.to_host_tensor().unwrap()),
                Arg::Scalar(s) => EvalInput::Scalar(*s),
            })
            .collect();
        let want = evaluate(&fusion, &inputs).unwrap();
        let exec = FusionExecutorCache::new(fusion);
        let got = match exec.run(device, args) {
            Ok(g) => g,
            Err(e) => {
                self.unsupported.push(format!("{name}: {e}"));
                return;
            }
        };
        for (g, w) in got.iter().zip(&want) {
            let g = g.to_host_tensor().unwrap();
            self.compared += 1;
            if let Err(m) = compare(&g, w, tolerance(w.dtype(), transcendental)) {
                self.mismatches.push(format!("{name}: {m}"));
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
        for u in &self.unsupported {
            println!("  not run: {u}");
        }
        assert!(
            self.mismatches.is_empty() && self.unsupported.is_empty(),
            "{what}: mismatches:\n{}\nnot run:\n{}",
            self.mismatches.join("\n"),
            self.unsupported.join("\n")
        );
        assert!(self.compared > 0);
    }
}

fn is_transcendental(op: UnaryOp) -> bool {
    matches!(op.rule(), UnaryRule::FloatMath | UnaryRule::FloatOnly)
}

#[test]
fn every_unary_op_on_every_dtype_and_layout() {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for &op in UnaryOp::ALL {
        for dtype in DTYPES {
            for (li, layout) in LAYOUTS.iter().enumerate() {
                let x = view(&device, dtype, layout, li as u64 + 1);
                let mut fd = FusionDefinition::new();
                let xv = declare(&mut fd, &x);
                let Ok(y) = fd.unary(op, xv) else { break };
                fd.add_output(y).unwrap();
                let name = format!("{} {dtype} {layout}", op.name());
                tally.check(
                    &device,
                    &name,
                    fd.finish().unwrap(),
                    &[(&x).into()],
                    is_transcendental(op),
                );
            }
        }
    }
    tally.finish("unary ops");
}

#[test]
fn every_binary_op_on_every_dtype_with_broadcast_and_scalars() {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for &op in BinaryOp::ALL {
        for dtype in DTYPES {
            let transcendental = matches!(op, BinaryOp::Pow | BinaryOp::Atan2);
            // Integer division, modulo and powers need right operands >= 1 (a zero
            // divisor or a negative exponent is an error in the reference).
            let positive = dtype.is_int()
                && matches!(
                    op,
                    BinaryOp::Div | BinaryOp::Fmod | BinaryOp::Remainder | BinaryOp::Pow
                );
            // Same shapes, both in odd layouts.
            let a = view(&device, dtype, "sliced", 3);
            let b = view_of(&device, dtype, "permuted", 4, positive);
            let mut fd = FusionDefinition::new();
            let (av, bv) = (declare(&mut fd, &a), declare(&mut fd, &b));
            let Ok(y) = fd.binary(op, av, bv) else {
                continue;
            };
            fd.add_output(y).unwrap();
            let name = format!("{} {dtype} [37,129]+[37,129]", op.name());
            tally.check(
                &device,
                &name,
                fd.finish().unwrap(),
                &[(&a).into(), (&b).into()],
                transcendental,
            );
            // [N, H] + [H], and an expanded operand.
            let h = device
                .tensor_from_host(&positive_host_or_random(dtype, &[129], 5, positive))
                .unwrap();
            let e = view(&device, dtype, "expanded", 6);
            let mut fd = FusionDefinition::new();
            let av = declare(&mut fd, &a);
            let hv = declare(&mut fd, &h);
            let ev = declare(&mut fd, &e);
            let y = fd.binary(op, av, hv).unwrap();
            let z = fd.binary(op, ev, hv).unwrap();
            fd.add_output(y).unwrap();
            fd.add_output(z).unwrap();
            let name = format!("{} {dtype} [N,H]+[H], expanded+[H]", op.name());
            tally.check(
                &device,
                &name,
                fd.finish().unwrap(),
                &[(&a).into(), (&h).into(), (&e).into()],
                transcendental,
            );
            // A tensor and a scalar input, on an odd 1-D size.
            let x = device
                .tensor_from_host(&HostTensor::random(dtype, &[1001], 7))
                .unwrap();
            let mut fd = FusionDefinition::new();
            let xv = declare(&mut fd, &x);
            let s = fd.define_scalar(dtype).unwrap();
            let Ok(y) = fd.binary(op, xv, s) else {
                continue;
            };
            fd.add_output(y).unwrap();
            let sv = match dtype {
                DataType::Bool => Arg::from(true),
                DataType::I32 | DataType::I64 => Arg::from(3i64),
                _ => Arg::from(1.5f64),
            };
            let name = format!("{} {dtype} tensor-scalar", op.name());
            tally.check(
                &device,
                &name,
                fd.finish().unwrap(),
                &[(&x).into(), sv],
                transcendental,
            );
        }
    }
    tally.finish("binary ops");
}

#[test]
fn every_ternary_op() {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for op in [
        TernaryOp::Where,
        TernaryOp::Lerp,
        TernaryOp::Clamp,
        TernaryOp::Threshold,
        TernaryOp::Addcmul,
    ] {
        for dtype in DTYPES {
            for layout in ["contiguous", "size1", "rank0", "empty", "sliced"] {
                let ts: Vec<Tensor> = (0..op.arity())
                    .map(|i| {
                        let d = if op == TernaryOp::Where && i == 0 {
                            DataType::Bool
                        } else {
                            dtype
                        };
                        view(&device, d, layout, 10 + i as u64)
                    })
                    .collect();
                let mut fd = FusionDefinition::new();
                let vs: Vec<ValId> = ts.iter().map(|t| declare(&mut fd, t)).collect();
                let Ok(y) = fd.ternary(op, &vs) else { break };
                fd.add_output(y).unwrap();
                let args: Vec<Arg<'_>> = ts.iter().map(Arg::from).collect();
                let name = format!("{} {dtype} {layout}", op.name());
                tally.check(&device, &name, fd.finish().unwrap(), &args, false);
            }
        }
    }
    tally.finish("ternary ops");
}

#[test]
fn casts_between_all_dtype_pairs() {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for from in DTYPES {
        for to in DTYPES {
            for layout in ["contiguous", "permuted", "rank0"] {
                let x = view(&device, from, layout, 21);
                let mut fd = FusionDefinition::new();
                let xv = declare(&mut fd, &x);
                let Ok(y) = fd.cast(xv, to) else { break };
                fd.add_output(y).unwrap();
                let name = format!("cast {from} -> {to} {layout}");
                tally.check(&device, &name, fd.finish().unwrap(), &[(&x).into()], false);
            }
        }
    }
    tally.finish("casts");
}

#[test]
fn a_new_batch_size_hits_the_runtime_cache() {
    let Some(device) = gpu() else { return };
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(a, two).unwrap();
    fd.add_output(y).unwrap();
    let exec = FusionExecutorCache::new(fd.finish().unwrap());
    for (i, n) in [8usize, 33, 1000].into_iter().enumerate() {
        let h = HostTensor::random(DataType::F32, &[n, 64], i as u64);
        let x = device.tensor_from_host(&h).unwrap();
        let out = exec.run(&device, &[(&x).into()]).unwrap();
        let want = evaluate(exec.fusion(), &[EvalInput::Tensor(h)]).unwrap();
        compare(
            &out[0].to_host_tensor().unwrap(),
            &want[0],
            Tolerance::exact(),
        )
        .unwrap();
    }
    // The same size again: found without running the heuristics.
    let h = HostTensor::random(DataType::F32, &[33, 64], 9);
    let x = device.tensor_from_host(&h).unwrap();
    exec.run(&device, &[(&x).into()]).unwrap();
    let stats = exec.stats();
    println!("{stats:?}");
    // One compile; the two new batch sizes got equal params and reused its kernel.
    assert_eq!((stats.misses, stats.reuses, stats.hits), (1, 2, 1));
}

#[test]
fn the_runtime_cache_is_bounded() {
    let Some(device) = gpu() else { return };
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.neg(a).unwrap();
    fd.add_output(y).unwrap();
    let exec = FusionExecutorCache::with_capacity(fd.finish().unwrap(), 1);
    let base = device.tensor_from_slice(&[1.0f32; 64], [64]).unwrap();
    // Two alignment classes: two signatures, one slot.
    let aligned = base.slice(0, 0, 32, 1).unwrap();
    let odd = base.slice(0, 1, 33, 1).unwrap();
    for t in [&aligned, &odd, &aligned] {
        let out = exec.run(&device, &[t.into()]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![-1.0f32; 32]);
    }
    let stats = exec.stats();
    println!("{stats:?}");
    assert_eq!((stats.misses, stats.evictions, stats.runtimes), (3, 2, 1));
}

fn softmax() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let m = fd.max(x, &[1], true).unwrap();
    let d = fd.sub(x, m).unwrap();
    let e = fd.exp(d).unwrap();
    let s = fd.sum(e, &[1], true).unwrap();
    let y = fd.div(e, s).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

fn rms_norm(dtype: DataType) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1]).unwrap();
    let w = fd.define_tensor(dtype, &[-1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let sq = fd.mul(xf, xf).unwrap();
    let ms = fd.mean(sq, &[1], true).unwrap();
    let eps = fd.constant(1e-6);
    let v = fd.add(ms, eps).unwrap();
    let r = fd.rsqrt(v).unwrap();
    let n = fd.mul(xf, r).unwrap();
    let wf = fd.cast(w, DataType::F32).unwrap();
    let y = fd.mul(n, wf).unwrap();
    let y = fd.cast(y, dtype).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

#[test]
fn softmax_and_rms_norm_match_on_row_lengths() {
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    for shape in [[7usize, 1000], [64, 4096], [3, 1], [5, 129]] {
        let x = device
            .tensor_from_host(&HostTensor::random(DataType::F32, &shape, 1))
            .unwrap();
        // exp differs by a few ulp between GPU and host.
        tally.check(
            &device,
            &format!("softmax {shape:?}"),
            softmax(),
            &[(&x).into()],
            true,
        );
        for dtype in [DataType::F32, DataType::BF16] {
            let x = device
                .tensor_from_host(&HostTensor::random(dtype, &shape, 2))
                .unwrap();
            let w = device
                .tensor_from_host(&HostTensor::random(dtype, &shape[1..], 3))
                .unwrap();
            tally.check(
                &device,
                &format!("rms_norm {dtype} {shape:?}"),
                rms_norm(dtype),
                &[(&x).into(), (&w).into()],
                true,
            );
        }
    }
    tally.finish("reductions");
}

/// Scalar math inside a fusion (`s - 1`) is evaluated on the host before the launch
/// and passed to the kernel (it used to be refused on the GPU).
#[test]
fn scalar_math_inside_a_fusion_runs_on_the_gpu() {
    let Some(device) = gpu() else { return };
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let one = fd.constant(1.0f32);
    let s1 = fd.sub(s, one).unwrap();
    let y = fd.mul(x, s1).unwrap();
    fd.add_output(y).unwrap();
    let exec = FusionExecutorCache::new(fd.finish().unwrap());
    let values = [0.5f32, -1.0, 2.0, 3.25, -0.75, 8.0, 0.0, -6.5];
    let t = device.tensor_from_slice(&values, [2, 4]).unwrap();
    for s in [3.0f32, -0.5] {
        let out = exec
            .run(&device, &[(&t).into(), nvfuser_cuda::Arg::Scalar(s.into())])
            .unwrap();
        let want: Vec<f32> = values.iter().map(|v| v * (s - 1.0)).collect();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want, "s = {s}");
    }
}

/// A tensor of more than 2^31 elements: the executor picks 64-bit indexing and every
/// element is computed (checked against the input on the host, element by element).
#[test]
fn more_than_2_31_elements_use_64_bit_indexing() {
    let Some(device) = gpu() else { return };
    let n = (1usize << 31) + 7;
    let host: Vec<bool> = (0..n).map(|i| i % 3 == 0 || i % 7 == 5).collect();
    let x = device.tensor_from_slice(&host, [n]).unwrap();
    let mut fd = FusionDefinition::new();
    let xv = fd.define_tensor(DataType::Bool, &[-1]).unwrap();
    let y = fd.logical_not(xv).unwrap();
    fd.add_output(y).unwrap();
    let exec = FusionExecutorCache::new(fd.finish().unwrap());
    let args = [Arg::from(&x)];
    let source = exec.cuda_source(&device, &args).unwrap();
    assert!(
        source.contains("nvf_shape<1> T0_shape") && source.contains("long long"),
        "expected a 64-bit index type in the generated kernel"
    );
    let out = exec.run(&device, &args).unwrap();
    let got: Vec<bool> = out[0].to_vec().unwrap();
    assert_eq!(got.len(), n);
    let wrong = got.iter().zip(&host).filter(|(g, h)| **g == **h).count();
    assert_eq!(
        wrong, 0,
        "{wrong} of {n} elements are not the logical_not of the input"
    );
    println!("logical_not over {n} elements (> 2^31) with 64-bit indexing: 0 mismatches");
}
