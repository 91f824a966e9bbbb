//! Hand-checked conversions: each expected byte is worked out in the comment beside it.

use super::*;

fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

#[test]
fn e4m3_hand_checked_values() {
    let cases: &[(f32, u8)] = &[
        (0.0, 0x00),
        (-0.0, 0x80),
        // 1.0 = 2^0: exponent field 0 + 7 = 0b0111, mantissa 000.
        (1.0, 0x38),
        (-2.0, 0xc0),
        // 0.1 (f32 0x3dcccccd) lies between 0.09375 (0x1c, 1.5 * 2^-4) and
        // 0.1015625 (0x1d, 1.625 * 2^-4), 0.0015625 from the upper one.
        (0.1, 0x1d),
        // The largest finite value: 1.75 * 2^8.
        (448.0, 0x7e),
        // 449 rounds down to 448.
        (449.0, 0x7e),
        // 464 is the tie between 448 (mantissa 110, even) and 480 (the NaN pattern
        // 111): ties to even give 448.
        (464.0, 0x7e),
        (-464.0, 0xfe),
        // The next f32 above 464 rounds to 480, past 448: NaN.
        (f(0x43e8_0001), 0x7f),
        (480.0, 0x7f),
        (-1.0e6, 0xff),
        (f32::INFINITY, 0x7f),
        (f32::NEG_INFINITY, 0xff),
        (f32::NAN, 0x7f),
        (-f32::NAN, 0xff),
        // Ties to even: 1 + 1/16 lies halfway between 1.0 (0x38) and 1.125 (0x39).
        (1.0625, 0x38),
        // 1.1875 lies halfway between 1.125 (0x39) and 1.25 (0x3a).
        (1.1875, 0x3a),
        // The smallest normal 2^-6 and the subnormals in units of 2^-9.
        (0.015625, 0x08),
        (2f32.powi(-9), 0x01),
        // 2^-10 is half a unit: the tie goes to the even 0.
        (2f32.powi(-10), 0x00),
        (-(2f32.powi(-10)), 0x80),
        // 0.75 units rounds to 1; 1.5 units ties to 2; 2.5 units ties to 2.
        (0.75 * 2f32.powi(-9), 0x01),
        (1.5 * 2f32.powi(-9), 0x02),
        (2.5 * 2f32.powi(-9), 0x02),
        // 7.5 units ties between 0x07 and the smallest normal 0x08 (8 units): even.
        (7.5 * 2f32.powi(-9), 0x08),
        // Far below half a unit, and an f32 subnormal: signed zero.
        (-(2f32.powi(-11)), 0x80),
        (f(1), 0x00),
    ];
    for &(x, want) in cases {
        let got = e4m3_from_f32(x);
        assert_eq!(got, want, "e4m3 {x:e}: got {got:#04x}, want {want:#04x}");
    }
    assert_eq!(e4m3_to_f32(0x7e), 448.0);
    assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
    assert_eq!(e4m3_to_f32(0x07), 7.0 * 2f32.powi(-9));
    assert_eq!(e4m3_to_f32(0x1d), 0.1015625);
    assert!(e4m3_to_f32(0x80).is_sign_negative() && e4m3_to_f32(0x80) == 0.0);
    assert_eq!(e4m3_to_f32(0x7f).to_bits(), 0x7fc0_0000);
    assert_eq!(e4m3_to_f32(0xff).to_bits(), 0xffc0_0000);
}

