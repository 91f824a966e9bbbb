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
// Sorts `tile / pad` runs of `pad` (key, index) pairs (a power of two) ascending, each
// by itself, with a bitonic network; ends with a barrier.
template <typename K, typename I>
__device__ inline void nvf_bitonic_sort(K* skey, I* sidx, nvfuser_index_t tile, nvfuser_index_t pad) {
  for (nvfuser_index_t size = 2; size <= pad; size <<= 1) {
    // The last merge of a run sorts it ascending; earlier ones alternate.
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
  nvf_bitonic_sort(skey, sidx, tile, pad);
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
// topk of one row per block without sorting the row: a radix select (8 bits a pass,
// most significant first) finds the k-th (key, index) pair of the row's order (index
// passes only when the k-th key has ties left out); the pairs up to it are gathered
// (in any order: atomics), padded to `kpad` (a power of two) and sorted by the bitonic
// network, so the result is the order of a full sort. A row of at most
// NVF_TOPK_ITEMS (16 for 64-bit keys) keys per thread is read once into registers;
// a longer one is read from global memory each pass. Each warp counts digits in a
// histogram of its own (no atomics contended across warps). Shared memory: 256
// counters per warp (at most 32 warps), 256 + 4 more, kpad keys and kpad u32 indices.
#define NVF_TOPK_ITEMS 32
template <typename T, typename K, int N>
__device__ inline void nvf_topk_rows_impl(
    const T* __restrict__ in, const nvf_shape<N>& in_s,
    T* __restrict__ out_v, const nvf_shape<N>& v_s,
    long long* __restrict__ out_i, const nvf_shape<N>& i_s,
    int axis, nvfuser_index_t kpad, bool descending) {
  unsigned int* whist = reinterpret_cast<unsigned int*>(nvf_sort_smem);
  unsigned int* hist = whist + 256 * 32;
  unsigned int* info = hist + 256;
  K* skey = reinterpret_cast<K*>(nvf_sort_smem + 4 * (256 * 33 + 16));
  unsigned int* sidx = reinterpret_cast<unsigned int*>(nvf_sort_smem + 4 * (256 * 33 + 16) + sizeof(K) * kpad);
  const nvfuser_index_t n = in_s.size[axis];
  const nvfuser_index_t k = out_i != nullptr ? i_s.size[axis] : v_s.size[axis];
  nvfuser_index_t rows = 1;
  for (int d = 0; d < N; ++d) if (d != axis) rows *= in_s.size[d];
  const nvfuser_index_t row = blockIdx.x;
  if (row >= rows || k <= 0 || k > n) return;  // the same for the whole block
  const nvfuser_index_t base = nvf_sort_row_offset(in_s, axis, row);
  const nvfuser_index_t step = in_s.stride[axis];
  const nvfuser_index_t bd = blockDim.x;
  const K flip = descending ? (K)~(K)0 : (K)0;
  const int warps = (int)((bd + 31) / 32);
  unsigned int* my_hist = whist + 256 * (threadIdx.x / 32);
  // The row's keys in registers when they fit.
  const int items = sizeof(K) == 4 ? NVF_TOPK_ITEMS : NVF_TOPK_ITEMS / 2;
  const bool cached = n <= (nvfuser_index_t)items * bd;
  K cache[NVF_TOPK_ITEMS];
  if (cached) {
#pragma unroll
    for (int j = 0; j < NVF_TOPK_ITEMS; ++j) {
      const nvfuser_index_t i = (nvfuser_index_t)j * bd + threadIdx.x;
      if (j < items && i < n) cache[j] = nvf_sort_key(in[base + i * step]) ^ flip;
    }
  }
  // Calls f(i, key) for this thread's positions of the row.
  auto each = [&](auto&& f) {
    if (cached) {
#pragma unroll
      for (int j = 0; j < NVF_TOPK_ITEMS; ++j) {
        const nvfuser_index_t i = (nvfuser_index_t)j * bd + threadIdx.x;
        if (j < items && i < n) f(i, cache[j]);
      }
    } else {
      for (nvfuser_index_t i = threadIdx.x; i < n; i += bd) f(i, nvf_sort_key(in[base + i * step]) ^ flip);
    }
  };
  // The k-th pair: its key `pk`, and (when `ties`) its index `pi`.
  K pk = 0, kmask = 0;
  unsigned int pi = 0, imask = 0;
  unsigned int want = (unsigned int)k;
  bool ties = false;
  const int key_bits = (int)sizeof(K) * 8;
  int index_bits = 0;
  while (index_bits < 32 && ((unsigned long long)(n - 1) >> index_bits) != 0ull) index_bits += 8;
  for (int pass = 0; pass < key_bits / 8 + index_bits / 8; ++pass) {
    const bool on_key = pass < key_bits / 8;
    if (!on_key && !ties) break;  // uniform: every thread read the same counters
    const int shift = on_key ? key_bits - 8 * (pass + 1) : index_bits - 8 * (pass - key_bits / 8 + 1);
    for (nvfuser_index_t d = threadIdx.x; d < 256 * warps; d += bd) whist[d] = 0u;
    __syncthreads();
    each([&](nvfuser_index_t i, K x) {
      if ((x & kmask) != pk) return;
      if (!on_key && ((unsigned int)i & imask) != pi) return;
      const unsigned int digit = on_key ? (unsigned int)(x >> shift) & 255u
                                        : ((unsigned int)i >> shift) & 255u;
      atomicAdd(&my_hist[digit], 1u);
    });
    __syncthreads();
    for (nvfuser_index_t d = threadIdx.x; d < 256; d += bd) {
      unsigned int c = 0u;
      for (int w = 0; w < warps; ++w) c += whist[256 * w + d];
      hist[d] = c;
    }
    __syncthreads();
    for (nvfuser_index_t d = threadIdx.x; d < 256; d += bd) {
      unsigned int before = 0u;
      for (nvfuser_index_t e = 0; e < d; ++e) before += hist[e];
      if (before < want && want <= before + hist[d]) {
        info[0] = (unsigned int)d;
        info[1] = before;
        info[2] = hist[d];
      }
    }
    __syncthreads();
    const unsigned int digit = info[0];
    want -= info[1];
    if (on_key) {
      pk |= ((K)digit) << shift;
      kmask |= ((K)255) << shift;
      // After the last key digit: ties of the k-th key are left out, so the index
      // decides which of them are taken.
      if (pass == key_bits / 8 - 1) ties = want < info[2];
    } else {
      pi |= digit << shift;
      imask |= 255u << shift;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) info[3] = 0u;
  __syncthreads();
  each([&](nvfuser_index_t i, K x) {
    const bool take = x < pk || (x == pk && (!ties || (unsigned int)i <= pi));
    if (take) {
      const unsigned int slot = atomicAdd(&info[3], 1u);
      if (slot < (unsigned int)kpad) {
        skey[slot] = x;
        sidx[slot] = (unsigned int)i;
      }
    }
  });
  for (nvfuser_index_t j = k + threadIdx.x; j < kpad; j += bd) {
    skey[j] = (K)~(K)0;
    sidx[j] = (unsigned int)(n + j);
  }
  __syncthreads();
  nvf_bitonic_sort(skey, sidx, kpad, kpad);
  for (nvfuser_index_t c = threadIdx.x; c < k; c += bd) {
    const nvfuser_index_t src = (nvfuser_index_t)sidx[c];
    if (out_v != nullptr)
      out_v[nvf_sort_row_offset(v_s, axis, row) + c * v_s.stride[axis]] = in[base + src * step];
    if (out_i != nullptr)
      out_i[nvf_sort_row_offset(i_s, axis, row) + c * i_s.stride[axis]] = (long long)src;
  }
}
// topk of the rows of `in` along `axis` (see nvf_topk_rows_impl): one row per block,
// k = the outputs' size along `axis`, at most kpad.
template <typename T, int N>
__device__ inline void nvf_topk_rows(
    const T* __restrict__ in, const nvf_shape<N> in_s,
    T* __restrict__ out_v, const nvf_shape<N> v_s,
    long long* __restrict__ out_i, const nvf_shape<N> i_s,
    int axis, nvfuser_index_t kpad, bool descending) {
  typedef decltype(nvf_sort_key(T())) K;
  nvf_topk_rows_impl<T, K, N>(in, in_s, out_v, v_s, out_i, i_s, axis, kpad, descending);
}
// ---- end of sort support ----
"#;

/// Bytes of shared memory one block of a radix-select topk kernel uses: 256 counters
/// for each of up to 32 warps, 256 + 16 more, then `kpad` keys and `kpad` u32 indices.
pub fn topk_shared_bytes(key_bytes: i64, kpad: i64) -> i64 {
    4 * (256 * 33 + 16) + kpad.saturating_mul(key_bytes + 4)
}

/// Bytes of shared memory one block of a sort kernel uses: `rows_per_block * pad`
/// pairs of a key (8 bytes for 64-bit types, else 4) and an index (2 bytes when `pad`
/// is at most 65536, else 4).
pub fn sort_shared_bytes(key_bytes: i64, pad: i64, rows_per_block: i64) -> i64 {
    let index_bytes = if pad <= 65536 { 2 } else { 4 };
    pad.saturating_mul(rows_per_block)
        .saturating_mul(key_bytes + index_bytes)
}
