//! The comparison rule of a call's outputs with the reference, and its tolerance: the
//! loosest float dtype of the fusion, widened where the GPU combines many values in
//! another order than the reference (reductions and scans) and where the error grows
//! with the number of values combined (f32 products and f32 scans).

use nvfuser::eval::{EvalInput, HostData, HostTensor};
use nvfuser::fp8::{f8e4m3, f8e5m2};
use nvfuser::ir::{Op, ReductionOp, ScanOp};
use nvfuser::prelude::*;

use crate::args::CallSpec;

/// f32's unit roundoff, 2^-24: the most one f32 operation's rounding moves a value,
/// relative to it.
const F32_UNIT: f64 = f32::EPSILON as f64 / 2.0;

/// The comparison rule: NaN where the reference has NaN, the same infinities, and
/// otherwise `|got - want| <= rtol * (|want| + scale)`, with `scale` the largest finite
/// magnitude of the reference output (at least 1): a norm-wise bound that tolerates
/// cancellation in values much smaller than their neighbours. `rtol` is the loosest of
/// the float dtypes the fusion computes in. Integers and bools compare exactly.
pub fn compare(got: &HostTensor, want: &HostTensor, rtol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, reference {:?}",
            got.shape(),
            want.shape()
        ));
    }
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {}, reference {}", got.dtype(), want.dtype()));
    }
    if got.dtype().is_fp8() {
        return compare_fp8(got, want, rtol);
    }
    match (got.data(), want.data()) {
        (HostData::Float(g), HostData::Float(w)) => {
            let scale = w
                .iter()
                .filter(|v| v.is_finite())
                .fold(1.0f64, |m, v| m.max(v.abs()));
            let first = mismatches(g.iter().copied(), w.iter().copied(), |g, w| {
                if w.is_nan() {
                    g.is_nan()
                } else if w.is_infinite() || g.is_infinite() {
                    g == w || (g.is_finite() && g.abs() > 1e30 && g.signum() == w.signum())
                } else {
                    (g - w).abs() <= rtol * (w.abs() + scale)
                }
            });
            match first {
                None => Ok(()),
                Some((bad, k, g, w)) => Err(format!(
                    "{bad} of {} values differ; first at flat index {k}: got {g:e}, reference {w:e} (rtol {rtol:e}, scale {scale:e})",
                    want.numel()
                )),
            }
        }
        (HostData::Int(g), HostData::Int(w)) => exact(g.iter(), w.iter(), want.numel()),
        (HostData::Bool(g), HostData::Bool(w)) => exact(g.iter(), w.iter(), want.numel()),
        _ => Err("storage kinds differ".into()),
    }
}

/// The position of an fp8 byte on the number line, in steps of one unit in the last
/// place: `±(b & 0x7f)` (both zeros are 0; e5m2's infinity is the step after 57344,
/// e4m3's NaN pattern the step after 448, where its overflow lands).
fn fp8_step(b: u8) -> i32 {
    let m = i32::from(b & 0x7f);
    if b & 0x80 != 0 {
        -m
    } else {
        m
    }
}

