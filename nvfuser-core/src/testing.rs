//! Shared test corpora (not part of the stable API).
//!
//! Several layers check a property over "every op on every dtype it accepts" (the
//! scans too, [`scan_cases`]): the reproducer round trip (`tests/print_every_op.rs`),
//! the macro's builder-call replay (`nvfuser-macros`), and more. They share one enumeration here so that adding an op
//! extends every check at once.

use crate::builder::{FusionDefinition, Size};
use crate::dtype::DataType;
use crate::error::Result;
use crate::ir::{BinaryOp, Fusion, ReductionOp, ScanOp, TernaryOp, UnaryOp, ValId};

/// Builds `body` over fresh inputs and makes its result an output (a scalar result is
/// added to an f32 tensor first); `None` when the builder rejects the combination.
pub fn try_build(body: impl FnOnce(&mut FusionDefinition) -> Result<ValId>) -> Option<Fusion> {
    let mut fd = FusionDefinition::new();
    let out = body(&mut fd).ok()?;
    if !fd.fusion().val(out).is_tensor() {
        let t = fd.define_tensor(DataType::F32, &[-1]).ok()?;
        let d = fd.fusion().val(out).dtype;
        let t = fd.cast(t, d).ok()?;
        let y = fd.add(t, out).ok()?;
        fd.add_output(y).ok()?;
    } else {
        fd.add_output(out).ok()?;
    }
    fd.finish().ok()
}

/// An operand of dtype `d`: kind 0 a `[N, 4]` tensor, 1 a `[4]` tensor, 2 a scalar
/// input, anything else a constant.
pub fn operand(fd: &mut FusionDefinition, kind: usize, d: DataType) -> Result<ValId> {
    match kind {
        0 => fd.define_tensor(d, &[-1, 4]),
        1 => fd.define_tensor(d, &[4]),
        2 => fd.define_scalar(d),
        _ => Ok(match d {
            DataType::Bool => fd.constant(true),
            d if d.is_int() => fd.constant_of(3, d),
            d => fd.constant_of(0.5, d),
        }),
    }
}

/// Every unary op on every dtype and operand kind the builder accepts, named.
pub fn unary_cases() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for &op in UnaryOp::ALL {
        for d in DataType::ALL {
            for kind in [0, 2, 3] {
                if let Some(f) = try_build(|fd| {
                    let x = operand(fd, kind, d)?;
                    fd.unary(op, x)
                }) {
                    out.push((format!("{} on {d} (operand kind {kind})", op.name()), f));
                }
            }
        }
    }
    out
}

/// Every binary op on every dtype pair and several operand-kind pairs the builder
/// accepts (tensor-tensor with broadcasting, tensor-scalar, constant-tensor, ...).
pub fn binary_cases() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for &op in BinaryOp::ALL {
        for a in DataType::ALL {
            for b in DataType::ALL {
                for (ka, kb) in [(0, 1), (0, 2), (3, 0), (2, 3)] {
                    if let Some(f) = try_build(|fd| {
                        let x = operand(fd, ka, a)?;
                        let y = operand(fd, kb, b)?;
                        fd.binary(op, x, y)
                    }) {
                        out.push((format!("{} on {a}, {b} ({ka}, {kb})", op.name()), f));
                    }
                }
            }
        }
    }
    out
}

/// Every ternary op on a few dtypes and operand-kind mixes.
pub fn ternary_cases() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for &op in TernaryOp::ALL {
        for d in [DataType::F32, DataType::BF16, DataType::I64, DataType::Bool] {
            for kinds in [[0, 1, 2, 3], [0, 3, 3, 2], [2, 0, 1, 0]] {
                if let Some(f) = try_build(|fd| {
                    let mut args = Vec::new();
                    for (i, &k) in kinds.iter().take(op.arity()).enumerate() {
                        let dt = if op == TernaryOp::Where && i == 0 {
                            DataType::Bool
                        } else {
                            d
                        };
                        args.push(operand(fd, k, dt)?);
                    }
                    fd.ternary(op, &args)
                }) {
                    out.push((format!("{} on {d} {kinds:?}", op.name()), f));
                }
            }
        }
    }
    out
}

