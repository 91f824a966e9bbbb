//! fp8 (`f8e4m3`, `f8e5m2`) on a GPU against the CPU reference evaluator: every code of
//! both formats round-tripped, random and edge f32 values cast to each format and back,
//! fp8 inputs through pointwise math, and reductions of fp8 inputs in f32. Casts and
//! elementary math (`+ - * /`) must give the reference's bytes exactly (the kernels'
//! conversions are the reference's integer arithmetic); library functions (`exp`,
//! `sin`) may differ by an f32 ulp, which may round to a neighbouring fp8 value; sums by
//! their order.
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_fp8
//! ```

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::fp8::{f8e4m3, f8e5m2};
use nvfuser_core::{DataType, Fusion};
use nvfuser_cuda::testing::{input_args, require_gpu, upload_inputs};
use nvfuser_cuda::{Device, FusionExecutorCache};

/// GPU 0, or `None` (skipped; with `NVFUSER_REQUIRE_GPU=1` the test fails).
fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

fn build(src: &str) -> Fusion {
    nvfuser_core::dsl::build_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
        .remove(0)
        .0
}

fn tensor<T: nvfuser_core::eval::Element>(values: Vec<T>, shape: &[usize]) -> EvalInput {
    EvalInput::Tensor(HostTensor::from_vec(values, shape).unwrap())
}

/// Runs `fusion` on `device` and returns its outputs with the reference's.
fn run(device: &Device, fusion: &Fusion, inputs: &[EvalInput]) -> Vec<(HostTensor, HostTensor)> {
    let want = evaluate(fusion, inputs).unwrap();
    let exec = FusionExecutorCache::new(fusion.clone());
    let tensors = upload_inputs(device, inputs).unwrap();
    let got = exec.run(device, &input_args(inputs, &tensors)).unwrap();
    assert_eq!(got.len(), want.len());
    got.iter()
        .map(|g| g.to_host_tensor().unwrap())
        .zip(want)
        .collect()
}

/// The bytes of an fp8 tensor, or the bits of an f32 one (NaNs as their sign and one
/// canonical pattern: a NaN's payload is not part of the semantics).
fn bits(t: &HostTensor) -> Vec<u32> {
    match t.dtype() {
        DataType::F8E4M3 => t
            .to_vec::<f8e4m3>()
            .unwrap()
            .iter()
            .map(|v| u32::from(v.to_bits()))
            .collect(),
        DataType::F8E5M2 => t
            .to_vec::<f8e5m2>()
            .unwrap()
            .iter()
            .map(|v| u32::from(v.to_bits()))
            .collect(),
        DataType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| {
                if v.is_nan() {
                    (v.to_bits() & 0x8000_0000) | 0x7fc0_0000
                } else {
                    v.to_bits()
                }
            })
            .collect(),
        d => panic!("no bit view of {d}"),
    }
}

/// Every output equal to the reference's bit for bit.
fn assert_bit_exact(outs: &[(HostTensor, HostTensor)], what: &str) {
    for (i, (got, want)) in outs.iter().enumerate() {
        assert_eq!(got.dtype(), want.dtype(), "{what}: output {i}");
        let (g, w) = (bits(got), bits(want));
        if let Some(k) = (0..w.len()).find(|&k| g[k] != w[k]) {
            panic!(
                "{what}: output {i} ({}) element {k}: got {:#x}, want {:#x} ({} of {} differ)",
                want.dtype(),
                g[k],
                w[k],
                g.iter().zip(&w).filter(|(a, b)| a != b).count(),
                w.len()
            );
        }
    }
}

