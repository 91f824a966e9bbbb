//! Sort fusions shared by `sort_plans` (planning, NVRTC, kernel snapshots: no GPU) and
//! `gpu_sort` (the same fusions on the GPU against the CPU reference).

#![allow(dead_code)]

use nvfuser_core::ir::{BinaryOp, UnaryOp};
use nvfuser_core::prelude::*;

/// `sort(x, axis, descending)`: values and indices.
pub fn sort(dtype: DataType, rank: usize, axis: i64, descending: bool) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let (v, i) = fd.sort(x, axis, descending, true).unwrap();
    fd.add_output(v).unwrap();
    fd.add_output(i).unwrap();
    fd.finish().unwrap()
}

/// `topk(x, k, axis, largest)`: values and indices.
pub fn topk(dtype: DataType, rank: usize, axis: i64, k: i64, largest: bool) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let (v, i) = fd.topk(x, k, axis, largest, true).unwrap();
    fd.add_output(v).unwrap();
    fd.add_output(i).unwrap();
    fd.finish().unwrap()
}

/// `argsort(x, axis, descending)`: the indices only.
pub fn argsort(dtype: DataType, rank: usize, axis: i64, descending: bool) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let i = fd.argsort(x, axis, descending).unwrap();
    fd.add_output(i).unwrap();
    fd.finish().unwrap()
}

/// `topk(relu(x) * x, k)` then `exp(-values)`: pointwise math before and after the
/// sort (three segments), f32.
pub fn topk_with_math(rank: usize, k: i64) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &vec![-1; rank]).unwrap();
    let r = fd.unary(UnaryOp::Relu, x).unwrap();
    let y = fd.binary(BinaryOp::Mul, r, x).unwrap();
    let (v, i) = fd.topk(y, k, -1, true, true).unwrap();
    let n = fd.unary(UnaryOp::Neg, v).unwrap();
    let e = fd.unary(UnaryOp::Exp, n).unwrap();
    fd.add_output(e).unwrap();
    fd.add_output(i).unwrap();
    fd.finish().unwrap()
}
