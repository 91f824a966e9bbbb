//! The kernel cache with the real NVRTC: memory hits, disk hits that call no NVRTC,
//! corrupt, truncated and stale entries rebuilt, distinct keys, parallel compilation.
//!
//! Every test starts with `require_nvrtc()`: without the library it prints why it is
//! skipped, unless `NVFUSER_REQUIRE_NVRTC=1` makes that a failure. Each test uses its own
//! temporary cache directory and its own `KernelCache` objects; a new `KernelCache` over
//! the same directory stands for a new process (see `kernel_cache_process.rs` for a real
//! one). NVRTC calls are counted per cache object (`CacheStats::nvrtc_compiles`), since
//! tests in this file run in parallel in one process.

use std::fs;
use std::time::Instant;

use nvfuser_cuda::cache::EntryError;
use nvfuser_cuda::testing::{note, require_nvrtc};
use nvfuser_cuda::{CacheOrigin, GpuArch, KernelCache, KernelRequest, NvrtcOptions};

/// A small self-contained kernel; `variant` changes the source.
fn source(variant: usize) -> String {
    format!(
        r#"extern "C" __global__ void scale_{variant}(float* __restrict__ out,
                                               const float* __restrict__ in, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * {variant}.5f + 1.0f;
}}
"#
    )
}

fn name(variant: usize) -> String {
    format!("scale_{variant}")
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_second_compile_hits_memory() {
    if require_nvrtc().is_none() {
        return;
    }
    let cache = KernelCache::memory_only();
    let options = NvrtcOptions::new(GpuArch::SM90);
    let (src, n) = (source(1), name(1));
    let first = cache
        .compile(KernelRequest::new(&src, &n, &options))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.origin, CacheOrigin::Compiled);
    let start = Instant::now();
    let second = cache
        .compile(KernelRequest::new(&src, &n, &options))
        .unwrap_or_else(|e| panic!("{e}"));
    let hit_time = start.elapsed();
    assert_eq!(second.origin, CacheOrigin::Memory);
    assert!(std::sync::Arc::ptr_eq(&first.kernel, &second.kernel));
    assert_eq!(first.key, second.key);
    let stats = cache.stats();
    assert_eq!((stats.nvrtc_compiles, stats.memory_hits), (1, 1));
    assert_eq!(cache.memory_len(), 1);
    note(&format!(
        "kernel cache: compile {:.1} ms, memory hit {:.1} µs",
        first.kernel.compile_time.as_secs_f64() * 1e3,
        hit_time.as_secs_f64() * 1e6
    ));
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_new_cache_object_hits_disk_without_calling_nvrtc() {
    if require_nvrtc().is_none() {
        return;
    }
    let dir = scratch();
    let options = NvrtcOptions::new(GpuArch::SM90).line_info(true);
    let (src, n) = (source(2), name(2));
    let request = KernelRequest::new(&src, &n, &options);

    let writer = KernelCache::with_disk_dir(dir.path());
    let compiled = writer.compile(request).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.origin, CacheOrigin::Compiled);
    assert_eq!(writer.stats().disk_writes, 1);
    let path = writer.entry_path(&compiled.key).expect("a disk cache");
    assert!(path.is_file(), "{} was not written", path.display());
    assert!(path.starts_with(dir.path()));
    // No temporary files are left behind.
    let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A new cache object: as a new process would, it finds the entry on disk.
    let reader = KernelCache::with_disk_dir(dir.path());
    let start = Instant::now();
    let loaded = reader.compile(request).unwrap_or_else(|e| panic!("{e}"));
    let load_time = start.elapsed();
    assert_eq!(loaded.origin, CacheOrigin::Disk);
    assert_eq!(
        reader.stats().nvrtc_compiles,
        0,
        "the disk hit called NVRTC"
    );
    assert_eq!(reader.stats().disk_hits, 1);
    assert_eq!(
        *loaded.kernel, *compiled.kernel,
        "the entry must restore every field"
    );
    // From now on it is in that cache's memory.
    let again = reader.compile(request).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.origin, CacheOrigin::Memory);
    note(&format!(
        "kernel cache: NVRTC compile {:.1} ms, warm disk load {:.2} ms ({} bytes)",
        compiled.kernel.compile_time.as_secs_f64() * 1e3,
        load_time.as_secs_f64() * 1e3,
        fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
    ));
}

