//! Arguments that break what the fusion or a cached kernel assumes, on a GPU: sizes the
//! fusion ties together (refused before any launch, with the CPU reference's message),
//! scalar values out of their dtype (refused the same way), and strided views whose row
//! pitch changes the alignment of vector accesses between calls (a new runtime is
//! planned; results equal the CPU reference). Skipped without a GPU (required with
//! `NVFUSER_REQUIRE_GPU=1`).
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_args -- --nocapture
//! ```

mod common;

use common::{gpu, tolerance};
use nvfuser_core::builder::{Contiguity, TensorSpec};
use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor};
use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue};
use nvfuser_cuda::{Arg, Device, Error, FusionExecutorCache, Tensor};

/// The error of a call on `device`, as text (it must not run).
fn run_err(device: &Device, fusion: &Fusion, args: &[Arg<'_>]) -> String {
    match FusionExecutorCache::new(fusion.clone()).run(device, args) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// The CPU reference's error for the same arguments.
fn reference_err(fusion: &Fusion, inputs: &[EvalInput]) -> String {
    evaluate(fusion, inputs).unwrap_err().to_string()
}

fn add_2d() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let z = fd.add(x, y).unwrap();
    fd.add_output(z).unwrap();
    fd.finish().unwrap()
}

#[test]
fn tied_sizes_are_refused_before_any_launch() {
    let Some(dev) = gpu() else { return };
    let f = add_2d();
    for (a, b) in [
        (&[4usize, 5][..], &[4usize, 6][..]),
        (&[4, 5], &[4, 1]),
        (&[512, 4096], &[2, 3]),
    ] {
        let (ha, hb) = (
            HostTensor::random(DataType::F32, a, 1),
            HostTensor::random(DataType::F32, b, 2),
        );
        let (x, y) = (
            dev.tensor_from_host(&ha).unwrap(),
            dev.tensor_from_host(&hb).unwrap(),
        );
        let got = run_err(&dev, &f, &[(&x).into(), (&y).into()]);
        assert_eq!(
            got,
            reference_err(&f, &[ha.into(), hb.into()]),
            "{a:?} + {b:?}"
        );
        assert!(got.starts_with("argument 1 dim "), "{got}");
    }
    // The context is still usable after the refusals: a good call runs.
    let h = HostTensor::random(DataType::F32, &[4, 5], 3);
    let x = dev.tensor_from_host(&h).unwrap();
    let out = FusionExecutorCache::new(f.clone())
        .run(&dev, &[(&x).into(), (&x).into()])
        .unwrap();
    let want = evaluate(&f, &[h.clone().into(), h.into()]).unwrap();
    compare(
        &out[0].to_host_tensor().unwrap(),
        &want[0],
        tolerance(DataType::F32),
    )
    .unwrap();

    // LayerNorm with a weight of 63 for a hidden size of 64.
    let f = nvfuser_core::workloads::layer_norm(DataType::F32).unwrap();
    let hx = HostTensor::random(DataType::F32, &[8, 64], 4);
    let hw = HostTensor::random(DataType::F32, &[63], 5);
    let hb = HostTensor::random(DataType::F32, &[64], 6);
    let (x, w, b) = (
        dev.tensor_from_host(&hx).unwrap(),
        dev.tensor_from_host(&hw).unwrap(),
        dev.tensor_from_host(&hb).unwrap(),
    );
    let got = run_err(
        &dev,
        &f,
        &[(&x).into(), (&w).into(), (&b).into(), Arg::from(1e-5f32)],
    );
    let eps = EvalInput::Scalar(1e-5f32.into());
    assert_eq!(
        got,
        reference_err(&f, &[hx.into(), hw.into(), hb.into(), eps])
    );
    assert_eq!(
        got,
        "argument 1 dim 0: size 63, but it must equal argument 0 dim 1 (size 64): the fusion multiplies them"
    );
}

#[test]
fn scalars_out_of_their_dtype_are_refused_like_on_the_cpu() {
    let Some(dev) = gpu() else { return };
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::Bool, &[-1]).unwrap();
    let b = fd.define_scalar(DataType::Bool).unwrap();
    let y = fd.logical_and(x, b).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let hx = HostTensor::from_slice(&[true, false, true], &[3]).unwrap();
    let xt = dev.tensor_from_host(&hx).unwrap();
    let two = ScalarValue::Int(2);
    assert_eq!(
        run_err(&dev, &f, &[(&xt).into(), Arg::Scalar(two)]),
        reference_err(&f, &[hx.into(), EvalInput::Scalar(two)])
    );

    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::I32, &[-1]).unwrap();
    let s = fd.define_scalar(DataType::I32).unwrap();
    let y = fd.add(x, s).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let hx = HostTensor::from_slice(&[1i32, 2, 3], &[3]).unwrap();
    let xt = dev.tensor_from_host(&hx).unwrap();
    let big = ScalarValue::Int(1 << 40);
    let got = run_err(&dev, &f, &[(&xt).into(), Arg::Scalar(big)]);
    assert_eq!(got, reference_err(&f, &[hx.into(), EvalInput::Scalar(big)]));
    assert_eq!(
        got,
        "input 1: expected a value in i32 range for an i32 scalar, found 1099511627776"
    );
}

