//! Philox4x32-10 counter-based random numbers and the element streams of the fusion
//! IR's random ops (`uniform`, `normal`).
//!
//! **This documentation is the specification.** The CPU reference evaluator calls the
//! functions below, and the CUDA code generator must emit kernels that produce the same
//! raw words and the same `uniform` values bit for bit. Anything not written here is not
//! part of the contract.
//!
//! # Notation
//!
//! All integers are unsigned. `>>` and `<<` are logical shifts, `^` is xor, `|` is or,
//! `+` and `*` on 32-bit words wrap modulo 2^32. `lo(x)` and `hi(x)` are the low and
//! high 32 bits of a 64-bit value. `2^-24` and `2^-53` are the exact powers of two.
//! `as f32` / `as f64` on an integer means the exact conversion (every integer converted
//! below fits the destination's significand, so no rounding happens). Floating-point
//! `+`, `-`, `*` are single IEEE-754 operations with round-to-nearest-even, never fused
//! into an FMA (Rust never contracts; CUDA code must use `__fmul_rn`, `__fadd_rn`,
//! `__fsub_rn`, `__dmul_rn`, `__dadd_rn`, `__dsub_rn` or compile with `-fmad=false`).
//!
//! # The block function: Philox4x32-10
//!
//! [`philox4x32_10`] is the standard Random123 Philox4x32 with 10 rounds. Counter
//! `c = [c0, c1, c2, c3]`, key `k = [k0, k1]`, constants
//! `M0 = 0xD2511F53`, `M1 = 0xCD9E8D57` (multipliers) and
//! `W0 = 0x9E3779B9`, `W1 = 0xBB67AE85` (Weyl key increments).
//!
//! ```text
//! mulhilo(a, b) = (hi(a * b), lo(a * b))        // full 64-bit product; CUDA: __umulhi, a * b
//!
//! round(c, k):
//!     (hi0, lo0) = mulhilo(M0, c0)
//!     (hi1, lo1) = mulhilo(M1, c2)
//!     return [hi1 ^ c1 ^ k0,  lo1,  hi0 ^ c3 ^ k1,  lo0]
//!
//! philox4x32_10(c, k):
//!     c = round(c, k)
//!     repeat 9 times:
//!         k = [k0 + W0, k1 + W1]                 // "bump" the key (wrapping)
//!         c = round(c, k)
//!     return c                                   // out = [out0, out1, out2, out3]
//! ```
//!
//! So there are 10 rounds and 9 key bumps; the first round uses the unbumped key.
//!
//! # Counter and key of a random op
//!
//! A random op writes a tensor whose elements are numbered by their row-major linear
//! index `i` (`0 <= i < numel`) over the op's *logical* output shape, independent of
//! how the kernel is scheduled, vectorized or split. The op has two 64-bit parameters:
//!
//! ```text
//! key(seed)                 = [lo(seed), hi(seed)]
//! counter(offset, s)        = [lo(offset), hi(offset), lo(s), hi(s)]
//! words(seed, offset, s)    = philox4x32_10(counter(offset, s), key(seed))   // = raw_words
//! ```
//!
//! `s` is the *subsequence*: the element index divided by the number of elements one
//! block call feeds (4 for 32-bit-and-narrower floats, 2 for `f64`). Two ops with the
//! same seed and different offsets use disjoint counters, so their streams never
//! overlap.
//!
//! # `uniform(low, high)` for `f32`, `f16`, `bf16`
//!
//! ```text
//! s    = i / 4
//! lane = i % 4
//! r    = words(seed, offset, s)[lane]
//! u    = (r >> 8) as f32 * 2^-24               // 24 random bits; u in [0, 1), exact in f32
//! L    = low  rounded to f32 (nearest-even)
//! H    = high rounded to f32 (nearest-even)
//! v    = (u * (H - L)) + L                      // f32: d = H - L, m = u * d, v = m + L,
//!                                               //      each rounded, no FMA
//! ```
//!
//! In CUDA: `v = __fadd_rn(__fmul_rn(__uint2float_rn(r >> 8) * 0x1p-24f,
//! __fsub_rn(H, L)), L)` (the multiplication by `0x1p-24f` is exact).
//! For `f32` outputs the element is `v`. For `f16` and `bf16` outputs the element is `v`
//! rounded once more, round-to-nearest-even, from `f32` to the narrow type
//! (`__float2half_rn`, `__float2bfloat16_rn`). [`uniform_f32`] computes `v`.
//!
//! Because the multiply and add round, `v` can equal `high` for some bounds (e.g.
//! `low = 1`, `high = 2`, `r >> 8 = 2^24 - 1` gives `1 + (1 - 2^-24)`, a tie that rounds
//! to `2`), and the narrowing to `f16`/`bf16` can also round up to `high`. The functions
//! here do not clamp; the `uniform` op then applies one exact rule after rounding to the
//! output dtype: **a value `>= high` (high rounded to the dtype) becomes `low`** (rounded
//! likewise), as PyTorch does, so the op's range is `[low, high)`. Comparisons are exact,
//! so CPU and GPU still agree bit for bit.
//!
//! # `uniform(low, high)` for `f64`
//!
//! ```text
//! s    = i / 2
//! p    = i % 2
//! a    = words(seed, offset, s)[2p]
//! b    = words(seed, offset, s)[2p + 1]
//! x    = ((a as u64) << 32 | b as u64) >> 11    // top 53 bits
//! u    = x as f64 * 2^-53                       // u in [0, 1), exact in f64
//! v    = (u * (high - low)) + low               // f64, each operation rounded, no FMA
//! ```
//!
//! [`uniform_f64`] computes `v`; the op maps `v >= high` to `low` as above.
//!
//! # `normal(mean, std)` for `f32`, `f16`, `bf16` (Box-Muller)
//!
//! ```text
//! s     = i / 4
//! p     = (i % 4) / 2                           // elements 4s, 4s+1 use words 0, 1;
//!                                               // elements 4s+2, 4s+3 use words 2, 3
//! w     = words(seed, offset, s)
//! u1    = ((w[2p] >> 8) + 1) as f64 * 2^-24     // in (0, 1], never 0, so ln is finite
//! u2    = (w[2p + 1] >> 8) as f64 * 2^-24       // in [0, 1)
//! rad   = sqrt(-2 * ln(u1))                     // all in f64
//! theta = 2π * u2                               // 2π = std::f64::consts::TAU
//! z     = rad * cos(theta)   if i is even
//!         rad * sin(theta)   if i is odd
//! v     = mean + std * z                        // f64
//! ```
//!
//! The element is `v` rounded once, round-to-nearest-even, directly from `f64` to the
//! output dtype. [`normal_f32_as_f64`] computes `v` (before that rounding).
//!
//! # `normal(mean, std)` for `f64`
//!
//! ```text
//! s     = i / 2
//! w     = words(seed, offset, s)                // both elements of the pair use all 4 words
//! x0    = ((w[0] as u64) << 32 | w[1] as u64) >> 11
//! x1    = ((w[2] as u64) << 32 | w[3] as u64) >> 11
//! u1    = (x0 + 1) as f64 * 2^-53               // in (0, 1]
//! u2    = x1 as f64 * 2^-53                     // in [0, 1)
//! rad, theta, z, v as above (cos for even i, sin for odd i)
//! ```
//!
//! [`normal_f64`] computes `v`.
//!
//! # Reproducibility
//!
//! The raw words ([`raw_words`], [`philox4x32_10`]) and the `uniform` values of every
//! dtype are bit exact between the CPU evaluator and generated kernels. `normal` values
//! are only reproducible to within a few ulps: `ln`, `sqrt`, `sin` and `cos` differ
//! between the host libm and CUDA's device math library, and the last rounding to the
//! dtype can amplify a tiny difference into one ulp of `f16`/`bf16`. Tests must compare
//! `normal` outputs with a tolerance.
//!
//! # Known values
//!
//! With `seed = 0`, `offset = 0` the first block is `words(0, 0, 0) = [0x6627e8d5,
//! 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]` (the Random123 zero-counter, zero-key answer), so
//! `uniform_f32(0, 0, 0, 0.0, 1.0) = 0x6627e8 * 2^-24 = 0.399046421051025390625`
//! (bits `0x3ecc4fd0`) and `uniform_f64(0, 0, 0, 0.0, 1.0) = 0xcc4fd1abc2d38 * 2^-53`.

