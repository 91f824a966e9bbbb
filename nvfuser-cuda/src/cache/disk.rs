//! The on-disk half of the kernel cache: where it lives, and reading and writing entries.
//!
//! Location, first match wins:
//! 1. `NVFUSER_DISK_CACHE=0` (or `false`/`no`/`off`) turns the disk cache off;
//! 2. `NVFUSER_CACHE_DIR=<dir>`;
//! 3. `$XDG_CACHE_HOME/nvfuser-rs` (when that is an absolute path, as the XDG spec asks);
//! 4. `%LOCALAPPDATA%\nvfuser-rs` on Windows, `$HOME/.cache/nvfuser-rs` elsewhere;
//! 5. no disk cache when none of these is set.
//!
//! Entries are files `<dir>/kernels/<key hex>.cubin` in the format of `entry.rs`. A
//! writer fills a uniquely named temporary file in the same directory and renames it over
//! the entry, so a reader (in this process or another) sees either no entry or a complete
//! one, never a partial write; concurrent writers of one key both write complete files
//! and the last rename wins. No `fsync`: an entry that a crash leaves damaged fails its
//! checksum and is rebuilt.
//!
//! The entries are capped (`NVFUSER_DISK_CACHE_MAX_MB`, default 1 GB): after a write,
//! the least recently used entries (by modification time, which a hit refreshes) are
//! deleted until the rest takes at most 90% of the cap.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::entry::{self, EntryError};
use super::key::CacheKey;
use crate::error::Error;
use crate::nvrtc::CompiledKernel;

/// Overrides the cache directory.
pub const CACHE_DIR_VAR: &str = "NVFUSER_CACHE_DIR";
/// The most megabytes (10^6 bytes) of entries the disk cache keeps; the least recently
/// used entries are deleted past it. Unset: [`DEFAULT_DISK_CACHE_BYTES`].
pub const DISK_CACHE_MAX_MB_VAR: &str = "NVFUSER_DISK_CACHE_MAX_MB";
/// The disk cache's size cap unless `NVFUSER_DISK_CACHE_MAX_MB` says otherwise: 1 GB.
pub const DEFAULT_DISK_CACHE_BYTES: u64 = 1_000_000_000;
/// `0`/`false`/`no`/`off` disables the disk cache; `1`/`true`/`yes`/`on` or unset keeps it.
pub const DISK_CACHE_VAR: &str = "NVFUSER_DISK_CACHE";

/// The directory name under the user's cache directory.
const APP_DIR: &str = "nvfuser-rs";

/// The disk cache's size cap the environment asks for (`NVFUSER_DISK_CACHE_MAX_MB`, a
/// positive whole number of megabytes), or [`DEFAULT_DISK_CACHE_BYTES`].
///
/// Errors: [`Error::InvalidEnv`] for anything else.
pub fn disk_cache_limit_from_env() -> Result<u64, Error> {
    resolve_limit(|var| std::env::var_os(var))
}

/// [`disk_cache_limit_from_env`] over any variable lookup (tests pass a map).
pub(crate) fn resolve_limit(get: impl Fn(&str) -> Option<OsString>) -> Result<u64, Error> {
    let Some(value) = get(DISK_CACHE_MAX_MB_VAR) else {
        return Ok(DEFAULT_DISK_CACHE_BYTES);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(mb) if mb > 0 => Ok(mb.saturating_mul(1_000_000)),
        _ => Err(Error::InvalidEnv {
            var: DISK_CACHE_MAX_MB_VAR,
            value: text.into_owned(),
            expected: "a positive whole number of megabytes",
        }),
    }
}

/// The on-disk cache directory the environment asks for, or `None` when the disk cache
/// is disabled or no cache directory can be found (see the module docs for the order).
///
/// Errors: [`Error::InvalidEnv`] when `NVFUSER_DISK_CACHE` is not a boolean.
pub fn disk_cache_dir_from_env() -> Result<Option<PathBuf>, Error> {
    resolve_dir(|var| std::env::var_os(var))
}

