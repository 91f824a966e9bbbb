//! The runtime support every generated kernel carries: index helpers, f16/bf16/fp8 types
//! with round-to-nearest-even conversions, a math helper per op, reductions with warp
//! shuffles and shared memory, vector copies, and Philox matching [`crate::philox`].
//!
//! Architecture invariant: generated code includes no header at all; NVRTC alone
//! compiles it. Only compiler builtins (`__shfl_xor_sync`, `__umulhi`, `__fmul_rn`,
//! `expf`, ...) are used.

/// The support code, emitted once at the top of every kernel (after the index typedef).
pub const PREAMBLE: &str = r#"// ---- nvfuser-rs runtime support (self-contained: no includes) ----
template <int N> struct nvf_shape {
  nvfuser_index_t size[N > 0 ? N : 1];
  nvfuser_index_t stride[N > 0 ? N : 1];
};
__device__ inline nvfuser_index_t nvf_ceil_div(nvfuser_index_t a, nvfuser_index_t b) { return (a + b - 1) / b; }
__device__ inline nvfuser_index_t nvf_max_idx(nvfuser_index_t a, nvfuser_index_t b) { return a > b ? a : b; }
__device__ inline nvfuser_index_t nvf_min_idx(nvfuser_index_t a, nvfuser_index_t b) { return a < b ? a : b; }
// Bounds check of a data-dependent index (gather, index_select, take_along_axis).
__device__ inline bool nvf_in_range(nvfuser_index_t i, nvfuser_index_t size) { return i >= 0 && i < size; }
// A runtime index that may count from the end (select with a scalar index).
__device__ inline nvfuser_index_t nvf_wrap_index(long long i, nvfuser_index_t size) { return (nvfuser_index_t)(i < 0 ? i + size : i); }
// Device-side checks (nvfuser_core::codegen::checks): the first failing thread claims
// err[0] with its code (fingerprint << 32 | site) and records the bad value and the
// bound; the check then yields a defined value instead of reading out of bounds.
__device__ inline void nvf_report(unsigned long long* err, unsigned long long code, long long value, long long bound) {
  if (atomicCAS(err, 0ull, code) == 0ull) {
    err[1] = (unsigned long long)value;
    err[2] = (unsigned long long)bound;
  }
}
// A data-dependent index (gather, index_select, take_along_axis), checked in its own
// type before any narrowing to the index type: true when in 0..size.
__device__ inline bool nvf_check_index(unsigned long long* err, unsigned long long code, long long i, long long size) {
  if (i >= 0 && i < size) return true;
  nvf_report(err, code, i, size);
  return false;
}
// Integer div / fmod / remainder with a checked divisor: zero reports and yields 0;
// MIN / -1 wraps to MIN (and its remainders are 0), as on the CPU reference.
template <typename T> __device__ inline T nvf_wrapping_neg(T a) { return (T)(0ull - (unsigned long long)a); }
template <typename T> __device__ inline T nvf_div_checked(unsigned long long* err, unsigned long long code, T a, T b) {
  if (b == (T)0) { nvf_report(err, code, (long long)a, 0); return (T)0; }
  return b == (T)-1 ? nvf_wrapping_neg(a) : (T)(a / b);
}
template <typename T> __device__ inline T nvf_fmod_checked(unsigned long long* err, unsigned long long code, T a, T b) {
  if (b == (T)0) { nvf_report(err, code, (long long)a, 0); return (T)0; }
  return b == (T)-1 ? (T)0 : (T)(a % b);
}
template <typename T> __device__ inline T nvf_remainder_checked(unsigned long long* err, unsigned long long code, T a, T b) {
  if (b == (T)0) { nvf_report(err, code, (long long)a, 0); return (T)0; }
  if (b == (T)-1) return (T)0;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}

// f16 and bf16: storage types with round-to-nearest-even conversions.
__device__ inline unsigned short nvf_f2h_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  // One instruction where the hardware has it (same rounding: to nearest even).
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#endif
  unsigned int x = __float_as_uint(f);
  unsigned int sign = (x >> 16) & 0x8000u;
  unsigned int ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    unsigned int m = __float2uint_rn(__uint_as_float(ax) * 16777216.0f);
    return (unsigned short)(sign | m);
  }
  unsigned int h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  unsigned int rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1u;
  return (unsigned short)(sign | h);
}
__device__ inline float nvf_h2f(unsigned short h) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
#endif
  unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
  unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0u) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
  if (e == 31u) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ inline unsigned short nvf_f2bf_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#endif
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}
// Double to float rounding to odd, so that a second rounding to 16 bits is correct.
__device__ inline float nvf_d2f_odd(double d) {
  float f = __double2float_rz(d);
  if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}
struct nvf_half {
  unsigned short bits;
  nvf_half() = default;
  __device__ explicit nvf_half(float f) : bits(nvf_f2h_bits(f)) {}
  __device__ explicit nvf_half(double d) : bits(nvf_f2h_bits(nvf_d2f_odd(d))) {}
  __device__ explicit nvf_half(int i) : bits(nvf_f2h_bits((float)i)) {}
  __device__ explicit nvf_half(long long i) : bits(nvf_f2h_bits(nvf_d2f_odd((double)i))) {}
  __device__ explicit nvf_half(bool b) : bits(b ? 0x3c00u : 0u) {}
  __device__ operator float() const { return nvf_h2f(bits); }
};
struct nvf_bfloat {
  unsigned short bits;
  nvf_bfloat() = default;
  __device__ explicit nvf_bfloat(float f) : bits(nvf_f2bf_bits(f)) {}
  __device__ explicit nvf_bfloat(double d) : bits(nvf_f2bf_bits(nvf_d2f_odd(d))) {}
  __device__ explicit nvf_bfloat(int i) : bits(nvf_f2bf_bits((float)i)) {}
  __device__ explicit nvf_bfloat(long long i) : bits(nvf_f2bf_bits(nvf_d2f_odd((double)i))) {}
  __device__ explicit nvf_bfloat(bool b) : bits(b ? 0x3f80u : 0u) {}
  __device__ operator float() const { return __uint_as_float(((unsigned int)bits) << 16); }
};

