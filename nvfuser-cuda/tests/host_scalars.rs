//! Fusions whose tensors use scalars computed inside them (from `size` and scalar
//! inputs): the executor evaluates them on the host (the host scalar program, with the
//! CPU reference's semantics) and passes them to the kernel as scalar arguments.
//! Without a GPU: every case generates a kernel (through `generate_for`) that NVRTC
//! compiles, except those whose output is a view of an input (no kernel). On a GPU:
//! every case against the CPU reference.
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test host_scalars
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test host_scalars
//! ```

use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo, TensorInfo};
use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue};
use nvfuser_cuda::testing::{require_gpu, require_nvrtc, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

fn tensor(shape: &[usize]) -> EvalInput {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * 0.25 - 2.0).collect();
    EvalInput::Tensor(HostTensor::from_vec(data, shape).unwrap())
}

fn int(v: i64) -> EvalInput {
    EvalInput::Scalar(ScalarValue::Int(v))
}

fn float(v: f64) -> EvalInput {
    EvalInput::Scalar(ScalarValue::Float(v))
}

/// `full([2, 2], s0 + s1)`.
fn full_of_sum() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let a = fd.define_scalar(DataType::F32).unwrap();
    let b = fd.define_scalar(DataType::F32).unwrap();
    let s = fd.add(a, b).unwrap();
    let t = fd.full(&[2.into(), 2.into()], s, DataType::F32).unwrap();
    fd.add_output(t).unwrap();
    let inputs = vec![vec![float(1.25), float(2.5)], vec![float(-3.0), float(0.5)]];
    (fd.finish().unwrap(), inputs)
}

/// `full([a + b], 1.0)`: the length is computed, so it selects the runtime.
fn full_of_computed_length() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let a = fd.define_scalar(DataType::I64).unwrap();
    let b = fd.define_scalar(DataType::I64).unwrap();
    let n = fd.add(a, b).unwrap();
    let one = fd.constant(1.0f64);
    let t = fd.full(&[Size::Val(n)], one, DataType::F32).unwrap();
    fd.add_output(t).unwrap();
    let inputs = vec![
        vec![int(2), int(3)],
        vec![int(100), int(29)],
        vec![int(1), int(1)],
    ];
    (fd.finish().unwrap(), inputs)
}

/// `reshape(x, [x.size(0), a, b])`: a view of `x` (no kernel).
fn reshape_to_size_and_scalars() -> (Fusion, Vec<Vec<EvalInput>>) {
    reshape_case(false)
}

/// `reshape(x, [x.size(0), a, b]) * 2`: the reshape in a kernel.
fn reshape_to_size_and_scalars_scaled() -> (Fusion, Vec<Vec<EvalInput>>) {
    reshape_case(true)
}

/// `slice(x, [:, 0:x.size(1) - 1])`: a view of `x` (no kernel).
fn slice_to_size_minus_one() -> (Fusion, Vec<Vec<EvalInput>>) {
    slice_case(false)
}

/// `slice(x, [:, 0:x.size(1) - 1]) * 2`: the slice in a kernel.
fn slice_to_size_minus_one_scaled() -> (Fusion, Vec<Vec<EvalInput>>) {
    slice_case(true)
}

/// `y * 2` when `scaled`, else `y`.
fn scaled_output(fd: &mut FusionDefinition, y: nvfuser_core::ValId, scaled: bool) {
    let y = if scaled {
        let two = fd.constant(2.0f64);
        fd.mul(y, two).unwrap()
    } else {
        y
    };
    fd.add_output(y).unwrap();
}

fn reshape_case(scaled: bool) -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.define_scalar(DataType::I64).unwrap();
    let b = fd.define_scalar(DataType::I64).unwrap();
    let n0 = fd.size(x, 0).unwrap();
    let y = fd
        .reshape(x, &[Size::Val(n0), Size::Val(a), Size::Val(b)])
        .unwrap();
    scaled_output(&mut fd, y, scaled);
    let inputs = vec![
        vec![tensor(&[3, 8]), int(2), int(4)],
        vec![tensor(&[5, 6]), int(3), int(2)],
    ];
    (fd.finish().unwrap(), inputs)
}