/// f32 values: every edge of both formats (maxima, overflow ties, subnormal ties, signed
/// zeros, infinities, NaN) and their f32 neighbours, then random bit patterns of
/// magnitudes from 2^-20 to 2^17 with both signs.
fn f32_values(n_random: usize) -> Vec<f32> {
    let mut v = Vec::new();
    let edges = [
        0.0f32,
        1.0,
        0.1,
        448.0,
        449.0,
        464.0,
        480.0,
        57344.0,
        61440.0,
        65536.0,
        1.0625,
        1.1875,
        1.125,
        1.375,
        0.015625,
        2f32.powi(-14),
    ];
    for e in edges {
        for x in [e, e * 2f32.powi(-9), e * 2f32.powi(-16)] {
            for b in [x.to_bits().wrapping_sub(1), x.to_bits(), x.to_bits() + 1] {
                let y = f32::from_bits(b);
                v.extend([y, -y]);
            }
        }
    }
    v.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MAX,
        1e-45,
    ]);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..n_random {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let exp = 107 + (state >> 40) as u32 % 37;
        let sign = ((state >> 39) as u32 & 1) << 31;
        v.push(f32::from_bits(
            sign | (exp << 23) | (state as u32 & 0x007f_ffff),
        ));
    }
    v
}

fn all_codes_round_trip(device: &Device) {
    let f = build(
        "fn f(a: Tensor<f8e4m3, [N]>, b: Tensor<f8e5m2, [N]>) -> (Tensor<f32, [N]>, Tensor<f8e4m3, [N]>, Tensor<f32, [N]>, Tensor<f8e5m2, [N]>) {\n    let x = a as f32;\n    let y = b as f32;\n    (x, x as f8e4m3, y, y as f8e5m2)\n}\n",
    );
    let a: Vec<f8e4m3> = (0..=255u8).map(f8e4m3::from_bits).collect();
    let b: Vec<f8e5m2> = (0..=255u8).map(f8e5m2::from_bits).collect();
    // The device gets the 256 bytes themselves (e5m2's NaN payloads 0x7d and 0x7e
    // included, which a HostTensor, holding values, would canonicalize).
    let (ta, tb) = (
        device.tensor_from_slice(&a, [256]).unwrap(),
        device.tensor_from_slice(&b, [256]).unwrap(),
    );
    let want = evaluate(&f, &[tensor(a, &[256]), tensor(b, &[256])]).unwrap();
    let got = FusionExecutorCache::new(f.clone())
        .run(device, &[(&ta).into(), (&tb).into()])
        .unwrap();
    let outs: Vec<(HostTensor, HostTensor)> = got
        .iter()
        .map(|g| g.to_host_tensor().unwrap())
        .zip(want)
        .collect();
    assert_bit_exact(&outs, &format!("256 codes on {device}"));
    let e5: Vec<u8> = got[3]
        .to_vec::<f8e5m2>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    for (c, &v) in e5.iter().enumerate() {
        let nan = (c & 0x7f) > 0x7c;
        let want = if nan {
            (c as u8 & 0x80) | 0x7f
        } else {
            c as u8
        };
        assert_eq!(v, want, "e5m2 code {c:#04x} on {device}");
    }
    // The identity but for e5m2's NaN payloads.
    let e4 = bits(&outs[1].0);
    assert!(e4.iter().enumerate().all(|(c, &v)| v == c as u32), "{e4:?}");
}

#[test]
fn all_codes_round_trip_on_the_cpu_device() {
    all_codes_round_trip(&Device::cpu());
}

#[test]
fn all_codes_round_trip_on_the_gpu() {
    let Some(device) = gpu() else { return };
    all_codes_round_trip(&device);
}

#[test]
fn f32_values_cast_to_fp8_and_back_bit_exact() {
    let Some(device) = gpu() else { return };
    let f = build(
        "fn f(x: Tensor<f32, [N]>, d: Tensor<f64, [N]>, i: Tensor<i64, [N]>) -> (Tensor<f8e4m3, [N]>, Tensor<f32, [N]>, Tensor<f8e5m2, [N]>, Tensor<f32, [N]>, Tensor<f8e4m3, [N]>, Tensor<f8e5m2, [N]>) {\n    let a = x as f8e4m3;\n    let b = x as f8e5m2;\n    (a, a as f32, b, b as f32, d as f8e4m3, i as f8e5m2)\n}\n",
    );
    for n in [1000usize, 65_536] {
        let xs = f32_values(n);
        let len = xs.len();
        // f64 values between f32 neighbours (PyTorch rounds them to f32 first), and
        // integers near the e5m2 overflow.
        let ds: Vec<f64> = xs
            .iter()
            .map(|&x| f64::from(x) * (1.0 + 2f64.powi(-30)))
            .collect();
        let is: Vec<i64> = (0..len as i64).map(|k| 57_000 + 7 * k).collect();
        let outs = run(
            &device,
            &f,
            &[tensor(xs, &[len]), tensor(ds, &[len]), tensor(is, &[len])],
        );
        assert_bit_exact(&outs, &format!("{len} f32 values"));
    }
}

