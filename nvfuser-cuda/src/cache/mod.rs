//! The kernel cache: compiled CUBINs in memory and on disk, so that a kernel is compiled
//! once per machine, not once per call or per process.
//!
//! [`KernelCache::compile`] looks a [`KernelRequest`] up by its [`CacheKey`] (source,
//! name, NVRTC options including the architecture, NVRTC version, crate version):
//!
//! 1. in memory: a hit returns the shared `Arc<CompiledKernel>`;
//! 2. on disk (see `disk.rs` for where, and `entry.rs` for the verified format): a valid
//!    entry is loaded without calling NVRTC; a corrupt, truncated or stale entry is
//!    deleted and rebuilt, and the result says why ([`CacheOrigin::Rebuilt`]);
//! 3. otherwise NVRTC compiles it, and the CUBIN is stored in memory and on disk.
//!
//! The disk cache is best effort: a directory that cannot be written never fails a
//! compilation; it is counted in [`CacheStats::disk_errors`] and reported once on stderr.
//! Concurrent requests for one key wait for a single compilation; different keys compile
//! in parallel, and [`KernelCache::compile_many`] compiles a batch on all cores (NVRTC
//! programs are independent).

mod disk;
mod entry;
mod key;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use disk::{
    disk_cache_dir_from_env, disk_cache_limit_from_env, CACHE_DIR_VAR, DEFAULT_DISK_CACHE_BYTES,
    DISK_CACHE_MAX_MB_VAR, DISK_CACHE_VAR,
};
pub use entry::EntryError;
pub use key::CacheKey;

use crate::error::Error;
use crate::nvrtc::{self, CompiledKernel, NvrtcOptions, NvrtcVersion};
use disk::{DiskCache, Lookup};

/// One kernel to compile: CUDA source, kernel name and NVRTC options.
#[derive(Debug, Clone, Copy)]
pub struct KernelRequest<'a> {
    /// The self-contained CUDA C++ source.
    pub source: &'a str,
    /// The kernel name (NVRTC's program name, used in logs and errors).
    pub name: &'a str,
    /// The NVRTC options, architecture included.
    pub options: &'a NvrtcOptions,
}

impl<'a> KernelRequest<'a> {
    /// A request to compile `source` as `name` with `options`.
    pub fn new(source: &'a str, name: &'a str, options: &'a NvrtcOptions) -> Self {
        KernelRequest {
            source,
            name,
            options,
        }
    }
}

/// Where a kernel returned by the cache came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheOrigin {
    /// This cache object had it in memory.
    Memory,
    /// Loaded from a verified disk entry; NVRTC was not called.
    Disk,
    /// Compiled by NVRTC; there was no entry.
    Compiled,
    /// Compiled by NVRTC because the disk entry was rejected (and deleted) for this reason.
    Rebuilt(EntryError),
}

/// A compiled kernel from the cache.
#[derive(Debug, Clone)]
pub struct CachedKernel {
    /// The kernel, shared with the cache.
    pub kernel: Arc<CompiledKernel>,
    /// Its cache key.
    pub key: CacheKey,
    /// Where it came from.
    pub origin: CacheOrigin,
}

/// Counters of one [`KernelCache`] since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Requests answered from memory.
    pub memory_hits: u64,
    /// Requests answered from a verified disk entry.
    pub disk_hits: u64,
    /// NVRTC compilations this cache started (failed ones included).
    pub nvrtc_compiles: u64,
    /// Disk entries rejected as corrupt, truncated or stale, and deleted.
    pub disk_rejected: u64,
    /// Disk entries written.
    pub disk_writes: u64,
    /// Disk reads or writes that failed with an I/O error.
    pub disk_errors: u64,
    /// Disk entries deleted to keep the disk cache under its size cap.
    pub disk_evictions: u64,
}

#[derive(Default)]
struct Counters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    nvrtc_compiles: AtomicU64,
    disk_rejected: AtomicU64,
    disk_writes: AtomicU64,
    disk_errors: AtomicU64,
    disk_evictions: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// One key's compiled kernel; its lock is held while the kernel is being produced, so
/// concurrent requests for the key wait instead of compiling it again.
type Slot = Mutex<Option<Arc<CompiledKernel>>>;

/// Compiled kernels in memory and, optionally, on disk.
///
/// ```
/// use nvfuser_cuda::{GpuArch, KernelCache, KernelRequest, NvrtcOptions};
///
/// let cache = KernelCache::memory_only();
/// let options = NvrtcOptions::new(GpuArch::SM90);
/// let source = r#"extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }"#;
/// match cache.compile(KernelRequest::new(source, "k", &options)) {
///     Ok(first) => {
///         let again = cache.compile(KernelRequest::new(source, "k", &options)).unwrap();
///         assert_eq!(again.origin, nvfuser_cuda::CacheOrigin::Memory);
///         assert!(std::sync::Arc::ptr_eq(&first.kernel, &again.kernel));
///     }
///     Err(err) => eprintln!("{err}"), // no NVRTC on this machine
/// }
/// ```
pub struct KernelCache {
    memory: Mutex<HashMap<CacheKey, Arc<Slot>>>,
    disk: Option<DiskCache>,
    counters: Counters,
    warned: AtomicBool,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("disk_dir", &self.disk_dir())
            .field("stats", &self.stats())
            .finish()
    }
}