/// A `[-1, -1]` f32 input whose rows may have any pitch (the inner dim contiguous).
fn strided_input(fd: &mut FusionDefinition) -> nvfuser_core::ValId {
    fd.define_tensor_spec(
        TensorSpec::new(DataType::F32, &[-1, -1])
            .contiguity(Contiguity::PerDim(vec![Some(false), Some(true)])),
    )
    .unwrap()
}

fn pointwise() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = strided_input(&mut fd);
    let k = fd.constant(2.0);
    let t = fd.mul(x, k).unwrap();
    let y = fd.sigmoid(t).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

fn row_sum() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = strided_input(&mut fd);
    let y = fd.sum(x, &[1], false).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

fn softmax() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = strided_input(&mut fd);
    let m = fd.max(x, &[1], true).unwrap();
    let c = fd.sub(x, m).unwrap();
    let e = fd.exp(c).unwrap();
    let s = fd.sum(e, &[1], true).unwrap();
    let y = fd.div(e, s).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// A `[rows, cols]` view (columns `0..cols`) of a random `[rows, pitch]` GPU tensor, and
/// the view's values on the host.
fn pitched_view(
    dev: &Device,
    rows: usize,
    cols: usize,
    pitch: usize,
    seed: u64,
) -> (Tensor, HostTensor) {
    let h = HostTensor::random(DataType::F32, &[rows, pitch], seed);
    let wide = dev.tensor_from_host(&h).unwrap();
    let view = wide.slice(1, 0, cols as i64, 1).unwrap();
    assert_eq!(view.strides(), [pitch, 1]);
    let values = view.to_host_tensor().unwrap();
    (view, values)
}

/// Runs `exec` on the view and compares with the CPU reference.
fn run_view(
    dev: &Device,
    exec: &FusionExecutorCache,
    view: &Tensor,
    values: &HostTensor,
    what: &str,
) {
    let out = exec
        .run(dev, &[view.into()])
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = evaluate(exec.fusion(), &[values.clone().into()]).unwrap();
    let got = out[0]
        .to_host_tensor()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    compare(&got, &want[0], tolerance(DataType::F32)).unwrap_or_else(|m| panic!("{what}: {m}"));
}