// fp8 (e4m3fn, e5m2): storage types with round-to-nearest-even conversions from f32 by
// integer arithmetic on the bits, the exact rule of nvfuser_core::fp8 (no hardware cvt:
// its saturation differs). e4m3fn has no infinities: a rounded magnitude above 448,
// inf and NaN give NaN (0x7f with the sign); e5m2 overflows to inf. Doubles and 64-bit
// integers round to f32 first (PyTorch's conversion).
__device__ inline unsigned int nvf_f8_round(unsigned int ax, unsigned int mbits, unsigned int bias) {
  const unsigned int e = ax >> 23;
  if (e == 0u) return 0u;
  const unsigned int mant = (ax & 0x7fffffu) | 0x800000u;
  if (e < 128u - bias) {
    const unsigned int shift = 151u - e - bias - mbits;
    if (shift > 24u) return 0u;
    const unsigned int q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    return (rem > half || (rem == half && (q & 1u))) ? q + 1u : q;
  }
  const unsigned int code = ((e + bias - 127u) << mbits) | ((ax >> (23u - mbits)) & ((1u << mbits) - 1u));
  const unsigned int rem = ax & ((1u << (23u - mbits)) - 1u), half = 1u << (22u - mbits);
  return (rem > half || (rem == half && (code & 1u))) ? code + 1u : code;
}
__device__ inline unsigned char nvf_f2e4m3_bits(float f) {
  const unsigned int x = __float_as_uint(f);
  const unsigned int sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
  if (ax >= 0x43f00000u) return (unsigned char)(sign | 0x7fu);
  const unsigned int code = nvf_f8_round(ax, 3u, 7u);
  return (unsigned char)(sign | (code > 0x7eu ? 0x7fu : code));
}
__device__ inline unsigned char nvf_f2e5m2_bits(float f) {
  const unsigned int x = __float_as_uint(f);
  const unsigned int sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
  if (ax >= 0x47800000u) return (unsigned char)(sign | 0x7cu);
  return (unsigned char)(sign | nvf_f8_round(ax, 2u, 15u));
}
// The f32 bits of m (1 .. 2^mbits - 1) units of 2^unit_exp.
__device__ inline unsigned int nvf_f8_subnormal(unsigned int m, int unit_exp) {
  const unsigned int p = 31u - (unsigned int)__clz(m);
  return ((unsigned int)(127 + unit_exp + (int)p) << 23) | ((m - (1u << p)) << (23u - p));
}
__device__ inline float nvf_e4m32f(unsigned char b) {
  const unsigned int sign = ((unsigned int)b & 0x80u) << 24, c = (unsigned int)b & 0x7fu;
  const unsigned int e = c >> 3, m = c & 7u;
  const unsigned int r = c == 0x7fu ? 0x7fc00000u : (e == 0u ? (m == 0u ? 0u : nvf_f8_subnormal(m, -9)) : (((e + 120u) << 23) | (m << 20)));
  return __uint_as_float(sign | r);
}
__device__ inline float nvf_e5m22f(unsigned char b) {
  const unsigned int sign = ((unsigned int)b & 0x80u) << 24, c = (unsigned int)b & 0x7fu;
  const unsigned int e = c >> 2, m = c & 3u;
  const unsigned int r = e == 31u ? (m == 0u ? 0x7f800000u : 0x7fc00000u) : (e == 0u ? (m == 0u ? 0u : nvf_f8_subnormal(m, -16)) : (((e + 112u) << 23) | (m << 21)));
  return __uint_as_float(sign | r);
}
struct nvf_fp8_e4m3 {
  unsigned char bits;
  nvf_fp8_e4m3() = default;
  __device__ explicit nvf_fp8_e4m3(float f) : bits(nvf_f2e4m3_bits(f)) {}
  __device__ explicit nvf_fp8_e4m3(double d) : bits(nvf_f2e4m3_bits((float)d)) {}
  __device__ explicit nvf_fp8_e4m3(int i) : bits(nvf_f2e4m3_bits((float)i)) {}
  __device__ explicit nvf_fp8_e4m3(long long i) : bits(nvf_f2e4m3_bits((float)i)) {}
  __device__ explicit nvf_fp8_e4m3(bool b) : bits(b ? 0x38u : 0u) {}
  __device__ operator float() const { return nvf_e4m32f(bits); }
};
struct nvf_fp8_e5m2 {
  unsigned char bits;
  nvf_fp8_e5m2() = default;
  __device__ explicit nvf_fp8_e5m2(float f) : bits(nvf_f2e5m2_bits(f)) {}
  __device__ explicit nvf_fp8_e5m2(double d) : bits(nvf_f2e5m2_bits((float)d)) {}
  __device__ explicit nvf_fp8_e5m2(int i) : bits(nvf_f2e5m2_bits((float)i)) {}
  __device__ explicit nvf_fp8_e5m2(long long i) : bits(nvf_f2e5m2_bits((float)i)) {}
  __device__ explicit nvf_fp8_e5m2(bool b) : bits(b ? 0x3cu : 0u) {}
  __device__ operator float() const { return nvf_e5m22f(bits); }
};

// Math helpers, one per op; float and double overloads, templates for integers.
#define NVF_UNARY(name, fexpr, dexpr) \
  __device__ inline float nvf_##name(float x) { return fexpr; } \
  __device__ inline double nvf_##name(double x) { return dexpr; }
