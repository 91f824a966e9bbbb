//! Storing a tensor's elements into a strided view on the GPU: how an in-place output
//! (`add_output_alias`) reaches its input's buffer.
//!
//! The fusion's kernels compute an in-place output into a fresh buffer like any other
//! output; once they are queued, the value is copied into the input's view by one small
//! hand-written kernel (`nvf_store_<bytes>`), queued after them on the same stream. So
//! the input is only written after every kernel of the call has read it, whatever the
//! schedule (threads reading other threads' elements, several segments), and any view
//! of the input can be updated: permuted, sliced, with gaps. A view that addresses one
//! element twice is refused ([`Layout::overlapping_dim`](crate::tensor)), as on the CPU
//! device.
//!
//! The copy kernel walks the elements in row-major order of the shape with a
//! grid-stride loop and 64-bit index math; dims that are dense in both views are merged
//! first (a contiguous update is one flat loop without divisions). It is compiled once
//! per process through the [`KernelCache`] (and its disk cache) and loaded once per
//! device.

use std::ffi::c_void;

use cudarc::driver::CudaFunction;

use crate::args::Arg;
use crate::{Device, Error, KernelCache, KernelRequest, NvrtcOptions, Tensor};

/// Most dims the copy kernel indexes (after merging dense dims); a view of more is
/// refused with a typed error.
pub(crate) const MAX_STORE_DIMS: usize = 8;

/// The copy kernels' source: one entry point per element width, moving raw bits.
pub const STORE_SOURCE: &str = r#"
struct nvf_store_dims {
  long long rank;
  long long numel;
  long long size[8];
  long long src[8];
  long long dst[8];
};

template <typename W>
__device__ __forceinline__ void nvf_store(const W* src, W* dst, const nvf_store_dims& d) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += step) {
    long long rest = i, s = 0, t = 0;
    for (int k = (int)d.rank - 1; k >= 0; --k) {
      const long long c = k == 0 ? rest : rest % d.size[k];
      rest = k == 0 ? 0 : rest / d.size[k];
      s += c * d.src[k];
      t += c * d.dst[k];
    }
    dst[t] = src[s];
  }
}

extern "C" __global__ void nvf_store_1(const unsigned char* s, unsigned char* t, const nvf_store_dims d) { nvf_store(s, t, d); }
extern "C" __global__ void nvf_store_2(const unsigned short* s, unsigned short* t, const nvf_store_dims d) { nvf_store(s, t, d); }
extern "C" __global__ void nvf_store_4(const unsigned int* s, unsigned int* t, const nvf_store_dims d) { nvf_store(s, t, d); }
extern "C" __global__ void nvf_store_8(const unsigned long long* s, unsigned long long* t, const nvf_store_dims d) { nvf_store(s, t, d); }
"#;

/// The element widths with an entry point, in the order of [`StoreKernels`].
const WIDTHS: [usize; 4] = [1, 2, 4, 8];

/// The copy kernel's entry point for elements of `width` bytes.
pub(crate) fn entry_point(width: usize) -> Option<&'static str> {
    Some(match width {
        1 => "nvf_store_1",
        2 => "nvf_store_2",
        4 => "nvf_store_4",
        8 => "nvf_store_8",
        _ => return None,
    })
}

/// The loaded copy kernels of one device, one per width of [`WIDTHS`].
pub(crate) type StoreKernels = [CudaFunction; 4];

/// The kernel parameter `nvf_store_dims` (same layout as the CUDA struct: 8-byte fields
/// only, no padding).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoreDims {
    pub(crate) rank: i64,
    pub(crate) numel: i64,
    pub(crate) size: [i64; MAX_STORE_DIMS],
    pub(crate) src: [i64; MAX_STORE_DIMS],
    pub(crate) dst: [i64; MAX_STORE_DIMS],
}

