//! GPU tests of devices, tensors and CUBIN loading. They need a GPU and NVRTC.
//!
//! Each test starts with `require_gpu()`: on a machine without a GPU it prints why it is
//! skipped and passes; on the GPU machine run them with `NVFUSER_REQUIRE_GPU=1` so that a
//! missing GPU fails them instead:
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_device -- --nocapture
//! ```
//!
//! Expected values always come from the host: the same views are built on the CPU
//! reference device (or computed from the host data) and compared element for element,
//! bit for bit.

use std::sync::Arc;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use half::{bf16, f16};
use nvfuser_core::eval::HostTensor;
use nvfuser_core::DataType;
use nvfuser_cuda::testing::{note, require_gpu};
use nvfuser_cuda::{
    compile, Device, Element, Error, GpuArch, KernelCache, KernelRequest, NvrtcOptions, Tensor,
};

/// GPU 0, after `require_gpu()` said there is one; a failure to open it fails the test.
fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// Deterministic pseudo-random bits (SplitMix64).
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Random values of every bit pattern (NaNs and infinities included for floats), so
/// that a round trip is checked bit for bit.
trait Random: Element + std::fmt::Debug {
    fn random(bits: &mut Bits) -> Self;
    fn bits(self) -> u64;
}

impl Random for f32 {
    fn random(b: &mut Bits) -> Self {
        f32::from_bits(b.next() as u32)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Random for f64 {
    fn random(b: &mut Bits) -> Self {
        f64::from_bits(b.next())
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}
impl Random for f16 {
    fn random(b: &mut Bits) -> Self {
        f16::from_bits(b.next() as u16)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Random for bf16 {
    fn random(b: &mut Bits) -> Self {
        bf16::from_bits(b.next() as u16)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Random for i32 {
    fn random(b: &mut Bits) -> Self {
        b.next() as i32
    }
    fn bits(self) -> u64 {
        self as u32 as u64
    }
}
impl Random for i64 {
    fn random(b: &mut Bits) -> Self {
        b.next() as i64
    }
    fn bits(self) -> u64 {
        self as u64
    }
}
impl Random for bool {
    fn random(b: &mut Bits) -> Self {
        b.next() & 1 == 1
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

/// Shapes with empty, 0-d, size-1 and odd sizes.
const SHAPES: &[&[usize]] = &[
    &[],
    &[0],
    &[1],
    &[7],
    &[3, 5],
    &[2, 3, 0],
    &[1, 1, 1],
    &[1023],
    &[33, 17],
    &[4099],
    &[3, 1, 5, 7],
];

fn assert_bits_eq<T: Random>(found: &[T], expected: &[T], what: &str) {
    assert_eq!(found.len(), expected.len(), "{what}: lengths differ");
    for (i, (f, e)) in found.iter().zip(expected).enumerate() {
        assert_eq!(
            f.bits(),
            e.bits(),
            "{what}: element {i}: found {f:?}, expected {e:?}"
        );
    }
}

fn round_trips<T: Random>(gpu: &Device, seed: u64) {
    let mut bits = Bits(seed);
    for shape in SHAPES {
        let n: usize = shape.iter().product();
        let host: Vec<T> = (0..n).map(|_| T::random(&mut bits)).collect();
        let what = format!("{} {shape:?}", T::DTYPE);
        let t = gpu
            .tensor_from_slice(&host, shape)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(t.device().is_gpu());
        assert_eq!((t.dtype(), t.sizes()), (T::DTYPE, *shape));
        assert!(t.is_contiguous());
        // The driver aligns allocations to at least 256 bytes (cudaMalloc's guarantee);
        // vectorized kernels rely on 16.
        assert!(
            t.data_alignment() >= 16,
            "{what}: alignment {}",
            t.data_alignment()
        );
        assert_bits_eq(&t.to_vec::<T>().unwrap(), &host, &what);
        // GPU -> CPU -> GPU copies.
        let on_cpu = t.to_device(&Device::cpu()).unwrap();
        assert_bits_eq(&on_cpu.to_vec::<T>().unwrap(), &host, &what);
        let back = on_cpu.to_device(gpu).unwrap();
        assert_bits_eq(&back.to_vec::<T>().unwrap(), &host, &what);
        let zeros = gpu.zeros(T::DTYPE, shape).unwrap();
        assert!(
            zeros.to_vec::<T>().unwrap().iter().all(|z| z.bits() == 0),
            "{what}"
        );
    }
}

#[test]
fn device_properties_are_read_from_the_driver_and_sane() {
    let Some(gpu) = gpu() else { return };
    let p = gpu.properties().expect("a GPU has properties");
    assert!(!p.name.is_empty());
    assert!(p.sm_count > 0, "{p:?}");
    assert!(gpu.arch().unwrap() >= GpuArch::new(7, 5), "{p:?}");
    assert!(p.peak_bandwidth_gb_per_s() > 0.0, "{p:?}");
    assert_eq!(p.warp_size, 32);
    assert!(p.max_threads_per_block >= 1024 && p.max_threads_per_sm >= p.max_threads_per_block);
    assert!(p.registers_per_sm >= 65_536 && p.registers_per_block > 0);
    assert!(p.shared_memory_per_block_optin >= p.shared_memory_per_block);
    assert!(p.shared_memory_per_sm >= p.shared_memory_per_block_optin);
    assert!(p.l2_cache_bytes > 0 && p.total_memory_bytes > 0);
    assert!(p.max_grid_dim[0] >= 65_535 && p.max_block_dim[0] >= 1024);
    assert!(gpu.is_gpu() && !gpu.is_cpu());
    assert_eq!(gpu.ordinal(), Some(0));
    assert!(gpu.to_string().starts_with("cuda:0 ("), "{gpu}");
    // Opening it again gives the same device, and `best` picks it.
    assert_eq!(Device::cuda(0).unwrap(), gpu);
    assert!(Device::best().is_gpu());
    let base = gpu.zeros(DataType::F32, [1]).unwrap().data_alignment();
    assert!(base >= 16, "allocation alignment {base}");
    let json = serde_json::to_string_pretty(p).unwrap();
    note(&format!(
        "{gpu}: {}, {} SMs, peak {:.0} GB/s, allocations aligned to {base} bytes (or more); \
         properties:\n{json}",
        p.arch(),
        p.sm_count,
        p.peak_bandwidth_gb_per_s()
    ));
}

#[test]
fn a_gpu_index_past_the_last_is_a_typed_error() {
    let Some(_gpu) = gpu() else { return };
    let count = nvfuser_cuda::driver::probe().unwrap().device_count;
    match Device::cuda(count as usize) {
        Err(Error::InvalidDeviceIndex {
            requested,
            count: c,
        }) => {
            assert_eq!((requested, c), (count as usize, count));
        }
        other => panic!("expected InvalidDeviceIndex, got {other:?}"),
    }
}

#[test]
fn uploads_and_downloads_round_trip_every_dtype() {
    let Some(gpu) = gpu() else { return };
    round_trips::<f32>(&gpu, 1);
    round_trips::<f64>(&gpu, 2);
    round_trips::<f16>(&gpu, 3);
    round_trips::<bf16>(&gpu, 4);
    round_trips::<i32>(&gpu, 5);
    round_trips::<i64>(&gpu, 6);
    round_trips::<bool>(&gpu, 7);
}

/// A chain of views, applied alike on the CPU and the GPU.
type View = fn(&Tensor) -> Result<Tensor, Error>;

fn views() -> Vec<(&'static str, View)> {
    vec![
        ("identity", |t| Ok(t.clone())),
        ("permute(2,0,1)", |t| t.permute(&[2, 0, 1])),
        ("permute(-1,1,0)", |t| t.permute(&[-1, 1, 0])),
        ("slice(0,1,3,1)", |t| t.slice(0, 1, 3, 1)),
        ("slice(2,1,-1,2)", |t| t.slice(2, 1, -1, 2)),
        ("slice(1,5,2,1) (empty)", |t| t.slice(1, 5, 2, 1)),
        ("slice then permute", |t| {
            t.slice(1, 0, 4, 3)?.permute(&[1, 2, 0])
        }),
        ("unsqueeze(1)", |t| t.unsqueeze(1)),
        ("slice to 1, expand", |t| {
            t.slice(1, 2, 3, 1)?.expand(&[-1, 6, -1])
        }),
        ("unsqueeze, expand new dims", |t| {
            t.slice(2, 0, 1, 1)?.unsqueeze(0)?.expand(&[2, 4, 3, 5, 1])
        }),
        ("permute, slice, expand", |t| {
            t.permute(&[1, 0, 2])?.slice(2, 3, 4, 1)?.expand(&[5, 3, 2])
        }),
    ]
}

fn views_match<T: Random>(gpu: &Device, seed: u64) {
    let mut bits = Bits(seed);
    let shape = [3usize, 5, 7];
    let host: Vec<T> = (0..105).map(|_| T::random(&mut bits)).collect();
    let on_gpu = gpu.tensor_from_slice(&host, shape).unwrap();
    let on_cpu = Device::cpu().tensor_from_slice(&host, shape).unwrap();
    for (name, view) in views() {
        let what = format!("{} {name}", T::DTYPE);
        let g = view(&on_gpu).unwrap_or_else(|e| panic!("{what}: {e}"));
        let c = view(&on_cpu).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(g.sizes(), c.sizes(), "{what}");
        assert_eq!(g.strides(), c.strides(), "{what}");
        assert_eq!(g.is_contiguous(), c.is_contiguous(), "{what}");
        // Both buffers start at least 16-byte aligned, so views agree up to 16 bytes.
        assert_eq!(
            g.data_alignment().min(16),
            c.data_alignment().min(16),
            "{what}"
        );
        assert_bits_eq(&g.to_vec::<T>().unwrap(), &c.to_vec::<T>().unwrap(), &what);
        // A contiguous copy on the GPU reads the same.
        let copy = g.to_device(gpu).unwrap();
        assert!(copy.is_contiguous());
        assert_bits_eq(
            &copy.to_vec::<T>().unwrap(),
            &c.to_vec::<T>().unwrap(),
            &what,
        );
    }
}

#[test]
fn views_download_the_values_the_host_computes() {
    let Some(gpu) = gpu() else { return };
    views_match::<f32>(&gpu, 11);
    views_match::<bf16>(&gpu, 12);
    views_match::<i64>(&gpu, 13);
    views_match::<bool>(&gpu, 14);
}

#[test]
fn host_tensors_of_the_cpu_evaluator_upload_and_come_back() {
    let Some(gpu) = gpu() else { return };
    for (i, dtype) in DataType::ALL.into_iter().enumerate() {
        for shape in [&[][..], &[0, 3], &[3, 5, 7]] {
            let host = HostTensor::random(dtype, shape, 100 + i as u64);
            let t = gpu.tensor_from_host(&host).unwrap();
            assert_eq!(t.to_host_tensor().unwrap(), host, "{dtype} {shape:?}");
            if shape.len() == 3 {
                let on_cpu = Device::cpu().tensor_from_host(&host).unwrap();
                let g = t.permute(&[2, 0, 1]).unwrap().slice(1, 1, 3, 1).unwrap();
                let c = on_cpu
                    .permute(&[2, 0, 1])
                    .unwrap()
                    .slice(1, 1, 3, 1)
                    .unwrap();
                assert_eq!(
                    g.to_host_tensor().unwrap(),
                    c.to_host_tensor().unwrap(),
                    "{dtype}"
                );
            }
        }
    }
}

#[test]
fn foreign_cudarc_slices_are_wrapped_without_a_copy() {
    let Some(gpu) = gpu() else { return };
    let stream = gpu.cuda_stream().unwrap();
    let host: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let slice = stream.clone_htod(&host).unwrap();
    let slice = Arc::new(slice);
    // Read it as the transpose of a 3x4 matrix: sizes [4, 3], strides [1, 4].
    let t =
        Tensor::from_cuda_slice(Arc::clone(&slice), DataType::F32, &[4, 3], &[1, 4], 0).unwrap();
    let expected: Vec<f32> = (0..4)
        .flat_map(|j| (0..3).map(move |i| (4 * i + j) as f32))
        .collect();
    assert_eq!(t.to_vec::<f32>().unwrap(), expected);
    assert_eq!(t.buffer_bytes(), 48);
    // An offset view of the second row.
    let row = Tensor::from_cuda_slice(Arc::clone(&slice), DataType::F32, &[4], &[1], 4).unwrap();
    assert_eq!(row.to_vec::<f32>().unwrap(), [4.0, 5.0, 6.0, 7.0]);
    assert_eq!(row.data_alignment(), 16);
    // The same bytes as i32 (a slice's element type only fixes its byte length).
    let bits = Tensor::from_cuda_slice(Arc::clone(&slice), DataType::I32, &[2], &[1], 1).unwrap();
    assert_eq!(
        bits.to_vec::<i32>().unwrap(),
        [1.0f32.to_bits() as i32, 2.0f32.to_bits() as i32]
    );
    // Views that leave the buffer are typed errors that name the numbers.
    for (sizes, strides, offset) in [
        (&[13usize][..], &[1usize][..], 0usize),
        (&[4], &[1], 9),
        (&[3, 4], &[5, 1], 0),
        (&[7], &[1], 6),
    ] {
        match Tensor::from_cuda_slice(Arc::clone(&slice), DataType::F32, sizes, strides, offset) {
            Err(Error::InvalidTensor {
                op,
                expected,
                found,
            }) => {
                assert_eq!(op, "Tensor::from_cuda_slice");
                assert!(expected.contains("48-byte buffer"), "{expected}");
                assert!(found.contains(&format!("offset {offset}")), "{found}");
            }
            other => {
                panic!("{sizes:?}/{strides:?}/{offset}: expected InvalidTensor, got {other:?}")
            }
        }
    }
    assert!(Tensor::from_cuda_slice(Arc::clone(&slice), DataType::F64, &[6], &[1], 1).is_err());
    assert!(Tensor::from_cuda_slice(slice, DataType::F32, &[2], &[1, 1], 0).is_err());
}

#[test]
fn an_impossible_allocation_is_a_typed_error() {
    let Some(gpu) = gpu() else { return };
    // 4 PiB.
    let err = gpu.zeros(DataType::F32, [1usize << 50]).unwrap_err();
    assert!(
        matches!(err, Error::OutOfMemory { .. } | Error::Driver { .. }),
        "{err}"
    );
    note(&format!("allocating 4 PiB: {err}"));
}

const AXPY: &str = r#"
extern "C" __global__ void axpy_f32(float* __restrict__ out, const float* __restrict__ x,
                                    float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + b;
}
"#;

#[test]
fn a_cubin_compiled_by_nvrtc_loads_and_launches() {
    let Some(gpu) = gpu() else { return };
    let arch = gpu.arch().unwrap();
    let options = NvrtcOptions::new(arch);
    let cache = KernelCache::memory_only();
    let kernel = cache
        .compile(KernelRequest::new(AXPY, "axpy_f32", &options))
        .unwrap_or_else(|e| panic!("{e}"))
        .kernel;
    let function = gpu.load_function(&kernel, "axpy_f32").unwrap();

    let n: i32 = 10_007; // not a multiple of the block size
    let host: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 3.0).collect();
    let x = gpu.tensor_from_slice(&host, [n as usize]).unwrap();
    let x_ptr: u64 = x.cuda_address().unwrap();
    let stream = gpu.cuda_stream().unwrap();
    let mut out = stream.alloc_zeros::<f32>(n as usize).unwrap();
    let (a, b) = (2.0f32, 1.0f32);
    let config = LaunchConfig {
        grid_dim: ((n as u32).div_ceil(256), 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(&function);
    launch.arg(&mut out).arg(&x_ptr).arg(&a).arg(&b).arg(&n);
    // SAFETY: the arguments match the kernel's signature (float*, const float*, float,
    // float, int); `out` and `x` hold n floats and outlive the launch (the download below
    // synchronizes the stream).
    unsafe { launch.launch(config) }.unwrap();
    let y = Tensor::from_cuda_slice(out, DataType::F32, &[n as usize], &[1], 0).unwrap();
    let got = y.to_vec::<f32>().unwrap();
    let expected: Vec<f32> = host.iter().map(|&v| a * v + b).collect();
    assert_eq!(got, expected);
    note(&format!(
        "{gpu}: launched axpy_f32 from a {}-byte {} CUBIN on {n} elements",
        kernel.cubin.len(),
        kernel.arch
    ));
}

#[test]
fn loading_checks_the_architecture_and_the_function_name() {
    let Some(gpu) = gpu() else { return };
    let arch = gpu.arch().unwrap();
    let kernel = compile(AXPY, "axpy_f32", arch).unwrap_or_else(|e| panic!("{e}"));
    match gpu.load_function(&kernel, "no_such_kernel") {
        Err(Error::FunctionNotFound { function, .. }) => assert_eq!(function, "no_such_kernel"),
        other => panic!("expected FunctionNotFound, got {:?}", other.err()),
    }
    assert!(matches!(
        gpu.load_function(&kernel, "bad\0name"),
        Err(Error::InvalidInput { .. })
    ));
    // Machine code of another major architecture cannot run here.
    let other = if arch.major() == 8 {
        GpuArch::SM90
    } else {
        GpuArch::SM80
    };
    let foreign = compile(AXPY, "axpy_f32", other).unwrap_or_else(|e| panic!("{e}"));
    match gpu.load_module(&foreign) {
        Err(err @ Error::ArchMismatch { .. }) => note(&format!("as expected: {err}")),
        other => panic!("expected ArchMismatch, got {:?}", other.err()),
    }
    assert!(matches!(
        Device::cpu().load_module(&kernel),
        Err(Error::NotAGpu { .. })
    ));
}
