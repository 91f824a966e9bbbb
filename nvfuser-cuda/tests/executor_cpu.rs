//! The executor on the CPU reference device: results equal the evaluator's, and every
//! argument that contradicts the fusion's declaration is a typed error.

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::prelude::*;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache, InputSignature, Tensor};

fn scale_add() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let y = fd.mul(x, s).unwrap();
    let y = fd.add(y, b).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

#[test]
fn cpu_run_matches_the_evaluator() {
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(scale_add());
    let x = HostTensor::random(DataType::F32, &[5, 7], 1);
    let b = HostTensor::random(DataType::F32, &[1, 7], 2);
    let out = exec
        .run(
            &cpu,
            &[
                (&cpu.tensor_from_host(&x).unwrap()).into(),
                (&cpu.tensor_from_host(&b).unwrap()).into(),
                Arg::from(1.5f32),
            ],
        )
        .unwrap();
    let want = evaluate(
        exec.fusion(),
        &[x.into(), b.into(), EvalInput::Scalar(1.5f32.into())],
    )
    .unwrap();
    compare(
        &out[0].to_host_tensor().unwrap(),
        &want[0],
        Tolerance::for_dtype(DataType::F32),
    )
    .unwrap();
}

#[test]
fn arguments_that_contradict_the_declaration_are_errors() {
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(scale_add());
    let vals: Vec<f32> = (0..35).map(|v| v as f32 * 0.25 - 3.0).collect();
    let x = cpu.tensor_from_slice(&vals, [5, 7]).unwrap();
    let b = cpu.tensor_from_slice(&vals[..7], [1, 7]).unwrap();
    let msg = |args: &[Arg<'_>]| exec.run(&cpu, args).unwrap_err().to_string();

    assert_eq!(
        msg(&[(&x).into(), (&b).into()]),
        "fusion call: expected 3 arguments (the fusion's inputs), found 2 arguments"
    );
    let xi = cpu.tensor_from_slice(&[1i32; 35], [5, 7]).unwrap();
    assert_eq!(
        msg(&[(&xi).into(), (&b).into(), 2.0f32.into()]),
        "fusion call: expected argument 0: a f32 tensor, found a i32 tensor"
    );
    assert_eq!(
        msg(&[(&x).into(), (&b).into(), (&x).into()]),
        "fusion call: expected argument 2: a f32 scalar, found a f32 tensor"
    );
    // A transposed view where a contiguous row-major tensor was declared.
    let xt = cpu
        .tensor_from_slice(&vals, [7, 5])
        .unwrap()
        .permute(&[1, 0])
        .unwrap();
    assert_eq!(
        msg(&[(&xt).into(), (&b).into(), 2.0f32.into()]),
        "fusion call: expected argument 0: stride 1 at dim 1 (declared contiguous), found stride 5 (strides [1, 5]); declare it non-contiguous or pass a contiguous tensor"
    );
    // An expanded (stride 0) view where contiguity was declared: never silently wrong.
    let row = cpu.tensor_from_slice(&vals[..7], [1, 7]).unwrap();
    let xe = row.expand(&[5, 7]).unwrap();
    assert_eq!(
        msg(&[(&xe).into(), (&b).into(), 2.0f32.into()]),
        "fusion call: expected argument 0: stride 7 at dim 0 (declared contiguous), found stride 0 (strides [0, 1]); declare it non-contiguous or pass a contiguous tensor"
    );
    // A declared broadcast dim given a real size.
    assert_eq!(
        msg(&[(&x).into(), (&x).into(), 2.0f32.into()]),
        "fusion call: expected argument 1: size 1 at dim 0 (declared broadcast), found size 5 (sizes [5, 7])"
    );
    // An integer for a float scalar input converts like a cast.
    assert!(exec
        .run(&cpu, &[(&x).into(), (&b).into(), 2i64.into()])
        .is_ok());
}

/// The error of a CPU-device call, as text.
fn cpu_err(fusion: &Fusion, args: &[Arg<'_>]) -> String {
    let exec = FusionExecutorCache::new(fusion.clone());
    match exec.run(&Device::cpu(), args) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
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
fn tied_extents_are_checked_like_the_evaluator_does() {
    let cpu = Device::cpu();
    let f = add_2d();
    let zeros = |s: &[usize]| cpu.zeros(DataType::F32, s).unwrap();
    for (a, b, want) in [
        (
            &[4usize, 5][..],
            &[4usize, 6][..],
            "argument 1 dim 1: size 6, but it must equal argument 0 dim 1 (size 5): the fusion adds them",
        ),
        (
            &[4, 5],
            &[4, 1],
            "argument 1 dim 1: size 1, but it must equal argument 0 dim 1 (size 5): the fusion adds them",
        ),
        (
            &[512, 4096],
            &[2, 3],
            "argument 1 dim 0: size 2, but it must equal argument 0 dim 0 (size 512): the fusion adds them",
        ),
    ] {
        let (x, y) = (zeros(a), zeros(b));
        assert_eq!(cpu_err(&f, &[(&x).into(), (&y).into()]), want);
        // The same error (same message) as the evaluator's.
        let e = evaluate(
            &f,
            &[
                HostTensor::zeros(DataType::F32, a).unwrap().into(),
                HostTensor::zeros(DataType::F32, b).unwrap().into(),
            ],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), want);
    }
    // LayerNorm with a weight of 63 for a hidden size of 64.
    let f = nvfuser_core::workloads::layer_norm(DataType::F32).unwrap();
    let (x, w, b) = (zeros(&[8, 64]), zeros(&[63]), zeros(&[64]));
    assert_eq!(
        cpu_err(&f, &[(&x).into(), (&w).into(), (&b).into(), Arg::from(1e-5f32)]),
        "argument 1 dim 0: size 63, but it must equal argument 0 dim 1 (size 64): the fusion multiplies them"
    );
}

#[test]
fn scalar_arguments_are_checked_against_their_dtype() {
    let cpu = Device::cpu();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::Bool, &[-1]).unwrap();
    let b = fd.define_scalar(DataType::Bool).unwrap();
    let y = fd.logical_and(x, b).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let xt = cpu.zeros(DataType::Bool, [3]).unwrap();
    assert_eq!(
        cpu_err(&f, &[(&xt).into(), Arg::Scalar(ScalarValue::Int(2))]),
        "input 1: expected a bool value for a bool scalar, found 2"
    );

    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::I32, &[-1]).unwrap();
    let s = fd.define_scalar(DataType::I32).unwrap();
    let y = fd.add(x, s).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let xt = cpu.zeros(DataType::I32, [3]).unwrap();
    assert_eq!(
        cpu_err(&f, &[(&xt).into(), Arg::from(1i64 << 40)]),
        "input 1: expected a value in i32 range for an i32 scalar, found 1099511627776"
    );
    // In range, it runs.
    let exec = FusionExecutorCache::new(f);
    let out = exec.run(&cpu, &[(&xt).into(), Arg::from(-7i64)]).unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![-7, -7, -7]);
}

