//! A caching allocator for the device buffers this crate allocates.
//!
//! Every tensor this crate allocates on a GPU (outputs, uploads, zeros, intermediates of
//! segmented fusions, grid-reduction work buffers) comes from a [`Pool`] that keeps the
//! blocks of dropped tensors, by size class, and hands them out again. A cached call
//! then allocates its outputs without a driver call, which is most of what a cached
//! call costs beyond the launch itself (PyTorch's caching allocator does the same).
//!
//! Reuse is safe by stream order: a pool belongs to one stream, every use of a block by
//! this crate is queued on that stream, and a dropped block is only handed out again for
//! work queued later on the same stream. (Buffers used by another library on its own
//! stream are joined to ours at launch, as before.) A block returned while the pool holds
//! more than its limit of cached bytes is freed in stream order (`cuMemFreeAsync`); when
//! an allocation fails for lack of memory, the cached blocks are freed and it is tried
//! once more.
//!
//! **CUDA graphs.** While a stream is being captured ([`crate::Device::capture`]), a
//! child pool serves the allocations: blocks come from the child's own free list, then
//! from the parent's (whose earlier uses are all ordered before the capture), then from
//! `cuMemAlloc`, which capture permits in relaxed mode, so no allocation becomes a graph
//! node. Every block the capture touched stays owned by the child pool, and so by the
//! graph, until the graph is dropped: the graph's kernels keep writing to those
//! addresses on each replay, so they must not be handed to other tensors meanwhile. The
//! child returns its blocks to the parent when the graph is dropped.

use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaStream, DriverError};
use rustc_hash::FxHashMap;

use crate::tensor::storage::CudaBuffer;
use crate::Error;

/// One device allocation.
#[derive(Debug)]
struct Block {
    ptr: sys::CUdeviceptr,
    /// Its size class (bytes).
    size: usize,
    /// Allocated with `cuMemAlloc` (during a capture) rather than `cuMemAllocAsync`.
    sync: bool,
}

#[derive(Debug, Default)]
struct State {
    free: FxHashMap<usize, Vec<Block>>,
    cached: usize,
    /// A capture pool whose graph is gone: blocks go back to the parent.
    retired: bool,
}

/// A caching allocator on one stream (see the module documentation).
#[derive(Debug)]
pub(crate) struct Pool {
    stream: Arc<CudaStream>,
    state: Mutex<State>,
    /// Bytes of free blocks kept at most.
    limit: usize,
    /// The device's pool, for a capture's pool.
    parent: Option<Arc<Pool>>,
}

/// The size class of an allocation of `bytes`: a multiple of 512 bytes, and above
/// 1 MiB a multiple of an eighth of the next power of two (at most 12.5% unused).
fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    let granule = if bytes <= 1 << 20 {
        512
    } else {
        // A request past 2^63 bytes fails in the driver whatever its class.
        bytes
            .checked_next_power_of_two()
            .map_or(512, |p| (p / 8).max(512))
    };
    bytes.div_ceil(granule).saturating_mul(granule)
}

impl Pool {
    /// A pool on `stream` keeping up to `limit` bytes of free blocks.
    pub(crate) fn new(stream: Arc<CudaStream>, limit: usize) -> Arc<Pool> {
        Arc::new(Pool {
            stream,
            state: Mutex::new(State::default()),
            limit,
            parent: None,
        })
    }