/// Damages the entry of `request` with `damage`, then checks that a new cache rejects
/// it with an error `expect` accepts, rebuilds it with NVRTC, and that the rebuilt entry
/// is then a clean disk hit.
fn damaged_entries_are_rebuilt(
    variant: usize,
    damage: impl FnOnce(&mut Vec<u8>),
    expect: impl Fn(&EntryError) -> bool,
) {
    if require_nvrtc().is_none() {
        return;
    }
    let dir = scratch();
    let options = NvrtcOptions::new(GpuArch::SM80);
    let (src, n) = (source(variant), name(variant));
    let request = KernelRequest::new(&src, &n, &options);
    let first = KernelCache::with_disk_dir(dir.path())
        .compile(request)
        .unwrap_or_else(|e| panic!("{e}"));
    let path = KernelCache::with_disk_dir(dir.path())
        .entry_path(&first.key)
        .unwrap();
    let mut bytes = fs::read(&path).unwrap();
    damage(&mut bytes);
    fs::write(&path, &bytes).unwrap();

    let cache = KernelCache::with_disk_dir(dir.path());
    let rebuilt = cache.compile(request).unwrap_or_else(|e| panic!("{e}"));
    match &rebuilt.origin {
        CacheOrigin::Rebuilt(err) => assert!(expect(err), "unexpected rejection: {err}"),
        other => panic!("a damaged entry was not rejected: {other:?}"),
    }
    assert_eq!(cache.stats().nvrtc_compiles, 1);
    assert_eq!(cache.stats().disk_rejected, 1);
    assert_eq!(rebuilt.kernel.cubin, first.kernel.cubin);

    let fresh = KernelCache::with_disk_dir(dir.path());
    let reloaded = fresh.compile(request).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        reloaded.origin,
        CacheOrigin::Disk,
        "the rebuilt entry is not valid"
    );
    assert_eq!(fresh.stats().nvrtc_compiles, 0);
    if let CacheOrigin::Rebuilt(err) = &rebuilt.origin {
        note(&format!(
            "kernel cache: rejected and rebuilt an entry: {err}"
        ));
    }
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_corrupted_entry_is_rebuilt() {
    damaged_entries_are_rebuilt(
        3,
        |bytes| {
            // Flip one bit in the middle of the CUBIN.
            let middle = bytes.len() / 2 + 40;
            bytes[middle] ^= 0x10;
        },
        |err| *err == EntryError::Checksum,
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_truncated_entry_is_rebuilt() {
    damaged_entries_are_rebuilt(
        4,
        |bytes| bytes.truncate(bytes.len() - 100),
        |err| matches!(err, EntryError::Truncated { .. }),
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn an_empty_entry_is_rebuilt() {
    damaged_entries_are_rebuilt(5, Vec::clear, |err| {
        matches!(err, EntryError::Truncated { found: 0, .. })
    });
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_stale_entry_format_is_rebuilt() {
    damaged_entries_are_rebuilt(
        6,
        |bytes| bytes[8..12].copy_from_slice(&999u32.to_le_bytes()),
        |err| matches!(err, EntryError::StaleFormat { found: 999, .. }),
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn an_entry_of_another_key_is_rebuilt() {
    damaged_entries_are_rebuilt(
        7,
        |bytes| bytes[12] ^= 0xff,
        |err| matches!(err, EntryError::KeyMismatch { .. }),
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn a_file_that_is_not_an_entry_is_rebuilt() {
    damaged_entries_are_rebuilt(
        8,
        |bytes| *bytes = b"this is not a cache entry at all, just some text".to_vec(),
        |err| *err == EntryError::BadMagic,
    );
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn different_arch_or_options_give_different_keys_and_entries() {
    if require_nvrtc().is_none() {
        return;
    }
    let dir = scratch();
    let cache = KernelCache::with_disk_dir(dir.path());
    let (src, n) = (source(9), name(9));
    let variants = [
        NvrtcOptions::new(GpuArch::SM90),
        NvrtcOptions::new(GpuArch::SM80),
        NvrtcOptions::new(GpuArch::SM90).fmad(true),
        NvrtcOptions::new(GpuArch::SM90).max_registers(Some(32)),
        NvrtcOptions::new(GpuArch::SM90).line_info(true),
    ];
    let mut keys = Vec::new();
    for options in &variants {
        let k = cache
            .compile(KernelRequest::new(&src, &n, options))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.origin, CacheOrigin::Compiled, "{:?}", options.to_args());
        assert_eq!(k.kernel.arch, options.arch());
        keys.push(k.key);
    }
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), variants.len(), "{keys:?}");
    let entries = fs::read_dir(dir.path().join("kernels")).unwrap().count();
    assert_eq!(entries, variants.len());
    assert_eq!(cache.stats().nvrtc_compiles, variants.len() as u64);
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn parallel_compilation_gives_the_serial_cubins() {
    if require_nvrtc().is_none() {
        return;
    }
    const N: usize = 8;
    let options = NvrtcOptions::new(GpuArch::SM90);
    let sources: Vec<String> = (100..100 + N).map(source).collect();
    let names: Vec<String> = (100..100 + N).map(name).collect();
    let requests: Vec<KernelRequest<'_>> = sources
        .iter()
        .zip(&names)
        .map(|(s, n)| KernelRequest::new(s, n, &options))
        .collect();

    let serial_cache = KernelCache::memory_only();
    let start = Instant::now();
    let serial: Vec<_> = requests
        .iter()
        .map(|r| serial_cache.compile(*r).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let serial_time = start.elapsed();

    let parallel_cache = KernelCache::memory_only();
    let start = Instant::now();
    let parallel = parallel_cache.compile_many(&requests);
    let parallel_time = start.elapsed();

    assert_eq!(parallel.len(), N);
    for (i, (s, p)) in serial.iter().zip(&parallel).enumerate() {
        let p = p.as_ref().unwrap_or_else(|e| panic!("kernel {i}: {e}"));
        assert_eq!(p.kernel.name, names[i], "results out of order");
        assert_eq!(p.key, s.key);
        assert_eq!(
            p.kernel.cubin, s.kernel.cubin,
            "kernel {i}: different CUBIN"
        );
        assert_eq!(p.origin, CacheOrigin::Compiled);
    }
    assert_eq!(parallel_cache.stats().nvrtc_compiles, N as u64);
    note(&format!(
        "kernel cache: {N} kernels serially in {:.0} ms, with compile_many in {:.0} ms on {} threads",
        serial_time.as_secs_f64() * 1e3,
        parallel_time.as_secs_f64() * 1e3,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ));
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn duplicates_in_a_batch_compile_once() {
    if require_nvrtc().is_none() {
        return;
    }
    let cache = KernelCache::memory_only();
    let options = NvrtcOptions::new(GpuArch::SM90);
    let (src, n) = (source(20), name(20));
    let request = KernelRequest::new(&src, &n, &options);
    let results = cache.compile_many(&[request; 6]);
    let kernels: Vec<_> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(cache.stats().nvrtc_compiles, 1);
    assert_eq!(cache.stats().memory_hits, 5);
    assert!(kernels
        .iter()
        .all(|k| std::sync::Arc::ptr_eq(&k.kernel, &kernels[0].kernel)));
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn compile_errors_come_back_per_request_and_are_not_cached() {
    if require_nvrtc().is_none() {
        return;
    }
    let dir = scratch();
    let cache = KernelCache::with_disk_dir(dir.path());
    let options = NvrtcOptions::new(GpuArch::SM90);
    let (good, good_name) = (source(30), name(30));
    let bad = "extern \"C\" __global__ void broken(float* x) { x[0] = }";
    let requests = [
        KernelRequest::new(&good, &good_name, &options),
        KernelRequest::new(bad, "broken", &options),
    ];
    let results = cache.compile_many(&requests);
    assert!(results[0].is_ok());
    let err = results[1].as_ref().expect_err("a syntax error");
    assert!(err.to_string().contains("broken.cu("), "{err}");
    // The failure was not cached: asking again calls NVRTC again.
    assert!(cache.compile(requests[1]).is_err());
    assert_eq!(cache.stats().nvrtc_compiles, 3);
    assert_eq!(cache.stats().disk_writes, 1);
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn an_unwritable_cache_directory_does_not_fail_compilation() {
    if require_nvrtc().is_none() {
        return;
    }
    let dir = scratch();
    // A regular file where the cache directory should be: every write fails.
    let blocked = dir.path().join("not-a-dir");
    fs::write(&blocked, b"x").unwrap();
    let cache = KernelCache::with_disk_dir(&blocked);
    let options = NvrtcOptions::new(GpuArch::SM90);
    let (src, n) = (source(40), name(40));
    let k = cache
        .compile(KernelRequest::new(&src, &n, &options))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.origin, CacheOrigin::Compiled);
    let stats = cache.stats();
    assert_eq!((stats.disk_writes, stats.disk_errors), (0, 1));
}