/// `x[:, 0 : x.size(1) - 1]`.
fn slice_case(scaled: bool) -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let one = fd.constant(1i64);
    let end = fd.sub(n1, one).unwrap();
    let y = fd
        .slice(x, &[Slice::all(), Slice::range(0, Size::Val(end))])
        .unwrap();
    scaled_output(&mut fd, y, scaled);
    let inputs = vec![vec![tensor(&[3, 5])], vec![tensor(&[4, 130])]];
    (fd.finish().unwrap(), inputs)
}

/// `x + bf16(s)` and `x * f32(x.size(1) + 1)`.
fn casts_of_scalars() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F64).unwrap();
    let c = fd.cast(s, DataType::BF16).unwrap();
    let y = fd.add(x, c).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let one = fd.constant(1i64);
    let np1 = fd.add(n1, one).unwrap();
    let k = fd.cast(np1, DataType::F32).unwrap();
    let z = fd.mul(y, k).unwrap();
    fd.add_output(z).unwrap();
    let inputs = vec![
        vec![tensor(&[3, 5]), float(1.1)],
        vec![tensor(&[64, 33]), float(-0.3)],
    ];
    (fd.finish().unwrap(), inputs)
}

/// `iota(x.size(0) * x.size(1))`.
fn iota_shaped_by_sizes() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let n0 = fd.size(x, 0).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let len = fd.mul(n0, n1).unwrap();
    let start = fd.constant(0i64);
    let step = fd.constant(1i64);
    let i = fd.iota(Size::Val(len), start, step, DataType::F32).unwrap();
    fd.add_output(i).unwrap();
    let inputs = vec![vec![tensor(&[3, 4])], vec![tensor(&[17, 9])]];
    (fd.finish().unwrap(), inputs)
}

/// `uniform([x.size(0), x.size(1)]) + x`.
fn uniform_shaped_by_sizes() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let n0 = fd.size(x, 0).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let lo = fd.constant(0.0f64);
    let hi = fd.constant(1.0f64);
    let seed = fd.constant(7i64);
    let off = fd.constant(0i64);
    let u = fd
        .uniform(
            &[Size::Val(n0), Size::Val(n1)],
            lo,
            hi,
            seed,
            off,
            DataType::F32,
        )
        .unwrap();
    let w = fd.add(u, x).unwrap();
    fd.add_output(w).unwrap();
    let inputs = vec![vec![tensor(&[3, 4])], vec![tensor(&[17, 9])]];
    (fd.finish().unwrap(), inputs)
}

/// `expand(y, [-1, x.size(1)]) + x`.
fn expand_to_a_size() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, 1]).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let e = fd.expand(y, &[Size::Const(-1), Size::Val(n1)]).unwrap();
    let w = fd.add(e, x).unwrap();
    fd.add_output(w).unwrap();
    let inputs = vec![
        vec![tensor(&[3, 4]), tensor(&[3, 1])],
        vec![tensor(&[8, 200]), tensor(&[8, 1])],
    ];
    (fd.finish().unwrap(), inputs)
}

/// Dropout shaped by `x.size()`: `where(uniform([x.size(0), x.size(1)]) < p, 0, x * (1 /
/// (1 - p)))` with `p` a scalar input (the scale computed on the host).
fn dropout_shaped_by_sizes() -> (Fusion, Vec<Vec<EvalInput>>) {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let p = fd.define_scalar(DataType::F64).unwrap();
    let n0 = fd.size(x, 0).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let (lo, hi) = (fd.constant(0.0f64), fd.constant(1.0f64));
    let (seed, off) = (fd.constant(11i64), fd.constant(0i64));
    let u = fd
        .uniform(
            &[Size::Val(n0), Size::Val(n1)],
            lo,
            hi,
            seed,
            off,
            DataType::F32,
        )
        .unwrap();
    let dropped = fd.lt(u, p).unwrap();
    let one = fd.constant(1.0f64);
    let keep = fd.sub(one, p).unwrap();
    let scale = fd.div(one, keep).unwrap();
    let scaled = fd.mul(x, scale).unwrap();
    let zero = fd.constant(0.0f64);
    let y = fd.where_(dropped, zero, scaled).unwrap();
    fd.add_output(y).unwrap();
    let inputs = vec![
        vec![tensor(&[3, 4]), float(0.25)],
        vec![tensor(&[64, 300]), float(0.5)],
    ];
    (fd.finish().unwrap(), inputs)
}

