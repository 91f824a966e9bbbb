//! [`Device`]: where tensors live and fusions run: a GPU, or the CPU reference device.
//!
//! A GPU is opened only after the driver probe (`driver.rs`) has found `libcuda`, a GPU,
//! and every driver function cudarc will call, so a machine without a driver gets a
//! [`Error`] from [`Device::cuda`], never cudarc's panic. [`Device::best`] turns that
//! error into the CPU reference device, and says so once on stderr: per the design, a
//! machine without a GPU still runs every example, and the user is told that the CPU
//! reference evaluator did the work.
//!
//! Each GPU is opened once per process (its primary context, shared with other cudarc
//! users such as candle) and every `Device::cuda(i)` returns a cheap handle to it. Its
//! [`DeviceProperties`] are read from the driver at that moment.
//!
//! Without the `cuda` feature the CPU reference device is the only one:
//! [`Device::cuda`] returns [`Error::CudaDisabled`] and [`Device::best`] the CPU device.
//! Everything that holds a GPU (`CudaDevice`, the pool, the error buffer, graphs) is
//! compiled with `cuda` only.

#[cfg(feature = "cuda")]
pub(crate) mod errors;
// Its items are `cuda` one by one, not the module: rustdoc would hide the `cuda` badge
// of `Device::capture` behind the private module's `cfg`.
mod graph;
mod module;
#[cfg(feature = "cuda")]
pub(crate) mod pool;
mod properties;

use std::fmt;
use std::sync::Once;
#[cfg(feature = "cuda")]
use std::sync::{Arc, Mutex, Weak};

#[cfg(feature = "cuda")]
use cudarc::driver::{CudaContext, CudaModule, CudaStream, DriverError};

#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use graph::CudaGraphRun;
pub use module::cubin_runs_on;
pub use properties::DeviceProperties;

#[cfg(feature = "cuda")]
use crate::driver;
use crate::error::Error;
use crate::nvrtc::GpuArch;

/// Bytes of free blocks a device's pool keeps at most by default.
pub const DEFAULT_CACHED_BYTES: usize = 4 << 30;

/// A device: one GPU, or the CPU reference device. Cheap to clone.
///
/// ```
/// use nvfuser_cuda::Device;
/// // `best()` never fails: GPU 0 when there is one, else the CPU reference device.
/// let device = Device::best();
/// let x = device.tensor_from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2]).unwrap();
/// assert_eq!(x.permute(&[1, 0]).unwrap().to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
/// ```
#[derive(Clone)]
pub struct Device {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Cpu,
    #[cfg(feature = "cuda")]
    Cuda(Arc<CudaDevice>),
}

/// An opened GPU: its context, the stream this crate orders its work on, and its
/// properties.
#[cfg(feature = "cuda")]
pub(crate) struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) context: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// The same stream (the legacy default stream of the same primary context) seen
    /// through a second, private cudarc context object that never creates a stream and
    /// has cudarc's event tracking off: this crate's own allocations come from here, so
    /// they do not create and destroy two CUDA events each (see `Device::cuda`).
    pub(crate) alloc_stream: Arc<CudaStream>,
    pub(crate) properties: DeviceProperties,
    /// The modules loaded through this device, to count the live ones
    /// ([`Device::loaded_modules`]); dead entries are pruned on each load.
    pub(crate) modules: Mutex<Vec<Weak<CudaModule>>>,
    /// The error buffer of kernels with device-side checks (see `errors`).
    pub(crate) errors: errors::ErrorState,
    /// The caching allocator of this crate's buffers, on `alloc_stream` (see `pool`).
    pub(crate) pool: Arc<pool::Pool>,
    /// The pool of the capture in progress on this device's stream, if any.
    pub(crate) capture: Mutex<Option<Arc<pool::Pool>>>,
    /// True while `capture` is set (checked without the lock on every allocation).
    pub(crate) capturing: std::sync::atomic::AtomicBool,
    /// True when the stream is this device's own (not the legacy default stream).
    pub(crate) own_stream: bool,
    /// The copy kernels that store in-place outputs (`launch::store`), loaded on
    /// first use.
    pub(crate) store_kernels: std::sync::OnceLock<crate::launch::store::StoreKernels>,
}

