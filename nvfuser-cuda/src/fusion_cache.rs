//! The definition level of the cache: structurally equal fusions share one executor.
//!
//! Frameworks that build graphs at run time define the same fusion again and again (one
//! per training step, one per layer). [`FusionCache::get_or_insert`] maps each definition
//! to a shared [`FusionExecutorCache`] by structural hash and structural equality, so the
//! compiled runtimes behind it are found again instead of being rebuilt. The cache is
//! bounded: when full it evicts the least recently used definition (its runtimes, modules
//! and buffers are freed when the last user drops its `Arc`); it never fails for being
//! full.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use nvfuser_core::Fusion;

use crate::FusionExecutorCache;

/// Default number of definitions kept by [`FusionCache::global`].
pub const DEFAULT_FUSION_CAPACITY: usize = 128;

/// Counters of a [`FusionCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FusionCacheStats {
    /// Definitions found.
    pub hits: u64,
    /// Definitions added.
    pub misses: u64,
    /// Definitions evicted to make room.
    pub evictions: u64,
    /// Definitions held now.
    pub entries: usize,
}

struct Entry {
    hash: u64,
    executor: Arc<FusionExecutorCache>,
    last_use: u64,
}

/// A bounded map from fusion definitions to their executors.
pub struct FusionCache {
    capacity: usize,
    entries: Mutex<(Vec<Entry>, u64)>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl FusionCache {
    /// A cache holding at most `capacity` definitions (at least one).
    pub fn new(capacity: usize) -> Self {
        FusionCache {
            capacity: capacity.max(1),
            entries: Mutex::new((Vec::new(), 0)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The process-wide cache, holding [`DEFAULT_FUSION_CAPACITY`] definitions.
    pub fn global() -> &'static FusionCache {
        static GLOBAL: OnceLock<FusionCache> = OnceLock::new();
        GLOBAL.get_or_init(|| FusionCache::new(DEFAULT_FUSION_CAPACITY))
    }

    /// The executor of a structurally equal definition if one is cached, else a new
    /// executor for `fusion` (cached, evicting the least recently used when full).
    pub fn get_or_insert(&self, fusion: Fusion) -> Arc<FusionExecutorCache> {
        let hash = fusion.structural_hash();
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, tick) = &mut *guard;
        *tick += 1;
        let now = *tick;
        if let Some(e) = entries
            .iter_mut()
            .find(|e| e.hash == hash && *e.executor.fusion() == fusion)
        {
            e.last_use = now;
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Arc::clone(&e.executor);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        if entries.len() >= self.capacity {
            if let Some(oldest) = entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.last_use)
                .map(|(i, _)| i)
            {
                entries.swap_remove(oldest);
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        let executor = Arc::new(FusionExecutorCache::new(fusion));
        entries.push(Entry {
            hash,
            executor: Arc::clone(&executor),
            last_use: now,
        });
        executor
    }

    /// Counters since creation.
    pub fn stats(&self) -> FusionCacheStats {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .len();
        FusionCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfuser_core::prelude::*;

    fn scaled(c: f64) -> Fusion {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
        let k = fd.constant(c);
        let y = fd.mul(x, k).unwrap();
        fd.add_output(y).unwrap();
        fd.finish().unwrap()
    }

    #[test]
    fn equal_definitions_share_an_executor_and_the_cache_evicts() {
        let cache = FusionCache::new(2);
        let a = cache.get_or_insert(scaled(2.0));
        let again = cache.get_or_insert(scaled(2.0));
        assert!(
            Arc::ptr_eq(&a, &again),
            "a structurally equal definition is a hit"
        );
        let b = cache.get_or_insert(scaled(3.0));
        assert!(
            !Arc::ptr_eq(&a, &b),
            "another constant is another definition"
        );
        // Full: a third definition evicts the least recently used (2.0 was used last
        // before 3.0, so 2.0 goes), and nothing fails.
        let _c = cache.get_or_insert(scaled(4.0));
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.evictions, s.entries), (1, 3, 1, 2));
        let a2 = cache.get_or_insert(scaled(2.0));
        assert!(
            !Arc::ptr_eq(&a, &a2),
            "the evicted definition is built anew"
        );
        // The evicted executor still works for whoever holds it.
        let cpu = crate::Device::cpu();
        let x = cpu.tensor_from_slice(&[1.5f32, -2.0], [2]).unwrap();
        let y = a.run(&cpu, &[(&x).into()]).unwrap();
        assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![3.0, -4.0]);
    }
}