/// [`disk_cache_dir_from_env`] over any variable lookup (tests pass a map).
pub(crate) fn resolve_dir(
    get: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<PathBuf>, Error> {
    let non_empty = |var: &str| get(var).filter(|v| !v.is_empty());
    if let Some(value) = get(DISK_CACHE_VAR) {
        let text = value.to_string_lossy().trim().to_ascii_lowercase();
        match text.as_str() {
            "0" | "false" | "no" | "off" => return Ok(None),
            "" | "1" | "true" | "yes" | "on" => {}
            _ => {
                return Err(Error::InvalidEnv {
                    var: DISK_CACHE_VAR,
                    value: value.to_string_lossy().into_owned(),
                    expected: "0/false/no/off to disable the disk cache, or 1/true/yes/on",
                })
            }
        }
    }
    if let Some(dir) = non_empty(CACHE_DIR_VAR) {
        return Ok(Some(PathBuf::from(dir)));
    }
    if let Some(xdg) = non_empty("XDG_CACHE_HOME").map(PathBuf::from) {
        if xdg.is_absolute() {
            return Ok(Some(xdg.join(APP_DIR)));
        }
    }
    if cfg!(windows) {
        if let Some(local) = non_empty("LOCALAPPDATA") {
            return Ok(Some(PathBuf::from(local).join(APP_DIR)));
        }
    }
    Ok(non_empty("HOME").map(|home| PathBuf::from(home).join(".cache").join(APP_DIR)))
}

/// What a disk lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A verified entry.
    Hit(CompiledKernel),
    /// No entry.
    Miss,
    /// An entry that failed verification; it has been deleted.
    Rejected(EntryError),
    /// The entry could not be read (permissions, I/O); treated as a miss.
    Unreadable(io::Error),
}

/// The entries under one directory.
#[derive(Debug, Clone)]
pub(crate) struct DiskCache {
    root: PathBuf,
    entries: PathBuf,
    /// The most bytes of entries kept (see [`DiskCache::trim`]).
    limit: u64,
}

