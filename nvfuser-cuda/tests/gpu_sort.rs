//! Sorts (`sort`, `argsort`, `topk`) through the sort scheduler on a GPU, compared with
//! the CPU reference **exactly** (indices equal, values bit for bit but for NaN
//! payloads) over a sweep of row lengths (1 to 70000: odd sizes, powers of two and
//! their neighbours), one row and many, both directions, `k` of 1, 8 and 64, the sorted
//! dim innermost and outermost, every dtype family, inputs with ties (small integers),
//! NaNs, infinities and signed zeros, and a topk with math before and after it (three
//! segments), and the radix-select topk of long rows (an LLM vocabulary of 128256, rows
//! of 200000). Rows too long for a block's shared memory (full sorts) must be refused
//! with the typed reason, never computed wrong. Prints how many outputs it compared and how many calls
//! were refused; fails on the first mismatch. `sort_plans` checks the plans without a
//! GPU.

mod sort_fusions;

use half::{bf16, f16};
use nvfuser_core::eval::{evaluate, EvalInput, HostData, HostTensor};
use nvfuser_core::prelude::*;
use nvfuser_cuda::testing::{input_args, require_gpu, upload_inputs};
use nvfuser_cuda::{Device, FusionExecutorCache};
use sort_fusions::*;

/// Values with ties, NaNs, infinities and signed zeros (mostly small integers, some
/// halves), as f64.
fn value(i: usize, seed: u64) -> f64 {
    let h = (i as u64 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(23);
    match h % 41 {
        0 => f64::NAN,
        1 => -0.0,
        2 => 0.0,
        3 => f64::INFINITY,
        4 => f64::NEG_INFINITY,
        r if r < 20 => (r as f64 - 12.0) * 0.5,
        _ => ((h >> 8) % 2001) as f64 / 8.0 - 125.0,
    }
}

fn input(dtype: DataType, shape: &[usize], seed: u64) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| value(i, seed)).collect();
    let int = |x: f64| if x.is_finite() { (x * 4.0) as i64 } else { -7 };
    match dtype {
        DataType::F32 => {
            let x: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            HostTensor::from_vec(x, shape).unwrap()
        }
        DataType::F64 => HostTensor::from_vec(v, shape).unwrap(),
        DataType::F16 => {
            let x: Vec<f16> = v.iter().map(|&x| f16::from_f64(x)).collect();
            HostTensor::from_vec(x, shape).unwrap()
        }
        DataType::BF16 => {
            let x: Vec<bf16> = v.iter().map(|&x| bf16::from_f64(x)).collect();
            HostTensor::from_vec(x, shape).unwrap()
        }
        DataType::I32 => {
            let x: Vec<i32> = v.iter().map(|&x| int(x) as i32).collect();
            HostTensor::from_vec(x, shape).unwrap()
        }
        DataType::I64 => {
            let x: Vec<i64> = v.iter().map(|&x| int(x) * 1_000_000_007).collect();
            HostTensor::from_vec(x, shape).unwrap()
        }
        DataType::Bool => {
            let x: Vec<bool> = v.iter().map(|&x| int(x) % 3 == 0).collect();
            HostTensor::from_vec(x, shape).unwrap()
        }
        other => panic!("no inputs of {other}"),
    }
}

/// Exact equality: same shape and dtype, integers and bools equal, floats with equal
/// bits or both NaN.
fn exact(got: &HostTensor, want: &HostTensor) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{} {:?}, expected {} {:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let first_bad = match (got.data(), want.data()) {
        (HostData::Float(g), HostData::Float(w)) => g
            .iter()
            .zip(w.iter())
            .position(|(a, b)| !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())))
            .map(|p| {
                format!(
                    "element {p}: {} expected {}",
                    g.iter().nth(p).unwrap(),
                    w.iter().nth(p).unwrap()
                )
            }),
        (HostData::Int(g), HostData::Int(w)) => {
            g.iter().zip(w.iter()).position(|(a, b)| a != b).map(|p| {
                format!(
                    "element {p}: {} expected {}",
                    g.iter().nth(p).unwrap(),
                    w.iter().nth(p).unwrap()
                )
            })
        }
        (HostData::Bool(g), HostData::Bool(w)) => g
            .iter()
            .zip(w.iter())
            .position(|(a, b)| a != b)
            .map(|p| format!("element {p} differs")),
        _ => Some("storage kinds differ".into()),
    };
    first_bad.map_or(Ok(()), Err)
}

#[derive(Default)]
struct Counts {
    outputs: usize,
    refused: usize,
}

/// Runs `fusion` on `device` and compares every output with the reference exactly; a
/// refusal counts only when it is the typed "too long for shared memory" one.
fn check(
    device: &Device,
    fusion: Fusion,
    dtype: DataType,
    shape: &[usize],
    seed: u64,
    c: &mut Counts,
) {
    let what = format!("{dtype} {shape:?} seed {seed}");
    let exec = FusionExecutorCache::new(fusion);
    let inputs = vec![EvalInput::Tensor(input(dtype, shape, seed))];
    let want =
        evaluate(exec.fusion(), &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let tensors = upload_inputs(device, &inputs).unwrap();
    let args = input_args(&inputs, &tensors);
    let got = match exec.run(device, &args) {
        Ok(got) => got,
        Err(e) if e.to_string().contains("shared memory per block") => {
            c.refused += 1;
            return;
        }
        Err(e) => panic!("{what}: run: {e}\n{}", exec.fusion()),
    };
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = g
            .to_host_tensor()
            .unwrap_or_else(|e| panic!("{what}: download: {e}"));
        if let Err(m) = exact(&g, w) {
            panic!(
                "{what}: output {k} differs from the reference: {m}\n{}",
                exec.fusion()
            );
        }
        c.outputs += 1;
    }
}

