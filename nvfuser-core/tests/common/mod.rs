//! Helpers shared by the CPU reference evaluator's op tests (`eval_ops`,
//! `eval_ops_shapes`, `eval_ops_reductions`): a fusion from a closure, evaluating it
//! (expecting success or an error), input tensors from slices, and outputs as vectors.

#![allow(dead_code)]

use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::prelude::*;
use nvfuser_core::Result;

pub fn fusion(build: impl FnOnce(&mut FusionDefinition) -> Result<Vec<ValId>>) -> Fusion {
    let mut fd = FusionDefinition::new();
    let outs = build(&mut fd).unwrap();
    for o in outs {
        fd.add_output(o).unwrap();
    }
    fd.finish().unwrap()
}

pub fn run(f: &Fusion, inputs: Vec<EvalInput>) -> Vec<HostTensor> {
    evaluate(f, &inputs).unwrap_or_else(|e| panic!("evaluate failed: {e}"))
}

pub fn err(f: &Fusion, inputs: Vec<EvalInput>) -> String {
    match evaluate(f, &inputs) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e.to_string(),
    }
}

pub fn t<T: nvfuser_core::eval::Element>(v: &[T], shape: &[usize]) -> EvalInput {
    HostTensor::from_slice(v, shape).unwrap().into()
}

pub fn f64s(t: &HostTensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

pub fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

pub fn i64s(t: &HostTensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

pub fn i32s(t: &HostTensor) -> Vec<i32> {
    t.to_vec::<i32>().unwrap()
}

pub fn bools(t: &HostTensor) -> Vec<bool> {
    t.to_vec::<bool>().unwrap()
}