/// fp8 outputs: with `ulp` (a GPU call), each byte equal to the reference's or its
/// neighbour, one unit in the last place away, which an upstream f32 value one f32 ulp
/// off gives when it lies near a rounding boundary (e4m3: 448 beside the NaN its
/// overflow becomes); NaN where the reference has an e5m2 NaN (any sign: NaN signs are
/// not part of the semantics), or values within the f32 rule of [`compare`] (an upstream
/// f32 value that cancels to about zero on one device and to exactly zero on the other
/// rounds to fp8 values several subnormal steps apart: GPU fuzz seed 10100034, e5m2
/// 0x82 against 0x00). Without `ulp` (`rtol` 0), equal bytes (NaN: any NaN).
fn compare_fp8(got: &HostTensor, want: &HostTensor, rtol: f64) -> Result<(), String> {
    let ulp = rtol > 0.0;
    let bytes = |t: &HostTensor| -> Result<Vec<u8>, String> {
        let r = match t.dtype() {
            DataType::F8E4M3 => t
                .to_vec::<f8e4m3>()
                .map(|v| v.iter().map(|x| x.to_bits()).collect()),
            _ => t
                .to_vec::<f8e5m2>()
                .map(|v| v.iter().map(|x| x.to_bits()).collect()),
        };
        r.map_err(|e| e.to_string())
    };
    let (g, w) = (bytes(got)?, bytes(want)?);
    let e5m2 = want.dtype() == DataType::F8E5M2;
    let value = |b: u8| -> f64 {
        if e5m2 {
            f64::from(f8e5m2::from_bits(b).to_f32())
        } else {
            f64::from(f8e4m3::from_bits(b).to_f32())
        }
    };
    let scale = w
        .iter()
        .map(|&b| value(b))
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, v| m.max(v.abs()));
    let nan = |b: u8| {
        if e5m2 {
            b & 0x7f > 0x7c
        } else {
            b & 0x7f == 0x7f
        }
    };
    let first = mismatches(g.iter().copied(), w.iter().copied(), |g, w| {
        if nan(g) && nan(w) {
            true
        } else if e5m2 && (nan(g) || nan(w)) {
            false
        } else if ulp {
            // e4m3 NaN patterns as the step past ±448 (either sign, see above).
            let step = |b: u8| if nan(b) { 127 } else { fp8_step(b) };
            let (sg, sw) = (step(g), step(w));
            if nan(g) || nan(w) {
                sg.abs() >= 126 && sw.abs() >= 126
            } else {
                let (vg, vw) = (value(g), value(w));
                (sg - sw).abs() <= 1
                    || (vg.is_finite()
                        && vw.is_finite()
                        && (vg - vw).abs() <= rtol * (vw.abs() + scale))
            }
        } else {
            g == w || (g & 0x7f == 0 && w & 0x7f == 0)
        }
    });
    match first {
        None => Ok(()),
        Some((bad, k, g, w)) => Err(format!(
            "{bad} of {} {} values differ by more than {}; first at flat index {k}: got {g:#04x}, reference {w:#04x}",
            want.numel(),
            want.dtype(),
            if ulp { "one unit in the last place" } else { "nothing" }
        )),
    }
}

/// The number of pairs `ok` refuses and the first of them (its flat index, got,
/// reference), or `None` when every pair passes.
fn mismatches<T: Copy>(
    g: impl Iterator<Item = T>,
    w: impl Iterator<Item = T>,
    ok: impl Fn(T, T) -> bool,
) -> Option<(usize, usize, T, T)> {
    let mut bad = 0usize;
    let mut first = None;
    for (k, (g, w)) in g.zip(w).enumerate() {
        if !ok(g, w) {
            bad += 1;
            first.get_or_insert((k, g, w));
        }
    }
    first.map(|(k, g, w)| (bad, k, g, w))
}

fn exact<T: Copy + PartialEq + std::fmt::Debug>(
    g: impl Iterator<Item = T>,
    w: impl Iterator<Item = T>,
    n: usize,
) -> Result<(), String> {
    match mismatches(g, w, |g, w| g == w) {
        None => Ok(()),
        Some((bad, k, g, w)) => Err(format!(
            "{bad} of {n} values differ; first at flat index {k}: got {g:?}, reference {w:?}"
        )),
    }
}

/// The relative tolerance of a fusion: the loosest of its float dtypes.
pub fn rtol_for(fusion: &Fusion) -> f64 {
    let mut rtol: f64 = 1e-9;
    for (_, v) in fusion.vals() {
        let r = match v.dtype {
            DataType::F64 => 1e-9,
            DataType::F32 => 2e-4,
            DataType::F16 => 4e-3,
            DataType::BF16 => 2e-2,
            // fp8 values other values read are computed bit for bit on both devices
            // (the generator ends a chain at an inexact fp8 value); fp8 outputs have
            // their own rule (`compare_fp8`).
            _ => continue,
        };
        rtol = rtol.max(r);
    }
    // A reduction, or a running sum or product, of f32 values over thousands of
    // elements in another order.
    let combines = |op: &Op| match op {
        Op::Scan { op, .. } => accumulates(*op),
        op => op.reduction_axes().is_some(),
    };
    if rtol < 1e-3 && fusion.exprs().any(|(_, e)| combines(&e.op)) {
        rtol = rtol.max(1e-3);
    }
    rtol
}