const LENGTHS: [usize; 24] = [
    1, 2, 3, 5, 31, 32, 33, 100, 255, 256, 257, 1000, 1023, 1024, 1025, 4096, 4097, 10000, 16384,
    32767, 32768, 40000, 65536, 70000,
];

/// Rows for a row length: a few million elements at most, one row at times.
fn rows_for(n: usize, k: usize) -> usize {
    if k.is_multiple_of(3) {
        1
    } else {
        ((1 << 21) / n).clamp(1, 257)
    }
}

#[test]
fn sorts_match_the_reference_exactly_over_a_sweep() {
    let Some(_) = require_gpu() else { return };
    let device = Device::cuda(0).unwrap();
    let mut c = Counts::default();
    for (i, &n) in LENGTHS.iter().enumerate() {
        let r = rows_for(n, i);
        let s = i as u64;
        let f = DataType::F32;
        check(&device, sort(f, 2, -1, false), f, &[r, n], s, &mut c);
        check(&device, sort(f, 2, -1, true), f, &[r, n], s + 1, &mut c);
        check(&device, argsort(f, 2, -1, true), f, &[r, n], s + 2, &mut c);
        for k in [1, 8, 64] {
            if k <= n {
                check(
                    &device,
                    topk(f, 2, -1, k as i64, true),
                    f,
                    &[r, n],
                    s + 3,
                    &mut c,
                );
                check(
                    &device,
                    topk(f, 2, -1, k as i64, false),
                    f,
                    &[r, n],
                    s + 4,
                    &mut c,
                );
            }
        }
        // The sorted dim outermost (strided rows).
        if n <= 4097 {
            check(
                &device,
                sort(f, 2, 0, false),
                f,
                &[n, r.min(33)],
                s + 5,
                &mut c,
            );
            check(
                &device,
                topk(f, 2, 0, 1, true),
                f,
                &[n, r.min(33)],
                s + 6,
                &mut c,
            );
        }
        for dtype in [
            DataType::BF16,
            DataType::F16,
            DataType::F64,
            DataType::I32,
            DataType::I64,
            DataType::Bool,
        ] {
            check(
                &device,
                sort(dtype, 2, -1, i % 2 == 0),
                dtype,
                &[r.min(17), n],
                s + 7,
                &mut c,
            );
            if n >= 8 {
                check(
                    &device,
                    topk(dtype, 2, -1, 8, i % 2 == 1),
                    dtype,
                    &[r.min(17), n],
                    s + 8,
                    &mut c,
                );
            }
        }
        check(
            &device,
            sort(DataType::F32, 3, 1, true),
            DataType::F32,
            &[2, n, 3],
            s + 9,
            &mut c,
        );
    }
    eprintln!(
        "gpu_sort: {} outputs equal to the reference, {} calls refused (rows too long for shared memory)",
        c.outputs, c.refused
    );
    assert!(c.outputs > 500, "only {} outputs compared", c.outputs);
}

#[test]
fn topk_of_long_rows_selects_by_radix_and_matches_the_reference() {
    let Some(_) = require_gpu() else { return };
    let device = Device::cuda(0).unwrap();
    let mut c = Counts::default();
    let f = DataType::F32;
    check(
        &device,
        topk(f, 2, -1, 50, true),
        f,
        &[64, 128256],
        21,
        &mut c,
    );
    check(
        &device,
        topk(f, 2, -1, 8, false),
        f,
        &[3, 200_000],
        22,
        &mut c,
    );
    check(
        &device,
        topk(f, 2, -1, 1024, true),
        f,
        &[5, 4097],
        23,
        &mut c,
    );
    check(
        &device,
        topk(DataType::BF16, 2, -1, 64, true),
        DataType::BF16,
        &[33, 50000],
        24,
        &mut c,
    );
    check(
        &device,
        topk(DataType::I64, 2, -1, 3, true),
        DataType::I64,
        &[7, 70000],
        25,
        &mut c,
    );
    check(
        &device,
        topk(DataType::Bool, 2, -1, 100, false),
        DataType::Bool,
        &[4, 9999],
        26,
        &mut c,
    );
    check(
        &device,
        topk(DataType::F64, 2, 0, 16, true),
        DataType::F64,
        &[70000, 3],
        27,
        &mut c,
    );
    eprintln!(
        "gpu_sort: {} outputs of radix-select topk equal to the reference, {} refused",
        c.outputs, c.refused
    );
    assert_eq!((c.outputs, c.refused), (14, 0));
}

#[test]
fn topk_with_math_around_it_matches_the_reference() {
    let Some(_) = require_gpu() else { return };
    let device = Device::cuda(0).unwrap();
    let mut c = Counts::default();
    for (k, shape) in [(5, vec![64, 1000]), (1, vec![3, 7]), (64, vec![100, 32768])] {
        check(
            &device,
            topk_with_math(2, k),
            DataType::F32,
            &shape,
            11,
            &mut c,
        );
    }
    eprintln!(
        "gpu_sort: {} outputs of topk with math around it equal to the reference",
        c.outputs
    );
    assert_eq!(c.outputs, 6);
}

#[test]
fn k_above_the_size_is_refused_on_the_gpu() {
    let Some(_) = require_gpu() else { return };
    let device = Device::cuda(0).unwrap();
    let exec = FusionExecutorCache::new(topk(DataType::F32, 2, -1, 8, true));
    let inputs = vec![EvalInput::Tensor(input(DataType::F32, &[4, 5], 1))];
    let tensors = upload_inputs(&device, &inputs).unwrap();
    let e = exec
        .run(&device, &input_args(&inputs, &tensors))
        .unwrap_err()
        .to_string();
    assert!(e.contains("be at least 8"), "{e}");
}