/// The copy's dims: size-1 dims dropped, and each dim merged into the next outer one
/// where both views are dense across the pair. `None` when more than
/// [`MAX_STORE_DIMS`] dims are left.
pub(crate) fn store_dims(sizes: &[usize], src: &[usize], dst: &[usize]) -> Option<StoreDims> {
    // (size, src stride, dst stride), innermost last.
    let mut dims: Vec<(i64, i64, i64)> = Vec::with_capacity(sizes.len());
    for d in 0..sizes.len() {
        if sizes[d] == 1 {
            continue;
        }
        let next = (sizes[d] as i64, src[d] as i64, dst[d] as i64);
        match dims.last_mut() {
            // The outer dim `last` steps exactly over `next` in both views.
            Some(last) if last.1 == next.0 * next.1 && last.2 == next.0 * next.2 => {
                *last = (last.0 * next.0, next.1, next.2);
            }
            _ => dims.push(next),
        }
    }
    if dims.len() > MAX_STORE_DIMS {
        return None;
    }
    let numel = sizes.iter().map(|&s| s as i64).product();
    let mut out = StoreDims {
        rank: dims.len() as i64,
        numel,
        size: [1; MAX_STORE_DIMS],
        src: [0; MAX_STORE_DIMS],
        dst: [0; MAX_STORE_DIMS],
    };
    for (k, (n, s, t)) in dims.into_iter().enumerate() {
        (out.size[k], out.src[k], out.dst[k]) = (n, s, t);
    }
    Some(out)
}

/// The device's copy kernels, compiled and loaded on first use.
fn kernels(device: &Device) -> Result<StoreKernels, Error> {
    let gpu = device.require_gpu("in-place output")?;
    if let Some(k) = gpu.store_kernels.get() {
        return Ok(k.clone());
    }
    let options = NvrtcOptions::new(gpu.properties.arch());
    let compiled =
        KernelCache::global().compile(KernelRequest::new(STORE_SOURCE, "nvf_store", &options))?;
    let mut loaded = Vec::with_capacity(WIDTHS.len());
    for w in WIDTHS {
        let name = entry_point(w).expect("every width has an entry point");
        loaded.push(device.load_function(&compiled.kernel, name)?);
    }
    let loaded: StoreKernels = loaded.try_into().expect("one function per width");
    // A racing first use loads its own copy; either is fine.
    Ok(gpu.store_kernels.get_or_init(|| loaded).clone())
}

