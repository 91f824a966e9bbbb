//! NVRTC compilation with the real library, no GPU needed.
//!
//! Each test that needs NVRTC starts with `require_nvrtc()`: without the library it prints
//! why it is skipped and passes, unless `NVFUSER_REQUIRE_NVRTC=1` (CI) makes it fail.
//! `source scripts/nvrtc-env.sh` installs NVRTC and points the loader at it.

use nvfuser_cuda::testing::{note, require_nvrtc};
use nvfuser_cuda::{compile, compile_with_options, nvrtc, Error, GpuArch, NvrtcOptions};

/// A self-contained kernel (no includes): a softmax-like row kernel with a template, shared
/// memory, warp shuffles and a math builtin, the constructs generated kernels use.
const ROW_KERNEL: &str = r#"
template <typename T>
__device__ T warp_sum(T value) {
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    }
    return value;
}

extern "C" __global__ void row_exp_sum(const float* __restrict__ in, float* __restrict__ out,
                                       long long rows, long long cols) {
    __shared__ float partial[32];
    long long row = blockIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        acc += expf(in[row * cols + c]);
    }
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float total = threadIdx.x < (blockDim.x + 31) / 32 ? partial[threadIdx.x] : 0.0f;
        total = warp_sum(total);
        if (threadIdx.x == 0) out[row] = total;
    }
}
"#;

/// The third line lacks a semicolon.
const BROKEN_KERNEL: &str = "extern \"C\" __global__ void broken_kernel(float* x) {\n\
                             \x20   float y = x[0] * 2.0f;\n\
                             \x20   x[threadIdx.x] = y\n\
                             }\n";

/// ELF magic: a CUBIN is an ELF image.
const ELF_MAGIC: &[u8] = b"\x7fELF";

/// The SM number a CUBIN's ELF header names (machine code for exactly that architecture,
/// so the driver loads it without JIT). In ELF ABI version 8 and later (CUDA 12.8 on) the
/// SM is in bits 8..16 of `e_flags`, before that in bits 0..8.
fn cubin_sm(cubin: &[u8]) -> Option<u32> {
    const EM_CUDA: u16 = 190;
    let machine = u16::from_le_bytes(cubin.get(18..20)?.try_into().ok()?);
    if cubin.get(4) != Some(&2) || machine != EM_CUDA {
        return None; // not a 64-bit CUDA ELF
    }
    let abi_version = *cubin.get(8)?;
    let flags = u32::from_le_bytes(cubin.get(48..52)?.try_into().ok()?);
    Some(if abi_version >= 8 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    })
}

