//! The random generators of the stateful random ops (`rand_uniform`, `rand_normal`).
//!
//! Each device has one generator, as PyTorch has one default generator per device: the
//! CPU reference device one, and each GPU (by ordinal) one, shared by every
//! [`Device`] handle of it and every fusion run on it. Its state is a seed and a Philox
//! offset. A call of a fusion with stateful random ops ([`Fusion::generator_inputs`])
//! that leaves out the seed and offset takes the current state, and advances the offset
//! by the fusion's `draws` (one per stateful op: op `k` reads `offset + k`), so no two
//! calls, and no two ops of one call, read the same Philox stream.
//!
//! The first seed is PyTorch's default (67280421310721): a process that never seeds
//! draws the same numbers every run. [`Device::manual_seed`] sets a seed and rewinds the
//! offset; [`Device::rng_state`] and [`Device::set_rng_state`] save and restore a state,
//! so a sequence of calls can be replayed. A call may also pass the seed and offset
//! itself, as its last two arguments: that call leaves the generator alone.
//!
//! The values a stream yields depend only on (seed, offset, element): the GPU and the
//! CPU reference draw the same numbers for the same state (`nvfuser_core::philox`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use nvfuser_core::{Fusion, ScalarValue};

use crate::{Arg, Device, Error};

/// PyTorch's default seed of its generators (`default_rng_seed_val`).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

/// A generator's state: the seed, and the offset the next call starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RngState {
    /// The Philox key.
    pub seed: u64,
    /// The Philox offset of the next stateful random op.
    pub offset: u64,
}

impl Default for RngState {
    fn default() -> Self {
        RngState {
            seed: DEFAULT_SEED,
            offset: 0,
        }
    }
}

/// The generators of the process, by device: `None` is the CPU reference device,
/// `Some(i)` GPU `i`.
fn generators() -> MutexGuard<'static, HashMap<Option<usize>, RngState>> {
    static GENERATORS: OnceLock<Mutex<HashMap<Option<usize>, RngState>>> = OnceLock::new();
    GENERATORS
        .get_or_init(Default::default)
        .lock()
        // The map holds plain numbers: a panic elsewhere cannot leave it half-written.
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Device {
    /// Seeds this device's random generator and rewinds its offset to 0, as
    /// `torch.manual_seed` does for one device: the stateful random ops
    /// (`rand_uniform`, `rand_normal`) of the calls that follow draw the same numbers
    /// after the same seed.
    pub fn manual_seed(&self, seed: u64) {
        generators().insert(self.ordinal(), RngState { seed, offset: 0 });
    }

    /// The state of this device's random generator.
    pub fn rng_state(&self) -> RngState {
        generators()
            .get(&self.ordinal())
            .copied()
            .unwrap_or_default()
    }

    /// Restores a state of this device's random generator (from [`Device::rng_state`]).
    pub fn set_rng_state(&self, state: RngState) {
        generators().insert(self.ordinal(), state);
    }

    /// The current state, and the offset advanced by `draws`.
    fn draw_rng(&self, draws: u64) -> RngState {
        let mut g = generators();
        let state = g.entry(self.ordinal()).or_default();
        let now = *state;
        state.offset = state.offset.wrapping_add(draws);
        now
    }
}

/// `args` with the generator's seed and offset appended when the fusion has stateful
/// random ops and the caller left them out (one argument per user input); otherwise
/// `None`, and `args` go on as they are (the argument checks judge them). `advance`
/// moves the generator on (a run); an inspection (a plan, the CUDA source) only reads it.
///
/// # Errors
///
/// A run that would take them while the device records a CUDA graph: every replay of
/// the graph would repeat the recorded seed and offset, so the numbers would not be new
/// per call as the op promises ([`Error::Capture`]; pass the seed and offset to record
/// fixed ones).
pub(crate) fn complete_args<'a>(
    fusion: &Fusion,
    device: &Device,
    args: &[Arg<'a>],
    advance: bool,
) -> Result<Option<Vec<Arg<'a>>>, Error> {
    let Some(g) = fusion.generator_inputs() else {
        return Ok(None);
    };
    if args.len() != fusion.user_inputs().len() {
        return Ok(None);
    }
    if advance && device.is_capturing() {
        return Err(Error::Capture {
            reason: "a fusion with stateful random ops (rand_uniform, rand_normal) was called \
                     without its seed and offset while a CUDA graph is recorded: every replay \
                     would draw the recorded numbers again; pass the seed and offset (its last \
                     two arguments) to record fixed ones"
                .into(),
        });
    }
    let state = if advance {
        device.draw_rng(g.draws)
    } else {
        device.rng_state()
    };
    let mut all = args.to_vec();
    // The inputs are i64: the seed's and offset's bits, as Philox reads them.
    all.push(Arg::Scalar(ScalarValue::Int(state.seed as i64)));
    all.push(Arg::Scalar(ScalarValue::Int(state.offset as i64)));
    Ok(Some(all))
}