impl KernelCache {
    fn with_disk(disk: Option<DiskCache>) -> Self {
        KernelCache {
            memory: Mutex::new(HashMap::new()),
            disk,
            counters: Counters::default(),
            warned: AtomicBool::new(false),
        }
    }

    /// A cache that keeps kernels in memory only.
    pub fn memory_only() -> Self {
        Self::with_disk(None)
    }

    /// A cache backed by the directory `dir` (created on the first write), keeping at
    /// most [`DEFAULT_DISK_CACHE_BYTES`] of entries there.
    pub fn with_disk_dir(dir: impl Into<PathBuf>) -> Self {
        Self::with_disk_dir_limited(dir, DEFAULT_DISK_CACHE_BYTES)
    }

    /// A cache backed by `dir` keeping at most `max_bytes` of entries: past it, the least
    /// recently used entries (written or read) are deleted down to 90% of it.
    pub fn with_disk_dir_limited(dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        Self::with_disk(Some(DiskCache::new(dir.into(), max_bytes)))
    }

    /// A cache configured by the environment: `NVFUSER_DISK_CACHE=0` for memory only,
    /// `NVFUSER_CACHE_DIR` for the directory, else the user's cache directory (see
    /// [`disk_cache_dir_from_env`]).
    pub fn from_env() -> Result<Self, Error> {
        Ok(match disk_cache_dir_from_env()? {
            Some(dir) => Self::with_disk_dir_limited(dir, disk_cache_limit_from_env()?),
            None => Self::memory_only(),
        })
    }