/// First Philox4x32 multiplier, applied to counter word 0.
pub const PHILOX_M0: u32 = 0xD251_1F53;
/// Second Philox4x32 multiplier, applied to counter word 2.
pub const PHILOX_M1: u32 = 0xCD9E_8D57;
/// Weyl increment added to key word 0 between rounds (golden ratio).
pub const PHILOX_W0: u32 = 0x9E37_79B9;
/// Weyl increment added to key word 1 between rounds (sqrt(3) - 1).
pub const PHILOX_W1: u32 = 0xBB67_AE85;
/// Number of Philox rounds used by the random ops.
pub const PHILOX_ROUNDS: usize = 10;

/// 2^-24 in `f32` (exact).
const TWO_POW_NEG_24_F32: f32 = 1.0 / 16_777_216.0;
/// 2^-24 in `f64` (exact).
const TWO_POW_NEG_24_F64: f64 = 1.0 / 16_777_216.0;
/// 2^-53 in `f64` (exact).
const TWO_POW_NEG_53_F64: f64 = 1.0 / 9_007_199_254_740_992.0;

/// Full 32x32 -> 64 bit product, split into `(high word, low word)`.
#[inline]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let product = u64::from(a) * u64::from(b);
    ((product >> 32) as u32, product as u32)
}

