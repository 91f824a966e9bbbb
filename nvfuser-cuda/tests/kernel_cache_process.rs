//! A second process finds the first one's kernels on disk and calls no NVRTC.
//!
//! The test compiles a kernel into a fresh cache directory, then runs this same test
//! binary again as a child process (selected by an environment variable) that loads the
//! kernel through a `KernelCache` over that directory. The child checks, with the
//! process-wide counter `nvrtc::compile_calls()`, that it compiled nothing, and prints
//! its load time. This file holds one test so that the counter sees no other test.

use std::process::Command;
use std::time::Instant;

use nvfuser_cuda::testing::{note, require_nvrtc};
use nvfuser_cuda::{nvrtc, CacheOrigin, GpuArch, KernelCache, KernelRequest, NvrtcOptions};

/// Set in the child: the cache directory to load from.
const CHILD_DIR_VAR: &str = "NVFUSER_TEST_CACHE_CHILD_DIR";
const TEST_NAME: &str = "a_second_process_loads_kernels_from_disk_without_nvrtc";

const SOURCE: &str = r#"extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"#;

fn request(options: &NvrtcOptions) -> KernelRequest<'_> {
    KernelRequest::new(SOURCE, "add_one", options)
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_second_process_loads_kernels_from_disk_without_nvrtc() {
    if let Some(dir) = std::env::var_os(CHILD_DIR_VAR) {
        return child(dir.into());
    }
    if require_nvrtc().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = NvrtcOptions::new(GpuArch::SM90);
    let cache = KernelCache::with_disk_dir(dir.path());
    let compiled = cache
        .compile(request(&options))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.origin, CacheOrigin::Compiled);

    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR_VAR, dir.path())
        .output()
        .expect("the child process starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let report = stderr
        .lines()
        .find(|l| l.starts_with("child:"))
        .unwrap_or_else(|| panic!("the child did not report:\n{stdout}\n{stderr}"));
    note(&format!(
        "kernel cache across processes: parent compiled in {:.1} ms; {report}",
        compiled.kernel.compile_time.as_secs_f64() * 1e3
    ));
}

fn child(dir: std::path::PathBuf) {
    let options = NvrtcOptions::new(GpuArch::SM90);
    let before = nvrtc::compile_calls();
    let start = Instant::now();
    let cache = KernelCache::with_disk_dir(&dir);
    let loaded = cache
        .compile(request(&options))
        .unwrap_or_else(|e| panic!("{e}"));
    let elapsed = start.elapsed();
    assert_eq!(loaded.origin, CacheOrigin::Disk);
    assert_eq!(nvrtc::compile_calls(), before, "the child called NVRTC");
    assert_eq!(nvrtc::compile_calls(), 0);
    note(&format!(
        "child: loaded `add_one` from disk in {:.2} ms (NVRTC probe and key included), \
         {} NVRTC compilations in this process",
        elapsed.as_secs_f64() * 1e3,
        nvrtc::compile_calls()
    ));
}
