//! Capturing fusion calls into a CUDA graph, and replaying them.
//!
//! A graph replays a fixed sequence of launches with one driver call, so a chain of
//! small fusions costs one launch of host time instead of one per kernel. The calls
//! inside [`Device::capture`] run as usual (argument checks, plan lookup, output
//! allocation) but their launches are recorded, not run; [`CudaGraphRun::replay`] then
//! runs them all again, on the same buffers.
//!
//! What a capture needs, and how this crate meets it:
//! - a stream that can be captured: [`Device::cuda_with_own_stream`] (the legacy default
//!   stream cannot be);
//! - no synchronization and no driver allocation in the captured calls: a cached call
//!   never synchronizes, and buffers come from the capture's pool
//!   ([`super::pool`]), whose blocks stay reserved for the graph while it lives;
//! - compiled kernels: call each fusion once before capturing it (a first call compiles
//!   and loads its kernels, which a capture should not record).
//!
//! Every tensor a graph reads or writes (the inputs given to the captured calls and the
//! outputs they returned) must outlive the graph: a replay reads and writes those
//! addresses. Inputs keep their addresses, so new input values are written into them
//! (for example with a fusion call captured in the same graph, or a copy), and the
//! outputs hold the new results after each replay.

#[cfg(feature = "cuda")]
use std::sync::{atomic::Ordering, Arc};

#[cfg(feature = "cuda")]
use cudarc::driver::{sys, CudaGraph};

#[cfg(feature = "cuda")]
use super::{pool::Pool, Device};
#[cfg(feature = "cuda")]
use crate::Error;

/// A captured sequence of launches, replayable on its device's stream (see the module
/// documentation).
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub struct CudaGraphRun {
    graph: CudaGraph,
    pool: Arc<Pool>,
    device: Device,
    launches: usize,
}

#[cfg(feature = "cuda")]
impl std::fmt::Debug for CudaGraphRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaGraphRun")
            .field("device", &self.device.to_string())
            .field("nodes", &self.launches)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "cuda")]
impl CudaGraphRun {
    /// Queues one replay of the captured work on the device's stream and returns; read
    /// the outputs (downloads wait for it) or [`Device::synchronize`] to wait.
    pub fn replay(&self) -> Result<(), Error> {
        self.graph
            .launch()
            .map_err(|e| Error::driver("cuGraphLaunch", e))?;
        if let Some(gpu) = self.device.gpu() {
            gpu.errors.mark_pending();
        }
        Ok(())
    }

    /// How many nodes (kernel launches, memsets, copies) the graph holds.
    pub fn nodes(&self) -> usize {
        self.launches
    }
}

#[cfg(feature = "cuda")]
impl Drop for CudaGraphRun {
    fn drop(&mut self) {
        // The blocks the graph used go back to the device's pool, for work queued after
        // the replays already queued.
        self.pool.retire();
    }
}

#[cfg(feature = "cuda")]
impl Device {
    /// Runs `calls` with this device's stream in capture mode and returns the captured
    /// graph with what `calls` returned (see [`CudaGraphRun`]). Nothing runs during the
    /// capture: outputs returned by the captured calls hold their values after the
    /// first [`CudaGraphRun::replay`].
    ///
    /// Errors: [`Error::NotAGpu`] on the CPU device; [`Error::Capture`] on a
    /// device without its own stream ([`Device::cuda_with_own_stream`]), when a capture
    /// is already in progress on it, or when nothing was captured; the error of `calls`,
    /// or the driver's when a captured call did something a capture cannot hold (a
    /// download, a synchronize, a first call that compiles).
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn capture<T>(
        &self,
        calls: impl FnOnce() -> Result<T, Error>,
    ) -> Result<(CudaGraphRun, T), Error> {
        let gpu = self.require_gpu("Device::capture")?;
        if !gpu.own_stream {
            return Err(Error::Capture {
                reason: "the legacy default stream cannot be captured; open the device with Device::cuda_with_own_stream".into(),
            });
        }
        gpu.errors.ensure(&gpu.alloc_stream)?;
        let pool = gpu.pool.capture_child();
        {
            let mut capture = gpu.capture.lock().unwrap_or_else(|p| p.into_inner());
            if capture.is_some() {
                return Err(Error::Capture {
                    reason: "a capture is already in progress on this device".into(),
                });
            }
            *capture = Some(pool.clone());
            gpu.capturing.store(true, Ordering::Release);
        }
        let stream = &gpu.stream;
        let result = stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(|e| Error::driver("cuStreamBeginCapture", e))
            .and_then(|()| {
                let out = calls();
                // The capture ends whatever the calls did.
                let graph = stream
                    .end_capture(sys::CUgraphInstantiate_flags(0))
                    .map_err(|e| Error::driver("cuStreamEndCapture", e));
                let out = out?;
                let graph = graph?.ok_or_else(|| Error::Capture {
                    reason: "nothing was captured".into(),
                })?;
                Ok((graph, out))
            });
        {
            let mut capture = gpu.capture.lock().unwrap_or_else(|p| p.into_inner());
            *capture = None;
            gpu.capturing.store(false, Ordering::Release);
        }
        match result {
            Ok((graph, _)) if graph_nodes(&graph) == 0 => {
                drop(graph);
                pool.retire();
                Err(Error::Capture {
                    reason:
                        "nothing was captured (the calls queued no work on the device's stream)"
                            .into(),
                })
            }
            Ok((graph, out)) => {
                let launches = graph_nodes(&graph);
                Ok((
                    CudaGraphRun {
                        graph,
                        pool,
                        device: self.clone(),
                        launches,
                    },
                    out,
                ))
            }
            Err(e) => {
                pool.retire();
                Err(e)
            }
        }
    }
}

/// The number of nodes of a graph (0 when the driver cannot say).
#[cfg(feature = "cuda")]
fn graph_nodes(graph: &CudaGraph) -> usize {
    let mut n: usize = 0;
    // SAFETY: a query of the graph's node count (null node array) on a live graph.
    let r = unsafe { sys::cuGraphGetNodes(graph.cu_graph(), std::ptr::null_mut(), &mut n) };
    if r == sys::CUresult::CUDA_SUCCESS {
        n
    } else {
        0
    }
}