#[test]
fn a_new_row_pitch_alignment_plans_a_new_runtime() {
    let Some(dev) = gpu() else { return };
    let cases: [(&str, Fusion, usize, usize, [usize; 2]); 3] = [
        ("pointwise", pointwise(), 256, 64, [68, 66]),
        ("reduction", row_sum(), 64, 4096, [4100, 4098]),
        ("softmax", softmax(), 64, 4096, [4100, 4098]),
    ];
    for (name, fusion, rows, cols, pitches) in cases {
        let exec = FusionExecutorCache::new(fusion);
        for (k, &pitch) in pitches.iter().enumerate() {
            let (view, values) = pitched_view(&dev, rows, cols, pitch, k as u64 + 1);
            run_view(
                &dev,
                &exec,
                &view,
                &values,
                &format!("{name} pitch {pitch}"),
            );
        }
        // The second pitch did not hit the first runtime (same sizes, another alignment).
        assert_eq!(exec.stats().hits, 0, "{name}: {:?}", exec.stats());
        // Both again, now from the cache.
        for (k, &pitch) in pitches.iter().enumerate() {
            let (view, values) = pitched_view(&dev, rows, cols, pitch, k as u64 + 7);
            run_view(
                &dev,
                &exec,
                &view,
                &values,
                &format!("{name} pitch {pitch}, again"),
            );
        }
        dev.synchronize().unwrap();
    }
}

#[test]
fn params_planned_for_another_pitch_are_refused_at_launch() {
    let Some(dev) = gpu() else { return };
    let exec = FusionExecutorCache::new(pointwise());
    let (v68, _) = pitched_view(&dev, 256, 64, 68, 1);
    let (v66, _) = pitched_view(&dev, 256, 64, 66, 2);
    let params = exec.heuristics(&dev, &[(&v68).into()]).unwrap();
    match exec.run_with_params(&dev, &[(&v66).into()], &params) {
        // The heuristics may not vectorize by 16 bytes at all on some device: then it
        // runs, and must be right.
        Ok(_) => {}
        Err(Error::InvalidTensor { expected, .. }) => {
            assert!(expected.contains("row pitch"), "{expected}");
        }
        Err(e) => panic!("expected a launch refusal naming the row pitch, got {e}"),
    }
    dev.synchronize().unwrap();
}

/// `y = x * a` and its column sums: one outer-reduction kernel with a grid split (work
/// buffers), a scalar parameter and two outputs.
fn scaled_with_column_sums() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = strided_input(&mut fd);
    let a = fd.define_scalar(DataType::F32).unwrap();
    let y = fd.mul(x, a).unwrap();
    let s = fd.sum(y, &[0], false).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(s).unwrap();
    fd.finish().unwrap()
}

/// Runs `exec` on `view` and `a`; compares every output with the CPU reference.
fn run_scaled(dev: &Device, exec: &FusionExecutorCache, view: &Tensor, a: f64, what: &str) {
    let values = view.to_host_tensor().unwrap();
    let scalar = ScalarValue::Float(a);
    let out = exec
        .run(dev, &[view.into(), Arg::Scalar(scalar)])
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = evaluate(exec.fusion(), &[values.into(), EvalInput::Scalar(scalar)]).unwrap();
    assert_eq!(out.len(), want.len(), "{what}");
    for (k, (o, w)) in out.iter().zip(&want).enumerate() {
        let got = o.to_host_tensor().unwrap();
        // The column sums add 4096 rows: the tolerance grows with the reduced length.
        let tol = if k == 1 {
            nvfuser_core::eval::Tolerance::new(1e-4, 4e-3)
        } else {
            tolerance(DataType::F32)
        };
        compare(&got, w, tol).unwrap_or_else(|m| panic!("{what} output {k}: {m}"));
    }
}

