//! Where the host time of a cached call goes: an opt-in, per-thread split of
//! [`crate::FusionExecutorCache::run`] into phases ([`HostPhase`]).
//!
//! Off by default; then each phase boundary costs one relaxed atomic load. Turned on
//! ([`enable`]), each boundary reads the clock and adds the time since the previous one
//! to that phase's total on this thread; [`take`] returns the totals and clears them.
//! `examples/host_overhead` prints the split next to the end-to-end figures.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static ON: AtomicBool = AtomicBool::new(false);

/// A phase of a cached call, in the order the call runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPhase {
    /// Argument checks against the fusion's declarations (count, device, dtype,
    /// layout, sizes the fusion equates).
    ArgChecks,
    /// The host scalar program, data-dependent read checks and the no-op test.
    HostScalars,
    /// The runtime cache lookup: input signature, call sizes, the LRU.
    Lookup,
    /// Output allocation (from the caching pool) and the launch recipe.
    Outputs,
    /// Work buffers of grid reductions and the device error buffer.
    WorkBuffers,
    /// Packing the kernel parameters.
    Pack,
    /// Stream ordering with foreign streams and `cuLaunchKernel`.
    Launch,
    /// Outputs forwarded from inputs, and returning.
    Finish,
}

impl HostPhase {
    /// Every phase, in order.
    pub const ALL: [HostPhase; 8] = [
        HostPhase::ArgChecks,
        HostPhase::HostScalars,
        HostPhase::Lookup,
        HostPhase::Outputs,
        HostPhase::WorkBuffers,
        HostPhase::Pack,
        HostPhase::Launch,
        HostPhase::Finish,
    ];

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            HostPhase::ArgChecks => "argument checks",
            HostPhase::HostScalars => "host scalars, reads",
            HostPhase::Lookup => "runtime lookup",
            HostPhase::Outputs => "outputs",
            HostPhase::WorkBuffers => "work buffers",
            HostPhase::Pack => "parameter packing",
            HostPhase::Launch => "launch",
            HostPhase::Finish => "finish",
        }
    }
}

#[derive(Default)]
struct Log {
    last: Option<Instant>,
    nanos: [u64; 8],
    calls: u64,
}

thread_local! {
    static LOG: RefCell<Log> = RefCell::new(Log::default());
}

/// Turns the split on or off (for every thread).
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// The start of a call.
#[inline]
pub(crate) fn begin() {
    if ON.load(Ordering::Relaxed) {
        LOG.with(|l| {
            let mut l = l.borrow_mut();
            l.last = Some(Instant::now());
            l.calls += 1;
        });
    }
}

/// The end of `phase` (the time since the previous boundary is its own). GPU calls only:
/// a call on the CPU device is counted, not split.
#[cfg(feature = "cuda")]
#[inline]
pub(crate) fn end(phase: HostPhase) {
    if ON.load(Ordering::Relaxed) {
        LOG.with(|l| {
            let mut l = l.borrow_mut();
            let now = Instant::now();
            if let Some(last) = l.last {
                l.nanos[phase as usize] += now.duration_since(last).as_nanos() as u64;
            }
            l.last = Some(now);
        });
    }
}

/// The calls recorded on this thread since the last `take` and the mean nanoseconds
/// per call of each phase; clears them.
pub fn take() -> (u64, Vec<(HostPhase, f64)>) {
    LOG.with(|l| {
        let mut l = l.borrow_mut();
        let calls = l.calls;
        let per = |n: u64| {
            if calls == 0 {
                0.0
            } else {
                n as f64 / calls as f64
            }
        };
        let out = HostPhase::ALL
            .iter()
            .map(|&p| (p, per(l.nanos[p as usize])))
            .collect();
        *l = Log::default();
        (calls, out)
    })
}

/// The split (`cuda`: only GPU calls are split).
#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_only_while_enabled() {
        enable(false);
        begin();
        end(HostPhase::ArgChecks);
        assert_eq!(take().0, 0);
        enable(true);
        begin();
        std::thread::sleep(std::time::Duration::from_millis(2));
        end(HostPhase::Lookup);
        end(HostPhase::Launch);
        enable(false);
        let (calls, phases) = take();
        assert_eq!(calls, 1);
        let lookup = phases.iter().find(|p| p.0 == HostPhase::Lookup).unwrap().1;
        assert!(lookup >= 2e6, "{lookup}");
        let args = phases
            .iter()
            .find(|p| p.0 == HostPhase::ArgChecks)
            .unwrap()
            .1;
        assert_eq!(args, 0.0);
        assert_eq!(take().0, 0, "take clears");
    }
}
