//! Scalar math that `std` lacks: erfinv, GELU, PyTorch's remainder/lerp, NaN-propagating
//! minimum/maximum and integer helpers.

/// 2 / sqrt(pi).
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// Giles' single-precision approximation of erfinv(a) / a, with `w = -ln((1-a)(1+a))`
/// ("Approximating the erfinv function", GPU Computing Gems, 2011).
fn giles(w: f64) -> f64 {
    if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        p = 3.432_739_39e-07 + p * w;
        p = -3.523_387_7e-06 + p * w;
        p = -4.391_506_54e-06 + p * w;
        p = 0.000_218_580_87 + p * w;
        p = -0.001_253_725_03 + p * w;
        p = -0.004_177_681_64 + p * w;
        p = 0.246_640_727 + p * w;
        1.501_409_41 + p * w
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        p = 0.000_100_950_558 + p * w;
        p = 0.001_349_343_22 + p * w;
        p = -0.003_673_428_44 + p * w;
        p = 0.005_739_507_73 + p * w;
        p = -0.007_622_461_3 + p * w;
        p = 0.009_438_870_47 + p * w;
        p = 1.001_674_06 + p * w;
        2.832_976_82 + p * w
    }
}

/// The inverse error function: `erf(erfinv(y)) == y` for `y` in (-1, 1);
/// `erfinv(±1) = ±inf`, NaN outside [-1, 1] and for NaN.
///
/// Giles' approximation (about 1e-7 relative) refined by Halley steps on `erf` for
/// `|y| <= 0.5` and on `erfc` (with the exact `1 - |y|`) above, which keeps full relative
/// accuracy in the tails; accurate to a few units in the last place of f64.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return f64::INFINITY.copysign(y);
    }
    if y == 0.0 {
        return y;
    }
    let a = y.abs();
    let w = -((1.0 - a) * (1.0 + a)).ln();
    let mut x = giles(w) * a;
    if a <= 0.5 {
        for _ in 0..8 {
            let f = libm::erf(x) - a;
            let d = TWO_OVER_SQRT_PI * (-x * x).exp();
            let dx = f / (d + x * f);
            x -= dx;
            if dx.abs() <= 1e-17 * x.abs() {
                break;
            }
        }
    } else {
        // 1 - a is exact for a in [0.5, 1] (Sterbenz).
        let c = 1.0 - a;
        for _ in 0..12 {
            let f = libm::erfc(x) - c;
            let d = TWO_OVER_SQRT_PI * (-x * x).exp();
            let dx = f / (x * f - d);
            if !dx.is_finite() {
                break;
            }
            x -= dx;
            if dx.abs() <= 1e-17 * x.abs() {
                break;
            }
        }
    }
    x.copysign(y)
}

/// GELU, exact: `x/2 * (1 + erf(x / sqrt 2))`.
pub(crate) fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
}

/// GELU, tanh approximation: `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
pub(crate) fn gelu_tanh(x: f64) -> f64 {
    const K: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
    0.5 * x * (1.0 + (K * (x + 0.044715 * x * x * x)).tanh())
}

/// PyTorch's floating `remainder`: `fmod` adjusted to the sign of the divisor.
pub(crate) fn remainder_f(a: f64, b: f64) -> f64 {
    let m = a % b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m + b
    } else {
        m
    }
}

/// Python's integer `%` (sign of the divisor); `b` is nonzero.
pub(crate) fn remainder_i(a: i64, b: i64) -> i64 {
    let m = a.wrapping_rem(b);
    if m != 0 && ((b < 0) != (m < 0)) {
        m + b
    } else {
        m
    }
}