NVF_UNARY(exp, expf(x), exp(x))
NVF_UNARY(exp2, exp2f(x), exp2(x))
NVF_UNARY(expm1, expm1f(x), expm1(x))
NVF_UNARY(log, logf(x), log(x))
NVF_UNARY(log2, log2f(x), log2(x))
NVF_UNARY(log10, log10f(x), log10(x))
NVF_UNARY(log1p, log1pf(x), log1p(x))
NVF_UNARY(sqrt, sqrtf(x), sqrt(x))
NVF_UNARY(rsqrt, rsqrtf(x), rsqrt(x))
NVF_UNARY(reciprocal, 1.0f / x, 1.0 / x)
NVF_UNARY(sin, sinf(x), sin(x))
NVF_UNARY(cos, cosf(x), cos(x))
NVF_UNARY(tan, tanf(x), tan(x))
NVF_UNARY(asin, asinf(x), asin(x))
NVF_UNARY(acos, acosf(x), acos(x))
NVF_UNARY(atan, atanf(x), atan(x))
NVF_UNARY(sinh, sinhf(x), sinh(x))
NVF_UNARY(cosh, coshf(x), cosh(x))
NVF_UNARY(tanh, tanhf(x), tanh(x))
NVF_UNARY(asinh, asinhf(x), asinh(x))
NVF_UNARY(acosh, acoshf(x), acosh(x))
NVF_UNARY(atanh, atanhf(x), atanh(x))
NVF_UNARY(sigmoid, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)))
NVF_UNARY(silu, x / (1.0f + expf(-x)), x / (1.0 + exp(-x)))
NVF_UNARY(gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)), 0.5 * x * (1.0 + erf(x * 0.70710678118654752)))
NVF_UNARY(gelu_tanh, 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))),
          0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x))))
NVF_UNARY(erf, erff(x), erf(x))
NVF_UNARY(erfc, erfcf(x), erfc(x))
NVF_UNARY(erfinv, erfinvf(x), erfinv(x))
NVF_UNARY(lgamma, lgammaf(x), lgamma(x))
NVF_UNARY(frac, x - truncf(x), x - trunc(x))
NVF_UNARY(floor, floorf(x), floor(x))
NVF_UNARY(ceil, ceilf(x), ceil(x))
NVF_UNARY(round, rintf(x), rint(x))
NVF_UNARY(trunc, truncf(x), trunc(x))
NVF_UNARY(abs, fabsf(x), fabs(x))
#undef NVF_UNARY
template <typename T> __device__ inline T nvf_floor(T x) { return x; }
template <typename T> __device__ inline T nvf_ceil(T x) { return x; }
template <typename T> __device__ inline T nvf_round(T x) { return x; }
template <typename T> __device__ inline T nvf_trunc(T x) { return x; }
template <typename T> __device__ inline T nvf_abs(T x) { return x < (T)0 ? (T)-x : x; }
__device__ inline bool nvf_abs(bool x) { return x; }
template <typename T> __device__ inline T nvf_neg(T x) { return -x; }
template <typename T> __device__ inline T nvf_relu(T x) { return x <= (T)0 ? (T)0 : x; }
// sign(±0) is +0 and sign(NaN) is NaN, as on the CPU reference (`eval::math::sign_f`):
// the sign of a zero would show through atan2 or a division (fuzz seed 11032140).
template <typename T> __device__ inline T nvf_sign(T x) { return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : (x == x ? (T)0 : x)); }
__device__ inline bool nvf_sign(bool x) { return x; }
template <typename T> __device__ inline bool nvf_isnan(T x) { return x != x; }
template <typename T> __device__ inline bool nvf_isinf(T x) { return x == (T)(1.0 / 0.0) || x == (T)(-1.0 / 0.0); }
// Integer and bool overloads come before nvf_isfinite: a call inside a template sees
// only the overloads declared before it for built-in types.
__device__ inline bool nvf_isinf(long long) { return false; }
__device__ inline bool nvf_isinf(int) { return false; }
__device__ inline bool nvf_isinf(bool) { return false; }
template <typename T> __device__ inline bool nvf_isfinite(T x) { return !nvf_isnan(x) && !nvf_isinf(x); }
template <typename T> __device__ inline bool nvf_logical_not(T x) { return x == (T)0; }
template <typename T> __device__ inline T nvf_bitwise_not(T x) { return ~x; }
__device__ inline bool nvf_bitwise_not(bool x) { return !x; }

