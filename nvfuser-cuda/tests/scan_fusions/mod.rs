//! Scan fusions shared by `scan_plans` (planning, NVRTC, kernel snapshots: no GPU) and
//! `gpu_scan` (the same fusions on the GPU against the CPU reference).

#![allow(dead_code)]

use nvfuser_core::ir::{BinaryOp, ScanOp, UnaryOp};
use nvfuser_core::prelude::*;

/// A fusion of one rank-`rank` input of `dtype`.
pub type Build = fn(&mut FusionDefinition, ValId) -> ValId;

/// `op(x)` along `axis`.
pub fn plain(op: ScanOp, dtype: DataType, rank: usize, axis: i64) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let y = fd.scan(op, x, axis).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// A fusion built by `f` from one input.
pub fn built(dtype: DataType, rank: usize, f: Build) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let y = f(&mut fd, x);
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// The exclusive cumsum `cumsum(x) - x` in f32 (the scan's input read twice).
pub fn exclusive(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let xf = fd.cast(x, DataType::F32).unwrap();
    let c = fd.cumsum(xf, -1).unwrap();
    fd.binary(BinaryOp::Sub, c, xf).unwrap()
}

/// `cumprod(1 + x / 64)` (values near 1, so long rows neither overflow nor vanish).
pub fn near_one_product(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let k = fd.constant(1.0 / 64.0);
    let s = fd.binary(BinaryOp::Mul, x, k).unwrap();
    let one = fd.constant(1.0);
    let y = fd.binary(BinaryOp::Add, s, one).unwrap();
    fd.cumprod(y, -1).unwrap()
}

/// `exp(x - cummax(x))`, a running-max normalization (math after the scan).
pub fn running_softmax_numerator(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let m = fd.cummax(x, -1).unwrap();
    let d = fd.binary(BinaryOp::Sub, x, m).unwrap();
    fd.unary(UnaryOp::Exp, d).unwrap()
}

/// `cummax(cumsum(x))`: a scan of a scan.
pub fn scan_of_scan(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let c = fd.cumsum(x, -1).unwrap();
    fd.cummax(c, -1).unwrap()
}

/// `cumsum(x) * cummin(x)`: two scans of one input joined.
pub fn two_scans(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let a = fd.cumsum(x, -1).unwrap();
    let b = fd.cummin(x, -1).unwrap();
    fd.binary(BinaryOp::Mul, a, b).unwrap()
}
