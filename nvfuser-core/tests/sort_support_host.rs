//! The sort kernels' support code (`codegen::sort_support`, C++) against the reference
//! evaluator, bit for bit: the text is compiled for the host by a C++ compiler (`c++`,
//! with shims for the CUDA builtins it uses) and run as one thread per block, which
//! computes what a block does (every phase is a loop over independent elements or
//! pairs followed by a barrier). Rows with ties, NaNs, signed zeros and padding, both
//! directions, `topk` and full sorts, rows along either dim, several rows per block,
//! the radix-select topk (also of rows of 70000), f32, f64, bf16, i32, i64 and bool. Skips with a printed reason when no C++ compiler
//! runs.

mod common;

use std::process::Command;

use common::t;
use half::bf16;
use nvfuser_core::codegen::preamble::PREAMBLE;
use nvfuser_core::codegen::sort_support::SORT_SUPPORT;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::prelude::*;

const SHIMS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
typedef int nvfuser_index_t;
struct nvf_dim3 { unsigned int x, y, z; };
static nvf_dim3 threadIdx, blockIdx, blockDim;
static inline void __syncthreads() {}
static inline unsigned int atomicAdd(unsigned int* a, unsigned int v) { unsigned int o = *a; *a += v; return o; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline long long __double_as_longlong(double d) { long long u; std::memcpy(&u, &d, 8); return u; }
template <int N> struct nvf_shape {
  nvfuser_index_t size[N > 0 ? N : 1];
  nvfuser_index_t stride[N > 0 ? N : 1];
};
struct nvf_half { unsigned short bits; operator float() const { return 0.0f; } };
struct nvf_bfloat { unsigned short bits; operator float() const { return __uint_as_float(((unsigned int)bits) << 16); } };
"#;

const MAIN: &str = r#"
template <typename T> static int run(FILE* in, FILE* out, const long long* h) {
  const int d0 = (int)h[1], d1 = (int)h[2], axis = (int)h[3];
  const bool desc = h[4] != 0;
  const int k = (int)h[5], pad = (int)h[6], rpb = (int)h[7], select = (int)h[8];
  T* x = new T[(size_t)d0 * d1];
  if (fread(x, sizeof(T), (size_t)d0 * d1, in) != (size_t)d0 * d1) return 2;
  nvf_shape<2> xs;
  xs.size[0] = d0; xs.size[1] = d1; xs.stride[0] = d1; xs.stride[1] = 1;
  const int o0 = axis == 0 ? k : d0, o1 = axis == 1 ? k : d1;
  T* v = new T[(size_t)o0 * o1 + 1];
  std::vector<long long> ix((size_t)o0 * o1);
  nvf_shape<2> os;
  os.size[0] = o0; os.size[1] = o1; os.stride[0] = o1; os.stride[1] = 1;
  const int rows = axis == 0 ? d1 : d0;
  blockDim.x = 1; threadIdx.x = 0;
  for (int b = 0; b * rpb < rows; ++b) {
    blockIdx.x = b;
    if (select > 0)
      nvf_topk_rows((const T*)x, xs, v, os, ix.data(), os, axis, select, desc);
    else
      nvf_sort_rows((const T*)x, xs, v, os, ix.data(), os, axis, pad, rpb, desc);
  }
  fwrite(v, sizeof(T), (size_t)o0 * o1, out);
  fwrite(ix.data(), sizeof(long long), ix.size(), out);
  return 0;
}
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  long long h[9];
  if (fread(h, 8, 9, in) != 9) return 2;
  switch (h[0]) {
    case 0: return run<float>(in, out, h);
    case 1: return run<double>(in, out, h);
    case 2: return run<int>(in, out, h);
    case 3: return run<long long>(in, out, h);
    case 4: return run<nvf_bfloat>(in, out, h);
    case 5: return run<bool>(in, out, h);
  }
  return 3;
}
"#;

