//! [`CacheKey`]: the identity of a compiled kernel.
//!
//! Two compilations may share a CUBIN only when everything that can change the machine
//! code is equal: the CUDA source, the kernel name (NVRTC's program name, which appears
//! in line info), the full NVRTC option list (which includes the architecture), the NVRTC
//! version, and this crate's version (a new release may change what it asks of NVRTC in
//! ways the option list does not show). The key is a SHA-256 over a length-prefixed
//! encoding of those fields, so no two different field lists hash the same input.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::nvrtc::{NvrtcOptions, NvrtcVersion};

/// This crate's version, part of every key.
pub(crate) const CRATE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A 256-bit cache key; its hex form names the entry file on disk.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of compiling `source` as kernel `name` with `options` on NVRTC `nvrtc`.
    pub fn new(source: &str, name: &str, options: &NvrtcOptions, nvrtc: NvrtcVersion) -> Self {
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(b"nvfuser-rs kernel cache key");
        field(CRATE_VERSION.as_bytes());
        field(&nvrtc.major.to_le_bytes());
        field(&nvrtc.minor.to_le_bytes());
        field(&options.arch().sm().to_le_bytes());
        let args = options.to_args();
        field(&(args.len() as u64).to_le_bytes());
        for arg in &args {
            field(arg.as_bytes());
        }
        field(name.as_bytes());
        field(source.as_bytes());
        CacheKey(hasher.finalize().into())
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key from its raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        CacheKey(bytes)
    }

    /// The 64-character lowercase hex form.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({self})")
    }
}

/// SHA-256 of `bytes` (the checksum of a cache entry's payload).
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvrtc::GpuArch;

    const V13: NvrtcVersion = NvrtcVersion {
        major: 13,
        minor: 0,
    };

    fn key(source: &str, name: &str, options: &NvrtcOptions) -> CacheKey {
        CacheKey::new(source, name, options, V13)
    }

    #[test]
    fn every_field_changes_the_key() {
        let opts = NvrtcOptions::new(GpuArch::SM90);
        let base = key("src", "k", &opts);
        assert_eq!(base, key("src", "k", &opts.clone()));
        assert_ne!(base, key("src ", "k", &opts));
        assert_ne!(base, key("src", "k2", &opts));
        assert_ne!(base, key("src", "k", &NvrtcOptions::new(GpuArch::SM80)));
        assert_ne!(base, key("src", "k", &opts.clone().line_info(true)));
        assert_ne!(base, key("src", "k", &opts.clone().fmad(true)));
        assert_ne!(base, key("src", "k", &opts.clone().max_registers(Some(64))));
        assert_ne!(
            base,
            CacheKey::new(
                "src",
                "k",
                &opts,
                NvrtcVersion {
                    major: 13,
                    minor: 1
                }
            )
        );
    }

    #[test]
    fn fields_cannot_run_into_each_other() {
        let opts = NvrtcOptions::new(GpuArch::SM90);
        assert_ne!(key("ab", "c", &opts), key("b", "ac", &opts));
        assert_ne!(key("", "kk", &opts), key("k", "k", &opts));
    }

    #[test]
    fn keys_print_as_hex() {
        let k = CacheKey::from_bytes([0xab; 32]);
        assert_eq!(k.to_hex(), "ab".repeat(32));
        assert_eq!(k.as_bytes(), &[0xab; 32]);
        // The SHA-256 of the empty string, a known vector.
        assert_eq!(
            CacheKey::from_bytes(sha256(b"")).to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
