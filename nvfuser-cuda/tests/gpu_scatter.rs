//! `scatter` / `scatter_add` on the GPU against the CPU reference: every fusion of
//! `scatter_cases` over its sweep of sizes (odd sizes, size-1 dims, index axes longer
//! than the target axis so that duplicate targets are common, indices drawn at random),
//! values compared exactly for copies and integer adds and within the usual float
//! tolerance where the fusion also computes `exp`; bad index values (too large,
//! negative) reported as `Error::DeviceAssert`. Prints how many outputs it compared and
//! fails on the first mismatch. Needs a GPU (`--features gpu-tests`).

mod common;
mod scatter_cases;

use common::{gpu, indices, rnd, tolerance};
use nvfuser_core::eval::{EvalInput, Tolerance};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::run_and_compare;
use nvfuser_cuda::{Arg, Error, FusionExecutorCache};
use scatter_cases::CASES;

fn exact_or_usual(dtype: DataType) -> Tolerance {
    match dtype {
        DataType::I32 | DataType::I64 | DataType::Bool => Tolerance::for_dtype(dtype),
        other => tolerance(other),
    }
}

fn build(src: &str) -> nvfuser_core::Fusion {
    nvfuser_core::dsl::build_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
        .remove(0)
        .0
}

#[test]
fn scatters_match_the_reference_over_a_shape_sweep() {
    let Some(dev) = gpu() else { return };
    let mut compared = 0usize;
    let mut failures = Vec::new();
    for (ci, c) in CASES.iter().enumerate() {
        let fusion = build(c.src);
        let exec = FusionExecutorCache::new(fusion.clone());
        let tensor_inputs: Vec<_> = fusion
            .inputs()
            .iter()
            .copied()
            .filter(|&v| fusion.val(v).is_tensor())
            .collect();
        for (k, sizes) in c.calls.iter().enumerate() {
            let bound = sizes[0][c.axis];
            // Twice per size: a narrow index range (many duplicates), then the full one.
            for (r, b) in [(0u64, bound.div_ceil(3).max(1)), (1, bound)] {
                let inputs: Vec<EvalInput> = tensor_inputs
                    .iter()
                    .zip(sizes.iter())
                    .enumerate()
                    .map(|(j, (&v, shape))| {
                        let seed = (ci * 1000 + k * 10 + r as usize * 3 + j) as u64;
                        let dt = fusion.val(v).dtype;
                        if j == c.index_input {
                            indices(dt, shape, b, seed)
                        } else {
                            rnd(dt, shape, seed)
                        }
                    })
                    .collect();
                match run_and_compare(&dev, &exec, &inputs, None, &exact_or_usual) {
                    Ok(n) => compared += n,
                    Err(e) => failures.push(format!("{} at {sizes:?} (bound {b}): {e}", c.name)),
                }
            }
        }
    }
    eprintln!("gpu_scatter: compared {compared} outputs with the CPU reference");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared > 0, "nothing compared");
}

/// `scatter(x, 0, index, src)` of f32 `[4, 6]` with an index `[2, 3]`.
fn bad_index_case(add: bool, bad: i64) -> Result<Vec<f32>, Error> {
    let dev = gpu().expect("checked by the caller");
    let op = if add { "scatter_add" } else { "scatter" };
    let exec = FusionExecutorCache::new(build(&format!(
        "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [M, K]>, s: Tensor<f32, [M, K]>) -> Tensor<f32, [N, H]> {{
            x.{op}(0, i, s)
        }}"
    )));
    let x = dev.tensor_from_slice(&[1.0f32; 24], [4, 6]).unwrap();
    let i = dev
        .tensor_from_slice(&[0i64, 1, 2, 3, bad, 1], [2, 3])
        .unwrap();
    let s = dev.tensor_from_slice(&[2.0f32; 6], [2, 3]).unwrap();
    let out = exec.run(&dev, &[Arg::from(&x), Arg::from(&i), Arg::from(&s)])?;
    out[0].to_vec::<f32>()
}

#[test]
fn bad_indices_are_device_asserts_and_the_device_stays_usable() {
    if gpu().is_none() {
        return;
    }
    for add in [false, true] {
        for bad in [4i64, 1000, -1] {
            match bad_index_case(add, bad) {
                Err(Error::DeviceAssert {
                    op, value, bound, ..
                }) => {
                    let want = if add { "scatter_add" } else { "scatter" };
                    assert_eq!((op.as_str(), value, bound), (want, bad, 4));
                }
                other => panic!("expected a device assert for index {bad}, got {other:?}"),
            }
        }
        // The error was cleared: a good call runs.
        let good = bad_index_case(add, 3).expect("a good index after the assert");
        assert_eq!(good.len(), 24);
    }
    eprintln!("gpu_scatter: 6 bad-index calls reported as DeviceAssert");
}

/// `pad` with widths given by a scalar input and by scalar math on a size, fused with
/// its producer and consumer (the kernel of `scatter_plans::PAD_SCALAR`), over odd and
/// even sizes and widths 0 to 5; a negative width is a typed error before any launch.
#[test]
fn pads_with_scalar_widths_match_the_reference() {
    let Some(dev) = gpu() else { return };
    let src = "fn f(x: Tensor<f32, [N, H]>, a: i64) -> Tensor<f32, [_, _]> {
        (x * 2.0).pad([(a, 1), (0, x.size(0) % 2)], 0.5).exp()
    }";
    let exec = FusionExecutorCache::new(build(src));
    let mut compared = 0;
    let mut failures = Vec::new();
    for (k, (n, h)) in [(7usize, 33usize), (8, 64), (1, 1), (300, 517), (64, 4096)]
        .into_iter()
        .enumerate()
    {
        for a in [0i64, 1, 2, 5] {
            let inputs = vec![rnd(DataType::F32, &[n, h], k as u64), common::int(a)];
            match run_and_compare(&dev, &exec, &inputs, None, &exact_or_usual) {
                Ok(c) => compared += c,
                Err(e) => failures.push(format!("[{n}, {h}] a = {a}: {e}")),
            }
        }
    }
    let x = dev.tensor_from_slice(&[1.0f32; 6], [2, 3]).unwrap();
    match exec.run(
        &dev,
        &[
            Arg::from(&x),
            Arg::Scalar(nvfuser_core::ScalarValue::Int(-1)),
        ],
    ) {
        Err(e) => assert!(e.to_string().contains("pad"), "{e}"),
        Ok(_) => failures.push("a negative width ran".into()),
    }
    eprintln!("gpu_scatter: compared {compared} pad outputs with the CPU reference");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared > 0, "nothing compared");
}

/// A scatter into an empty dim with a non-empty index: refused by the read checks
/// before any launch, as on the CPU device.
#[test]
fn scatter_into_an_empty_dim_is_a_typed_error() {
    let Some(dev) = gpu() else { return };
    let exec = FusionExecutorCache::new(build(CASES[0].src));
    let x = dev.tensor_from_slice::<f32>(&[], [0, 3]).unwrap();
    let i = dev.tensor_from_slice(&[0i64; 6], [2, 3]).unwrap();
    let s = dev.tensor_from_slice(&[1.0f32; 6], [2, 3]).unwrap();
    let r = exec
        .run(&dev, &[Arg::from(&x), Arg::from(&i), Arg::from(&s)])
        .and_then(|o| o[0].to_vec::<f32>());
    match r {
        Err(e) => assert!(e.to_string().contains("scatter"), "{e}"),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}