    /// The process-wide cache, configured from the environment on first use. An invalid
    /// setting is reported once on stderr and the cache then works in memory only.
    pub fn global() -> &'static KernelCache {
        static GLOBAL: OnceLock<KernelCache> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            KernelCache::from_env().unwrap_or_else(|err| {
                note(&format!(
                    "nvfuser: {err}; the kernel cache keeps kernels in memory only"
                ));
                KernelCache::memory_only()
            })
        })
    }

    /// The disk cache's directory, if there is a disk cache.
    pub fn disk_dir(&self) -> Option<&Path> {
        self.disk.as_ref().map(DiskCache::root)
    }

    /// The disk cache's size cap in bytes, if there is a disk cache.
    pub fn disk_limit(&self) -> Option<u64> {
        self.disk.as_ref().map(DiskCache::limit)
    }

    /// The file that holds (or would hold) the disk entry of `key`.
    pub fn entry_path(&self, key: &CacheKey) -> Option<PathBuf> {
        self.disk.as_ref().map(|d| d.entry_path(key))
    }

    /// The key of `request` with the NVRTC this process uses.
    ///
    /// Errors: [`Error::NvrtcNotFound`] without NVRTC (its version is part of the key).
    pub fn key(&self, request: &KernelRequest<'_>) -> Result<CacheKey, Error> {
        let version = nvrtc::nvrtc_version()?;
        Ok(CacheKey::new(
            request.source,
            request.name,
            request.options,
            version,
        ))
    }

    /// The compiled kernel of `request`: from memory, from disk, or compiled by NVRTC
    /// (see the module docs). Compilation errors are those of
    /// [`compile_with_options`](crate::compile_with_options); they are not cached.
    pub fn compile(&self, request: KernelRequest<'_>) -> Result<CachedKernel, Error> {
        let version = nvrtc::nvrtc_version()?;
        let key = CacheKey::new(request.source, request.name, request.options, version);
        let slot = {
            let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(memory.entry(key).or_default())
        };
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kernel) = slot.as_ref() {
            bump(&self.counters.memory_hits);
            return Ok(CachedKernel {
                kernel: Arc::clone(kernel),
                key,
                origin: CacheOrigin::Memory,
            });
        }
        let mut origin = CacheOrigin::Compiled;
        if let Some(disk) = &self.disk {
            match disk.load(&key) {
                Lookup::Hit(kernel) => match check_entry(&kernel, &request, version) {
                    Ok(()) => {
                        bump(&self.counters.disk_hits);
                        let kernel = Arc::new(kernel);
                        *slot = Some(Arc::clone(&kernel));
                        return Ok(CachedKernel {
                            kernel,
                            key,
                            origin: CacheOrigin::Disk,
                        });
                    }
                    Err(err) => {
                        disk.remove(&key);
                        bump(&self.counters.disk_rejected);
                        origin = CacheOrigin::Rebuilt(err);
                    }
                },
                Lookup::Miss => {}
                Lookup::Rejected(err) => {
                    bump(&self.counters.disk_rejected);
                    origin = CacheOrigin::Rebuilt(err);
                }
                Lookup::Unreadable(err) => {
                    self.disk_error(&format!(
                        "cannot read {}: {err}",
                        disk.entry_path(&key).display()
                    ));
                }
            }
        }
        bump(&self.counters.nvrtc_compiles);
        let kernel = Arc::new(nvrtc::compile_with_options(
            request.source,
            request.name,
            request.options,
        )?);
        if let Some(disk) = &self.disk {
            match disk.store(&key, &kernel) {
                Ok(_) => {
                    bump(&self.counters.disk_writes);
                    let evicted = disk.trim(&key) as u64;
                    self.counters
                        .disk_evictions
                        .fetch_add(evicted, Ordering::Relaxed);
                }
                Err(err) => self.disk_error(&format!(
                    "cannot write {}: {err}",
                    disk.entry_path(&key).display()
                )),
            }
        }
        *slot = Some(Arc::clone(&kernel));
        Ok(CachedKernel {
            kernel,
            key,
            origin,
        })
    }

    /// Compiles every request, in parallel on all cores, each through
    /// [`compile`](Self::compile) (so cached kernels are not recompiled and duplicates
    /// compile once). The results are in the order of `requests`.
    pub fn compile_many(&self, requests: &[KernelRequest<'_>]) -> Vec<Result<CachedKernel, Error>> {
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(requests.len());
        if workers <= 1 {
            return requests.iter().map(|r| self.compile(*r)).collect();
        }
        let next = AtomicUsize::new(0);
        let mut results: Vec<Option<Result<CachedKernel, Error>>> =
            (0..requests.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(request) = requests.get(i) else {
                                break done;
                            };
                            done.push((i, self.compile(*request)));
                        }
                    })
                })
                .collect();
            for handle in handles {
                match handle.join() {
                    Ok(done) => {
                        for (i, result) in done {
                            results[i] = Some(result);
                        }
                    }
                    // A panic in a worker is a bug in this crate: pass it on unchanged.
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
        // Every index was taken by exactly one worker, and every worker returned.
        results
            .into_iter()
            .zip(requests)
            .map(|(result, request)| {
                result.unwrap_or_else(|| {
                    Err(Error::InvalidInput {
                        kernel: request.name.to_owned(),
                        what: "no worker compiled it (an internal error)".to_owned(),
                    })
                })
            })
            .collect()
    }

    /// The counters since this cache was created.
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            memory_hits: get(&c.memory_hits),
            disk_hits: get(&c.disk_hits),
            nvrtc_compiles: get(&c.nvrtc_compiles),
            disk_rejected: get(&c.disk_rejected),
            disk_writes: get(&c.disk_writes),
            disk_errors: get(&c.disk_errors),
            disk_evictions: get(&c.disk_evictions),
        }
    }

    /// The number of kernels held in memory.
    pub fn memory_len(&self) -> usize {
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory
            .values()
            // A slot being filled right now is not counted (and not waited for).
            .filter(|slot| slot.try_lock().is_ok_and(|s| s.is_some()))
            .count()
    }

    /// Forgets every kernel held in memory (the disk cache is untouched).
    pub fn clear_memory(&self) {
        self.memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn disk_error(&self, what: &str) {
        bump(&self.counters.disk_errors);
        if !self.warned.swap(true, Ordering::Relaxed) {
            note(&format!(
                "nvfuser: kernel disk cache: {what}; kernels still compile, but may not be \
                 cached on disk (this is reported once)"
            ));
        }
    }
}

/// Whether a verified entry describes the requested compilation (it always does unless
/// the file was written by something else under this key).
fn check_entry(
    kernel: &CompiledKernel,
    request: &KernelRequest<'_>,
    nvrtc_version: NvrtcVersion,
) -> Result<(), EntryError> {
    let args = request.options.to_args();
    if kernel.nvrtc_version != nvrtc_version {
        return Err(EntryError::Mismatch(format!(
            "entry from NVRTC {}, expected {nvrtc_version}",
            kernel.nvrtc_version
        )));
    }
    if kernel.name != request.name {
        return Err(EntryError::Mismatch(format!(
            "entry for kernel `{}`, expected `{}`",
            kernel.name, request.name
        )));
    }
    if kernel.arch != request.options.arch() || kernel.options != args {
        return Err(EntryError::Mismatch(format!(
            "entry for options {:?}, expected {args:?}",
            kernel.options
        )));
    }
    Ok(())
}

/// A warning for the application's logger (`log`, target `nvfuser`).
fn note(message: &str) {
    log::warn!(target: "nvfuser", "{message}");
}