/// Values that make ties, NaNs and signed zeros: small integers mostly.
fn value(i: usize, seed: u64) -> f64 {
    let h = (i as u64 ^ seed)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(17);
    match h % 23 {
        0 => f64::NAN,
        1 => -0.0,
        2 => 0.0,
        3 => f64::INFINITY,
        4 => f64::NEG_INFINITY,
        r => (r as f64 - 12.0) * if h.is_multiple_of(2) { 0.5 } else { 1.0 },
    }
}

struct Case {
    dtype: DataType,
    code: i64,
    d: [usize; 2],
    k: Option<usize>,
    rpb: Option<i64>,
}

/// A shape: sizes, the sorted dim, `k` (a topk) and rows per block (else the
/// scheduler's).
type Shape = ([usize; 2], usize, Option<usize>, Option<i64>);

fn bytes_and_input(c: &Case, seed: u64) -> (Vec<u8>, EvalInput) {
    let n = c.d[0] * c.d[1];
    let vals: Vec<f64> = (0..n).map(|i| value(i, seed)).collect();
    let ints: Vec<i64> = vals
        .iter()
        .map(|v| {
            if v.is_finite() {
                (*v * 2.0) as i64
            } else {
                i64::MIN + 7
            }
        })
        .collect();
    let mut b = Vec::new();
    let input: EvalInput = match c.dtype {
        DataType::F32 => {
            let x: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
            x.iter().for_each(|v| b.extend(v.to_le_bytes()));
            t(&x, &c.d)
        }
        DataType::F64 => {
            vals.iter().for_each(|v| b.extend(v.to_le_bytes()));
            t(&vals, &c.d)
        }
        DataType::I32 => {
            let x: Vec<i32> = ints.iter().map(|&v| v as i32).collect();
            x.iter().for_each(|v| b.extend(v.to_le_bytes()));
            t(&x, &c.d)
        }
        DataType::I64 => {
            ints.iter().for_each(|v| b.extend(v.to_le_bytes()));
            t(&ints, &c.d)
        }
        DataType::BF16 => {
            let x: Vec<bf16> = vals.iter().map(|&v| bf16::from_f64(v)).collect();
            x.iter().for_each(|v| b.extend(v.to_bits().to_le_bytes()));
            t(&x, &c.d)
        }
        DataType::Bool => {
            let x: Vec<bool> = ints.iter().map(|&v| v % 3 == 0).collect();
            x.iter().for_each(|&v| b.push(u8::from(v)));
            t(&x, &c.d)
        }
        other => panic!("{other}"),
    };
    (b, input)
}

/// The reference's output bytes: values (in the dtype's layout) then i64 indices.
fn reference_bytes(c: &Case, out: &[HostTensor]) -> Vec<u8> {
    let mut b = Vec::new();
    match c.dtype {
        DataType::F32 => out[0]
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .for_each(|v| b.extend(v.to_le_bytes())),
        DataType::F64 => out[0]
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .for_each(|v| b.extend(v.to_le_bytes())),
        DataType::I32 => out[0]
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .for_each(|v| b.extend(v.to_le_bytes())),
        DataType::I64 => out[0]
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .for_each(|v| b.extend(v.to_le_bytes())),
        DataType::BF16 => out[0]
            .to_vec::<bf16>()
            .unwrap()
            .iter()
            .for_each(|v| b.extend(v.to_bits().to_le_bytes())),
        DataType::Bool => out[0]
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .for_each(|&v| b.push(u8::from(v))),
        other => panic!("{other}"),
    }
    out[1]
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .for_each(|v| b.extend(v.to_le_bytes()));
    b
}