/// Minimum that returns NaN when either operand is NaN (and -0 below +0).
pub(crate) fn minimum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b || (a == b && a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// Maximum that returns NaN when either operand is NaN (and +0 above -0).
pub(crate) fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b || (a == b && b.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// PyTorch's `lerp`, exact at both ends: `start + w (end - start)` for `|w| < 0.5`,
/// else `end - (end - start)(1 - w)`.
pub(crate) fn lerp(start: f64, end: f64, w: f64) -> f64 {
    if w.abs() < 0.5 {
        start + w * (end - start)
    } else {
        end - (end - start) * (1.0 - w)
    }
}

/// `sign` of a float: -1, 0 or 1; NaN stays NaN; both zeros give +0.
pub(crate) fn sign_f(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else {
        ((0.0 < x) as i8 - (x < 0.0) as i8) as f64
    }
}

/// `relu` of a float: NaN stays NaN.
pub(crate) fn relu_f(x: f64) -> f64 {
    if x > 0.0 || x.is_nan() {
        x
    } else {
        0.0
    }
}

/// `base ^ exp` with wrap-around; `exp >= 0`.
pub(crate) fn pow_i(base: i64, exp: i64) -> i64 {
    let mut e = exp as u64;
    let mut b = base;
    let mut r: i64 = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}

/// Left shift in a `width`-bit integer: amounts outside `0..width` give 0.
pub(crate) fn shl(x: i64, s: i64, width: u32) -> i64 {
    if s < 0 || s >= width as i64 {
        0
    } else {
        x.wrapping_shl(s as u32)
    }
}

/// Arithmetic right shift: amounts outside `0..width` give 0 or -1 (the sign).
pub(crate) fn shr(x: i64, s: i64, width: u32) -> i64 {
    if s < 0 || s >= width as i64 {
        if x < 0 {
            -1
        } else {
            0
        }
    } else {
        x >> s
    }
}

/// Logical (zero-filling) right shift of the `width`-bit pattern of `x`: amounts outside
/// `0..width` give 0.
pub(crate) fn lshr(x: i64, s: i64, width: u32) -> i64 {
    if s < 0 || s >= width as i64 {
        0
    } else if width == 32 {
        ((x as u32) >> s) as i32 as i64
    } else {
        ((x as u64) >> s) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfinv_known_values() {
        // Normal quantiles: Phi^-1(0.75) = 0.6744897501960817, Phi^-1(0.975) =
        // 1.959963984540054; erfinv(2p - 1) = Phi^-1(p) / sqrt 2.
        let s2 = std::f64::consts::SQRT_2;
        assert!((erfinv(0.5) - 0.674_489_750_196_081_7 / s2).abs() < 2e-16);
        assert!((erfinv(0.95) - 1.959_963_984_540_054 / s2).abs() < 4e-16);
        assert!((erfinv(-0.95) + 1.959_963_984_540_054 / s2).abs() < 4e-16);
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert_eq!(erfinv(-1.0), f64::NEG_INFINITY);
        assert!(erfinv(1.5).is_nan() && erfinv(-1.0000001).is_nan() && erfinv(f64::NAN).is_nan());
        assert_eq!(erfinv(0.0), 0.0);
        // Tiny arguments: erfinv(y) ~ y sqrt(pi) / 2.
        let y = 1e-300;
        assert!((erfinv(y) / (y * std::f64::consts::PI.sqrt() / 2.0) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn erfinv_round_trips_to_1e_14() {
        for i in 1..2000 {
            let y = -1.0 + i as f64 / 1000.0;
            let x = erfinv(y);
            if y.abs() <= 0.5 {
                assert!(
                    (libm::erf(x) - y).abs() <= 2e-16,
                    "y {y}: erf(erfinv) = {}",
                    libm::erf(x)
                );
            } else {
                let c = 1.0 - y.abs();
                let back = libm::erfc(x.abs());
                assert!(
                    ((back - c) / c).abs() < 1e-14,
                    "y {y}: erfc = {back}, want {c}"
                );
            }
        }
        // Deep tails: 1 - 2^-53 and 1 - 1e-10.
        for c in [2f64.powi(-53), 1e-10, 1e-5] {
            let y = 1.0 - c;
            let c = 1.0 - y; // exact
            let x = erfinv(y);
            assert!(((libm::erfc(x) - c) / c).abs() < 1e-14, "c {c}: x {x}");
        }
    }

    #[test]
    fn integer_helpers() {
        assert_eq!(remainder_i(-7, 3), 2);
        assert_eq!(remainder_i(7, -3), -2);
        assert_eq!(remainder_f(-7.5, 2.0), 0.5);
        assert_eq!(pow_i(3, 5), 243);
        assert_eq!(pow_i(-2, 63), i64::MIN);
        assert_eq!(pow_i(2, 64), 0);
        assert_eq!(pow_i(0, 0), 1);
        assert_eq!(shl(1, 31, 32), 1 << 31);
        assert_eq!(shl(1, 32, 32), 0);
        assert_eq!(shr(-8, 1, 64), -4);
        assert_eq!(shr(-8, 70, 64), -1);
        assert_eq!(lshr(-8, 1, 32), 0x7fff_fffc);
        assert_eq!(lshr(-8, 1, 64), 0x7fff_ffff_ffff_fffc);
        assert_eq!(lshr(-8, -1, 64), 0);
    }
}