fn compile_row_kernel_for(arch: GpuArch) {
    let Some(library) = require_nvrtc() else {
        return;
    };
    let kernel = match compile(ROW_KERNEL, "row_exp_sum", arch) {
        Ok(kernel) => kernel,
        Err(err) => panic!("{err}"),
    };
    assert!(kernel.cubin.starts_with(ELF_MAGIC), "not an ELF CUBIN");
    assert_eq!(
        cubin_sm(&kernel.cubin),
        Some(arch.sm()),
        "CUBIN for another SM"
    );
    assert_eq!(kernel.arch, arch);
    assert_eq!(kernel.nvrtc_version, library.version());
    assert!(kernel
        .options
        .contains(&format!("--gpu-architecture={arch}")));
    note(&format!(
        "NVRTC {} ({}) compiled row_exp_sum for {arch}: {} bytes of CUBIN in {:.1} ms",
        kernel.nvrtc_version,
        library.loaded_as(),
        kernel.cubin.len(),
        kernel.compile_time.as_secs_f64() * 1e3
    ));
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn compiles_a_self_contained_kernel_for_sm_80() {
    compile_row_kernel_for(GpuArch::SM80);
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn compiles_a_self_contained_kernel_for_sm_90() {
    compile_row_kernel_for(GpuArch::SM90);
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_syntax_error_carries_the_log_the_name_and_the_source() {
    if require_nvrtc().is_none() {
        return;
    }
    let err = compile(BROKEN_KERNEL, "broken_kernel", GpuArch::SM90)
        .expect_err("a missing semicolon must not compile");
    let message = err.to_string();
    let Error::Compile(failure) = err else {
        panic!("expected Error::Compile, got {message}");
    };
    assert_eq!(failure.kernel, "broken_kernel");
    assert_eq!(failure.status, "NVRTC_ERROR_COMPILATION");
    assert_eq!(failure.source_code, BROKEN_KERNEL);
    // NVRTC reports the missing `;` of line 3 at the next token, on line 4.
    let log_line = failure
        .log
        .lines()
        .find(|line| line.starts_with("broken_kernel.cu(") && line.contains("error"))
        .unwrap_or_else(|| panic!("no error line in the NVRTC log:\n{}", failure.log));
    assert!(message.contains(log_line), "{message}");
    assert!(
        message.contains("kernel `broken_kernel` for sm_90"),
        "{message}"
    );
    assert!(!failure.referenced_lines().is_empty(), "{message}");
    note(&format!("the compile error reads:\n{message}"));
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn every_option_is_accepted_by_nvrtc() {
    if require_nvrtc().is_none() {
        return;
    }
    let options = NvrtcOptions::new(GpuArch::SM90)
        .line_info(true)
        .max_registers(Some(64))
        .fmad(true)
        .extra_option("-DNVFUSER_TEST=1");
    let source = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = NVFUSER_TEST; }";
    let kernel = compile_with_options(source, "k", &options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kernel.options, options.to_args());
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn warnings_come_back_in_the_log_of_a_success() {
    if require_nvrtc().is_none() {
        return;
    }
    let source = "extern \"C\" __global__ void k(float* x) { int unused = 1; x[0] = 0.0f; }";
    let kernel = compile(source, "warns", GpuArch::SM80).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        kernel.log.contains("warns.cu(1): warning"),
        "{}",
        kernel.log
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn an_architecture_nvrtc_does_not_know_is_a_typed_error() {
    let Some(library) = require_nvrtc() else {
        return;
    };
    // sm_30: no NVRTC of 12.x (the `cuda-12*` features) or 13.x knows it (CUDA 13 also
    // dropped sm_50 to sm_72).
    let err = compile(
        "extern \"C\" __global__ void k() {}",
        "k",
        GpuArch::new(3, 0),
    )
    .expect_err("CUDA 11 dropped sm_30");
    match &err {
        Error::UnsupportedArch { supported, .. } => {
            assert_eq!(supported.as_slice(), library.supported_archs());
            assert!(supported.contains(&80) && supported.contains(&90));
        }
        other => panic!("expected UnsupportedArch, got {other}"),
    }
    assert!(
        err.to_string().contains("cannot compile for sm_30"),
        "{err}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_nul_byte_is_invalid_input_not_a_panic() {
    if require_nvrtc().is_none() {
        return;
    }
    let err = compile("extern \"C\" __global__ void k() {}\0", "k", GpuArch::SM90)
        .expect_err("a NUL byte cannot reach NVRTC");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    let err = compile("", "", GpuArch::SM90).expect_err("an empty name is rejected");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn kernels_compile_on_several_threads_at_once() {
    if require_nvrtc().is_none() {
        return;
    }
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let source = format!(
                    "extern \"C\" __global__ void k{i}(float* x) {{ x[threadIdx.x] *= {i}.0f; }}"
                );
                compile(&source, &format!("k{i}"), GpuArch::SM90).map(|k| k.cubin.len())
            })
        })
        .collect();
    for handle in handles {
        let size = handle
            .join()
            .expect("no panic")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(size > 0);
    }
}

#[test]
fn the_probe_answers_without_panicking() {
    match nvrtc::probe() {
        Ok(library) => {
            assert_eq!(nvrtc::nvrtc_version().ok(), Some(library.version()));
            note(&format!(
                "NVRTC {} loaded as {}; supported: {:?}",
                library.version(),
                library.loaded_as(),
                library.supported_archs()
            ));
        }
        // A build without `cuda` loads no NVRTC.
        Err(err @ Error::CudaDisabled { .. }) if !cfg!(feature = "cuda") => {
            assert!(
                err.to_string().contains("without the `cuda` feature"),
                "{err}"
            );
        }
        Err(err) => {
            assert!(matches!(err, Error::NvrtcNotFound { .. }), "{err}");
            assert!(err.to_string().contains("libnvrtc"), "{err}");
        }
    }
}

/// The copy kernels that store in-place outputs (`launch::store`) compile for the
/// oldest and newest architectures the presets name, with one entry point per width in
/// the CUBIN's symbols.
#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
#[cfg(feature = "cuda")]
fn the_in_place_store_kernels_compile() {
    if require_nvrtc().is_none() {
        return;
    }
    for arch in [GpuArch::SM80, GpuArch::SM90] {
        let kernel = compile(nvfuser_cuda::launch::STORE_SOURCE, "nvf_store", arch)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(cubin_sm(&kernel.cubin), Some(arch.sm()));
        for w in [1, 2, 4, 8] {
            let name = format!("nvf_store_{w}");
            assert!(
                kernel
                    .cubin
                    .windows(name.len())
                    .any(|s| s == name.as_bytes()),
                "{arch}: {name} missing"
            );
        }
    }
}