    /// The pool of a capture on the same stream (see the module documentation).
    pub(crate) fn capture_child(self: &Arc<Self>) -> Arc<Pool> {
        Arc::new(Pool {
            stream: self.stream.clone(),
            state: Mutex::new(State::default()),
            limit: usize::MAX,
            parent: Some(self.clone()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, size: usize) -> Option<Block> {
        let mut state = self.lock();
        let block = state.free.get_mut(&size)?.pop()?;
        state.cached -= block.size;
        Some(block)
    }

    /// A buffer of `bytes` (at least one) with arbitrary contents.
    pub(crate) fn alloc(self: &Arc<Self>, bytes: usize) -> Result<PooledBuffer, DriverError> {
        let size = size_class(bytes);
        let cached = self
            .take(size)
            .or_else(|| self.parent.as_ref().and_then(|p| p.take(size)));
        let block = match cached {
            Some(b) => b,
            None => match self.fresh(size) {
                Ok(b) => b,
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                    self.release_cached();
                    if let Some(p) = &self.parent {
                        p.release_cached();
                    }
                    self.fresh(size)?
                }
                Err(e) => return Err(e),
            },
        };
        Ok(PooledBuffer {
            block: Some(block),
            bytes: bytes.max(1),
            pool: self.clone(),
        })
    }

    /// A new block from the driver: stream-ordered, or plain `cuMemAlloc` in a capture.
    fn fresh(&self, size: usize) -> Result<Block, DriverError> {
        self.stream.context().bind_to_thread()?;
        let capture = self.parent.is_some();
        // SAFETY: plain driver allocations with the stream's context current; the block
        // is freed once, by `free` below, after its last use is queued.
        let ptr = unsafe {
            if capture || !self.stream.context().has_async_alloc() {
                result::malloc_sync(size)?
            } else {
                result::malloc_async(self.stream.cu_stream(), size)?
            }
        };
        Ok(Block {
            ptr,
            size,
            sync: capture || !self.stream.context().has_async_alloc(),
        })
    }

    /// Frees `block`: in stream order, after the work queued before; a `cuMemAlloc`
    /// block with `cuMemFree`, which waits for the device.
    fn free(&self, block: Block) {
        let ctx = self.stream.context();
        if ctx.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: the block came from this pool's driver allocation and is freed once;
        // every use of it is queued on this stream before this point.
        let r = unsafe {
            if block.sync {
                result::free_sync(block.ptr)
            } else {
                result::free_async(block.ptr, self.stream.cu_stream())
            }
        };
        ctx.record_err(r);
    }

    /// Takes back a block of a dropped buffer.
    fn give_back(&self, block: Block) {
        let mut state = self.lock();
        if state.retired {
            drop(state);
            match &self.parent {
                Some(p) => p.give_back(block),
                None => self.free(block),
            }
            return;
        }
        if state.cached.saturating_add(block.size) > self.limit {
            drop(state);
            self.free(block);
            return;
        }
        state.cached += block.size;
        state.free.entry(block.size).or_default().push(block);
    }

    /// Frees every cached block; returns how many bytes they held.
    pub(crate) fn release_cached(&self) -> usize {
        let blocks: Vec<Block> = {
            let mut state = self.lock();
            state.cached = 0;
            state.free.drain().flat_map(|(_, v)| v).collect()
        };
        let bytes = blocks.iter().map(|b| b.size).sum();
        for b in blocks {
            self.free(b);
        }
        bytes
    }

    /// Bytes of free blocks held now.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.lock().cached
    }

    /// Ends a capture pool's ownership (its graph is gone): its free blocks, and every
    /// block returned later, go to the parent.
    pub(crate) fn retire(&self) {
        let blocks: Vec<Block> = {
            let mut state = self.lock();
            state.retired = true;
            state.cached = 0;
            state.free.drain().flat_map(|(_, v)| v).collect()
        };
        for b in blocks {
            match &self.parent {
                Some(p) => p.give_back(b),
                None => self.free(b),
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let blocks: Vec<Block> = {
            let mut state = self.lock();
            state.free.drain().flat_map(|(_, v)| v).collect()
        };
        for b in blocks {
            self.free(b);
        }
    }
}

/// A buffer from a [`Pool`]; dropping it returns the block to the pool.
#[derive(Debug)]
pub(crate) struct PooledBuffer {
    block: Option<Block>,
    /// The bytes asked for (the block may be larger).
    bytes: usize,
    pool: Arc<Pool>,
}

impl PooledBuffer {
    fn ptr(&self) -> sys::CUdeviceptr {
        self.block.as_ref().map_or(0, |b| b.ptr)
    }

    /// Sets every byte to zero, in stream order.
    pub(crate) fn zero(&self) -> Result<(), DriverError> {
        self.pool.stream.context().bind_to_thread()?;
        // SAFETY: the range is inside the block, which lives until this buffer drops
        // (and is reused only for work queued after).
        unsafe { result::memset_d8_async(self.ptr(), 0, self.bytes, self.pool.stream.cu_stream()) }
    }

    /// Copies `data` (at most `bytes` long) to the start of the buffer, in stream order.
    pub(crate) fn upload(&self, data: &[u8]) -> Result<(), DriverError> {
        debug_assert!(data.len() <= self.bytes);
        self.pool.stream.context().bind_to_thread()?;
        // SAFETY: `data.len()` bytes fit in the block; a copy from pageable host memory
        // has read `data` when the call returns.
        unsafe { result::memcpy_htod_async(self.ptr(), data, self.pool.stream.cu_stream()) }
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.pool.give_back(b);
        }
    }
}

impl CudaBuffer for PooledBuffer {
    fn num_bytes(&self) -> usize {
        self.bytes
    }

    fn address(&self) -> u64 {
        self.ptr()
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.pool.stream
    }

    fn download(&self, start: usize, out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() {
            return Ok(());
        }
        if start.checked_add(out.len()).is_none_or(|e| e > self.bytes) {
            return Err(Error::tensor(
                "download",
                format!("a byte range inside the {}-byte buffer", self.bytes),
                format!("{start}..{}", start.saturating_add(out.len())),
            ));
        }
        let stream = &self.pool.stream;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        // SAFETY: the range was checked against the buffer above; the copy is ordered
        // after the work that wrote it, and waited for before `out` is used.
        unsafe { result::memcpy_dtoh_async(out, self.ptr() + start as u64, stream.cu_stream()) }
            .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
        stream
            .synchronize()
            .map_err(|e| Error::driver("cuStreamSynchronize", e))
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_round_up_by_at_most_an_eighth_above_a_mebibyte() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(1 << 20), 1 << 20);
        let big = (1 << 20) + 1;
        assert_eq!(size_class(big), (1 << 20) + (1 << 18));
        assert_eq!(size_class(usize::MAX), usize::MAX);
        for n in [3 << 20, 100 << 20, (1 << 30) + 7] {
            let c = size_class(n);
            assert!(c >= n && (c - n) * 8 <= n.next_power_of_two(), "{n} -> {c}");
        }
    }
}
