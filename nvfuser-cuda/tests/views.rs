//! Outputs that layout-only ops make from an input (permute, squeeze, unsqueeze,
//! broadcast, expand, slice, reshape of a dense input) come back as views of the input's
//! buffer, with no kernel, on every device: same values as the CPU reference, the same
//! buffer as the input (a write through the input is seen through the output), and on a
//! GPU no runtime built when every output is a view. Chains a view cannot express (a
//! reshape after a permute, a `set`) are computed. Runs on the CPU device always, and on
//! the GPU when there is one (required with `NVFUSER_REQUIRE_GPU=1`).
//!
//! ```text
//! cargo test -p nvfuser-cuda --test views
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test views
//! ```

mod common;

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::OutputSource;
use nvfuser_core::{DataType, Fusion, ScalarValue};
use nvfuser_cuda::{Arg, Device, FusionExecutorCache, Tensor};

fn build(src: &str) -> Fusion {
    nvfuser_core::dsl::build_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
        .remove(0)
        .0
}

/// The devices to check: the CPU, and the GPU when there is one.
fn devices() -> Vec<Device> {
    let mut out = vec![Device::cpu()];
    out.extend(common::gpu());
    out
}

/// What the planner decided for each output: `v` view, `i` input, `k` kernel.
fn sources(exec: &FusionExecutorCache) -> String {
    let n = exec.fusion().outputs().len();
    match exec.planner().forward() {
        None => "k".repeat(n),
        Some(f) => f
            .iter()
            .map(|s| match s {
                OutputSource::Kernel(_) => 'k',
                OutputSource::Input(_) => 'i',
                OutputSource::View(_) => 'v',
            })
            .collect(),
    }
}

/// One case: a fusion, the shape of its one f32 tensor input (or a view of a larger
/// tensor: `(shape, Some((axis, pitch)))` slices `axis` of a `pitch`-wide tensor), its
/// scalar arguments, and the expected sources of its outputs.
struct Case {
    name: &'static str,
    src: &'static str,
    shape: &'static [usize],
    padded: Option<(usize, usize)>,
    scalars: &'static [i64],
    sources: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "permute",
        src: "fn f(x: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _, _]> { x.permute([2, 0, 1]) }",
        shape: &[3, 4, 5],
        padded: None,
        scalars: &[],
        sources: "v",
    },
    Case {
        name: "reshape of a dense input",
        src: "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _, _]> { x.reshape([2, -1, 6]) }",
        shape: &[4, 9],
        padded: None,
        scalars: &[],
        sources: "v",
    },
    Case {
        name: "outer slice, then reshape",
        src: "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.slice([1..5, ..]).reshape([-1]) }",
        shape: &[7, 6],
        padded: None,
        scalars: &[],
        sources: "v",
    },
    Case {
        name: "strided slices with negative bounds",
        src: "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.slice([(1, -1, 2), (-5, 9, 3)]) }",
        shape: &[9, 11],
        padded: None,
        scalars: &[],
        sources: "v",
    },
    Case {
        name: "slice bounds given by scalars",
        src: "fn f(x: Tensor<f32, [_, _]>, a: i64, b: i64) -> Tensor<f32, [_, _]> { x.slice([a..b, ..]) }",
        shape: &[10, 3],
        padded: None,
        scalars: &[2, 7],
        sources: "v",
    },
    Case {
        name: "empty slice",
        src: "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.slice([.., 4..2]) }",
        shape: &[3, 6],
        padded: None,
        scalars: &[],
        sources: "v",
    },
    Case {
        // GPU fuzz seed 7305386: a slice start in one dim of a view empty in another
        // moved the offset past the end of the (empty) buffer.
        name: "slice of an empty input",
        src: "fn f(x: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _, _]> { x.slice([.., 1.., ..]).permute([0, 2, 1]) }",
        shape: &[30, 18, 0],
        padded: None,
        scalars: &[],
        sources: "v",
    },
    Case {
        name: "squeeze, unsqueeze, expand",
        src: "fn f(x: Tensor<f32, [_, 1, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, 4, _]>) { let s = x.squeeze([1]); (s, s.unsqueeze(1).expand([-1, 4, -1])) }",
        shape: &[3, 1, 5],
        padded: None,
        scalars: &[],
        sources: "vv",
    },
    Case {
        name: "view of a pitched input",
        src: "fn f(#[layout(contiguity = [false, true])] x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.permute([1, 0]).slice([1.., ..]) }",
        shape: &[6, 5],
        padded: Some((1, 8)),
        scalars: &[],
        sources: "v",
    },
    Case {
        name: "reshape of a pitched input is computed",
        src: "fn f(#[layout(contiguity = [false, true])] x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.reshape([-1]) }",
        shape: &[6, 5],
        padded: Some((1, 8)),
        scalars: &[],
        sources: "k",
    },
    Case {
        name: "reshape after a permute is computed",
        src: "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.permute([1, 0]).reshape([-1]) }",
        shape: &[4, 6],
        padded: None,
        scalars: &[],
        sources: "k",
    },
    Case {
        name: "set copies",
        src: "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.permute([1, 0]).set() }",
        shape: &[4, 6],
        padded: None,
        scalars: &[],
        sources: "k",
    },
    Case {
        name: "a view beside a computed output",
        src: "fn f(x: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_]>, Tensor<f32, [_, _]>) { (x.permute([1, 0]), x.sum([1]), x) }",
        shape: &[5, 7],
        padded: None,
        scalars: &[],
        sources: "vki",
    },
];