#[cfg(feature = "cuda")]
impl CudaDevice {
    /// `cuda:N (name)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("cuda:{} ({})", self.ordinal, self.properties.name)
    }
}

/// Opens GPU `ordinal`: its primary context, the stream this crate orders its work on
/// (the legacy default stream, or a new stream when `own_stream`), and its pool.
#[cfg(feature = "cuda")]
fn open(ordinal: usize, own_stream: bool) -> Result<CudaDevice, Error> {
    let context = CudaContext::new(ordinal).map_err(|e| Error::driver("CudaContext::new", e))?;
    let properties = DeviceProperties::query(&context)?;
    // A second handle on the same primary context, private to this crate, for its own
    // allocations. cudarc creates two events per allocation while event tracking is on,
    // but only consults them once a context object has created a stream of its own
    // ("multi-stream mode"); this object has tracking off, and the public context
    // (`cuda_context`) keeps cudarc's defaults for whatever users do with it.
    let private = CudaContext::new(ordinal).map_err(|e| Error::driver("CudaContext::new", e))?;
    // SAFETY: cudarc's contract is that the user orders work across streams. This crate
    // queues everything it allocates, writes, reads and frees on the one stream below
    // (launches included), so that stream orders all of it.
    unsafe { private.disable_event_tracking() };
    let (stream, alloc_stream) = if own_stream {
        let s = private
            .new_stream()
            .map_err(|e| Error::driver("cuStreamCreate", e))?;
        (s.clone(), s)
    } else {
        // The legacy default stream: it orders this crate's work with every other
        // blocking stream on the device, the safe default while tensors are shared with
        // other libraries.
        (context.default_stream(), private.default_stream())
    };
    Ok(CudaDevice {
        ordinal,
        context,
        stream,
        pool: pool::Pool::new(alloc_stream.clone(), DEFAULT_CACHED_BYTES),
        alloc_stream,
        properties,
        modules: Mutex::new(Vec::new()),
        errors: errors::ErrorState::default(),
        capture: Mutex::new(None),
        capturing: std::sync::atomic::AtomicBool::new(false),
        own_stream,
        store_kernels: std::sync::OnceLock::new(),
    })
}

#[cfg(feature = "cuda")]
impl CudaDevice {
    /// A buffer of `bytes` from the pool new buffers come from: the capture's while one
    /// is in progress, else the device's (borrowed: no reference count is touched on
    /// the cached call's path beyond the buffer's own).
    pub(crate) fn alloc(&self, bytes: usize) -> Result<pool::PooledBuffer, DriverError> {
        if self.capturing.load(std::sync::atomic::Ordering::Acquire) {
            let capture = self
                .capture
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if let Some(p) = capture {
                return p.alloc(bytes);
            }
        }
        self.pool.alloc(bytes)
    }
}

/// The GPUs opened so far, by ordinal.
#[cfg(feature = "cuda")]
static OPENED: Mutex<Vec<Arc<CudaDevice>>> = Mutex::new(Vec::new());

static CPU_NOTICE: Once = Once::new();

impl Device {
    /// The CPU reference device: tensors in host memory, fusions run by the CPU reference
    /// evaluator. Always available.
    pub fn cpu() -> Device {
        Device { kind: Kind::Cpu }
    }