#[test]
fn sort_support_matches_the_reference_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("nvf_sort_host_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("sort.cpp");
    let exe = dir.join("sort");
    let support = SORT_SUPPORT.replace(
        "extern __shared__ __align__(16) unsigned char nvf_sort_smem[];",
        "alignas(16) static unsigned char nvf_sort_smem[1 << 22];",
    );
    let _ = PREAMBLE; // the kernels print it first; the shims stand in for what is used.
    std::fs::write(&src, format!("{SHIMS}{support}{MAIN}")).unwrap();
    let built = Command::new("c++")
        .args(["-O2", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(&src)
        .output();
    match built {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "the sort support does not compile on the host:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("skipped: no C++ compiler (`c++`): {e}");
            return;
        }
    }
    let types = [
        (DataType::F32, 0),
        (DataType::F64, 1),
        (DataType::I32, 2),
        (DataType::I64, 3),
        (DataType::BF16, 4),
        (DataType::Bool, 5),
    ];
    let shapes: [Shape; 17] = [
        ([3, 7], 1, None, None),
        ([5, 8], 1, Some(3), None),
        ([4, 1], 1, Some(1), None),
        ([2, 1000], 1, Some(64), None),
        ([2, 1025], 1, None, None),
        ([37, 6], 0, None, None),
        ([37, 6], 0, Some(5), Some(3)),
        ([9, 33], 1, Some(0), Some(5)),
        ([1, 4096], 1, Some(8), None),
        ([7, 100], 1, Some(100), Some(2)),
        // Radix-select topk (one row per block), also of rows no block could sort.
        ([3, 5000], 1, Some(64), Some(1)),
        ([2, 70000], 1, Some(50), Some(1)),
        ([300, 9], 0, Some(9), Some(1)),
        ([2, 3000], 1, Some(1), Some(1)),
        // Rows the one host thread keeps in registers (32 keys, 16 of 64 bits).
        ([5, 32], 1, Some(7), Some(1)),
        ([6, 16], 1, Some(16), Some(1)),
        ([4, 20], 1, Some(3), Some(1)),
    ];
    let mut compared = 0usize;
    for &(dtype, code) in &types {
        for (s, &(d, axis, k, rpb)) in shapes.iter().enumerate() {
            for desc in [false, true] {
                let c = Case {
                    dtype,
                    code,
                    d,
                    k,
                    rpb,
                };
                let n = d[axis];
                let pad = (n as u64).next_power_of_two() as i64;
                let rpb = c.rpb.unwrap_or((1024 / pad).max(1));
                // The last shapes take the radix-select topk.
                let select = if s >= 10 {
                    (c.k.unwrap() as u64).next_power_of_two() as i64
                } else {
                    0
                };
                let mut fd = FusionDefinition::new();
                let x = fd.define_tensor(dtype, &[-1, -1]).unwrap();
                let (v, i) = fd
                    .sort_op(x, axis as i64, desc, c.k.map(|k| k as i64))
                    .unwrap();
                fd.add_output(v).unwrap();
                fd.add_output(i).unwrap();
                let f = fd.finish().unwrap();
                let (data, input) = bytes_and_input(&c, s as u64 * 31 + code as u64);
                let want = reference_bytes(&c, &evaluate(&f, &[input]).unwrap());
                let header = [
                    c.code,
                    d[0] as i64,
                    d[1] as i64,
                    axis as i64,
                    i64::from(desc),
                    c.k.unwrap_or(n) as i64,
                    pad,
                    rpb,
                    select,
                ];
                let mut file: Vec<u8> = header.iter().flat_map(|h| h.to_le_bytes()).collect();
                file.extend(data);
                let (inp, outp) = (dir.join("in.bin"), dir.join("out.bin"));
                std::fs::write(&inp, &file).unwrap();
                let st = Command::new(&exe).arg(&inp).arg(&outp).status().unwrap();
                assert!(st.success(), "case {dtype} {d:?} axis {axis} desc {desc}");
                let got = std::fs::read(&outp).unwrap();
                assert!(
                    got == want,
                    "{dtype} {d:?} axis {axis} k {:?} desc {desc} rows/block {rpb}: the C++ sort differs from the reference",
                    c.k
                );
                compared += 1;
            }
        }
    }
    eprintln!("sort support: {compared} cases equal to the reference");
    assert_eq!(compared, 6 * 17 * 2);
}