// minimum / maximum (and their reductions): NaN wins, and -0 orders below +0, as on the
// CPU reference (`eval::math::minimum`): minimum(+0, -0) is -0, maximum(-0, +0) is +0.
// f32 and f64 use the hardware min/max (FMNMX / DMNMX order -0 below +0, which
// `gpu_fuzz_regressions::maximum_and_minimum_order_negative_zero_below_positive_zero`
// checks); f32 from sm_80 as one `max.NaN` / `min.NaN` instruction. They sit on softmax's
// per-element path, where a compare-and-select version cost up to 30% of its bandwidth.
template <typename T> __device__ inline bool nvf_sign_bit(T x) { return x < (T)0; }
template <typename T> __device__ inline T nvf_minimum(T a, T b) { return a != a ? a : (b != b ? b : ((b < a || (!(a < b) && nvf_sign_bit(b))) ? b : a)); }
template <typename T> __device__ inline T nvf_maximum(T a, T b) { return a != a ? a : (b != b ? b : ((a < b || (!(b < a) && nvf_sign_bit(a))) ? b : a)); }
__device__ inline float nvf_minimum(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fminf(a, b);
#endif
}
__device__ inline float nvf_maximum(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fmaxf(a, b);
#endif
}
__device__ inline double nvf_minimum(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }
__device__ inline double nvf_maximum(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }
__device__ inline float nvf_fmod(float a, float b) { return fmodf(a, b); }
__device__ inline double nvf_fmod(double a, double b) { return fmod(a, b); }
template <typename T> __device__ inline T nvf_fmod(T a, T b) { return a % b; }
__device__ inline float nvf_remainder(float a, float b) { float r = fmodf(a, b); return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r; }
__device__ inline double nvf_remainder(double a, double b) { double r = fmod(a, b); return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r; }
template <typename T> __device__ inline T nvf_remainder(T a, T b) { T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ inline float nvf_pow(float a, float b) { return powf(a, b); }
__device__ inline double nvf_pow(double a, double b) { return pow(a, b); }
template <typename T> __device__ inline T nvf_pow(T a, T b) {
  if (b < 0) return a == 1 ? (T)1 : (a == -1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0);
  T r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
__device__ inline float nvf_atan2(float a, float b) { return atan2f(a, b); }
__device__ inline double nvf_atan2(double a, double b) { return atan2(a, b); }
__device__ inline int nvf_logical_shift_right(int a, int b) { return (int)((unsigned int)a >> b); }
__device__ inline long long nvf_logical_shift_right(long long a, long long b) { return (long long)((unsigned long long)a >> b); }
template <typename T> __device__ inline T nvf_clamp(T x, T lo, T hi) { return nvf_minimum(nvf_maximum(x, lo), hi); }
// Float to integer casts with PyTorch's CUDA results (the evaluator's float_to_int):
// truncation, saturation at the bounds, NaN -> 0 (i32 from 32-bit or narrower floats),
// INT_MIN (i32 from f64) or LLONG_MIN (i64).
__device__ inline int nvf_f2i32_f32(float x) {
  return x != x ? 0 : (x >= 2147483648.0f ? 2147483647 : (x < -2147483648.0f ? (-2147483647 - 1) : (int)x));
}
__device__ inline int nvf_f2i32_f64(double x) {
  return x != x ? (-2147483647 - 1) : (x >= 2147483648.0 ? 2147483647 : (x <= -2147483649.0 ? (-2147483647 - 1) : (int)x));
}
__device__ inline long long nvf_f2i64(double x) {
  return x != x ? (-9223372036854775807LL - 1) : (x >= 9223372036854775808.0 ? 9223372036854775807LL : (x < -9223372036854775808.0 ? (-9223372036854775807LL - 1) : (long long)x));
}

// Reductions.
struct NvfSum { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct NvfProd { template <typename T> __device__ T operator()(T a, T b) const { return a * b; } };
struct NvfMax { template <typename T> __device__ T operator()(T a, T b) const { return nvf_maximum(a, b); } };
struct NvfMin { template <typename T> __device__ T operator()(T a, T b) const { return nvf_minimum(a, b); } };
template <typename T> __device__ inline T nvf_shfl_xor(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
__device__ inline bool nvf_shfl_xor(bool v, int m) { return __shfl_xor_sync(0xffffffffu, (int)v, m) != 0; }
__device__ inline nvf_half nvf_shfl_xor(nvf_half v, int m) { nvf_half r; r.bits = (unsigned short)__shfl_xor_sync(0xffffffffu, (int)v.bits, m); return r; }
__device__ inline nvf_bfloat nvf_shfl_xor(nvf_bfloat v, int m) { nvf_bfloat r; r.bits = (unsigned short)__shfl_xor_sync(0xffffffffu, (int)v.bits, m); return r; }
__device__ inline nvf_fp8_e4m3 nvf_shfl_xor(nvf_fp8_e4m3 v, int m) { nvf_fp8_e4m3 r; r.bits = (unsigned char)__shfl_xor_sync(0xffffffffu, (int)v.bits, m); return r; }
__device__ inline nvf_fp8_e5m2 nvf_shfl_xor(nvf_fp8_e5m2 v, int m) { nvf_fp8_e5m2 r; r.bits = (unsigned char)__shfl_xor_sync(0xffffffffu, (int)v.bits, m); return r; }
template <typename T, typename Op> __device__ inline T nvf_warp_allreduce(T v, Op op) {
  for (int m = 16; m >= 1; m >>= 1) v = op(v, nvf_shfl_xor(v, m));
  return v;
}
// All-reduce over threadIdx.x (blockDim.x a multiple of 32, at most 1024 threads in the
// block): warp shuffles, one value per warp through shared memory, shuffles again.
// Each row of threads (one threadIdx.y/z) reduces on its own, so 2-D blocks reduce
// several rows at once; smem holds one slot per warp of the block (32). Every thread
// returns its row's result. Must be reached by every thread of the block.
__device__ inline unsigned int nvf_thread_linear() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
template <typename T, typename Op> __device__ inline T nvf_block_allreduce_x(T v, Op op, T init, T* smem) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned int warp = nvf_thread_linear() >> 5;
  const unsigned int nwarps = blockDim.x >> 5;
  const unsigned int row_first_warp = warp - (threadIdx.x >> 5);
  v = nvf_warp_allreduce(v, op);
  __syncthreads();
  if (lane == 0u) smem[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem[row_first_warp + lane] : init;
  return nvf_warp_allreduce(v, op);
}

// Scans over threadIdx.x (blockDim.x a multiple of 32, at most 1024 threads): each row
// of threads (one threadIdx.y/z) scans on its own. A thread passes its value `v` and gets
// back the combination of the values of the threads before it in its row (`init` for the
// first), and `total` is set to the combination of the whole row. Inclusive scans within
// warps by shuffles, the warp totals through shared memory (one slot per warp of the
// block), then every warp scans the totals of its row. Must be reached by every thread.
template <typename T> __device__ inline T nvf_shfl_up(T v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ inline bool nvf_shfl_up(bool v, int d) { return __shfl_up_sync(0xffffffffu, (int)v, d) != 0; }
__device__ inline nvf_half nvf_shfl_up(nvf_half v, int d) { nvf_half r; r.bits = (unsigned short)__shfl_up_sync(0xffffffffu, (int)v.bits, d); return r; }
__device__ inline nvf_bfloat nvf_shfl_up(nvf_bfloat v, int d) { nvf_bfloat r; r.bits = (unsigned short)__shfl_up_sync(0xffffffffu, (int)v.bits, d); return r; }
__device__ inline nvf_fp8_e4m3 nvf_shfl_up(nvf_fp8_e4m3 v, int d) { nvf_fp8_e4m3 r; r.bits = (unsigned char)__shfl_up_sync(0xffffffffu, (int)v.bits, d); return r; }
__device__ inline nvf_fp8_e5m2 nvf_shfl_up(nvf_fp8_e5m2 v, int d) { nvf_fp8_e5m2 r; r.bits = (unsigned char)__shfl_up_sync(0xffffffffu, (int)v.bits, d); return r; }
template <typename T> __device__ inline T nvf_shfl_idx(T v, int l) { return __shfl_sync(0xffffffffu, v, l); }
__device__ inline bool nvf_shfl_idx(bool v, int l) { return __shfl_sync(0xffffffffu, (int)v, l) != 0; }
__device__ inline nvf_half nvf_shfl_idx(nvf_half v, int l) { nvf_half r; r.bits = (unsigned short)__shfl_sync(0xffffffffu, (int)v.bits, l); return r; }
__device__ inline nvf_bfloat nvf_shfl_idx(nvf_bfloat v, int l) { nvf_bfloat r; r.bits = (unsigned short)__shfl_sync(0xffffffffu, (int)v.bits, l); return r; }
__device__ inline nvf_fp8_e4m3 nvf_shfl_idx(nvf_fp8_e4m3 v, int l) { nvf_fp8_e4m3 r; r.bits = (unsigned char)__shfl_sync(0xffffffffu, (int)v.bits, l); return r; }
__device__ inline nvf_fp8_e5m2 nvf_shfl_idx(nvf_fp8_e5m2 v, int l) { nvf_fp8_e5m2 r; r.bits = (unsigned char)__shfl_sync(0xffffffffu, (int)v.bits, l); return r; }
template <typename T, typename Op> __device__ inline T nvf_warp_scan(T v, Op op, unsigned int lane) {
  for (int d = 1; d < 32; d <<= 1) {
    const T u = nvf_shfl_up(v, d);
    if (lane >= (unsigned int)d) v = op(u, v);
  }
  return v;
}
template <typename T, typename Op> __device__ inline T nvf_block_scan_x(T v, Op op, T init, T* smem, T& total) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned int warp = nvf_thread_linear() >> 5;
  const unsigned int nwarps = blockDim.x >> 5;
  const unsigned int row_warp = threadIdx.x >> 5;
  const unsigned int row_first_warp = warp - row_warp;
  const T inc = nvf_warp_scan(v, op, lane);
  T before = nvf_shfl_up(inc, 1);
  if (lane == 0u) before = init;
  __syncthreads();
  if (lane == 31u) smem[warp] = inc;
  __syncthreads();
  const T w = nvf_warp_scan(lane < nwarps ? smem[row_first_warp + lane] : init, op, lane);
  const T earlier = nvf_shfl_idx(w, row_warp == 0u ? 0 : (int)row_warp - 1);
  total = nvf_shfl_idx(w, (int)nwarps - 1);
  return row_warp == 0u ? before : op(earlier, before);
}

// Welford: a running (mean, sum of squared deviations, count) per thread, combined
// across threads by Chan's parallel formula. An empty partial (count 0) is neutral.
template <typename T> __device__ inline void nvf_welford_update(T& avg, T& m2, long long& n, T x) {
  n += 1;
  const T delta = x - avg;
  avg += delta / (T)n;
  m2 += delta * (x - avg);
}
template <typename T> __device__ inline void nvf_welford_combine(T& avg, T& m2, long long& n, T avg_b, T m2_b, long long n_b) {
  if (n_b == 0) return;
  if (n == 0) { avg = avg_b; m2 = m2_b; n = n_b; return; }
  const long long total = n + n_b;
  const T delta = avg_b - avg;
  const T frac_b = (T)n_b / (T)total;
  avg += delta * frac_b;
  m2 += m2_b + delta * delta * (T)n * frac_b;
  n = total;
}
template <typename T> __device__ inline void nvf_warp_welford(T& avg, T& m2, long long& n) {
  for (int m = 16; m >= 1; m >>= 1) {
    T a = nvf_shfl_xor(avg, m), q = nvf_shfl_xor(m2, m);
    long long c = nvf_shfl_xor(n, m);
    nvf_welford_combine(avg, m2, n, a, q, c);
  }
}
// Block all-reduce of Welford triples over threadIdx.x, row by row (as above).
template <typename T> __device__ inline void nvf_block_welford_x(T& avg, T& m2, long long& n, T* s_avg, T* s_m2, long long* s_n) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned int warp = nvf_thread_linear() >> 5;
  const unsigned int nwarps = blockDim.x >> 5;
  const unsigned int row_first_warp = warp - (threadIdx.x >> 5);
  nvf_warp_welford(avg, m2, n);
  __syncthreads();
  if (lane == 0u) { s_avg[warp] = avg; s_m2[warp] = m2; s_n[warp] = n; }
  __syncthreads();
  if (lane < nwarps) {
    avg = s_avg[row_first_warp + lane]; m2 = s_m2[row_first_warp + lane]; n = s_n[row_first_warp + lane];
  } else {
    avg = (T)0; m2 = (T)0; n = 0;
  }
  nvf_warp_welford(avg, m2, n);
}

// Block all-reduce over threadIdx.y, blockDim.y a power of two: each column of
// threads (one threadIdx.x and threadIdx.z) halves its blockDim.y values in shared
// memory (one slot per thread of the block); every thread returns its column's result.
// Must be reached by every thread of the block.
template <typename T, typename Op> __device__ inline T nvf_block_allreduce_y(T v, Op op, T* smem) {
  const unsigned int w = blockDim.x;
  const unsigned int base = threadIdx.z * blockDim.y * w + threadIdx.x;
  const unsigned int me = base + threadIdx.y * w;
  __syncthreads();
  smem[me] = v;
  __syncthreads();
  for (unsigned int half = blockDim.y >> 1; half > 0u; half >>= 1) {
    if (threadIdx.y < half) smem[me] = op(smem[me], smem[me + half * w]);
    __syncthreads();
  }
  return smem[base];
}
// The same for Welford triples.
template <typename T> __device__ inline void nvf_block_welford_y(T& avg, T& m2, long long& n, T* s_avg, T* s_m2, long long* s_n) {
  const unsigned int w = blockDim.x;
  const unsigned int base = threadIdx.z * blockDim.y * w + threadIdx.x;
  const unsigned int me = base + threadIdx.y * w;
  __syncthreads();
  s_avg[me] = avg; s_m2[me] = m2; s_n[me] = n;
  __syncthreads();
  for (unsigned int half = blockDim.y >> 1; half > 0u; half >>= 1) {
    if (threadIdx.y < half) {
      T a = s_avg[me], q = s_m2[me];
      long long c = s_n[me];
      const unsigned int o = me + half * w;
      nvf_welford_combine(a, q, c, s_avg[o], s_m2[o], s_n[o]);
      s_avg[me] = a; s_m2[me] = q; s_n[me] = c;
    }
    __syncthreads();
  }
  avg = s_avg[base]; m2 = s_m2[base]; n = s_n[base];
}

// Loads that bypass the (non-coherent) L1 cache, for values other blocks wrote, and
// for an output this kernel stored and reads back: NVRTC merged `c ? in[i] : out[i]`
// into one read-only (non-coherent) load of the selected address, hoisted above the
// store to `out[i]`; a volatile load is issued as written.
template <typename T> __device__ inline T nvf_load_volatile(const T* p) { return *(const volatile T*)p; }
__device__ inline nvf_half nvf_load_volatile(const nvf_half* p) { nvf_half r; r.bits = *(const volatile unsigned short*)&p->bits; return r; }
__device__ inline nvf_bfloat nvf_load_volatile(const nvf_bfloat* p) { nvf_bfloat r; r.bits = *(const volatile unsigned short*)&p->bits; return r; }
__device__ inline nvf_fp8_e4m3 nvf_load_volatile(const nvf_fp8_e4m3* p) { nvf_fp8_e4m3 r; r.bits = *(const volatile unsigned char*)&p->bits; return r; }
__device__ inline nvf_fp8_e5m2 nvf_load_volatile(const nvf_fp8_e5m2* p) { nvf_fp8_e5m2 r; r.bits = *(const volatile unsigned char*)&p->bits; return r; }

// Grid reduction, in one pass with a semaphore. The blocks that reduce together (same
// `segment`, `nblocks` of them, this one being number `rank`) each store their partial
// (one per thread slot `slot` of `nslots`; a block reduced over threadIdx.x or .y
// (`reduce_tid` 1 or 2; 0: none) stores from its threads at 0 on that dim) in
// work[(segment * nblocks + rank) * nslots + slot], make it visible (__threadfence),
// and count themselves in sem[segment]. The block that arrives last reads every
// partial of its segment back, eight loads in flight at a time, spread over the
// reduced thread dim (then a block all-reduce over it) or serially per thread; it
// leaves the result in `v`, resets sem[segment] to 0 for the next launch and returns
// true; the others return false. Must be reached by every thread of the block.
__device__ inline bool nvf_grid_arrive(unsigned int* sem, nvfuser_index_t segment, nvfuser_index_t nblocks) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (nvf_thread_linear() == 0u) {
    const unsigned int arrived = atomicAdd(&sem[segment], 1u);
    last = arrived == (unsigned int)(nblocks - 1);
  }
  __syncthreads();
  const bool is_last = last;
  if (is_last) __threadfence();
  return is_last;
}
// The first partial this thread combines and the step between its partials.
__device__ inline nvfuser_index_t nvf_grid_first(int reduce_tid) {
  return reduce_tid == 1 ? (nvfuser_index_t)threadIdx.x : reduce_tid == 2 ? (nvfuser_index_t)threadIdx.y : 0;
}
__device__ inline nvfuser_index_t nvf_grid_step(int reduce_tid) {
  return reduce_tid == 1 ? (nvfuser_index_t)blockDim.x : reduce_tid == 2 ? (nvfuser_index_t)blockDim.y : 1;
}
__device__ inline bool nvf_grid_stores(int reduce_tid) {
  return reduce_tid == 1 ? threadIdx.x == 0u : reduce_tid == 2 ? threadIdx.y == 0u : true;
}
template <typename T, typename Op>
__device__ inline bool nvf_grid_reduce(T& v, Op op, T init, T* work, unsigned int* sem,
    nvfuser_index_t segment, nvfuser_index_t nblocks, nvfuser_index_t rank,
    nvfuser_index_t slot, nvfuser_index_t nslots, int reduce_tid, T* smem) {
  if (nvf_grid_stores(reduce_tid)) work[(segment * nblocks + rank) * nslots + slot] = v;
  if (!nvf_grid_arrive(sem, segment, nblocks)) return false;
  const nvfuser_index_t step = nvf_grid_step(reduce_tid);
  const T* part = work + segment * nblocks * nslots + slot;
  T acc = init;
  nvfuser_index_t b = nvf_grid_first(reduce_tid);
  for (; b + 7 * step < nblocks; b += 8 * step) {
    T r[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) r[j] = nvf_load_volatile(&part[(b + j * step) * nslots]);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc = op(acc, r[j]);
  }
  for (; b < nblocks; b += step) acc = op(acc, nvf_load_volatile(&part[b * nslots]));
  if (reduce_tid == 1) acc = nvf_block_allreduce_x(acc, op, init, smem);
  if (reduce_tid == 2) acc = nvf_block_allreduce_y(acc, op, smem);
  v = acc;
  if (nvf_thread_linear() == 0u) sem[segment] = 0u;
  return true;
}

// The grid reduction of `n` values per thread (a thread's vector of columns, kept in a
// register array), as nvf_grid_reduce without a grid barrier: each block stores its `n`
// partials per slot in work[((segment * nblocks + rank) * nslots + slot) * n + k] (a
// thread's values side by side), counts itself, and the block that arrives last combines
// every block's partials, `n` loads in flight per step, spread over the reduced thread
// dim (then a block all-reduce of each value over it). The results are left in `acc` of
// the last block, which returns true.
template <typename T, typename Op>
__device__ inline bool nvf_grid_reduce_group(T* acc, int n, Op op, T init, T* work,
    unsigned int* sem, nvfuser_index_t segment, nvfuser_index_t nblocks, nvfuser_index_t rank,
    nvfuser_index_t slot, nvfuser_index_t nslots, int reduce_tid, T* smem) {
  const nvfuser_index_t width = nslots * (nvfuser_index_t)n;
  T* base = work + segment * nblocks * width + slot * (nvfuser_index_t)n;
  if (nvf_grid_stores(reduce_tid)) {
    for (int k = 0; k < n; ++k) base[rank * width + k] = acc[k];
  }
  if (!nvf_grid_arrive(sem, segment, nblocks)) return false;
  for (int k = 0; k < n; ++k) acc[k] = init;
  const nvfuser_index_t step = nvf_grid_step(reduce_tid);
  for (nvfuser_index_t b = nvf_grid_first(reduce_tid); b < nblocks; b += step) {
    for (int k = 0; k < n; ++k) acc[k] = op(acc[k], nvf_load_volatile(&base[b * width + k]));
  }
  for (int k = 0; k < n; ++k) {
    if (reduce_tid == 1) acc[k] = nvf_block_allreduce_x(acc[k], op, init, smem);
    if (reduce_tid == 2) acc[k] = nvf_block_allreduce_y(acc[k], op, smem);
  }
  if (nvf_thread_linear() == 0u) sem[segment] = 0u;
  return true;
}

// A barrier of the `nblocks` blocks of one segment of the grid, which must all be resident
// at once (the kernel is launched cooperatively). Each block adds 1 to the segment's
// counter, the block of rank 0 adds 2^31 - (nblocks - 1): the top bit flips exactly when
// the last block arrives and the low bits come back to their value, so the counter needs
// no reset between barriers or launches.
__device__ inline void nvf_grid_sync(unsigned int* sem, nvfuser_index_t segment, nvfuser_index_t nblocks, bool leader) {
  __syncthreads();
  if (nvf_thread_linear() == 0u) {
    const unsigned int add = leader ? 0x80000000u - (unsigned int)(nblocks - 1) : 1u;
    __threadfence();
    const unsigned int old = atomicAdd(&sem[segment], add);
    while (((old ^ nvf_load_volatile(&sem[segment])) & 0x80000000u) == 0u) {}
    __threadfence();
  }
  __syncthreads();
}
// The grid all-reduce of `n` values per thread (a column sum's accumulators kept across a
// row loop): every block stores its partials, the blocks of the segment wait for each
// other, then each block combines a share of the columns (`lanes` threads per column,
// each over every `lanes`-th block, then shuffles), the blocks wait again, and every
// thread reads back its `n` results. `work` holds, per segment, `nblocks + 1` rows of
// `nslots * n` values: one row of partials per block, then the results. True in the block
// of rank 0 (every block holds the results; one stores them).
template <typename T, typename Op>
__device__ inline bool nvf_grid_allreduce_group(T* acc, int n, Op op, T init, T* work,
    unsigned int* sem, nvfuser_index_t segment, nvfuser_index_t nblocks, nvfuser_index_t rank,
    nvfuser_index_t slot, nvfuser_index_t nslots, int reduce_tid) {
  const nvfuser_index_t width = nslots * (nvfuser_index_t)n;
  T* base = work + segment * (nblocks + 1) * width;
  T* result = base + nblocks * width;
  if (nvf_grid_stores(reduce_tid)) {
    for (int k = 0; k < n; ++k) base[rank * width + slot * n + k] = acc[k];
  }
  nvf_grid_sync(sem, segment, nblocks, rank == 0);
  const nvfuser_index_t threads = (nvfuser_index_t)blockDim.x * blockDim.y * blockDim.z;
  const nvfuser_index_t tid = (nvfuser_index_t)nvf_thread_linear();
  const nvfuser_index_t share = (width + nblocks - 1) / nblocks;
  // Lanes per column: a power of two up to 32 (a warp), more while the block still
  // covers its share in one pass or each lane would combine more than 16 partials.
  int lanes = 1;
  if (threads % 32 == 0) {
    while (lanes < 32 && ((nvfuser_index_t)lanes * 2 * share <= threads || nblocks > 16 * lanes)) lanes *= 2;
  }
  const nvfuser_index_t per_pass = threads / lanes;
  const int lane = (int)(tid % lanes);
  for (nvfuser_index_t c0 = 0; c0 < share; c0 += per_pass) {
    const nvfuser_index_t j = c0 + tid / lanes;
    const nvfuser_index_t c = rank * share + j;
    const bool active = tid < per_pass * lanes && j < share && c < width;
    T v = init;
    if (active) {
      // Eight loads in flight per thread, as nvf_grid_reduce.
      nvfuser_index_t b = lane;
      for (; b + 7 * lanes < nblocks; b += 8 * lanes) {
        T r[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) r[j] = nvf_load_volatile(&base[(b + j * lanes) * width + c]);
#pragma unroll
        for (int j = 0; j < 8; ++j) v = op(v, r[j]);
      }
      for (; b < nblocks; b += lanes) v = op(v, nvf_load_volatile(&base[b * width + c]));
    }
    for (int m = lanes / 2; m >= 1; m >>= 1) v = op(v, nvf_shfl_xor(v, m));
    if (active && lane == 0) result[c] = v;
  }
  nvf_grid_sync(sem, segment, nblocks, rank == 0);
  for (int k = 0; k < n; ++k) acc[k] = nvf_load_volatile(&result[slot * n + k]);
  return rank == 0;
}

// Grid Welford, as nvf_grid_reduce for (mean, sum of squared deviations, count)
// triples: partials in three work buffers, combined by Chan's formula.
template <typename T>
__device__ inline bool nvf_grid_welford(T& avg, T& m2, long long& n, T* w_avg, T* w_m2,
    long long* w_n, unsigned int* sem, nvfuser_index_t segment, nvfuser_index_t nblocks,
    nvfuser_index_t rank, nvfuser_index_t slot, nvfuser_index_t nslots, int reduce_tid,
    T* s_avg, T* s_m2, long long* s_n) {
  const nvfuser_index_t at = (segment * nblocks + rank) * nslots + slot;
  if (nvf_grid_stores(reduce_tid)) { w_avg[at] = avg; w_m2[at] = m2; w_n[at] = n; }
  if (!nvf_grid_arrive(sem, segment, nblocks)) return false;
  const nvfuser_index_t step = nvf_grid_step(reduce_tid);
  const nvfuser_index_t first = segment * nblocks * nslots + slot;
  T a = (T)0, q = (T)0;
  long long c = 0;
  nvfuser_index_t b = nvf_grid_first(reduce_tid);
  for (; b + 7 * step < nblocks; b += 8 * step) {
    T ra[8], rq[8];
    long long rc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const nvfuser_index_t i = first + (b + j * step) * nslots;
      ra[j] = nvf_load_volatile(&w_avg[i]);
      rq[j] = nvf_load_volatile(&w_m2[i]);
      rc[j] = nvf_load_volatile(&w_n[i]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) nvf_welford_combine(a, q, c, ra[j], rq[j], rc[j]);
  }
  for (; b < nblocks; b += step) {
    const nvfuser_index_t i = first + b * nslots;
    nvf_welford_combine(a, q, c, nvf_load_volatile(&w_avg[i]), nvf_load_volatile(&w_m2[i]),
                        nvf_load_volatile(&w_n[i]));
  }
  if (reduce_tid == 1) nvf_block_welford_x(a, q, c, s_avg, s_m2, s_n);
  if (reduce_tid == 2) nvf_block_welford_y(a, q, c, s_avg, s_m2, s_n);
  avg = a; m2 = q; n = c;
  if (nvf_thread_linear() == 0u) sem[segment] = 0u;
  return true;
}

// Vector copies.
template <typename T, int N> struct alignas(sizeof(T) * N) nvf_array { T v[N]; };
template <typename T, int N> __device__ inline void nvf_vec_copy(T* dst, const T* src) {
  *reinterpret_cast<nvf_array<T, N>*>(dst) = *reinterpret_cast<const nvf_array<T, N>*>(src);
}

// Philox4x32-10 and the random element streams (see nvfuser_core::philox).
struct nvf_words { unsigned int w[4]; };
__device__ inline nvf_words nvf_philox(unsigned long long seed, unsigned long long offset, unsigned long long s) {
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
  unsigned int c0 = (unsigned int)offset, c1 = (unsigned int)(offset >> 32);
  unsigned int c2 = (unsigned int)s, c3 = (unsigned int)(s >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  nvf_words out;
  out.w[0] = c0; out.w[1] = c1; out.w[2] = c2; out.w[3] = c3;
  return out;
}
__device__ inline float nvf_uniform_f32(unsigned long long seed, unsigned long long offset, unsigned long long i, float lo, float hi) {
  unsigned int r = nvf_philox(seed, offset, i / 4).w[i % 4];
  float u = __uint2float_rn(r >> 8) * 0x1p-24f;
  return __fadd_rn(__fmul_rn(u, __fsub_rn(hi, lo)), lo);
}
__device__ inline double nvf_uniform_f64(unsigned long long seed, unsigned long long offset, unsigned long long i, double lo, double hi) {
  nvf_words w = nvf_philox(seed, offset, i / 2);
  unsigned int p = (unsigned int)(i % 2);
  unsigned long long x = (((unsigned long long)w.w[2 * p] << 32) | w.w[2 * p + 1]) >> 11;
  double u = (double)x * 0x1p-53;
  return __dadd_rn(__dmul_rn(u, __dsub_rn(hi, lo)), lo);
}
// The `uniform` op, on [low, high): the value from nvf_uniform_f32 (bounds rounded to
// f32) is rounded to the output type T (f32, f16 or bf16); a result >= high (high
// rounded to f32, then to T) becomes low (rounded likewise). Rounding can otherwise
// reach high (e.g. a tie at the top of [1, 2), or f32 -> bf16 rounding up). This is
// PyTorch's rule, and the CPU reference applies it identically, so both agree bit
// for bit.
template <typename T> __device__ inline T nvf_uniform(unsigned long long seed, unsigned long long offset, unsigned long long i, float lo, float hi) {
  const T v = (T)nvf_uniform_f32(seed, offset, i, lo, hi);
  const T lo_t = (T)lo, hi_t = (T)hi;
  return (float)v >= (float)hi_t ? lo_t : v;
}
// The same rule for f64 outputs: a result >= high becomes low.
__device__ inline double nvf_uniform_f64_op(unsigned long long seed, unsigned long long offset, unsigned long long i, double lo, double hi) {
  const double v = nvf_uniform_f64(seed, offset, i, lo, hi);
  return v >= hi ? lo : v;
}
__device__ inline double nvf_normal_f32(unsigned long long seed, unsigned long long offset, unsigned long long i, double mean, double std) {
  nvf_words w = nvf_philox(seed, offset, i / 4);
  unsigned int p = (unsigned int)((i % 4) / 2);
  double u1 = (double)((w.w[2 * p] >> 8) + 1u) * 0x1p-24;
  double u2 = (double)(w.w[2 * p + 1] >> 8) * 0x1p-24;
  double rad = sqrt(-2.0 * log(u1));
  double theta = 6.283185307179586 * u2;
  double z = (i % 2 == 0) ? rad * cos(theta) : rad * sin(theta);
  return mean + std * z;
}
__device__ inline double nvf_normal_f64(unsigned long long seed, unsigned long long offset, unsigned long long i, double mean, double std) {
  nvf_words w = nvf_philox(seed, offset, i / 2);
  unsigned long long x0 = (((unsigned long long)w.w[0] << 32) | w.w[1]) >> 11;
  unsigned long long x1 = (((unsigned long long)w.w[2] << 32) | w.w[3]) >> 11;
  double u1 = (double)(x0 + 1ull) * 0x1p-53;
  double u2 = (double)x1 * 0x1p-53;
  double rad = sqrt(-2.0 * log(u1));
  double theta = 6.283185307179586 * u2;
  double z = (i % 2 == 0) ? rad * cos(theta) : rad * sin(theta);
  return mean + std * z;
}
// ---- end of runtime support ----
"#;