#[test]
fn repeated_calls_replay_their_launch_and_recheck_what_can_change() {
    let Some(dev) = gpu() else { return };
    let exec = FusionExecutorCache::new(scaled_with_column_sums());
    let (rows, cols) = (4096, 96);
    // Row pitches 100 and 104 (400 and 416 bytes, both padded) share the 16-byte
    // alignment class, so their calls share one runtime entry; only the strides tell
    // them apart.
    let (v100, _) = pitched_view(&dev, rows, cols, 100, 11);
    run_scaled(&dev, &exec, &v100, 0.5, "first call (recorded)");
    assert_eq!(exec.stats().replays, 0, "{:?}", exec.stats());
    let (v100b, _) = pitched_view(&dev, rows, cols, 100, 12);
    run_scaled(
        &dev,
        &exec,
        &v100b,
        -1.25,
        "same strides, new data and scalar",
    );
    assert_eq!(exec.stats().replays, 1, "{:?}", exec.stats());
    let (v104, _) = pitched_view(&dev, rows, cols, 104, 13);
    run_scaled(&dev, &exec, &v104, 3.0, "same entry, other strides");
    let stats = exec.stats();
    assert_eq!(
        (stats.replays, stats.hits, stats.misses),
        (1, 2, 1),
        "other strides run every check: {stats:?}"
    );
    run_scaled(&dev, &exec, &v100, 2.0, "recorded strides again");
    assert_eq!(exec.stats().replays, 2, "{:?}", exec.stats());
    // Two sizes in turn: each call is checked against the last replayed entry, then
    // looked up by its signature.
    let (half, _) = pitched_view(&dev, rows / 2, cols, 100, 15);
    run_scaled(&dev, &exec, &half, 0.25, "half the rows (recorded)");
    for (k, (view, what)) in [(&v100b, "all rows"), (&half, "half the rows")]
        .into_iter()
        .cycle()
        .take(4)
        .enumerate()
    {
        run_scaled(
            &dev,
            &exec,
            view,
            k as f64 - 1.5,
            &format!("{what}, in turn {k}"),
        );
    }
    let stats = exec.stats();
    // The second size planned a runtime (compiled, or reusing the first's kernel).
    assert_eq!(
        (stats.replays, stats.misses + stats.reuses),
        (6, 2),
        "{stats:?}"
    );
    // A tensor of the same sizes on the CPU device is refused, not replayed.
    let host = Device::cpu()
        .tensor_from_host(&HostTensor::random(DataType::F32, &[rows, cols], 14))
        .unwrap();
    match exec.run(
        &dev,
        &[(&host).into(), Arg::Scalar(ScalarValue::Float(1.0))],
    ) {
        Err(Error::DeviceMismatch { .. }) => {}
        other => panic!("expected a device mismatch, got {other:?}"),
    }
    assert_eq!(exec.stats().replays, 6, "{:?}", exec.stats());
    dev.synchronize().unwrap();

    // A scalar the fusion's dtype refuses, after calls that were replayed.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::I32, &[-1]).unwrap();
    let s = fd.define_scalar(DataType::I32).unwrap();
    let y = fd.add(x, s).unwrap();
    fd.add_output(y).unwrap();
    let exec = FusionExecutorCache::new(fd.finish().unwrap());
    let hx = HostTensor::from_slice(&[1i32, -2, 3, 40], &[4]).unwrap();
    let xt = dev.tensor_from_host(&hx).unwrap();
    for (k, v) in [5i64, -7, 1 << 30].into_iter().enumerate() {
        let out = exec
            .run(&dev, &[(&xt).into(), Arg::Scalar(ScalarValue::Int(v))])
            .unwrap();
        let want: Vec<i32> = [1i32, -2, 3, 40]
            .iter()
            .map(|&e| e.wrapping_add(v as i32))
            .collect();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), want, "scalar {v}");
        assert_eq!(exec.stats().replays, k as u64, "{:?}", exec.stats());
    }
    let big = ScalarValue::Int(1 << 40);
    let err = exec
        .run(&dev, &[(&xt).into(), Arg::Scalar(big)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        reference_err(exec.fusion(), &[hx.into(), EvalInput::Scalar(big)])
    );
    assert_eq!(exec.stats().replays, 2, "{:?}", exec.stats());
    dev.synchronize().unwrap();
}
