//! Shared test helpers: seeded random tensors, dtype-aware comparison, and gradients of
//! a function of some variables under a random output gradient.

#![allow(dead_code)]

pub mod reference;

use candle_core::{DType, Device, Result, Tensor, Var};

/// A small deterministic generator (SplitMix64), so every test is reproducible without
/// depending on candle's global RNG.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// A tensor of `dims` with values uniform in `[lo, hi)`, in `dtype`.
    pub fn tensor(&mut self, dims: &[usize], lo: f32, hi: f32, dtype: DType) -> Result<Tensor> {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.uniform(lo, hi)).collect();
        Tensor::from_vec(v, dims, &Device::Cpu)?.to_dtype(dtype)
    }

    /// A variable of `dims` with values uniform in `[-2, 2)`.
    pub fn var(&mut self, dims: &[usize], dtype: DType) -> Result<Var> {
        Var::from_tensor(&self.tensor(dims, -2.0, 2.0, dtype)?)
    }

    /// A u32 tensor of `dims` with values in `0..bound`.
    pub fn labels(&mut self, dims: &[usize], bound: u32) -> Result<Tensor> {
        let n: usize = dims.iter().product();
        let v: Vec<u32> = (0..n)
            .map(|_| (self.next_u64() % bound as u64) as u32)
            .collect();
        Tensor::from_vec(v, dims, &Device::Cpu)
    }
}

/// A tolerance: element `i` passes when `|got - want| <= atol * max|want| + rtol * |want_i|`
/// (`max|want|` at least 1), so values near zero after cancellation are judged on the
/// tensor's scale.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub rtol: f64,
    pub atol: f64,
}

/// Forward tolerance for outputs of `dtype`.
pub fn fwd_tol(dtype: DType) -> Tol {
    match dtype {
        DType::F32 => Tol {
            rtol: 1e-5,
            atol: 2e-6,
        },
        DType::F64 => Tol {
            rtol: 1e-12,
            atol: 1e-12,
        },
        // One rounding of each side to 8 (bf16) or 11 (f16) significant bits.
        DType::BF16 => Tol {
            rtol: 1.6e-2,
            atol: 4e-3,
        },
        DType::F16 => Tol {
            rtol: 2e-3,
            atol: 5e-4,
        },
        _ => Tol {
            rtol: 0.0,
            atol: 0.0,
        },
    }
}

/// Gradient tolerance for gradients of `dtype` (sums over rows, more roundings).
pub fn grad_tol(dtype: DType) -> Tol {
    match dtype {
        DType::F32 => Tol {
            rtol: 1e-4,
            atol: 2e-5,
        },
        DType::F64 => Tol {
            rtol: 1e-10,
            atol: 1e-11,
        },
        DType::BF16 => Tol {
            rtol: 2.5e-2,
            atol: 1e-2,
        },
        DType::F16 => Tol {
            rtol: 4e-3,
            atol: 1e-3,
        },
        _ => Tol {
            rtol: 0.0,
            atol: 0.0,
        },
    }
}

/// The worst element of a comparison.
#[derive(Debug)]
pub struct Diff {
    pub max_abs: f64,
    pub max_rel: f64,
    pub worst: Option<(usize, f64, f64)>,
}

/// Compares two tensors of one shape and dtype elementwise (in f64).
pub fn diff(got: &Tensor, want: &Tensor, tol: Tol) -> Result<(Diff, bool)> {
    let g = got.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
    let w = want.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
    let scale = w.iter().fold(1f64, |m, v| m.max(v.abs()));
    let mut d = Diff {
        max_abs: 0.0,
        max_rel: 0.0,
        worst: None,
    };
    let mut ok = true;
    let mut worst_excess = f64::NEG_INFINITY;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let err = (a - b).abs();
        let bound = tol.atol * scale + tol.rtol * b.abs();
        // NaN fails too.
        if err.is_nan() || err > bound {
            ok = false;
        }
        d.max_abs = d.max_abs.max(err);
        if b != 0.0 {
            d.max_rel = d.max_rel.max(err / b.abs());
        }
        let excess = if err.is_nan() {
            f64::INFINITY
        } else {
            err - bound
        };
        if excess > worst_excess {
            worst_excess = excess;
            d.worst = Some((i, a, b));
        }
    }
    Ok((d, ok))
}

/// Asserts two tensors agree within `tol` (same shape and dtype), naming `what`.
pub fn assert_close(what: &str, got: &Tensor, want: &Tensor, tol: Tol) {
    assert_eq!(got.dims(), want.dims(), "{what}: shapes differ");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtypes differ");
    let (d, ok) = diff(got, want, tol).expect("comparison");
    if std::env::var_os("NVFUSER_CANDLE_SHOW_DIFFS").is_some() {
        eprintln!(
            "{what}: max abs {:.2e}, max rel {:.2e}",
            d.max_abs, d.max_rel
        );
    }
    assert!(
        ok,
        "{what}: not within {tol:?}: max abs {:.3e}, worst element (index, got, want) {:?}",
        d.max_abs, d.worst
    );
}

/// Runs `f` on the variables' tensors, then backward of `sum(f(..) * r)` for a random
/// `r` (seeded) in the output's shape: returns the output and each variable's gradient
/// (zeros where none reached it).
pub fn value_and_grads(
    vars: &[&Var],
    seed: u64,
    f: impl Fn(&[&Tensor]) -> Result<Tensor>,
) -> Result<(Tensor, Vec<Tensor>)> {
    let tensors: Vec<&Tensor> = vars.iter().map(|v| v.as_tensor()).collect();
    let y = f(&tensors)?;
    let r = Rng::new(seed).tensor(y.dims(), -1.0, 1.0, DType::F32)?;
    let loss = (y.to_dtype(DType::F32)? * r)?.sum_all()?;
    let grads = loss.backward()?;
    let mut out = Vec::new();
    for v in vars {
        out.push(match grads.get(v.as_tensor()) {
            Some(g) => g.clone(),
            None => v.as_tensor().zeros_like()?,
        });
    }
    Ok((y, out))
}

/// Checks an op against its reference: the values and every variable's gradient.
pub fn check_op(
    what: &str,
    vars: &[&Var],
    seed: u64,
    fused: impl Fn(&[&Tensor]) -> Result<Tensor>,
    reference: impl Fn(&[&Tensor]) -> Result<Tensor>,
) {
    let (y, g) =
        value_and_grads(vars, seed, fused).unwrap_or_else(|e| panic!("{what}: fused: {e}"));
    let (y_ref, g_ref) =
        value_and_grads(vars, seed, reference).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    assert_close(
        &format!("{what}: value"),
        &y,
        &y_ref,
        fwd_tol(y_ref.dtype()),
    );
    for (i, (a, b)) in g.iter().zip(&g_ref).enumerate() {
        assert_close(
            &format!("{what}: gradient of input {i}"),
            a,
            b,
            grad_tol(b.dtype()),
        );
    }
}