/// `[rows, cols]` f32 views of `[rows, pitch]` tensors (columns `0..cols`).
fn pitched(cpu: &Device, rows: usize, cols: usize, pitch: usize) -> Tensor {
    cpu.zeros(DataType::F32, [rows, pitch])
        .unwrap()
        .slice(1, 0, cols as i64, 1)
        .unwrap()
}

#[test]
fn the_signature_holds_the_alignment_of_every_row_pitch() {
    let cpu = Device::cpu();
    let sig = |t: &Tensor| InputSignature::of(&cpu, &[t.into()]);
    for (rows, cols, good, bad) in [(256, 64, 68, 66), (64, 4096, 4100, 4098)] {
        let a = pitched(&cpu, rows, cols, good);
        let b = pitched(&cpu, rows, cols, bad);
        assert_eq!(a.sizes(), b.sizes());
        assert!(a.data_alignment() >= 16 && b.data_alignment() >= 16);
        // Same shape, same (non-contiguous) layout, same address alignment: only the
        // pitch's alignment (16 vs 8 bytes) tells them apart.
        assert_ne!(sig(&a), sig(&b), "pitch {good} vs {bad}");
        // Another 16-byte pitch shares the runtime.
        let c = pitched(&cpu, rows, cols, good + 4);
        assert_eq!(sig(&a), sig(&c));
        assert_eq!(
            sig(&b),
            sig(&pitched(&cpu, rows, cols, bad + 4)),
            "8-byte pitches"
        );
    }
    // A view that starts one element in: 4-byte aligned address.
    let base = cpu.zeros(DataType::F32, [256, 68]).unwrap();
    let shifted = base.slice(1, 1, 65, 1).unwrap();
    let aligned = base.slice(1, 0, 64, 1).unwrap();
    assert_ne!(sig(&shifted), sig(&aligned));
}