    /// GPU `ordinal`, or why it cannot be used: no driver ([`Error::NoDriver`]), no
    /// GPU ([`Error::NoDevice`]), a driver older than the bindings
    /// ([`Error::DriverTooOld`]), an index past the last GPU
    /// ([`Error::InvalidDeviceIndex`]), a build without the `cuda` feature
    /// ([`Error::CudaDisabled`]). Never panics.
    pub fn cuda(ordinal: usize) -> Result<Device, Error> {
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            Err(Error::CudaDisabled { op: "Device::cuda" })
        }
        #[cfg(feature = "cuda")]
        Self::open_shared(ordinal)
    }

    /// [`Device::cuda`]: the process's handle to GPU `ordinal`, opened on first use.
    #[cfg(feature = "cuda")]
    fn open_shared(ordinal: usize) -> Result<Device, Error> {
        let info = driver::probe()?;
        let count = info.device_count;
        if !u32::try_from(ordinal).is_ok_and(|i| i < count) {
            return Err(Error::InvalidDeviceIndex {
                requested: ordinal,
                count,
            });
        }
        driver::check_device_symbols()?;
        let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(device) = opened.iter().find(|d| d.ordinal == ordinal) {
            return Ok(Device {
                kind: Kind::Cuda(Arc::clone(device)),
            });
        }
        let device = Arc::new(open(ordinal, false)?);
        opened.push(Arc::clone(&device));
        Ok(Device {
            kind: Kind::Cuda(device),
        })
    }

    /// GPU `ordinal` with a stream of its own: a new non-blocking stream, where this
    /// `Device` (and every clone of it) queues its uploads, downloads, allocations and
    /// launches. Unlike [`Device::cuda`]'s legacy default stream, such a stream can be
    /// captured into a CUDA graph ([`Device::capture`]), and its work runs concurrently
    /// with other streams. Tensors of one `Device` are ordered on its stream only: pass
    /// them to another `Device` of the same GPU after [`Device::synchronize`]. Errors as
    /// [`Device::cuda`].
    pub fn cuda_with_own_stream(ordinal: usize) -> Result<Device, Error> {
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            Err(Error::CudaDisabled {
                op: "Device::cuda_with_own_stream",
            })
        }
        #[cfg(feature = "cuda")]
        Self::open_own_stream(ordinal)
    }

    /// [`Device::cuda_with_own_stream`]: a new handle with a new stream.
    #[cfg(feature = "cuda")]
    fn open_own_stream(ordinal: usize) -> Result<Device, Error> {
        let info = driver::probe()?;
        if !u32::try_from(ordinal).is_ok_and(|i| i < info.device_count) {
            return Err(Error::InvalidDeviceIndex {
                requested: ordinal,
                count: info.device_count,
            });
        }
        driver::check_device_symbols()?;
        Ok(Device {
            kind: Kind::Cuda(Arc::new(open(ordinal, true)?)),
        })
    }

    /// GPU 0 when there is a usable one; otherwise the CPU reference device, after a
    /// one-line warning (once per process, through `log`, target `nvfuser`) saying why
    /// there is no GPU and that the CPU reference evaluator will run.
    ///
    /// In a build without the `cuda` feature: the CPU reference device, without a
    /// warning (the build has no GPU support by choice).
    pub fn best() -> Device {
        if !cfg!(feature = "cuda") {
            return Device::cpu();
        }
        match Device::cuda(0) {
            Ok(device) => device,
            Err(err) => {
                CPU_NOTICE.call_once(|| log::warn!(target: "nvfuser", "{}", no_gpu_notice(&err)));
                Device::cpu()
            }
        }
    }

    /// Whether this is a GPU.
    pub fn is_gpu(&self) -> bool {
        !self.is_cpu()
    }

    /// Whether this device is recording a CUDA graph ([`Device::capture`]).
    pub(crate) fn is_capturing(&self) -> bool {
        #[cfg(feature = "cuda")]
        return self
            .gpu()
            .is_some_and(|g| g.capturing.load(std::sync::atomic::Ordering::Acquire));
        // Without `cuda` there is no GPU to record on.
        #[cfg(not(feature = "cuda"))]
        false
    }

    /// Whether this is the CPU reference device.
    pub fn is_cpu(&self) -> bool {
        match self.kind {
            Kind::Cpu => true,
            #[cfg(feature = "cuda")]
            Kind::Cuda(_) => false,
        }
    }

    /// The GPU's ordinal; `None` for the CPU.
    pub fn ordinal(&self) -> Option<usize> {
        #[cfg(feature = "cuda")]
        return self.gpu().map(|d| d.ordinal);
        #[cfg(not(feature = "cuda"))]
        None
    }

    /// The GPU's properties, read from the driver; `None` for the CPU.
    pub fn properties(&self) -> Option<&DeviceProperties> {
        #[cfg(feature = "cuda")]
        return self.gpu().map(|d| &d.properties);
        #[cfg(not(feature = "cuda"))]
        None
    }

    /// The architecture to compile kernels for; `None` for the CPU.
    pub fn arch(&self) -> Option<GpuArch> {
        self.properties().map(DeviceProperties::arch)
    }

    /// The GPU's cudarc context (its primary context); `None` for the CPU.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn cuda_context(&self) -> Option<&Arc<CudaContext>> {
        self.gpu().map(|d| &d.context)
    }

    /// The stream this crate orders its uploads, downloads and launches on; `None` for
    /// the CPU.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        self.gpu().map(|d| &d.stream)
    }

    /// Waits until all work queued on the device's stream has finished (nothing to wait
    /// for on the CPU).
    ///
    /// A device-side check that failed in a kernel launched before (see
    /// [`Error::DeviceAssert`]) is reported here, and cleared.
    pub fn synchronize(&self) -> Result<(), Error> {
        #[cfg(feature = "cuda")]
        if let Some(d) = self.gpu() {
            d.stream
                .synchronize()
                .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
            return self.check_device_errors();
        }
        Ok(())
    }

    /// Reports (and clears) a failed device-side check of a kernel launched since the
    /// last report, as a [`Error::DeviceAssert`]; waits for the device's stream only
    /// when a kernel with checks was launched since then. Downloads and
    /// [`Device::synchronize`] call it; a no-op on the CPU device.
    pub fn check_device_errors(&self) -> Result<(), Error> {
        #[cfg(feature = "cuda")]
        if let Some(d) = self.gpu() {
            return d.errors.take(&d.alloc_stream, &self.to_string());
        }
        Ok(())
    }

    /// Free and total device memory as the driver reports them (`cuMemGetInfo`): the
    /// whole GPU, all processes included. Memory this crate frees goes back to the
    /// stream-ordered pool first, which returns it to the driver at the next
    /// synchronize (the pool's default release threshold is 0), so call
    /// [`Device::synchronize`] before reading it.
    ///
    /// Errors: [`Error::NotAGpu`] on the CPU device; driver errors.
    pub fn memory_info(&self) -> Result<MemoryInfo, Error> {
        const OP: &str = "Device::memory_info";
        #[cfg(not(feature = "cuda"))]
        return Err(Error::NotAGpu { op: OP });
        #[cfg(feature = "cuda")]
        {
            let gpu = self.require_gpu(OP)?;
            let (free, total) = gpu
                .context
                .mem_get_info()
                .map_err(|e| Error::driver("cuMemGetInfo", e))?;
            Ok(MemoryInfo {
                free_bytes: free,
                total_bytes: total,
            })
        }
    }

    /// Bytes of device memory this crate keeps cached for reuse: blocks of dropped
    /// tensors, handed out again to later allocations of the same size class without a
    /// driver call (see [`DEFAULT_CACHED_BYTES`]). 0 on the CPU device.
    pub fn cached_bytes(&self) -> usize {
        #[cfg(feature = "cuda")]
        return self.gpu().map_or(0, |g| g.pool.cached_bytes());
        #[cfg(not(feature = "cuda"))]
        0
    }

    /// Returns the cached blocks ([`Device::cached_bytes`]) to the driver, in stream
    /// order; returns how many bytes they held. [`Device::memory_info`] sees them free
    /// after the next [`Device::synchronize`].
    pub fn release_cached_memory(&self) -> usize {
        #[cfg(feature = "cuda")]
        return self.gpu().map_or(0, |g| g.pool.release_cached());
        #[cfg(not(feature = "cuda"))]
        0
    }

    /// How many modules loaded through this device ([`Device::load_module`],
    /// [`Device::load_function`]) are still loaded: a module is unloaded when the last
    /// `CudaModule`/`CudaFunction` handle to it is dropped (for the executor, when its
    /// runtime is evicted or the executor dropped). 0 on the CPU device.
    pub fn loaded_modules(&self) -> usize {
        #[cfg(feature = "cuda")]
        return self.gpu().map_or(0, |g| {
            g.modules
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|m| m.strong_count() > 0)
                .count()
        });
        #[cfg(not(feature = "cuda"))]
        0
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn gpu(&self) -> Option<&Arc<CudaDevice>> {
        match &self.kind {
            Kind::Cuda(d) => Some(d),
            Kind::Cpu => None,
        }
    }

    /// The GPU, or [`Error::NotAGpu`] naming `op`.
    #[cfg(feature = "cuda")]
    pub(crate) fn require_gpu(&self, op: &'static str) -> Result<&Arc<CudaDevice>, Error> {
        self.gpu().ok_or(Error::NotAGpu { op })
    }
}