/// The case's tensor argument on `device` (random values; a view of a wider tensor
/// when padded) and its values on the host.
fn input(device: &Device, c: &Case, seed: u64) -> (Tensor, HostTensor) {
    let mut full = c.shape.to_vec();
    if let Some((axis, pitch)) = c.padded {
        full[axis] = pitch;
    }
    let t = device
        .tensor_from_host(&HostTensor::random(DataType::F32, &full, seed))
        .unwrap();
    let t = match c.padded {
        Some((axis, _)) => t.slice(axis as i64, 0, c.shape[axis] as i64, 1).unwrap(),
        None => t,
    };
    let values = t.to_host_tensor().unwrap();
    (t, values)
}

#[test]
fn layout_only_outputs_are_views_of_the_input_buffer() {
    for device in devices() {
        for (k, c) in CASES.iter().enumerate() {
            let what = format!("{} on {device}", c.name);
            let exec = FusionExecutorCache::new(build(c.src));
            assert_eq!(sources(&exec), c.sources, "{what}");
            let (x, values) = input(&device, c, k as u64 + 1);
            let mut args = vec![Arg::from(&x)];
            let mut host = vec![EvalInput::Tensor(values)];
            for &s in c.scalars {
                args.push(Arg::Scalar(ScalarValue::Int(s)));
                host.push(EvalInput::Scalar(ScalarValue::Int(s)));
            }
            let outs = exec
                .run(&device, &args)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = evaluate(exec.fusion(), &host).unwrap();
            for (j, ((o, w), src)) in outs.iter().zip(&want).zip(c.sources.chars()).enumerate() {
                let got = o.to_host_tensor().unwrap();
                compare(&got, w, Tolerance::new(1e-5, 1e-5))
                    .unwrap_or_else(|m| panic!("{what}, output {j}: {m}"));
                assert_eq!(o.shares_buffer(&x), src != 'k', "{what}, output {j}");
            }
            if device.is_gpu() && !c.sources.contains('k') {
                let stats = exec.stats();
                assert_eq!((stats.misses, stats.runtimes), (0, 0), "{what}: no kernel");
            }
        }
    }
}

/// A write into the input after the call is seen through the view, as in PyTorch.
#[test]
fn a_view_sees_writes_to_its_input() {
    let exec = FusionExecutorCache::new(build(
        "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.permute([1, 0]).slice([1.., ..]) }",
    ));
    for device in devices() {
        let x = device
            .tensor_from_slice(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], [2, 3])
            .unwrap();
        let y = exec.run(&device, &[(&x).into()]).unwrap().remove(0);
        assert_eq!(y.sizes(), [2, 2], "{device}");
        assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 4.0, 2.0, 5.0], "{device}");
        x.write_from_slice(&[10.0f32, 11.0, 12.0, 13.0, 14.0, 15.0])
            .unwrap();
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            [11.0, 14.0, 12.0, 15.0],
            "{device}"
        );
    }
}

/// A slice bound out of range is refused before any view is made, on every device,
/// naming the bound and the range it must be in.
#[test]
fn a_view_with_scalar_bounds_out_of_range_is_refused() {
    let exec = FusionExecutorCache::new(build(
        "fn f(x: Tensor<f32, [_, _]>, a: i64) -> Tensor<f32, [_, _]> { x.slice([0..a, ..]) }",
    ));
    for device in devices() {
        let x = device
            .tensor_from_host(&HostTensor::random(DataType::F32, &[4, 3], 9))
            .unwrap();
        let err = exec
            .run(&device, &[(&x).into(), Arg::Scalar(ScalarValue::Int(5))])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("0..=4") && err.contains('5'),
            "{device}: {err}"
        );
    }
}