#[test]
fn fp8_inputs_through_pointwise_math() {
    let Some(device) = gpu() else { return };
    let exact = build(
        "fn f(x: Tensor<f8e4m3, [N, H]>, y: Tensor<f8e4m3, [N, H]>, s: f32, u: Tensor<f8e5m2, [H]>) -> (Tensor<f8e4m3, [N, H]>, Tensor<f8e4m3, [N, H]>, Tensor<f8e5m2, [N, H]>, Tensor<bool, [N, H]>) {\n    let p = x * y + 1;\n    let q = (x - y) / (y * s);\n    let r = (x as f32) as f8e5m2 * u - 0.5f8e5m2;\n    (p, q, r, x < y)\n}\n",
    );
    let library = build(
        "fn f(x: Tensor<f8e4m3, [N, H]>, u: Tensor<f8e5m2, [H]>) -> (Tensor<f8e4m3, [N, H]>, Tensor<f8e5m2, [H]>) {\n    (x.exp(), (u as f32).sin() as f8e5m2 + u)\n}\n",
    );
    // 16-wide vectors, and odd sizes that keep them out.
    for shape in [[64usize, 4096], [7, 1001]] {
        let x = HostTensor::random(DataType::F8E4M3, &shape, 1);
        let y = HostTensor::random(DataType::F8E4M3, &shape, 2);
        let u = HostTensor::random(DataType::F8E5M2, &shape[1..], 3);
        let outs = run(
            &device,
            &exact,
            &[
                EvalInput::Tensor(x.clone()),
                EvalInput::Tensor(y),
                EvalInput::Scalar(0.75f32.into()),
                EvalInput::Tensor(u.clone()),
            ],
        );
        // `(x < y)`: bools are exact; the rest bit for bit.
        assert_bit_exact(&outs[..3], &format!("exact math {shape:?}"));
        compare(&outs[3].0, &outs[3].1, Tolerance::exact()).unwrap();
        let outs = run(
            &device,
            &library,
            &[EvalInput::Tensor(x), EvalInput::Tensor(u)],
        );
        for (i, (got, want)) in outs.iter().enumerate() {
            compare(got, want, Tolerance::for_dtype(want.dtype()))
                .unwrap_or_else(|m| panic!("library math {shape:?} output {i}: {m}"));
        }
    }
}

#[test]
fn reductions_of_fp8_inputs_in_f32() {
    let Some(device) = gpu() else { return };
    let f = build(
        "fn f(x: Tensor<f8e4m3, [N, H]>, y: Tensor<f8e5m2, [N, H]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>, Tensor<f8e4m3, [N]>, Tensor<f8e5m2, [N]>, Tensor<f8e4m3, [H]>) {\n    let xf = x as f32;\n    (xf.sum([1]), (y as f32).mean([1]), x.max([1]), y.min([1]), x.sum([0]))\n}\n",
    );
    for shape in [[128usize, 1024], [4, 100_000], [1000, 3]] {
        let x = HostTensor::random(DataType::F8E4M3, &shape, 11);
        let y = HostTensor::random(DataType::F8E5M2, &shape, 12);
        let outs = run(&device, &f, &[EvalInput::Tensor(x), EvalInput::Tensor(y)]);
        // max/min select an element: exact.
        assert_bit_exact(&outs[2..4], &format!("max/min {shape:?}"));
        for (i, (got, want)) in outs.iter().enumerate() {
            let tol = match want.dtype() {
                DataType::F32 => Tolerance::new(1e-4, 1e-4),
                d => Tolerance::for_dtype(d),
            };
            compare(got, want, tol)
                .unwrap_or_else(|m| panic!("reduction {shape:?} output {i}: {m}"));
        }
    }
}