/// The tolerance of one call: [`rtol_for`], widened where the error grows with the
/// number of values combined.
///
/// - An f32 product: the GPU multiplies in f32 (the reference in f64), and a product of
///   `n` f32 factors near 1 drifts by up to about `n` ulps, not randomly but with a bias
///   (measured: -0.5% over 2^18 factors in 512 chains), so the bound grows with the
///   elements combined (the call's universe, a bound on any reduction's).
/// - An f32 scan (`cumsum`/`cumprod` of f32, f16 or bf16, which scan in f32): element
///   `i` of a running sum or product in f32 has up to `i` roundings of the running
///   value, in whatever association order the kernel takes (per-thread runs, block
///   carries), so its error is at most about `n * 2^-24 * max |running value|` for a
///   scanned length `n`: the bound a sum over the same `n` elements gets. `n` is the
///   scanned extent for this call's arguments (the universe when it depends on values
///   computed inside the fusion). Against the norm-wise rule of [`compare`] (whose
///   scale is the output's largest magnitude), this is `rtol >= n * 2^-24`. A wrong
///   scan misses by a whole element (exclusive), by the sum of the others (reversed)
///   or by a whole block's prefix (a lost carry), far beyond it for the lengths the
///   fuzzer draws (the tests below).
pub fn rtol_for_call(fusion: &Fusion, rtol: f64, call: &CallSpec, inputs: &[EvalInput]) -> f64 {
    let f32_prod = fusion.exprs().any(|(_, e)| {
        matches!(
            e.op,
            Op::Reduction {
                op: ReductionOp::Prod,
                ..
            }
        ) && e
            .outputs
            .iter()
            .any(|&o| fusion.val(o).dtype == DataType::F32)
    });
    let mut rtol = rtol;
    if f32_prod {
        rtol = rtol.max(call.elements as f64 * F32_UNIT);
    }
    for n in f32_scan_lengths(fusion, inputs, call.elements) {
        rtol = rtol.max(n as f64 * F32_UNIT);
    }
    rtol
}

/// A running sum or product (the scans whose values round); `cummax`/`cummin` select.
fn accumulates(op: ScanOp) -> bool {
    matches!(op, ScanOp::Sum | ScanOp::Prod)
}