/// Every reduction on every dtype it accepts (with and without keepdim, negative axes),
/// and the var / var_mean / welford family on a half and a double type.
pub fn reduction_cases() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for &op in ReductionOp::ALL {
        for d in DataType::ALL {
            for (axes, keepdim) in [
                (&[1i64][..], false),
                (&[0, -1][..], true),
                (&[-2][..], true),
            ] {
                if let Some(f) = try_build(|fd| {
                    let x = fd.define_tensor(d, &[-1, -1, 5])?;
                    fd.reduction(op, x, axes, keepdim)
                }) {
                    let name = format!("{} on {d} {axes:?} keepdim {keepdim}", op.name());
                    out.push((name, f));
                }
            }
        }
    }
    for d in [DataType::F16, DataType::F64] {
        if let Some(f) = try_build(|fd| {
            let x = fd.define_tensor(d, &[-1, 3])?;
            let v = fd.var(x, &[1], 0, true)?;
            let (v2, m) = fd.var_mean(x, &[0], 2, false)?;
            let (wm, wv, _) = fd.welford(x, &[1])?;
            let s = fd.add(wm, wv)?;
            fd.add_output(s)?;
            fd.add_output(v2)?;
            fd.add_output(m)?;
            Ok(v)
        }) {
            out.push((format!("var family on {d}"), f));
        }
    }
    out
}

/// A scan case's body: builds its inputs and the scan `op` of them.
type ScanBody = fn(&mut FusionDefinition, ScanOp) -> Result<ValId>;

/// Every scan (`cumsum`, `cumprod`, `cummax`, `cummin`) on every dtype, along the first,
/// middle and last axis of a rank-3 input (the last also counted from the end), plus
/// the shapes that take a path of their own in the builder: a 0-d tensor, a scanned
/// broadcast dim, a scanned expanded dim, a scan of a reduction's output (whose domain
/// keeps the reduced dim) and a scan of a scan.
pub fn scan_cases() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for &op in ScanOp::ALL {
        for d in DataType::ALL {
            for axis in [0i64, 1, 2, -1, -3] {
                if let Some(f) = try_build(|fd| {
                    let x = fd.define_tensor(d, &[-1, -1, 5])?;
                    fd.scan(op, x, axis)
                }) {
                    out.push((format!("{} on {d} axis {axis}", op.name()), f));
                }
            }
        }
        let shapes: [(&str, ScanBody); 5] = [
            ("0-d", |fd, op| {
                let x = fd.define_tensor(DataType::F16, &[])?;
                fd.scan(op, x, -1)
            }),
            ("broadcast dim", |fd, op| {
                let x = fd.define_tensor(DataType::I32, &[1, -1])?;
                fd.scan(op, x, 0)
            }),
            ("expanded dim", |fd, op| {
                let x = fd.define_tensor(DataType::BF16, &[1, -1])?;
                let n = fd.define_scalar(DataType::I64)?;
                let e = fd.expand(x, &[Size::Val(n), Size::Const(-1)])?;
                fd.scan(op, e, 0)
            }),
            ("reduction output", |fd, op| {
                let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
                let m = fd.max(x, &[1], false)?;
                fd.scan(op, m, 1)
            }),
            ("scan of a scan", |fd, op| {
                let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
                let s = fd.scan(op, x, 1)?;
                fd.scan(op, s, 0)
            }),
        ];
        for (what, body) in shapes {
            if let Some(f) = try_build(|fd| body(fd, op)) {
                out.push((format!("{} of a {what}", op.name()), f));
            }
        }
    }
    out
}

/// Every sort (`sort` both ways, `argsort`, `topk` of the largest and the smallest) on
/// every dtype the builder takes, along the first and the last axis (also counted from
/// the end) of a rank-3 input; the result is the values (the indices for `argsort`).
pub fn sort_cases() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for d in DataType::ALL {
        for axis in [0i64, 2, -1] {
            for (what, descending, k) in [
                ("sort", false, None),
                ("sort descending", true, None),
                ("argsort", false, None),
                ("topk largest", true, Some(2)),
                ("topk smallest", false, Some(2)),
            ] {
                if let Some(f) = try_build(|fd| {
                    let x = fd.define_tensor(d, &[-1, 3, 5])?;
                    let (v, i) = fd.sort_op(x, axis, descending, k)?;
                    Ok(if what == "argsort" { i } else { v })
                }) {
                    out.push((format!("{what} on {d} axis {axis}"), f));
                }
            }
        }
    }
    out
}

