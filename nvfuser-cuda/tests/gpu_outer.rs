//! Column reductions with vectors of columns per thread (the outer reduction scheduler's
//! `vectorize`): sums, means, maxima, minima and products over the leading dims of rank-2
//! and rank-3 tensors in bf16, f16 and f32, at shapes whose innermost dim divides the
//! vector and at shapes where it does not (one column per thread), with and without a
//! grid split, against the CPU reference on random inputs. Also a column sum beside a
//! full output stored with vectors, and activation backwards with their bias gradients
//! (`bias_grad_cases`: full outputs computed in the sum's loops). Skipped without a
//! GPU, required with `NVFUSER_REQUIRE_GPU=1`.
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_outer -- --nocapture
//! ```

use nvfuser_core::eval::{EvalInput, HostTensor};
use nvfuser_core::scheduler::HeuristicParams;
use nvfuser_core::DataType;
use nvfuser_cuda::testing::{
    gpu_device, input_args, reduction_tolerance, run_and_compare, upload_inputs,
};
use nvfuser_cuda::{Arg, FusionExecutorCache};

/// `(source, shapes)`: the reduction of each fusion, over its leading dims.
fn cases() -> Vec<(String, Vec<Vec<usize>>)> {
    let mut out = Vec::new();
    let shapes2: &[[usize; 2]] = &[
        [1, 8],
        [7, 64],
        [1000, 1024],
        [65536, 512],
        [3, 4100],
        [513, 24],
    ];
    for (dt, out_dt) in [("bf16", "bf16"), ("f16", "f32"), ("f32", "f32")] {
        for red in ["sum([0])", "mean([0])", "max([0])", "min([0])"] {
            let src = format!(
                "fn k(x: Tensor<{dt}, [_, _]>) -> Tensor<{out_dt}, [_]> {{ ((x as f32).{red}) as {out_dt} }}"
            );
            for s in shapes2 {
                out.push((src.clone(), vec![s.to_vec()]));
            }
        }
    }
    // A product (values near 1 keep it finite), rank 3 with two kept dims, two reduced
    // dims, and a column sum beside a full output (GELU backward's shape of fusion).
    out.push((
        "fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { (x * 0.01 + 1.0).prod([0]) }".into(),
        vec![vec![300, 256]],
    ));
    out.push((
        "fn k(x: Tensor<bf16, [_, _, _]>) -> Tensor<f32, [_, _]> { (x as f32).sum([0]) }".into(),
        vec![vec![4097, 3, 64]],
    ));
    out.push((
        "fn k(x: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_]> { x.sum([0, 1]) }".into(),
        vec![vec![64, 33, 128]],
    ));
    out.push((
        "fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>) -> (Tensor<bf16, [_, _]>, Tensor<f32, [_]>) {
            let g = (dy as f32) * (x as f32).tanh();
            (g as bf16, g.sum([0]))
        }"
        .into(),
        vec![vec![20000, 1024], vec![20000, 1024]],
    ));
    out
}

#[test]
fn vectorized_column_reductions_match_the_cpu_reference() {
    let Some(device) = gpu_device() else { return };
    let (mut compared, mut vectorized) = (0, 0);
    let mut mismatches = Vec::new();
    for (i, (src, shapes)) in cases().into_iter().enumerate() {
        let fusion = nvfuser_core::dsl::build_str(&src)
            .unwrap_or_else(|e| panic!("{src}: {e:?}"))
            .remove(0)
            .0;
        let dtypes: Vec<DataType> = fusion
            .inputs()
            .iter()
            .map(|&v| fusion.val(v).dtype)
            .collect();
        let exec = FusionExecutorCache::new(fusion);
        let inputs: Vec<EvalInput> = shapes
            .iter()
            .zip(&dtypes)
            .enumerate()
            .map(|(k, (s, &d))| EvalInput::Tensor(HostTensor::random(d, s, (i * 7 + k) as u64)))
            .collect();
        let tensors = upload_inputs(&device, &inputs).unwrap();
        let args: Vec<Arg<'_>> = input_args(&inputs, &tensors);
        if let Ok(HeuristicParams::OuterReduction(p)) = exec.heuristics(&device, &args) {
            vectorized += usize::from(p.vectorize > 1);
        }
        match run_and_compare(&device, &exec, &inputs, None, &reduction_tolerance) {
            Ok(n) => compared += n,
            Err(m) => mismatches.push(format!("{src} at {shapes:?}: {m}")),
        }
    }
    println!(
        "column reductions: {compared} outputs compared, {vectorized} cases with vectors of columns, {} mismatches",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(vectorized >= 20, "only {vectorized} cases ran with vectors");
}

mod bias_grad_cases;

/// Activation backwards with their bias gradients (`bias_grad_cases`: GELU, SiLU,
/// dropout; several full outputs and sums; bf16, f16, f32; widths with 16-byte
/// vectors, narrower ones and odd ones; rank 3; a broadcast bias; a Welford statistic
/// beside a full output): the full outputs computed in the column sum's loops from the
/// values it accumulates, against the CPU reference on random inputs.
#[test]
fn full_outputs_beside_column_sums_match_the_cpu_reference() {
    let Some(device) = gpu_device() else { return };
    let (mut compared, mut vectorized) = (0, 0);
    let mut mismatches = Vec::new();
    for (i, case) in bias_grad_cases::cases().into_iter().enumerate() {
        let fusion = nvfuser_core::dsl::build_str(&case.src)
            .unwrap_or_else(|e| panic!("{}: {e:?}", case.name))
            .remove(0)
            .0;
        let exec = FusionExecutorCache::new(fusion);
        let inputs: Vec<EvalInput> = case
            .shapes
            .iter()
            .enumerate()
            .map(|(k, (d, s))| {
                EvalInput::Tensor(HostTensor::random(*d, s, (1000 + i * 7 + k) as u64))
            })
            .collect();
        let tensors = upload_inputs(&device, &inputs).unwrap();
        let args: Vec<Arg<'_>> = input_args(&inputs, &tensors);
        if let Ok(HeuristicParams::OuterReduction(p)) = exec.heuristics(&device, &args) {
            vectorized += usize::from(p.vectorize > 1);
        }
        match run_and_compare(&device, &exec, &inputs, None, &reduction_tolerance) {
            Ok(n) => compared += n,
            Err(m) => mismatches.push(format!("{} at {:?}: {m}", case.name, case.shapes)),
        }
    }
    println!(
        "full outputs beside column sums: {compared} outputs compared, {vectorized} cases with vectors of columns, {} mismatches",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(vectorized >= 6, "only {vectorized} cases ran with vectors");
}