/// Copies `value`'s elements into the GPU view `target` (same dtype and sizes, checked
/// by the caller, as is that `target` addresses each element once), queued on the
/// device's stream after everything queued before, and ordered with foreign streams of
/// either buffer.
pub(crate) fn store_on_gpu(target: &Tensor, value: &Tensor) -> Result<(), Error> {
    const OP: &str = "in-place output";
    let device = target.device();
    if target.numel() == 0 {
        return Ok(());
    }
    let gpu = device.require_gpu(OP)?;
    let width = target.dtype().size_bytes();
    let Some(index) = WIDTHS.iter().position(|&w| w == width) else {
        return Err(Error::tensor(
            OP,
            "elements of 1, 2, 4 or 8 bytes",
            format!("{} ({width} bytes)", target.dtype()),
        ));
    };
    let Some(mut dims) = store_dims(value.sizes(), value.strides(), target.strides()) else {
        return Err(Error::tensor(
            OP,
            format!("a view of at most {MAX_STORE_DIMS} dims after merging dense ones"),
            format!(
                "sizes {:?} and strides {:?}",
                target.sizes(),
                target.strides()
            ),
        ));
    };
    let function = kernels(device)?[index].clone();
    let (mut src, mut dst) = (
        value.cuda_address().ok_or(Error::NotAGpu { op: OP })?,
        target.cuda_address().ok_or(Error::NotAGpu { op: OP })?,
    );
    const BLOCK: u32 = 256;
    let blocks = (dims.numel as u64).div_ceil(BLOCK as u64);
    let grid = blocks.min(gpu.properties.sm_count as u64 * 16).max(1) as u32;
    let mut params: [*mut c_void; 3] = [
        (&mut src as *mut u64).cast(),
        (&mut dst as *mut u64).cast(),
        (&mut dims as *mut StoreDims).cast(),
    ];
    let args = [Arg::Tensor(target), Arg::Tensor(value)];
    // SAFETY: the parameters are the kernel's three (two device pointers and the dims
    // struct of the same layout), kept alive by this frame until the launch returns.
    // Every address the kernel writes is `dst + Σ c_k · dst_k` for an index inside
    // `target`'s sizes, inside its buffer (the layout was checked when the view was
    // made), and likewise every read inside `value`'s; both buffers are owned by
    // tensors the caller keeps alive, freed in stream order after this launch.
    unsafe {
        super::launch_ordered(
            device,
            gpu,
            &function,
            ([grid, 1, 1], [BLOCK, 1, 1], false, 0),
            &mut params,
            &args,
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_dims_merge_and_size_one_dims_drop() {
        let d = store_dims(&[4, 1, 3, 5], &[15, 15, 5, 1], &[15, 99, 5, 1]).unwrap();
        assert_eq!((d.rank, d.numel), (1, 60));
        assert_eq!((d.size[0], d.src[0], d.dst[0]), (60, 1, 1));
        // A transposed target keeps both dims.
        let d = store_dims(&[3, 5], &[5, 1], &[1, 3]).unwrap();
        assert_eq!(d.rank, 2);
        assert_eq!(
            (&d.size[..2], &d.src[..2], &d.dst[..2]),
            (&[3, 5][..], &[5, 1][..], &[1, 3][..])
        );
        // A row slice of a wider buffer: rows stay apart in the target.
        let d = store_dims(&[2, 3, 4], &[12, 4, 1], &[40, 4, 1]).unwrap();
        assert_eq!(d.rank, 2);
        assert_eq!((d.size[0], d.size[1], d.dst[0], d.dst[1]), (2, 12, 40, 1));
        // Rank 0, and a view that never merges beyond the limit.
        let d = store_dims(&[], &[], &[]).unwrap();
        assert_eq!((d.rank, d.numel), (0, 1));
        let sizes = [2usize; 9];
        let src: Vec<usize> = (0..9).rev().map(|k| 1usize << k).collect();
        let dst: Vec<usize> = (0..9).rev().map(|k| 3usize << (2 * k)).collect();
        assert!(store_dims(&sizes, &src, &dst).is_none());
    }

    /// The copy kernel's index walk, run on the host: every element of the source in
    /// row-major order lands where the target view addresses it.
    #[test]
    fn the_index_walk_matches_row_major_order() {
        let (sizes, src, dst) = ([3usize, 1, 4, 2], [8usize, 8, 2, 1], [1usize, 50, 6, 3]);
        let d = store_dims(&sizes, &src, &dst).unwrap();
        for i in 0..d.numel {
            let (mut rest, mut s, mut t) = (i, 0, 0);
            for k in (0..d.rank as usize).rev() {
                let c = if k == 0 { rest } else { rest % d.size[k] };
                rest = if k == 0 { 0 } else { rest / d.size[k] };
                s += c * d.src[k];
                t += c * d.dst[k];
            }
            // The row-major index of element i, and its offsets in the unmerged views.
            let (mut rest, mut s0, mut t0) = (i as usize, 0, 0);
            for k in (0..sizes.len()).rev() {
                let c = rest % sizes[k];
                rest /= sizes[k];
                s0 += c * src[k];
                t0 += c * dst[k];
            }
            assert_eq!((s as usize, t as usize), (s0, t0), "element {i}");
        }
    }

    #[test]
    fn every_supported_width_has_an_entry_point_in_the_source() {
        for w in WIDTHS {
            let name = entry_point(w).unwrap();
            assert!(STORE_SOURCE.contains(&format!("void {name}(")), "{name}");
        }
        assert!(entry_point(16).is_none());
    }
}
