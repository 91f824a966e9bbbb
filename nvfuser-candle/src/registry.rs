//! The process-wide cache of the fused ops' fusions: one [`CandleFusion`] (and so one
//! executor cache) per op, dtype and shape key, built on first use.
//!
//! The key holds what the fusion's definition depends on: the op, the input dtype, and
//! for the ops whose slices need a constant (rotary embedding's half, the packed
//! SiLU-mul's half) that size. Everything else (rows, hidden sizes, eps) is a run-time
//! value, so new shapes reuse the same fusion.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use nvfuser::{DataType, Fusion};

use crate::error::{Error, Result};
use crate::fusion::CandleFusion;

/// What a cached fusion is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The fusion's name (the op, and `_bwd...` for its backward variants).
    pub name: &'static str,
    /// The dtype of the op's main input.
    pub dtype: DataType,
    /// A size the definition depends on, or 0.
    pub size: usize,
}

type Cache = Mutex<HashMap<Key, Arc<CandleFusion>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cached fusion for `key`, or the one `build` defines (with its input names), kept
/// for later calls.
pub(crate) fn fusion(
    key: Key,
    names: &[&str],
    build: impl FnOnce() -> Result<Fusion, nvfuser::Error>,
) -> Result<Arc<CandleFusion>> {
    let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = map.get(&key) {
        return Ok(Arc::clone(f));
    }
    let fusion = build().map_err(|e| Error::fusion(key.name, e))?;
    let f = Arc::new(CandleFusion::new(key.name, fusion)?.with_input_names(names)?);
    map.insert(key, Arc::clone(&f));
    Ok(f)
}

/// How many fusions the cache holds (tests check that repeated calls add none).
pub fn cached_fusions() -> usize {
    cache().lock().unwrap_or_else(|p| p.into_inner()).len()
}