/// Makes temporary file names unique within this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    pub(crate) fn new(root: PathBuf, limit: u64) -> Self {
        let entries = root.join("kernels");
        DiskCache {
            root,
            entries,
            limit,
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Deletes the least recently used entries (by modification time, which a hit
    /// refreshes) until the entries take at most 90% of the limit, once they take more
    /// than the limit; returns how many it deleted. The entry of `keep` (just written)
    /// is never deleted. Best effort: entries another process deletes meanwhile, or that
    /// cannot be deleted, are skipped.
    pub(crate) fn trim(&self, keep: &CacheKey) -> usize {
        let Ok(dir) = fs::read_dir(&self.entries) else {
            return 0;
        };
        let kept = self.entry_path(keep);
        let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = dir
            .filter_map(|e| {
                let e = e.ok()?;
                let path = e.path();
                let meta = e.metadata().ok()?;
                let is_entry = meta.is_file()
                    && path.extension().is_some_and(|x| x == "cubin")
                    && !e.file_name().to_string_lossy().starts_with('.');
                if !is_entry {
                    return None;
                }
                Some((meta.modified().ok()?, meta.len(), path))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.limit {
            return 0;
        }
        entries.sort_by_key(|e| e.0);
        let target = self.limit / 10 * 9;
        let mut deleted = 0;
        for (_, len, path) in entries {
            if total <= target {
                break;
            }
            if path != kept && fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
                deleted += 1;
            }
        }
        deleted
    }

    /// Marks the entry of `key` as just used (its modification time), so that `trim`
    /// keeps it longer. Best effort.
    fn touch(&self, key: &CacheKey) {
        if let Ok(file) = fs::OpenOptions::new()
            .append(true)
            .open(self.entry_path(key))
        {
            let _ = file.set_modified(std::time::SystemTime::now());
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The file that holds (or would hold) the entry of `key`.
    pub(crate) fn entry_path(&self, key: &CacheKey) -> PathBuf {
        self.entries.join(format!("{key}.cubin"))
    }

    /// Reads and verifies the entry of `key`; a bad entry is deleted. Only a regular
    /// file is opened: anything else at the entry's path (a FIFO, whose `open` would
    /// block forever, a device, a directory, a symbolic link) is reported as unreadable,
    /// treated as a miss and left in place.
    pub(crate) fn load(&self, key: &CacheKey) -> Lookup {
        let path = self.entry_path(key);
        let missing = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            )
        };
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            // A missing directory (or a file in place of one) holds no entry either.
            Err(e) if missing(&e) => return Lookup::Miss,
            Err(e) => return Lookup::Unreadable(e),
        };
        if !meta.file_type().is_file() {
            return Lookup::Unreadable(not_regular(&meta));
        }
        let bytes = match read_regular(&path, &meta) {
            Ok(bytes) => bytes,
            Err(e) if missing(&e) => return Lookup::Miss,
            Err(e) => return Lookup::Unreadable(e),
        };
        match entry::decode(&bytes, key) {
            Ok(kernel) => {
                self.touch(key);
                Lookup::Hit(kernel)
            }
            Err(err) => {
                self.remove(key);
                Lookup::Rejected(err)
            }
        }
    }

    /// Deletes the entry of `key`, if any. A failure to delete is not an error: the next
    /// reader rejects the entry again, and the next writer replaces it.
    pub(crate) fn remove(&self, key: &CacheKey) {
        let _ = fs::remove_file(self.entry_path(key));
    }

    /// Writes the entry of `key` atomically (temporary file, then rename). Something
    /// other than a regular file at the entry's path is not replaced (an error).
    pub(crate) fn store(&self, key: &CacheKey, kernel: &CompiledKernel) -> io::Result<PathBuf> {
        fs::create_dir_all(&self.entries)?;
        let path = self.entry_path(key);
        match fs::symlink_metadata(&path) {
            Ok(meta) if !meta.file_type().is_file() => return Err(not_regular(&meta)),
            _ => {}
        }
        let temp = self.entries.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(&entry::encode(key, kernel))?;
            drop(file);
            fs::rename(&temp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        Ok(path)
    }
}

/// The error for an entry path that holds something other than a regular file.
fn not_regular(meta: &fs::Metadata) -> io::Error {
    let t = meta.file_type();
    let what = if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a special file (FIFO, socket or device)"
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("expected a regular file, found {what}; left in place"),
    )
}

/// Reads a file that `checked` (from `symlink_metadata`) says is regular, and makes sure
/// the file opened is that one (not something swapped in since the check).
fn read_regular(path: &Path, checked: &fs::Metadata) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    let opened = file.metadata()?;
    #[cfg(unix)]
    let same = {
        use std::os::unix::fs::MetadataExt;
        opened.dev() == checked.dev() && opened.ino() == checked.ino()
    };
    #[cfg(not(unix))]
    let same = opened.file_type().is_file() && checked.file_type().is_file();
    if !same || !opened.file_type().is_file() {
        return Err(not_regular(&opened));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(vars: &[(&str, &str)]) -> Result<Option<PathBuf>, Error> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        resolve_dir(|var| map.get(var).cloned())
    }

    #[test]
    fn the_directory_comes_from_the_environment_in_order() {
        let home = [("HOME", "/home/u")];
        assert_eq!(
            resolve(&home).unwrap(),
            Some("/home/u/.cache/nvfuser-rs".into())
        );
        let xdg = [("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")];
        assert_eq!(resolve(&xdg).unwrap(), Some("/xdg/nvfuser-rs".into()));
        // A relative XDG_CACHE_HOME is ignored, as the spec says.
        let rel = [("HOME", "/home/u"), ("XDG_CACHE_HOME", "rel")];
        assert_eq!(
            resolve(&rel).unwrap(),
            Some("/home/u/.cache/nvfuser-rs".into())
        );
        let custom = [
            ("HOME", "/home/u"),
            ("XDG_CACHE_HOME", "/xdg"),
            (CACHE_DIR_VAR, "/c"),
        ];
        assert_eq!(resolve(&custom).unwrap(), Some("/c".into()));
        assert_eq!(resolve(&[]).unwrap(), None);
        assert_eq!(resolve(&[(CACHE_DIR_VAR, "")]).unwrap(), None);
    }

    #[test]
    fn the_disk_cache_can_be_turned_off() {
        for off in ["0", "false", "OFF", " no "] {
            let vars = [(DISK_CACHE_VAR, off), (CACHE_DIR_VAR, "/c")];
            assert_eq!(resolve(&vars).unwrap(), None, "{off}");
        }
        for on in ["1", "true", "yes", ""] {
            let vars = [(DISK_CACHE_VAR, on), (CACHE_DIR_VAR, "/c")];
            assert_eq!(resolve(&vars).unwrap(), Some("/c".into()), "{on}");
        }
        let err = resolve(&[(DISK_CACHE_VAR, "maybe")]).unwrap_err();
        assert!(matches!(
            err,
            Error::InvalidEnv {
                var: DISK_CACHE_VAR,
                ..
            }
        ));
        assert!(err.to_string().contains("\"maybe\""), "{err}");
    }

    /// A FIFO at an entry's path: the lookup returns (unreadable, so a miss) instead of
    /// blocking in `open` forever, and a store leaves it in place.
    #[cfg(unix)]
    #[test]
    fn a_fifo_entry_is_a_miss_and_does_not_block() {
        use std::sync::mpsc;
        use std::time::Duration;

        let dir = tempfile::tempdir().expect("a temporary directory");
        let cache = DiskCache::new(dir.path().to_path_buf(), DEFAULT_DISK_CACHE_BYTES);
        let key = CacheKey::from_bytes([3; 32]);
        fs::create_dir_all(&cache.entries).unwrap();
        let path = cache.entry_path(&key);
        match std::process::Command::new("mkfifo").arg(&path).status() {
            Ok(s) if s.success() => {}
            other => {
                println!("skipped: mkfifo is not available ({other:?})");
                return;
            }
        }
        let (tx, rx) = mpsc::channel();
        let worker = cache.clone();
        std::thread::spawn(move || {
            let found = match worker.load(&key) {
                Lookup::Unreadable(e) => Ok(e.to_string()),
                other => Err(format!("{other:?}")),
            };
            let _ = tx.send(found);
        });
        let found = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the lookup of a FIFO entry did not return within 10 s");
        let message = found.unwrap_or_else(|other| panic!("expected unreadable, found {other}"));
        assert!(
            message.contains("expected a regular file, found a special file"),
            "{message}"
        );

        let kernel = crate::nvrtc::CompiledKernel {
            name: "k".into(),
            arch: crate::nvrtc::GpuArch::SM90,
            cubin: b"\x7fELF".to_vec(),
            nvrtc_version: crate::nvrtc::NvrtcVersion {
                major: 13,
                minor: 0,
            },
            options: Vec::new(),
            log: String::new(),
            compile_time: Duration::ZERO,
        };
        let err = cache.store(&key, &kernel).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(!meta.file_type().is_file(), "the FIFO was replaced");

        // A directory in place of an entry is unreadable too, and a symbolic link to a
        // valid entry is not followed.
        let key2 = CacheKey::from_bytes([4; 32]);
        fs::create_dir(cache.entry_path(&key2)).unwrap();
        assert!(matches!(cache.load(&key2), Lookup::Unreadable(_)));
        let key3 = CacheKey::from_bytes([5; 32]);
        let real = cache.store(&key3, &kernel).unwrap();
        assert!(matches!(cache.load(&key3), Lookup::Hit(_)));
        let key4 = CacheKey::from_bytes([6; 32]);
        std::os::unix::fs::symlink(&real, cache.entry_path(&key4)).unwrap();
        assert!(matches!(cache.load(&key4), Lookup::Unreadable(_)));
    }

    fn fake_kernel(bytes: usize) -> crate::nvrtc::CompiledKernel {
        crate::nvrtc::CompiledKernel {
            name: "k".into(),
            arch: crate::nvrtc::GpuArch::SM90,
            cubin: b"\x7fELF"
                .iter()
                .copied()
                .chain(std::iter::repeat_n(0, bytes))
                .collect(),
            nvrtc_version: crate::nvrtc::NvrtcVersion {
                major: 13,
                minor: 0,
            },
            options: Vec::new(),
            log: String::new(),
            compile_time: std::time::Duration::ZERO,
        }
    }

    /// Sets an entry's modification time `secs` seconds after the epoch.
    fn age(cache: &DiskCache, key: &CacheKey, secs: u64) {
        let file = fs::OpenOptions::new()
            .append(true)
            .open(cache.entry_path(key))
            .unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        file.set_modified(t).unwrap();
    }

    /// Past the cap, the least recently used entries go (down to 90% of the cap), never
    /// the one just written; a hit makes an old entry recent again.
    #[test]
    fn the_disk_cache_keeps_under_its_cap_by_recency() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let key = |i: u8| CacheKey::from_bytes([i; 32]);
        let probe = DiskCache::new(dir.path().to_path_buf(), u64::MAX);
        let path = probe.store(&key(200), &fake_kernel(1000)).unwrap();
        let entry_len = fs::metadata(&path).unwrap().len();
        fs::remove_file(path).unwrap();
        // Room for four entries.
        let cache = DiskCache::new(dir.path().to_path_buf(), 4 * entry_len + entry_len / 2);
        for i in 0..4u8 {
            cache.store(&key(i), &fake_kernel(1000)).unwrap();
            age(&cache, &key(i), 1_000 + i as u64);
            assert_eq!(cache.trim(&key(i)), 0, "under the cap nothing goes");
        }
        // Entry 0 is read: now the most recent of the old ones.
        assert!(matches!(cache.load(&key(0)), Lookup::Hit(_)));
        cache.store(&key(9), &fake_kernel(1000)).unwrap();
        age(&cache, &key(9), 500); // older than everything, yet just written
        let deleted = cache.trim(&key(9));
        // Five entries over a cap of 4.5: down to 90% of it (4.05 entries) means one
        // goes, the least recently used of the others: entry 1 (entry 0 is older but
        // was read, and entry 9 was just written).
        assert_eq!(deleted, 1);
        let present: Vec<u8> = [0u8, 1, 2, 3, 9]
            .into_iter()
            .filter(|&i| cache.entry_path(&key(i)).exists())
            .collect();
        assert_eq!(present, [0, 2, 3, 9]);
        // Three more: each store keeps the cache under the cap.
        for i in 10..13u8 {
            cache.store(&key(i), &fake_kernel(1000)).unwrap();
            age(&cache, &key(i), 2_000 + i as u64);
            cache.trim(&key(i));
            let total: u64 = fs::read_dir(&cache.entries)
                .unwrap()
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum();
            assert!(total <= cache.limit(), "{total} > {}", cache.limit());
        }
        assert!(cache.entry_path(&key(12)).exists());
    }

    #[test]
    fn the_cap_comes_from_the_environment() {
        let limit = |v: Option<&str>| {
            resolve_limit(|var| {
                assert_eq!(var, DISK_CACHE_MAX_MB_VAR);
                v.map(OsString::from)
            })
        };
        assert_eq!(limit(None).unwrap(), DEFAULT_DISK_CACHE_BYTES);
        assert_eq!(limit(Some("250")).unwrap(), 250_000_000);
        assert_eq!(limit(Some(" 2 ")).unwrap(), 2_000_000);
        for bad in ["0", "-5", "1.5", "lots", ""] {
            let err = limit(Some(bad)).unwrap_err();
            assert!(
                err.to_string()
                    .contains("a positive whole number of megabytes"),
                "{bad}: {err}"
            );
        }
    }
}
