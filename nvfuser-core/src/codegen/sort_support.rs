//! The runtime support of sort kernels (`sort`, `argsort`, `topk`), emitted after the
//! [`PREAMBLE`](super::preamble::PREAMBLE) only by kernels that call `nvf_sort_rows`.
//!
//! One block sorts `rows_per_block` rows of `pad` (a power of two) elements each, in
//! dynamic shared memory: each element becomes an unsigned key whose unsigned order is
//! the evaluator's order (`crate::eval`, "Sorting": NaN above +inf, -0 equal to +0;
//! complemented for a descending sort) beside its index along the row (u16 when `pad`
//! is at most 65536, else u32); padding elements get the largest key and their own
//! position, so they sort after every element of the row. A bitonic network sorts the
//! (key, index) pairs, all distinct, so the result is the stable order on every
//! device. The first `k` pairs are written out: the index, and the value read back
//! from the input at that index (so -0 and NaN payloads are the input's own bits).
//!
//! Every phase is a loop `for (p = threadIdx.x; p < n; p += blockDim.x)` over
//! independent elements or pairs followed by a barrier, so one thread running every
//! iteration computes what the block does: `tests/sort_support_host.rs` compiles this
//! text for the host that way and compares it with the reference.

/// The support code (after the preamble, which defines `nvfuser_index_t`, `nvf_shape`,
/// `nvf_half` and `nvf_bfloat`).
pub const SORT_SUPPORT: &str = r#"// ---- sort support: block bitonic sort of (key, index) pairs ----
extern __shared__ __align__(16) unsigned char nvf_sort_smem[];
// Keys: unsigned order = the reference order (NaN above +inf, -0 == +0).
__device__ inline unsigned int nvf_sort_key(float x) {
  if (x != x) return 0xffffffffu;
  unsigned int b = x == 0.0f ? 0u : __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ inline unsigned long long nvf_sort_key(double x) {
  if (x != x) return 0xffffffffffffffffull;
  unsigned long long b = x == 0.0 ? 0ull : (unsigned long long)__double_as_longlong(x);
  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);
}
__device__ inline unsigned int nvf_sort_key(nvf_half x) { return nvf_sort_key((float)x); }
__device__ inline unsigned int nvf_sort_key(nvf_bfloat x) { return nvf_sort_key((float)x); }
__device__ inline unsigned int nvf_sort_key(int x) { return ((unsigned int)x) ^ 0x80000000u; }
__device__ inline unsigned long long nvf_sort_key(long long x) { return ((unsigned long long)x) ^ 0x8000000000000000ull; }
__device__ inline unsigned int nvf_sort_key(bool x) { return x ? 1u : 0u; }
// The offset of row `row` of a tensor: the row-major position over every dim but
// `axis`, times the strides.
template <int N>
__device__ inline nvfuser_index_t nvf_sort_row_offset(const nvf_shape<N>& s, int axis, nvfuser_index_t row) {
  nvfuser_index_t off = 0;
  int outer = axis == 0 ? 1 : 0;
  for (int d = N - 1; d >= 0; --d) {
    if (d == axis) continue;
    nvfuser_index_t i = row;
    if (d != outer) {
      i = row % s.size[d];
      row = row / s.size[d];
    }
    off += i * s.stride[d];
  }
  return off;
}
template <typename T, typename K, typename I, int N>
__device__ inline void nvf_sort_rows_impl(
    const T* __restrict__ in, const nvf_shape<N>& in_s,
    T* __restrict__ out_v, const nvf_shape<N>& v_s,
    long long* __restrict__ out_i, const nvf_shape<N>& i_s,
    int axis, nvfuser_index_t pad, nvfuser_index_t rows_per_block, bool descending) {
  K* skey = reinterpret_cast<K*>(nvf_sort_smem);
  I* sidx = reinterpret_cast<I*>(nvf_sort_smem + sizeof(K) * pad * rows_per_block);
  const nvfuser_index_t n = in_s.size[axis];
  const nvfuser_index_t k = out_i != nullptr ? i_s.size[axis] : v_s.size[axis];
  nvfuser_index_t rows = 1;
  for (int d = 0; d < N; ++d) if (d != axis) rows *= in_s.size[d];
  const nvfuser_index_t tile = pad * rows_per_block;
  const nvfuser_index_t first = (nvfuser_index_t)blockIdx.x * rows_per_block;
  const K top = (K)~(K)0;
  for (nvfuser_index_t e = threadIdx.x; e < tile; e += blockDim.x) {
    const nvfuser_index_t r = e / pad, c = e - r * pad, row = first + r;
    K key = top;
    if (row < rows && c < n) {
      key = nvf_sort_key(in[nvf_sort_row_offset(in_s, axis, row) + c * in_s.stride[axis]]);
      if (descending) key = ~key;
    }
    skey[e] = key;
    sidx[e] = (I)c;
  }
  __syncthreads();
  for (nvfuser_index_t size = 2; size <= pad; size <<= 1) {
    // The last merge of a row sorts it ascending; earlier ones alternate.
    const nvfuser_index_t dir = size & (pad - 1);
    for (nvfuser_index_t j = size >> 1; j > 0; j >>= 1) {
      for (nvfuser_index_t p = threadIdx.x; p < tile / 2; p += blockDim.x) {
        const nvfuser_index_t lo = ((p & ~(j - 1)) << 1) | (p & (j - 1));
        const nvfuser_index_t hi = lo + j;
        const K a = skey[lo], b = skey[hi];
        const I ia = sidx[lo], ib = sidx[hi];
        const bool greater = a > b || (a == b && ia > ib);
        if (greater == ((lo & dir) == 0)) {
          skey[lo] = b; skey[hi] = a;
          sidx[lo] = ib; sidx[hi] = ia;
        }
      }
      __syncthreads();
    }
  }
  for (nvfuser_index_t e = threadIdx.x; e < tile; e += blockDim.x) {
    const nvfuser_index_t r = e / pad, c = e - r * pad, row = first + r;
    if (row < rows && c < k) {
      const nvfuser_index_t src = (nvfuser_index_t)sidx[e];
      if (out_v != nullptr)
        out_v[nvf_sort_row_offset(v_s, axis, row) + c * v_s.stride[axis]] =
            in[nvf_sort_row_offset(in_s, axis, row) + src * in_s.stride[axis]];
      if (out_i != nullptr)
        out_i[nvf_sort_row_offset(i_s, axis, row) + c * i_s.stride[axis]] = (long long)src;
    }
  }
}
// Sorts the rows of `in` along `axis` into `out_v` (values) and `out_i` (indices, i64),
// either of which may be null; the first `k` of each row, k = the outputs' size along
// `axis`. Shared memory: rows_per_block * pad * (sizeof key + sizeof index) bytes.
template <typename T, int N>
__device__ inline void nvf_sort_rows(
    const T* __restrict__ in, const nvf_shape<N> in_s,
    T* __restrict__ out_v, const nvf_shape<N> v_s,
    long long* __restrict__ out_i, const nvf_shape<N> i_s,
    int axis, nvfuser_index_t pad, nvfuser_index_t rows_per_block, bool descending) {
  typedef decltype(nvf_sort_key(T())) K;
  if (pad <= 65536)
    nvf_sort_rows_impl<T, K, unsigned short, N>(in, in_s, out_v, v_s, out_i, i_s, axis, pad, rows_per_block, descending);
  else
    nvf_sort_rows_impl<T, K, unsigned int, N>(in, in_s, out_v, v_s, out_i, i_s, axis, pad, rows_per_block, descending);
}
// ---- end of sort support ----
"#;

/// Bytes of shared memory one block of a sort kernel uses: `rows_per_block * pad`
/// pairs of a key (8 bytes for 64-bit types, else 4) and an index (2 bytes when `pad`
/// is at most 65536, else 4).
pub fn sort_shared_bytes(key_bytes: i64, pad: i64, rows_per_block: i64) -> i64 {
    let index_bytes = if pad <= 65536 { 2 } else { 4 };
    pad.saturating_mul(rows_per_block)
        .saturating_mul(key_bytes + index_bytes)
}