type Case = fn() -> (Fusion, Vec<Vec<EvalInput>>);

const CASES: [(&str, Case); 11] = [
    ("full_of_sum", full_of_sum),
    ("full_of_computed_length", full_of_computed_length),
    ("reshape_to_size_and_scalars", reshape_to_size_and_scalars),
    (
        "reshape_to_size_and_scalars_scaled",
        reshape_to_size_and_scalars_scaled,
    ),
    ("slice_to_size_minus_one", slice_to_size_minus_one),
    (
        "slice_to_size_minus_one_scaled",
        slice_to_size_minus_one_scaled,
    ),
    ("casts_of_scalars", casts_of_scalars),
    ("iota_shaped_by_sizes", iota_shaped_by_sizes),
    ("uniform_shaped_by_sizes", uniform_shaped_by_sizes),
    ("expand_to_a_size", expand_to_a_size),
    ("dropout_shaped_by_sizes", dropout_shaped_by_sizes),
];

fn runtime_info(inputs: &[EvalInput]) -> RuntimeInfo {
    RuntimeInfo {
        device: DeviceInfo::h100_for_tests(),
        inputs: inputs
            .iter()
            .map(|i| match i {
                EvalInput::Tensor(t) => {
                    let sizes: Vec<i64> = t.shape().iter().map(|&s| s as i64).collect();
                    let mut strides = vec![1i64; sizes.len()];
                    for d in (0..sizes.len().saturating_sub(1)).rev() {
                        strides[d] = strides[d + 1] * sizes[d + 1].max(1);
                    }
                    InputInfo::Tensor(TensorInfo {
                        dtype: t.dtype(),
                        sizes,
                        strides,
                        alignment: 16,
                    })
                }
                EvalInput::Scalar(s) => InputInfo::Scalar(*s),
            })
            .collect(),
    }
}

/// Without a GPU: each case splits (the kernel fusion takes the computed scalars after
/// the original inputs), generates a kernel for every input set, and NVRTC compiles it.
#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn computed_scalars_generate_kernels_that_compile() {
    let nvrtc = require_nvrtc().is_some();
    for (name, case) in CASES {
        let (fusion, input_sets) = case();
        let exec = FusionExecutorCache::new(fusion.clone());
        assert!(
            exec.kernel_fusion().inputs().len() > fusion.inputs().len(),
            "{name}: not split"
        );
        for inputs in &input_sets {
            let (params, kernel) = exec
                .generate_for(&runtime_info(inputs), None)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let Some(kernel) = kernel else {
                // Only an output that is a view of an input needs no kernel.
                let views = exec.planner().forward().unwrap_or(&[]);
                assert!(
                    !views.is_empty()
                        && views
                            .iter()
                            .all(|s| matches!(s, nvfuser_core::ir::OutputSource::View(_))),
                    "{name}: no kernel, and not a view: {views:?}"
                );
                continue;
            };
            if nvrtc {
                nvfuser_cuda::compile(
                    &kernel.cuda_source(),
                    &kernel.abi.name,
                    nvfuser_cuda::GpuArch::SM90,
                )
                .unwrap_or_else(|e| panic!("{name} ({}): {e}", params.kind()));
            }
        }
    }
}

/// On a GPU: each case against the CPU reference, one executor called with every input
/// set in turn (computed lengths select their own runtimes).
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: run with --features gpu-tests on a GPU machine"
)]
fn computed_scalars_match_the_cpu_reference_on_a_gpu() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    for (name, case) in CASES {
        let (fusion, input_sets) = case();
        let exec = FusionExecutorCache::new(fusion);
        for inputs in &input_sets {
            run_and_compare(&dev, &exec, inputs, None, &Tolerance::for_dtype)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
