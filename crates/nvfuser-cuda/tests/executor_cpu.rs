//! The executor on the CPU reference device: results equal the evaluator's, and every
//! argument that contradicts the fusion's declaration is a typed error.

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::prelude::*;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache};

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