/// One Philox4x32 round.
#[inline]
fn round(c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    let (hi0, lo0) = mulhilo(PHILOX_M0, c[0]);
    let (hi1, lo1) = mulhilo(PHILOX_M1, c[2]);
    [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
}

/// Adds the Weyl increments to the key (wrapping).
#[inline]
fn bump_key(k: [u32; 2]) -> [u32; 2] {
    [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)]
}

/// Philox4x32 with 10 rounds (Random123 `philox4x32_R(10, counter, key)`).
///
/// The first round uses `key` as given; the key is bumped by
/// ([`PHILOX_W0`], [`PHILOX_W1`]) before each of the 9 following rounds. See the
/// module documentation for the round function.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = round(counter, key);
    let mut k = key;
    for _ in 1..PHILOX_ROUNDS {
        k = bump_key(k);
        c = round(c, k);
    }
    c
}

/// The Philox key of a random op: `[low 32 bits of seed, high 32 bits of seed]`.
pub fn key_from_seed(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// The Philox counter of a random op for one subsequence:
/// `[lo(offset), hi(offset), lo(subsequence), hi(subsequence)]`.
pub fn counter_from(offset: u64, subsequence: u64) -> [u32; 4] {
    [
        offset as u32,
        (offset >> 32) as u32,
        subsequence as u32,
        (subsequence >> 32) as u32,
    ]
}

/// The four raw words of block `subsequence` of the stream `(seed, offset)`:
/// `philox4x32_10(counter_from(offset, subsequence), key_from_seed(seed))`.
pub fn raw_words(seed: u64, offset: u64, subsequence: u64) -> [u32; 4] {
    philox4x32_10(counter_from(offset, subsequence), key_from_seed(seed))
}

/// Word `lane % 4` of a block, without any panicking index.
#[inline]
fn lane_word(words: [u32; 4], lane: u64) -> u32 {
    match lane & 3 {
        0 => words[0],
        1 => words[1],
        2 => words[2],
        _ => words[3],
    }
}

/// `(r >> 8) * 2^-24` in `f32`: 24 random bits in `[0, 1)`, exact.
#[inline]
fn unit_f32(r: u32) -> f32 {
    (r >> 8) as f32 * TWO_POW_NEG_24_F32
}

/// The top 53 bits of the 64-bit value `a:b` (a is the high word).
#[inline]
fn top53(a: u32, b: u32) -> u64 {
    ((u64::from(a) << 32) | u64::from(b)) >> 11
}

/// Box-Muller on `u1` in `(0, 1]`, `u2` in `[0, 1)`; `cos` branch for even elements.
#[inline]
fn box_muller(u1: f64, u2: f64, even: bool, mean: f64, std: f64) -> f64 {
    let radius = (-2.0 * u1.ln()).sqrt();
    let theta = std::f64::consts::TAU * u2;
    let z = if even {
        radius * theta.cos()
    } else {
        radius * theta.sin()
    };
    mean + std * z
}

/// Element `i` of `uniform(low, high)` for `f32` outputs (and, before the final
/// round-to-nearest-even narrowing, for `f16`/`bf16` outputs).
///
/// `v = (u * (high - low)) + low` in `f32` with `u = (r >> 8) * 2^-24`,
/// `r = raw_words(seed, offset, i / 4)[i % 4]`. Callers holding `f64` bounds must round
/// them to `f32` first (`as f32`).
pub fn uniform_f32(seed: u64, offset: u64, i: u64, low: f32, high: f32) -> f32 {
    let r = lane_word(raw_words(seed, offset, i / 4), i % 4);
    let u = unit_f32(r);
    // Rust never fuses these into an FMA: one rounding per operation.
    u * (high - low) + low
}

/// Element `i` of `uniform(low, high)` for `f64` outputs.
///
/// `v = (u * (high - low)) + low` in `f64` with `u = x * 2^-53`, where `x` is the top 53
/// bits of `words[2p]:words[2p + 1]`, `p = i % 2`, `words = raw_words(seed, offset, i / 2)`.
pub fn uniform_f64(seed: u64, offset: u64, i: u64, low: f64, high: f64) -> f64 {
    let w = raw_words(seed, offset, i / 2);
    let (a, b) = if i.is_multiple_of(2) {
        (w[0], w[1])
    } else {
        (w[2], w[3])
    };
    let u = top53(a, b) as f64 * TWO_POW_NEG_53_F64;
    u * (high - low) + low
}

/// Element `i` of `normal(mean, std)` for `f32`, `f16` and `bf16` outputs, as the `f64`
/// value before the final rounding to the dtype.
///
/// Box-Muller on the pair of words `(words[2p], words[2p + 1])`,
/// `p = (i % 4) / 2`, `words = raw_words(seed, offset, i / 4)`, with
/// `u1 = ((words[2p] >> 8) + 1) * 2^-24` and `u2 = (words[2p + 1] >> 8) * 2^-24`;
/// even `i` take the cosine branch, odd `i` the sine branch.
pub fn normal_f32_as_f64(seed: u64, offset: u64, i: u64, mean: f64, std: f64) -> f64 {
    let w = raw_words(seed, offset, i / 4);
    let (a, b) = if i % 4 < 2 {
        (w[0], w[1])
    } else {
        (w[2], w[3])
    };
    let u1 = f64::from((a >> 8) + 1) * TWO_POW_NEG_24_F64;
    let u2 = f64::from(b >> 8) * TWO_POW_NEG_24_F64;
    box_muller(u1, u2, i.is_multiple_of(2), mean, std)
}

/// Element `i` of `normal(mean, std)` for `f64` outputs.
///
/// Box-Muller with `u1 = (x0 + 1) * 2^-53` and `u2 = x1 * 2^-53`, where `x0`, `x1` are the
/// top 53 bits of `words[0]:words[1]` and `words[2]:words[3]`,
/// `words = raw_words(seed, offset, i / 2)`; even `i` take the cosine branch, odd `i`
/// the sine branch.
pub fn normal_f64(seed: u64, offset: u64, i: u64, mean: f64, std: f64) -> f64 {
    let w = raw_words(seed, offset, i / 2);
    let u1 = (top53(w[0], w[1]) + 1) as f64 * TWO_POW_NEG_53_F64;
    let u2 = top53(w[2], w[3]) as f64 * TWO_POW_NEG_53_F64;
    box_muller(u1, u2, i.is_multiple_of(2), mean, std)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors for philox4x32 with 10 rounds, as `(counter, key, expected)`.
    ///
    /// The first three are lines 27-29 of `tests/kat_vectors` in the Random123
    /// distribution (https://github.com/DEShawResearch/random123, commit
    /// 9545ff6413f258be2f04c1d319d99aaef7521150): zero counter and key, all-ones
    /// counter and key, and the hex digits of pi. The last three come from
    /// `tests/old_kat_vectors` of the same commit (lines 98, 113 and 134) and exercise
    /// single counter/key words, which pins down the word order.
    const KAT: [([u32; 4], [u32; 2], [u32; 4]); 6] = [
        (
            [0x0000_0000, 0x0000_0000, 0x0000_0000, 0x0000_0000],
            [0x0000_0000, 0x0000_0000],
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        ),
        (
            [0xffff_ffff, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff],
            [0xffff_ffff, 0xffff_ffff],
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0],
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
        ),
        (
            [0x0000_0001, 0x0000_0000, 0x0000_0000, 0x0000_0000],
            [0x0000_0001, 0x0000_0000],
            [0xac08_141b, 0xdfc5_ccbe, 0x79c0_7a47, 0xa7f6_6093],
        ),
        (
            [0x0000_0000, 0x0000_0000, 0x0000_0001, 0x0000_0000],
            [0x0000_0000, 0x0000_0001],
            [0x7f6c_13ff, 0x114b_2447, 0x0550_eced, 0xea1f_c805],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0x0000_0000, 0xffff_ffff],
            [0x08f7_720c, 0x845e_e9e0, 0x502c_cd3d, 0xa9a0_0e27],
        ),
    ];

    #[test]
    fn philox_kat_vectors() {
        for (counter, key, expected) in KAT {
            assert_eq!(
                philox4x32_10(counter, key),
                expected,
                "counter {counter:08x?} key {key:08x?}"
            );
        }
    }

    #[test]
    fn constants_are_exact_powers_of_two() {
        assert_eq!(TWO_POW_NEG_24_F32.to_bits(), 0x3380_0000);
        assert_eq!(TWO_POW_NEG_24_F64.to_bits(), 0x3e70_0000_0000_0000);
        assert_eq!(TWO_POW_NEG_53_F64.to_bits(), 0x3ca0_0000_0000_0000);
    }

    #[test]
    fn raw_words_layout_matches_spec() {
        // Old-KAT line 113: counter [0, 0, 1, 0], key [0, 1]. In stream terms that is
        // seed = 1 << 32 (key word 1 = high half of the seed), offset = 0,
        // subsequence = 1 (counter word 2 = low half of the subsequence).
        assert_eq!(raw_words(1 << 32, 0, 1), KAT[4].2);
        // Old-KAT line 98: counter [1, 0, 0, 0], key [1, 0]: seed = 1, offset = 1.
        assert_eq!(raw_words(1, 1, 0), KAT[3].2);
        // The pi KAT: offset = 0x85a308d3_243f6a88, subsequence = 0x03707344_13198a2e,
        // seed = 0x299f31d0_a4093822.
        assert_eq!(
            raw_words(
                0x299f_31d0_a409_3822,
                0x85a3_08d3_243f_6a88,
                0x0370_7344_1319_8a2e
            ),
            KAT[2].2
        );
        assert_eq!(
            key_from_seed(0x0123_4567_89ab_cdef),
            [0x89ab_cdef, 0x0123_4567]
        );
        assert_eq!(
            counter_from(0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00),
            [0x5566_7788, 0x1122_3344, 0xddee_ff00, 0x99aa_bbcc]
        );
    }

    #[test]
    fn uniform_f32_first_element_from_kat() {
        // seed 0, offset 0, i = 0: s = 0, lane 0, counter and key all zero, so
        // r = first word of the zero KAT = 0x6627e8d5.
        // r >> 8 = 0x6627e8 = 6694888; u = 6694888 * 2^-24 = 836861 / 2^21
        //        = 0.399046421051025390625 exactly (23 significant bits, exact in f32).
        // low = 0, high = 1: u * (1 - 0) + 0 = u.
        // f32 bits: 0x6627e8 = 1.1001100010011111101000b * 2^22, so u = that * 2^-2:
        // exponent 127 - 2 = 0x7d, fraction 0x4c4fd0 -> 0x3ecc4fd0.
        let v = uniform_f32(0, 0, 0, 0.0, 1.0);
        // 0.39904642 is the shortest decimal that rounds to that f32; the exact value
        // 0.399046421051025390625 is checked through f64, where it is also exact.
        assert_eq!(v, 0.399_046_42_f32);
        assert_eq!(f64::from(v), 836_861.0 / 2_097_152.0);
        assert_eq!(v.to_bits(), 0x3ecc_4fd0);
        // The f64 stream's first element uses the 64-bit value 0x6627e8d5_e169c58d:
        // top 53 bits = 0xcc4fd1abc2d38 = 3594291074837816.
        let d = uniform_f64(0, 0, 0, 0.0, 1.0);
        assert_eq!(d, 3_594_291_074_837_816.0 * TWO_POW_NEG_53_F64);
        assert_eq!(d, 0.399_046_470_848_964_5_f64);
    }

    #[test]
    fn uniform_f32_element_5_by_hand() {
        let seed = 0x0123_4567_89ab_cdef_u64;
        let offset = 0x1122_3344_5566_7788_u64;
        // i = 5: subsequence 5 / 4 = 1, lane 5 % 4 = 1.
        let words = philox4x32_10([0x5566_7788, 0x1122_3344, 1, 0], [0x89ab_cdef, 0x0123_4567]);
        // Value computed with an independent implementation while writing this test.
        assert_eq!(words[1], 0x2c00_244c);
        let u = (words[1] >> 8) as f32 / 16_777_216.0;
        let by_hand = u * (3.0_f32 - -2.0_f32) + -2.0_f32;
        let v = uniform_f32(seed, offset, 5, -2.0, 3.0);
        assert_eq!(v.to_bits(), by_hand.to_bits());
        // r >> 8 = 0x2c0024 = 2883620; u * 5 = 14418100 * 2^-24 (exact);
        // minus 2 -> -19136332 * 2^-24 = -4784083 * 2^-22 (exact in f32).
        assert_eq!(v, -4_784_083.0 / 4_194_304.0);
        assert_eq!(v.to_bits(), 0xbf91_ffa6);
    }

    #[test]
    fn uniform_f32_in_range() {
        // Ranges where every operation of the formula is exact, so [low, high) holds.
        let ranges: [(f32, f32); 4] = [(0.0, 1.0), (-1.0, 1.0), (-3.0, 5.0), (-64.0, 64.0)];
        for seed in [0_u64, 1, 42, 0xdead_beef_cafe_f00d, u64::MAX] {
            for (low, high) in ranges {
                for i in 0..20_000_u64 {
                    let v = uniform_f32(seed, 7, i, low, high);
                    assert!(
                        v >= low && v < high,
                        "seed {seed} i {i}: {v} not in [{low}, {high})"
                    );
                }
            }
        }
    }

    #[test]
    fn uniform_f64_in_range() {
        for seed in [0_u64, 3, u64::MAX] {
            for i in 0..20_000_u64 {
                let v = uniform_f64(seed, 0, i, -2.0, 6.0);
                assert!((-2.0..6.0).contains(&v), "seed {seed} i {i}: {v}");
            }
        }
    }

    /// Mean and (population) variance.
    fn moments(xs: impl Iterator<Item = f64>) -> (f64, f64) {
        let (mut n, mut sum, mut sum_sq) = (0.0, 0.0, 0.0);
        for x in xs {
            n += 1.0;
            sum += x;
            sum_sq += x * x;
        }
        let mean = sum / n;
        (mean, sum_sq / n - mean * mean)
    }

    const N: u64 = 100_000;

    #[test]
    fn uniform_statistics() {
        // For U(0,1): sd of the mean of 1e5 samples is about 0.0009, so 0.01 is ~11 sigma.
        let (mean, var) = moments((0..N).map(|i| f64::from(uniform_f32(2024, 0, i, 0.0, 1.0))));
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.005, "var {var}");
        let (mean, var) = moments((0..N).map(|i| uniform_f64(2024, 0, i, 0.0, 1.0)));
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.005, "var {var}");

        // Histogram with 16 bins: expected 6250 per bin, sd ~ 77; allow +-10%.
        let mut bins = [0_u32; 16];
        for i in 0..N {
            let v = uniform_f32(99, 5, i, 0.0, 1.0);
            bins[((v * 16.0) as usize).min(15)] += 1;
        }
        for (b, &count) in bins.iter().enumerate() {
            assert!((5625..=6875).contains(&count), "bin {b}: {count}");
        }

        // Each lane on its own must be uniform too (catches a stuck lane).
        for lane in 0..4_u64 {
            let (mean, _) =
                moments((0..N / 4).map(|s| f64::from(uniform_f32(11, 0, 4 * s + lane, 0.0, 1.0))));
            assert!((mean - 0.5).abs() < 0.02, "lane {lane} mean {mean}");
        }
    }

    #[test]
    fn normal_statistics() {
        // sd of the mean of 1e5 standard normals is about 0.0032; 0.03 is ~9 sigma.
        let check = |name: &str, xs: Vec<f64>| {
            let (mean, var) = moments(xs.iter().copied());
            let sd = var.sqrt();
            assert!(mean.abs() < 0.03, "{name}: mean {mean}");
            assert!((sd - 1.0).abs() < 0.03, "{name}: sd {sd}");
            let within = xs.iter().filter(|x| x.abs() < 1.0).count() as f64 / xs.len() as f64;
            assert!((within - 0.6827).abs() < 0.01, "{name}: P(|z|<1) {within}");
            assert!(xs.iter().all(|x| x.is_finite()), "{name}: non-finite value");
        };
        check(
            "f32 stream",
            (0..N)
                .map(|i| normal_f32_as_f64(77, 3, i, 0.0, 1.0))
                .collect(),
        );
        check(
            "f64 stream",
            (0..N).map(|i| normal_f64(77, 3, i, 0.0, 1.0)).collect(),
        );
        // Even (cos) and odd (sin) elements separately.
        check(
            "f32 even",
            (0..N / 2)
                .map(|k| normal_f32_as_f64(5, 0, 2 * k, 0.0, 1.0))
                .collect(),
        );
        check(
            "f32 odd",
            (0..N / 2)
                .map(|k| normal_f32_as_f64(5, 0, 2 * k + 1, 0.0, 1.0))
                .collect(),
        );

        // mean and std are applied affinely.
        let (mean, var) = moments((0..N).map(|i| normal_f64(8, 0, i, 10.0, 3.0)));
        assert!((mean - 10.0).abs() < 0.1, "mean {mean}");
        assert!((var.sqrt() - 3.0).abs() < 0.1, "sd {}", var.sqrt());
    }

    #[test]
    fn normal_pairs_share_radius() {
        // Elements 2k and 2k+1 are the cos and sin halves of one Box-Muller pair.
        for i in (0..400_u64).step_by(2) {
            let w = raw_words(31, 4, i / 4);
            let a = if i % 4 == 0 { w[0] } else { w[2] };
            let u1 = f64::from((a >> 8) + 1) / 16_777_216.0;
            let r2 = -2.0 * u1.ln();
            let c = normal_f32_as_f64(31, 4, i, 0.0, 1.0);
            let s = normal_f32_as_f64(31, 4, i + 1, 0.0, 1.0);
            assert!((c * c + s * s - r2).abs() <= 1e-12 * r2.max(1.0), "i {i}");
        }
        for i in (0..400_u64).step_by(2) {
            let w = raw_words(31, 4, i / 2);
            let x0 = ((u64::from(w[0]) << 32) | u64::from(w[1])) >> 11;
            let u1 = (x0 + 1) as f64 / 9_007_199_254_740_992.0;
            let r2 = -2.0 * u1.ln();
            let c = normal_f64(31, 4, i, 0.0, 1.0);
            let s = normal_f64(31, 4, i + 1, 0.0, 1.0);
            assert!((c * c + s * s - r2).abs() <= 1e-12 * r2.max(1.0), "i {i}");
        }
    }

    #[test]
    fn normal_known_values() {
        // seed 0, offset 0: words = zero KAT. Reference values from an independent
        // implementation (host libm); tolerance because transcendentals may differ.
        let close = |got: f64, want: f64| (got - want).abs() <= 1e-12 * want.abs().max(1.0);
        let f32_stream = [
            0.991_137_475_145_897_1,
            -0.924_662_780_354_433_2,
            -0.617_609_054_984_854_4,
            -0.482_068_347_264_496_3,
        ];
        for (i, want) in (0_u64..).zip(f32_stream) {
            let got = normal_f32_as_f64(0, 0, i, 0.0, 1.0);
            assert!(close(got, want), "f32 stream i {i}: {got} vs {want}");
        }
        let f64_stream = [-0.121_517_975_953_082_24, -1.350_032_659_857_655];
        for (i, want) in (0_u64..).zip(f64_stream) {
            let got = normal_f64(0, 0, i, 0.0, 1.0);
            assert!(close(got, want), "f64 stream i {i}: {got} vs {want}");
        }
    }

    #[test]
    fn box_muller_extremes_are_finite() {
        // Words at the ends of the range: u1 = 2^-24 (smallest) and u1 = 1 (largest).
        for (a, b) in [
            (0_u32, 0_u32),
            (0, u32::MAX),
            (u32::MAX, 0),
            (u32::MAX, u32::MAX),
        ] {
            let u1 = f64::from((a >> 8) + 1) * TWO_POW_NEG_24_F64;
            let u2 = f64::from(b >> 8) * TWO_POW_NEG_24_F64;
            for even in [true, false] {
                let v = box_muller(u1, u2, even, 0.0, 1.0);
                assert!(v.is_finite() && v.abs() < 6.0, "{a:#x} {b:#x}: {v}");
            }
        }
        let smallest = (-2.0 * (TWO_POW_NEG_53_F64).ln()).sqrt();
        assert!(smallest.is_finite() && smallest < 9.0);
        assert_eq!(box_muller(1.0, 0.25, true, 2.0, 5.0), 2.0);
    }

    #[test]
    fn seeds_and_offsets_change_the_stream() {
        let stream = |seed: u64, offset: u64| -> Vec<u32> {
            (0..64)
                .map(|i| uniform_f32(seed, offset, i, 0.0, 1.0).to_bits())
                .collect()
        };
        let params = [
            (0_u64, 0_u64),
            (1, 0),
            (1 << 32, 0),
            (u64::MAX, 0),
            (0, 1),
            (0, 1 << 32),
            (1, 1),
        ];
        let streams: Vec<Vec<u32>> = params.iter().map(|&(s, o)| stream(s, o)).collect();
        for a in 0..streams.len() {
            for b in a + 1..streams.len() {
                assert_ne!(streams[a], streams[b], "{:?} vs {:?}", params[a], params[b]);
                // Not just different somewhere: almost every element differs.
                let same = streams[a]
                    .iter()
                    .zip(&streams[b])
                    .filter(|(x, y)| x == y)
                    .count();
                assert!(
                    same < 4,
                    "{:?} vs {:?}: {same} equal elements",
                    params[a],
                    params[b]
                );
            }
        }
        // Same parameters give the same stream.
        assert_eq!(stream(9, 9), stream(9, 9));
        // Consecutive elements within a block come from different lanes.
        let s = stream(0, 0);
        assert_ne!(s[0], s[1]);
        assert_ne!(s[3], s[4]);
    }

    #[test]
    fn f64_and_f32_streams_index_blocks_differently() {
        // f32 elements 0..4 share block 0; f64 elements 0, 1 share block 0 and element 2
        // starts block 1.
        let w0 = raw_words(5, 6, 0);
        let w1 = raw_words(5, 6, 1);
        for lane in 0..4_u64 {
            let expect = (lane_word(w0, lane) >> 8) as f32 * TWO_POW_NEG_24_F32;
            assert_eq!(uniform_f32(5, 6, lane, 0.0, 1.0), expect);
        }
        let expect2 = top53(w1[0], w1[1]) as f64 * TWO_POW_NEG_53_F64;
        assert_eq!(uniform_f64(5, 6, 2, 0.0, 1.0), expect2);
        let expect1 = top53(w0[2], w0[3]) as f64 * TWO_POW_NEG_53_F64;
        assert_eq!(uniform_f64(5, 6, 1, 0.0, 1.0), expect1);
    }
}