/// LayerNorm written with sums over the last dim of a rank-`rank` f32 input `x` with
/// weights `w`, `b` of `[hidden]`: `mean = sum(x, -1, keepdim) * (1 / hidden)`, `d = x -
/// mean`, `var = sum(d * d, -1, keepdim) * (1 / hidden)`, `r = rsqrt(var + 1e-12)`;
/// outputs `d * r * w + b`, `mean` and `r` (two keepdim per-row outputs that the
/// kernel also reads).
pub fn layer_norm_sums(rank: usize, hidden: i64) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &vec![-1; rank])?;
    let w = fd.define_tensor(DataType::F32, &[-1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let s = fd.sum(x, &[-1], true)?;
    let inv_h = fd.constant(1.0 / hidden as f64);
    let mean = fd.mul(s, inv_h)?;
    let d = fd.sub(x, mean)?;
    let d2 = fd.mul(d, d)?;
    let s2 = fd.sum(d2, &[-1], true)?;
    let var = fd.mul(s2, inv_h)?;
    let eps = fd.constant(1e-12);
    let ve = fd.add(var, eps)?;
    let r = fd.rsqrt(ve)?;
    let y = fd.mul(d, r)?;
    let y = fd.mul(y, w)?;
    let y = fd.add(y, b)?;
    fd.add_output(y)?;
    fd.add_output(mean)?;
    fd.add_output(r)?;
    fd.finish()
}

/// `t1 + sum(t0, axis, keepdim)` over f32 inputs of rank `rank`: the sum's extent in
/// `axis` is not `t1`'s (the reduced dim is broadcast back into a wider tensor).
pub fn sum_into_wider(rank: usize, axis: i64) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let t0 = fd.define_tensor(DataType::F32, &vec![-1; rank])?;
    let t1 = fd.define_tensor(DataType::F32, &vec![-1; rank])?;
    let s = fd.sum(t0, &[axis], true)?;
    let o = fd.add(t1, s)?;
    fd.add_output(o)?;
    fd.finish()
}

/// Fuzz seed 516791 (`fusion!` source): a `[2, 1]` input broadcast into the merged kept
/// loop (`2 * N`) of an outer reduction.
pub const FUZZ_BROADCAST_IN_KEPT_LOOP: &str = r#"
fn k(t1: Tensor<f32, [2, 1]>, t2: Tensor<bf16, [1, 2, _]>) -> Tensor<f32, [1, 2, _]> {
    let t3 = t1.broadcast([true, false, false]);
    let t4 = t3.atan2(t2);
    let t7 = t4.mean([0]);
    t7.broadcast([true, false, false])
}
"#;

/// Fuzz seed 510836 (`fusion!` source): a `[3, 1, 5]` input in a product over dims 0 and
/// 1 of `[3, N, 5]`, merged into one loop of `3 * N`.
pub const FUZZ_BROADCAST_IN_REDUCTION_LOOP: &str = r#"
fn k(t0: Tensor<f32, [3, _, 5]>, t1: Tensor<f64, [3, 1, 5]>) -> Tensor<f64, [1, 1, 5]> {
    let t2 = t1.atan2(t0);
    let t8 = t2.tanh();
    let t10 = t8 * 0.01;
    let t12 = t10 + 1.0;
    let t13 = t12.prod([0, 1]);
    t13.broadcast([true, true, false])
}
"#;

/// Fuzz seed 504258 (`fusion!` source): an expanded output (`[7, N, M]` from
/// `[7, N, 1]`) that the kernel reads back.
pub const FUZZ_EXPANDED_OUTPUT_READ_BACK: &str = r#"
fn k(t1: Tensor<i32, [7, _, _]>, t2: Tensor<bool, [7, _, 1]>) -> (Tensor<f32, [7, _, _]>, Tensor<bool, [7, _, _]>) {
    let s6 = t1.size(2);
    let t7 = t2.expand([-1, -1, s6]);
    let t9 = t7.minimum(t1);
    let t12 = t9.exp2();
    (t12, t7)
}
"#;

