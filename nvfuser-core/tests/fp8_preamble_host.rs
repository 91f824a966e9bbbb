//! The kernels' fp8 conversions (the preamble's C++) against `nvfuser_core::fp8`, bit for
//! bit: the preamble's fp8 section is compiled for the host by a C++ compiler (`c++`,
//! with shims for the CUDA intrinsics it uses) and both sides hash their results over
//! f32 bit patterns (every 65,521st pattern plus the 2^17 patterns above each of 448,
//! 57344, 2^-9 and 2^-17, both signs; `NVFUSER_FP8_ALL=1` walks all 2^32 and 2^24 above
//! each edge, in about a minute with `--release`) and over the 256 codes of each format
//! decoded.
//! Skips with a printed reason when no C++ compiler runs; the conversions are integer
//! arithmetic, so the host build computes what the GPU does.

use std::process::Command;

use nvfuser_core::codegen::preamble::PREAMBLE;
use nvfuser_core::fp8::{e4m3_from_f32, e4m3_to_f32, e5m2_from_f32, e5m2_to_f32};

const SHIMS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define __device__
static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline int __clz(unsigned int x) { return x == 0 ? 32 : __builtin_clz(x); }
"#;

const MAIN: &str = r#"
static unsigned long long fnv(unsigned long long h, unsigned long long v) {
  for (int i = 0; i < 8; ++i) { h ^= (v >> (8 * i)) & 0xff; h *= 0x100000001b3ull; }
  return h;
}
int main(int argc, char** argv) {
  const unsigned long long step = std::strtoull(argv[1], nullptr, 10);
  const unsigned int near = (unsigned int)std::strtoul(argv[2], nullptr, 10);
  unsigned long long h4 = 0xcbf29ce484222325ull, h5 = h4, d4 = h4, d5 = h4;
  for (unsigned long long x = 0; x <= 0xffffffffull; x += step) {
    const float f = __uint_as_float((unsigned int)x);
    h4 = fnv(h4, (x << 8) | nvf_f2e4m3_bits(f));
    h5 = fnv(h5, (x << 8) | nvf_f2e5m2_bits(f));
  }
  for (unsigned int e = 0; e < 2; ++e)
    for (unsigned int m = 0; m < near; m += 1) {
      // Every pattern in `near` above 448, 57344, 2^-9 and 2^-17.
      const unsigned int bases[4] = {0x43e00000u, 0x47600000u, 0x3b000000u, 0x37000000u};
      for (unsigned int b = 0; b < 4; ++b) {
        const unsigned int x = (e << 31) | (bases[b] + m);
        const float f = __uint_as_float(x);
        h4 = fnv(h4, ((unsigned long long)x << 8) | nvf_f2e4m3_bits(f));
        h5 = fnv(h5, ((unsigned long long)x << 8) | nvf_f2e5m2_bits(f));
      }
    }
  for (unsigned int c = 0; c < 256; ++c) {
    d4 = fnv(d4, __float_as_uint(nvf_e4m32f((unsigned char)c)));
    d5 = fnv(d5, __float_as_uint(nvf_e5m22f((unsigned char)c)));
  }
  std::printf("%016llx %016llx %016llx %016llx\n", h4, h5, d4, d5);
  return 0;
}
"#;

fn fnv(mut h: u64, v: u64) -> u64 {
    for i in 0..8 {
        h ^= (v >> (8 * i)) & 0xff;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn rust_hashes(step: u64, near: u32) -> String {
    let basis = 0xcbf2_9ce4_8422_2325u64;
    let (mut h4, mut h5, mut d4, mut d5) = (basis, basis, basis, basis);
    let mut x = 0u64;
    while x <= 0xffff_ffff {
        let f = f32::from_bits(x as u32);
        h4 = fnv(h4, (x << 8) | u64::from(e4m3_from_f32(f)));
        h5 = fnv(h5, (x << 8) | u64::from(e5m2_from_f32(f)));
        x += step;
    }
    for e in 0..2u32 {
        for m in 0..near {
            for base in [0x43e0_0000u32, 0x4760_0000, 0x3b00_0000, 0x3700_0000] {
                let x = (e << 31) | (base + m);
                let f = f32::from_bits(x);
                h4 = fnv(h4, (u64::from(x) << 8) | u64::from(e4m3_from_f32(f)));
                h5 = fnv(h5, (u64::from(x) << 8) | u64::from(e5m2_from_f32(f)));
            }
        }
    }
    for c in 0..=255u8 {
        d4 = fnv(d4, u64::from(e4m3_to_f32(c).to_bits()));
        d5 = fnv(d5, u64::from(e5m2_to_f32(c).to_bits()));
    }
    format!("{h4:016x} {h5:016x} {d4:016x} {d5:016x}")
}

/// The preamble's fp8 section: from its first comment line to the storage structs.
fn fp8_section() -> &'static str {
    let start = PREAMBLE
        .find("// fp8 (e4m3fn, e5m2)")
        .expect("the preamble has an fp8 section");
    let end = PREAMBLE[start..]
        .find("struct nvf_fp8_e4m3")
        .expect("the fp8 section ends at the storage structs");
    &PREAMBLE[start..start + end]
}

#[test]
fn preamble_fp8_conversions_match_the_reference_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("nvf_fp8_host_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("fp8.cpp");
    let exe = dir.join("fp8");
    std::fs::write(&src, format!("{SHIMS}{}{MAIN}", fp8_section())).unwrap();
    let built = Command::new("c++")
        .args(["-O2", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(&src)
        .output();
    match built {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "the preamble's fp8 section does not compile on the host:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("skipped: no C++ compiler (`c++`): {e}");
            return;
        }
    }
    let (step, near): (u64, u32) = if std::env::var("NVFUSER_FP8_ALL").as_deref() == Ok("1") {
        (1, 1 << 24)
    } else {
        (65_521, 1 << 17)
    };
    let out = Command::new(&exe)
        .args([step.to_string(), near.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let cpp = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        cpp,
        rust_hashes(step, near),
        "preamble (left) vs nvfuser_core::fp8 (right)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