/// The scanned length of every `cumsum`/`cumprod` computed in f32, for the arguments
/// `inputs`: the scanned dim's extent evaluated from the input sizes and scalar inputs,
/// or `elements` (the call's universe) where it needs a value computed in the fusion.
fn f32_scan_lengths(fusion: &Fusion, inputs: &[EvalInput], elements: usize) -> Vec<usize> {
    let dim = |t: ValId, axis: usize| match inputs.get(fusion.input_position(t)?)? {
        EvalInput::Tensor(h) => h.shape().get(axis).map(|&n| n as i64),
        EvalInput::Scalar(_) => None,
    };
    let scalar = |v: ValId| match inputs.get(fusion.input_position(v)?)? {
        EvalInput::Scalar(ScalarValue::Int(i)) => Some(*i),
        _ => None,
    };
    fusion
        .exprs()
        .filter_map(|(_, e)| match e.op {
            Op::Scan { op, axis } if accumulates(op) => Some((e, axis)),
            _ => None,
        })
        .filter(|(e, _)| {
            e.outputs
                .iter()
                .any(|&o| fusion.val(o).dtype == DataType::F32)
        })
        .map(|(e, axis)| {
            let extent = fusion
                .tensor_type(e.inputs[0])
                .and_then(|t| t.shape_dims().get(axis).cloned())
                .and_then(|d| d.extent.eval(&dim, &scalar));
            extent.map_or(elements, |n| n.max(0) as usize)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! The rule against scans as a GPU may compute them (f32 running values, one lane
    //! at a time or in blocks with carries) and as a wrong kernel would (exclusive,
    //! reversed, a lost block carry), on the fuzzer's data (`HostTensor::random`).

    use nvfuser::eval::evaluate;

    use super::*;

    /// fp8 outputs: one unit in the last place on a GPU, or the f32 rule's difference.
    #[test]
    fn fp8_outputs_may_differ_by_one_unit_in_the_last_place() {
        let e4 = |b: &[u8]| {
            let v: Vec<f8e4m3> = b.iter().map(|&x| f8e4m3::from_bits(x)).collect();
            HostTensor::from_vec(v, &[b.len()]).unwrap()
        };
        let e5 = |b: &[u8]| {
            let v: Vec<f8e5m2> = b.iter().map(|&x| f8e5m2::from_bits(x)).collect();
            HostTensor::from_vec(v, &[b.len()]).unwrap()
        };
        let want = e4(&[0x38, 0x7e, 0x80, 0x01, 0xff]);
        // 1.0 -> 1.125, 448 -> NaN (its overflow), -0 -> +2^-9... one step each.
        compare(&e4(&[0x39, 0x7f, 0x01, 0x00, 0xfe]), &want, 1e-4).unwrap();
        compare(&e4(&[0x37, 0xff, 0x81, 0x02, 0x7f]), &want, 1e-4).unwrap();
        // Two steps, or a sign flip away from zero: refused.
        assert!(compare(&e4(&[0x3a, 0x7e, 0x80, 0x01, 0xff]), &want, 1e-4).is_err());
        let small = e4(&[0x38, 0x01]);
        assert!(compare(&e4(&[0x38, 0x81]), &small, 1e-4).is_err());
        // ... unless the f32 rule allows the difference: a value that cancels to about
        // zero beside values of magnitude 4 (GPU fuzz seed 10100034: e5m2 0x82 for 0x00).
        let cancel = e5(&[0x44, 0x00]);
        compare(&e5(&[0x44, 0x82]), &cancel, 2e-2).unwrap();
        assert!(compare(&e5(&[0x44, 0x82]), &cancel, 1e-6).is_err());
        assert!(compare(
            &e4(&[0x38, 0x7d, 0x80, 0x01, 0xff]),
            &e4(&[0x38, 0x7f, 0x80, 0x01, 0xff]),
            1e-4
        )
        .is_err());
        // The CPU device: equal bytes (zeros of either sign, NaNs of either sign).
        compare(&e4(&[0x38, 0x7e, 0x00, 0x01, 0x7f]), &want, 0.0).unwrap();
        assert!(compare(&e4(&[0x39, 0x7e, 0x80, 0x01, 0xff]), &want, 0.0).is_err());
        // e5m2: 57344 beside inf; NaN only where the reference has NaN.
        let want = e5(&[0x7b, 0x7f, 0x3c]);
        compare(&e5(&[0x7c, 0xfd, 0x3d]), &want, 1e-4).unwrap();
        assert!(compare(&e5(&[0x7b, 0x7c, 0x3c]), &want, 1e-4).is_err());
        assert!(compare(&e5(&[0x7b, 0x7f, 0x7f]), &want, 1e-4).is_err());
    }

    const ROWS: usize = 8;
    const LEN: usize = 1000;
    const SEEDS: usize = 16;

    /// `op` of an `[R, L]` input of `dtype` along dim 1 (a float `cumprod` over factors
    /// `1 + tanh(x) / 128`, as the generator makes them along a universe dim), and, as
    /// a second output, the scan's operand in f32 (what a kernel scans).
    fn scan_fusion(op: ScanOp, dtype: DataType) -> Fusion {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(dtype, &[-1, -1]).unwrap();
        let x = if op == ScanOp::Prod {
            let t = fd.tanh(x).unwrap();
            let k = fd.constant(if dtype == DataType::F32 {
                1.0 / 128.0
            } else {
                0.01
            });
            let t = fd.mul(t, k).unwrap();
            let one = fd.constant(1.0);
            fd.add(t, one).unwrap()
        } else {
            x
        };
        let y = fd.scan(op, x, 1).unwrap();
        fd.add_output(y).unwrap();
        let operand = fd.cast(x, DataType::F32).unwrap();
        fd.add_output(operand).unwrap();
        fd.finish().unwrap()
    }

    /// The reference's scan, its operand in f32 (f64 for an f64 scan), and the rule's
    /// `rtol` for a call on `x`.
    fn reference(fusion: &Fusion, x: &HostTensor) -> (HostTensor, Vec<f64>, f64) {
        let inputs = vec![EvalInput::Tensor(x.clone())];
        let mut outs = evaluate(fusion, &inputs).unwrap();
        let operand = outs.remove(1).to_f64_vec();
        let call = CallSpec {
            data_seed: 0,
            args: vec![],
            elements: x.numel(),
        };
        let rtol = rtol_for_call(fusion, rtol_for(fusion), &call, &inputs);
        (outs.remove(0), operand, rtol)
    }

    /// How a kernel combines two values: the scan's op, its result rounded to the
    /// computation type (f32, or f64 for an f64 scan).
    #[derive(Clone, Copy)]
    struct Combine {
        op: ScanOp,
        f32: bool,
    }

    impl Combine {
        fn of(op: ScanOp, dtype: DataType) -> Combine {
            Combine {
                op,
                f32: dtype != DataType::F64,
            }
        }

        fn apply(self, a: f64, b: f64) -> f64 {
            let v = match self.op {
                ScanOp::Sum => a + b,
                ScanOp::Prod => a * b,
                _ if a.is_nan() || b.is_nan() => f64::NAN,
                ScanOp::Max => a.max(b),
                ScanOp::Min => a.min(b),
            };
            if self.f32 {
                v as f32 as f64
            } else {
                v
            }
        }

        fn identity(self) -> f64 {
            match self.op {
                ScanOp::Sum => 0.0,
                ScanOp::Prod => 1.0,
                ScanOp::Max => f64::NEG_INFINITY,
                ScanOp::Min => f64::INFINITY,
            }
        }
    }

    /// A scan of one lane, one element after the other.
    fn sequential(lane: &[f64], c: Combine) -> Vec<f64> {
        let mut out: Vec<f64> = Vec::with_capacity(lane.len());
        for &v in lane {
            out.push(out.last().map_or(v, |&acc| c.apply(acc, v)));
        }
        out
    }

    /// A scan of one lane as a block-wise kernel computes it: each block of `block`
    /// elements scanned in log steps (Hillis-Steele), then the carry of the blocks
    /// before it combined in (unless `carry` is false: the lost-carry bug).
    fn blocked(lane: &[f64], c: Combine, block: usize, carry: bool) -> Vec<f64> {
        let mut out = Vec::with_capacity(lane.len());
        let mut before: Option<f64> = None;
        for chunk in lane.chunks(block) {
            let mut v = chunk.to_vec();
            let mut d = 1;
            while d < v.len() {
                let prev = v.clone();
                for i in d..v.len() {
                    v[i] = c.apply(prev[i - d], prev[i]);
                }
                d *= 2;
            }
            if let (Some(b), true) = (before, carry) {
                v.iter_mut().for_each(|x| *x = c.apply(b, *x));
            }
            before = v.last().copied().or(before);
            out.extend(v);
        }
        out
    }

    /// The kernel `f` applied to every lane (row) of the operand, as a tensor of
    /// `dtype` (rounded to it, as the builder's cast back does).
    fn kernel(
        operand: &[f64],
        len: usize,
        dtype: DataType,
        f: impl Fn(&[f64]) -> Vec<f64>,
    ) -> HostTensor {
        let out: Vec<f64> = operand.chunks(len).flat_map(f).collect();
        let rows = out.len() / len;
        HostTensor::from_vec(out, &[rows, len]).unwrap().cast(dtype)
    }

    #[test]
    fn right_scans_pass_and_wrong_ones_are_caught() {
        let cases = [
            (ScanOp::Sum, DataType::F32),
            (ScanOp::Sum, DataType::F16),
            (ScanOp::Sum, DataType::BF16),
            (ScanOp::Sum, DataType::F64),
            (ScanOp::Prod, DataType::F32),
            (ScanOp::Prod, DataType::F16),
            (ScanOp::Prod, DataType::BF16),
            (ScanOp::Prod, DataType::F64),
            (ScanOp::Max, DataType::F32),
            (ScanOp::Min, DataType::BF16),
        ];
        let mut missed_exclusive = vec![0usize; cases.len()];
        for (k, &(op, dtype)) in cases.iter().enumerate() {
            let fusion = scan_fusion(op, dtype);
            let c = Combine::of(op, dtype);
            for seed in 0..SEEDS as u64 {
                let x = HostTensor::random(dtype, &[ROWS, LEN], seed);
                let (want, a, rtol) = reference(&fusion, &x);
                let out = want.dtype();
                let what = format!("{} of {dtype}, seed {seed}, rtol {rtol:e}", op.name());
                let right = [
                    ("sequential", kernel(&a, LEN, out, |l| sequential(l, c))),
                    (
                        "blocks of 256",
                        kernel(&a, LEN, out, |l| blocked(l, c, 256, true)),
                    ),
                    (
                        "blocks of 32",
                        kernel(&a, LEN, out, |l| blocked(l, c, 32, true)),
                    ),
                ];
                for (how, got) in &right {
                    if let Err(e) = compare(got, &want, rtol) {
                        panic!("{what}: a right scan ({how}) fails: {e}");
                    }
                }
                let exclusive = |l: &[f64]| {
                    let mut s = sequential(l, c);
                    s.pop();
                    s.insert(0, c.identity());
                    s
                };
                let reversed = |l: &[f64]| {
                    let r: Vec<f64> = l.iter().rev().copied().collect();
                    sequential(&r, c).into_iter().rev().collect()
                };
                let wrong = [
                    ("exclusive", kernel(&a, LEN, out, exclusive)),
                    ("reversed", kernel(&a, LEN, out, reversed)),
                    (
                        "without block carries",
                        kernel(&a, LEN, out, |l| blocked(l, c, 256, false)),
                    ),
                ];
                for (how, got) in &wrong {
                    let caught = compare(got, &want, rtol).is_err();
                    if *how == "exclusive" && !caught {
                        missed_exclusive[k] += 1;
                    } else {
                        assert!(caught, "{what}: a wrong scan ({how}) passes");
                    }
                }
            }
        }
        // An exclusive scan differs from the inclusive one by one element. bf16's rtol
        // (2e-2 of the output's largest magnitude, five bf16 ulps) is wider than one
        // element of a running sum past about 50 elements' worth, and than every factor
        // near 1 of a running product, so there only reversed scans and lost carries
        // are caught for sure; f64, f32 and f16 catch all three every time.
        for (k, &(op, dtype)) in cases.iter().enumerate() {
            let allowed = match (op, dtype) {
                (ScanOp::Sum, DataType::BF16) => 2,
                (ScanOp::Prod, DataType::BF16) => SEEDS,
                _ => 0,
            };
            assert!(
                missed_exclusive[k] <= allowed,
                "{} of {dtype}: {} of {SEEDS} exclusive scans pass",
                op.name(),
                missed_exclusive[k]
            );
        }
    }

    #[test]
    fn the_widening_follows_the_scanned_length() {
        // Along dim 1 of [8, 1000]: 1000 elements, below the reductions' 1e-3.
        let fusion = scan_fusion(ScanOp::Sum, DataType::F32);
        let x = HostTensor::random(DataType::F32, &[ROWS, LEN], 1);
        assert_eq!(reference(&fusion, &x).2, 1e-3);
        let inputs = [EvalInput::Tensor(x)];
        assert_eq!(f32_scan_lengths(&fusion, &inputs, 8000), [LEN]);
        // A length that needs a value computed in the fusion is the universe's.
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::BF16, &[-1]).unwrap();
        let n = fd.size(x, 0).unwrap();
        let two = fd.constant(2i64);
        let n = fd.mul(n, two).unwrap();
        let p = fd.cat(&[x, x], 0).unwrap();
        let p = fd.cumprod(p, 0).unwrap();
        let s = fd.reshape(p, &[Size::Val(n)]).unwrap();
        let s = fd.cumsum(s, -1).unwrap();
        fd.add_output(s).unwrap();
        let fusion = fd.finish().unwrap();
        let inputs = [EvalInput::Tensor(HostTensor::random(
            DataType::BF16,
            &[3],
            0,
        ))];
        assert_eq!(f32_scan_lengths(&fusion, &inputs, 7), [6, 7]);

        // 2^20 elements of 0.1 summed one after the other in f32 end at 105892 instead
        // of 104858 (each step rounds the same way, +1%); n 2^-24 = 1/16 covers it
        // (a merged dim of the universe is that long), and a lost carry is still far
        // outside.
        const N: usize = 1 << 20;
        let fusion = scan_fusion(ScanOp::Sum, DataType::F32);
        let x = HostTensor::from_vec(vec![0.1f32; N], &[1, N]).unwrap();
        let (want, a, rtol) = reference(&fusion, &x);
        assert_eq!(rtol, N as f64 * F32_UNIT);
        let c = Combine::of(ScanOp::Sum, DataType::F32);
        let serial = kernel(&a, N, DataType::F32, |l| sequential(l, c));
        assert!(compare(&serial, &want, 1e-3).is_err());
        compare(&serial, &want, rtol).unwrap();
        let blocks = kernel(&a, N, DataType::F32, |l| blocked(l, c, 1024, true));
        compare(&blocks, &want, rtol).unwrap();
        let lost = kernel(&a, N, DataType::F32, |l| blocked(l, c, 1024, false));
        assert!(compare(&lost, &want, rtol).is_err());
    }
}