/// Fuzz seed 1117748 (`fusion!` source): a row sum broadcast back (`t4`, `[1]`) is read
/// by a full-size output's math (inside the persistent kernel's unrolled loop) and by a
/// broadcast-shaped output (outside it).
pub const FUZZ_BROADCAST_READ_IN_AND_OUT_OF_A_LOOP: &str = r#"
fn k(t1: Tensor<i32, [_]>) -> (Tensor<i64, [1]>, Tensor<i64, [_]>) {
    let t2 = t1 as i64;
    let t3 = t2.sum([0]);
    let t4 = t3.broadcast([true]);
    let t6 = t4.abs();
    let t8 = t6 + 1;
    let t9 = t1.remainder(t8);
    let t11 = t4 + t4;
    (t11, t9)
}
"#;

/// GPU fuzz seed 10603824 (`fusion!` source): an `iota` mask beside a variance over the
/// last dim of `[4, X, 8]` rows (the mask's rows merged into another extent than the
/// reference's).
pub const FUZZ_IOTA_MASK_BESIDE_ROW_VARIANCE: &str = r#"
fn k(x: Tensor<f64, [_, 16]>) -> (Tensor<f64, [4, _]>, Tensor<f64, [4, _]>) {
    let s = x.size(1);
    let rows = x.reshape([4, -1, s]).slice([.., .., (0, i64::MAX, 2)]);
    let (var, mean) = rows.var_mean([2], 0);
    let a = iota(var.size(0), 0, 1, i64).broadcast([false, true]);
    let b = iota(var.size(1), 0, 1, i64).broadcast([true, false]);
    (where_(b - a <= -2, var, 0.0), mean)
}
"#;

/// GPU fuzz seed 10604126 (`fusion!` source): an `iota` mask beside the `[B, C]` result
/// of a Welford over dim 0 of `[A, B, C]` (the mask's kept dims merged into another
/// extent than the columns').
pub const FUZZ_IOTA_MASK_BESIDE_COLUMN_WELFORD: &str = r#"
fn k(x: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _]> {
    let (avg, m2, n) = x.welford([0]);
    let a = iota(m2.size(0), 0, 1, i64).broadcast([false, true]);
    let b = iota(m2.size(1), 0, 1, i64).broadcast([true, false]);
    where_(b - a >= -2, avg, 0.0)
}
"#;

/// CPU fuzz seed 10902137 (`fusion!` source, its pointwise segment): `sigmoid(x)` read
/// by two outputs of a `[A, 1, C, D]` shape, one of them `x - w` with `w` broadcast over
/// the leading dims. The pointwise schedule loops over `A` serially; each output had a
/// loop nest of its own, so the shared producer needed all of `A` in registers.
pub const FUZZ_SHARED_PRODUCER_KEEPDIM: &str = r#"
fn k(x: Tensor<f32, [_, 1, _, _]>, w: Tensor<f32, [_]>) -> (Tensor<f32, [_, 1, _, _]>, Tensor<f32, [_, 1, _, _]>) {
    let a = x.sigmoid();
    let b = a.sigmoid();
    let c = a - w.broadcast([true, true, true, false]);
    (b, c)
}
"#;

/// The class of [`FUZZ_SHARED_PRODUCER_KEEPDIM`] without a size-1 dim: `w` broadcast
/// over dims 0 and 2 of four makes four groups of dims, and the first is a serial loop.
pub const FUZZ_SHARED_PRODUCER_ALTERNATING: &str = r#"
fn k(x: Tensor<f32, [_, _, _, _]>, w: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _, _, _]>, Tensor<f32, [_, _, _, _]>) {
    let a = x.sigmoid();
    let b = a.sigmoid();
    let c = a - w.broadcast([true, false, true, false]);
    (b, c)
}
"#;

/// GPU fuzz seed 11337506 (`fusion!` source): a variance over a size-1 dim (the rows'
/// `[A, B]` results) plus a per-row `[A, 1]` sum. Its segment bound `blockIdx.x` to
/// `A * B / 4` for the rows and to `A / 4` for the per-row input.
pub const FUZZ_PER_ROW_INPUT_BESIDE_ROWS: &str = r#"
fn k(t0: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_, _]> {
    let t4 = t0.sum([1]);
    let (t6, _t7) = t0.var_mean([2], 0);
    (t4 + t6).atan()
}
"#;