#[test]
fn e5m2_hand_checked_values() {
    let cases: &[(f32, u8)] = &[
        (0.0, 0x00),
        (-0.0, 0x80),
        // 1.0: exponent field 15 = 0b01111, mantissa 00.
        (1.0, 0x3c),
        // 0.1 lies between 0.09375 (0x2e, 1.5 * 2^-4) and 0.109375 (0x2f): nearer below.
        (0.1, 0x2e),
        // The largest finite value 1.75 * 2^15, and what rounds to it.
        (57344.0, 0x7b),
        (-57344.0, 0xfb),
        (f(0x476f_ffff), 0x7b),
        // 61440 is the tie between 57344 (mantissa 11, odd) and 65536 = inf (even).
        (61440.0, 0x7c),
        (65536.0, 0x7c),
        (-1.0e9, 0xfc),
        (f32::INFINITY, 0x7c),
        (f32::NEG_INFINITY, 0xfc),
        (f32::NAN, 0x7f),
        (-f32::NAN, 0xff),
        // Ties to even: 1.125 between 1.0 (0x3c) and 1.25 (0x3d); 1.375 between 1.25
        // (0x3d) and 1.5 (0x3e).
        (1.125, 0x3c),
        (1.375, 0x3e),
        // The smallest normal 2^-14 and subnormals in units of 2^-16.
        (2f32.powi(-14), 0x04),
        (2f32.powi(-16), 0x01),
        (2f32.powi(-17), 0x00),
        (1.5 * 2f32.powi(-16), 0x02),
        // 3.5 units ties between 0x03 and the smallest normal 0x04: even.
        (3.5 * 2f32.powi(-16), 0x04),
        (-(2f32.powi(-18)), 0x80),
    ];
    for &(x, want) in cases {
        let got = e5m2_from_f32(x);
        assert_eq!(got, want, "e5m2 {x:e}: got {got:#04x}, want {want:#04x}");
    }
    assert_eq!(e5m2_to_f32(0x7b), 57344.0);
    assert_eq!(e5m2_to_f32(0x7c), f32::INFINITY);
    assert_eq!(e5m2_to_f32(0xfc), f32::NEG_INFINITY);
    assert_eq!(e5m2_to_f32(0x01), 2f32.powi(-16));
    assert_eq!(e5m2_to_f32(0x03), 3.0 * 2f32.powi(-16));
    assert!(e5m2_to_f32(0x7d).is_nan() && e5m2_to_f32(0xfe).is_sign_negative());
}

#[test]
fn every_code_round_trips() {
    for b in 0..=255u8 {
        let x = e4m3_to_f32(b);
        // e4m3fn has one NaN per sign (0x7f, 0xff), so every code is its own image.
        assert_eq!(e4m3_from_f32(x), b, "e4m3 code {b:#04x} ({x:e})");
        let y = e5m2_to_f32(b);
        let want = if y.is_nan() { (b & 0x80) | 0x7f } else { b };
        assert_eq!(e5m2_from_f32(y), want, "e5m2 code {b:#04x} ({y:e})");
    }
}

/// The nearest code by brute force over the 256 decoded values (ties to the even
/// code), against the bit arithmetic, for many f32 values.
#[test]
fn rounding_matches_brute_force() {
    type Codec = (fn(f32) -> u8, fn(u8) -> f32);
    let formats: [(&str, Codec, f64); 2] = [
        ("e4m3", (e4m3_from_f32, e4m3_to_f32), 464.0),
        ("e5m2", (e5m2_from_f32, e5m2_to_f32), 61440.0),
    ];
    let mut state = 0x9e37_79b9u32;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    for (name, (enc, dec), limit) in formats {
        let codes: Vec<u8> = (0..=0x7fu8).filter(|&c| dec(c).is_finite()).collect();
        for _ in 0..200_000 {
            // Magnitudes from 2^-20 to 2^17 with random mantissas.
            let e = 107 + next() % 37;
            let x = f32::from_bits((e << 23) | (next() & 0x007f_ffff));
            let ax = x as f64;
            let got = enc(x);
            if ax > limit || (ax == limit && name == "e5m2") {
                assert!(!dec(got).is_finite(), "{name} {x:e} -> {got:#04x}");
                continue;
            }
            let best = codes
                .iter()
                .copied()
                .min_by(|&a, &b| {
                    let (da, db) = ((dec(a) as f64 - ax).abs(), (dec(b) as f64 - ax).abs());
                    da.partial_cmp(&db).unwrap().then((a & 1).cmp(&(b & 1)))
                })
                .unwrap();
            assert_eq!(got, best, "{name} {x:e}");
        }
    }
}

#[test]
fn host_types() {
    assert_eq!(f8e4m3::from_f32(0.1).to_bits(), 0x1d);
    assert_eq!(f8e4m3::from_f64(0.1).to_f64(), 0.1015625);
    assert_eq!(f8e5m2::from_bits(0x3c).to_f32(), 1.0);
    assert!(f8e4m3::from_f32(f32::INFINITY).is_nan());
    assert_eq!(format!("{:?}", f8e5m2::from_f32(1.5)), "1.5");
}