/// Device memory as the driver reports it ([`Device::memory_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Free bytes.
    pub free_bytes: usize,
    /// Total bytes.
    pub total_bytes: usize,
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        match (&self.kind, &other.kind) {
            (Kind::Cpu, Kind::Cpu) => true,
            #[cfg(feature = "cuda")]
            (Kind::Cuda(a), Kind::Cuda(b)) => a.ordinal == b.ordinal,
            #[cfg(feature = "cuda")]
            _ => false,
        }
    }
}

impl Eq for Device {}

impl fmt::Display for Device {
    /// `cpu`, or `cuda:N (GPU name)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Cpu => f.write_str("cpu"),
            #[cfg(feature = "cuda")]
            Kind::Cuda(d) => f.write_str(&d.label()),
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_device_is_always_there() {
        let cpu = Device::cpu();
        assert!(cpu.is_cpu() && !cpu.is_gpu());
        assert_eq!(cpu.to_string(), "cpu");
        assert_eq!(cpu, Device::cpu());
        assert!(cpu.properties().is_none() && cpu.arch().is_none());
        assert!(cpu.synchronize().is_ok());
        #[cfg(feature = "cuda")]
        assert!(matches!(
            cpu.require_gpu("op"),
            Err(Error::NotAGpu { op: "op" })
        ));
        assert!(matches!(
            cpu.memory_info(),
            Err(Error::NotAGpu {
                op: "Device::memory_info"
            })
        ));
    }

    #[test]
    fn a_gpu_index_past_the_last_is_a_typed_error() {
        match Device::cuda(usize::MAX) {
            Err(Error::InvalidDeviceIndex { requested, .. }) => {
                assert_eq!(requested, usize::MAX)
            }
            // Without a driver the probe's error comes first.
            Err(Error::NoDriver { .. } | Error::NoDevice { .. }) => {}
            Err(Error::DriverTooOld { .. }) => {}
            // A build without `cuda`.
            Err(Error::CudaDisabled { op: "Device::cuda" }) if !cfg!(feature = "cuda") => {}
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn best_always_returns_a_device() {
        let device = Device::best();
        assert_eq!(device.is_gpu(), Device::cuda(0).is_ok());
    }

    #[test]
    #[cfg(not(feature = "cuda"))]
    fn without_cuda_there_is_only_the_cpu() {
        assert!(Device::best().is_cpu());
        for err in [
            Device::cuda(0).unwrap_err(),
            Device::cuda_with_own_stream(0).unwrap_err(),
        ] {
            assert!(matches!(err, Error::CudaDisabled { .. }), "{err}");
            assert!(
                err.to_string().contains("built without the `cuda` feature"),
                "{err}"
            );
        }
    }
}

/// The two lines [`Device::best`] prints when it falls back to the CPU: why there is no
/// GPU, short (a missing driver in one line, not the ~30 library names tried, which
/// `Device::cuda(0)`'s error lists), and what runs instead.
fn no_gpu_notice(err: &Error) -> String {
    let why = match err {
        Error::NoDriver { .. } => "no CUDA driver: libcuda is not on the loader path".into(),
        other => other.to_string(),
    };
    format!("no usable GPU ({why}); fusions run on the CPU reference evaluator")
}

#[cfg(test)]
mod notice_tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_one_short_line() {
        let searched: Vec<String> = (0..34).map(|i| format!("libcuda{i}.so.13")).collect();
        let notice = no_gpu_notice(&Error::NoDriver { searched });
        assert_eq!(
            notice,
            "no usable GPU (no CUDA driver: libcuda is not on the loader path); fusions run on the CPU reference evaluator"
        );
        assert!(notice.len() < 120 && !notice.contains('\n'), "{notice}");
    }
}
