//! The byte format of one on-disk cache entry, and its verification.
//!
//! ```text
//! header (84 bytes)
//!   magic           8 bytes   "NVFCUBIN"
//!   format version  u32 LE    FORMAT_VERSION
//!   key             32 bytes  the CacheKey the entry was written for
//!   payload length  u64 LE
//!   checksum        32 bytes  SHA-256 of the payload
//! payload
//!   name, arch (u32 major, u32 minor), NVRTC version (u32, u32), options (u32 count,
//!   then strings), log, compile time (u64 ns), CUBIN (u64 length, bytes);
//!   strings are a u32 LE length and UTF-8 bytes.
//! ```
//!
//! A reader trusts nothing: a short file is truncated, another magic is not an entry, a
//! different format version or key is stale, a checksum mismatch is corrupt, and a
//! payload that does not decode exactly (bad lengths, trailing bytes, invalid UTF-8, a
//! CUBIN that is not an ELF image) is corrupt too. Every such case is an [`EntryError`],
//! and the cache deletes and rebuilds the entry.

use std::time::Duration;

use super::key::{sha256, CacheKey};
use crate::nvrtc::{CompiledKernel, GpuArch, NvrtcVersion};

/// The first bytes of every entry.
pub(crate) const MAGIC: [u8; 8] = *b"NVFCUBIN";
/// The version of this format; a reader rejects entries of any other version as stale.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The header's size in bytes.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 32 + 8 + 32;
/// ELF's magic: every CUBIN starts with it.
const ELF_MAGIC: &[u8] = b"\x7fELF";

/// Why a cache entry was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// The file is shorter than its header says.
    #[error("truncated: {found} bytes, expected {expected}")]
    Truncated {
        /// The size the header implies.
        expected: u64,
        /// The file's size.
        found: u64,
    },
    /// The file does not start with the entry magic.
    #[error("not a cache entry (expected the magic {:?})", String::from_utf8_lossy(&MAGIC))]
    BadMagic,
    /// Written by another version of the entry format.
    #[error("stale: entry format version {found}, expected {expected}")]
    StaleFormat {
        /// The version this crate reads.
        expected: u32,
        /// The entry's version.
        found: u32,
    },
    /// Written for another key (a renamed or copied file).
    #[error("stale: written for key {found}, expected {expected}")]
    KeyMismatch {
        /// The key looked up.
        expected: CacheKey,
        /// The key in the entry.
        found: CacheKey,
    },
    /// The payload's checksum does not match the header.
    #[error("corrupt: the payload's SHA-256 does not match the header")]
    Checksum,
    /// The payload does not decode.
    #[error("corrupt: {0}")]
    Malformed(String),
    /// The entry decodes but describes another compilation than the one requested.
    #[error("stale: {0}")]
    Mismatch(String),
}

/// The entry file's bytes for `kernel` under `key`.
pub(crate) fn encode(key: &CacheKey, kernel: &CompiledKernel) -> Vec<u8> {
    let mut payload = Vec::with_capacity(kernel.cubin.len() + kernel.log.len() + 256);
    put_str(&mut payload, &kernel.name);
    put_u32(&mut payload, kernel.arch.major());
    put_u32(&mut payload, kernel.arch.minor());
    put_u32(&mut payload, kernel.nvrtc_version.major);
    put_u32(&mut payload, kernel.nvrtc_version.minor);
    put_u32(&mut payload, len_u32(kernel.options.len()));
    for option in &kernel.options {
        put_str(&mut payload, option);
    }
    put_str(&mut payload, &kernel.log);
    let nanos = u64::try_from(kernel.compile_time.as_nanos()).unwrap_or(u64::MAX);
    payload.extend_from_slice(&nanos.to_le_bytes());
    payload.extend_from_slice(&(kernel.cubin.len() as u64).to_le_bytes());
    payload.extend_from_slice(&kernel.cubin);

    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&sha256(&payload));
    out.extend_from_slice(&payload);
    out
}

/// Verifies and decodes an entry file that should hold `expected`.
pub(crate) fn decode(bytes: &[u8], expected: &CacheKey) -> Result<CompiledKernel, EntryError> {
    let found_len = bytes.len() as u64;
    let truncated = |want: u64| EntryError::Truncated {
        expected: want,
        found: found_len,
    };
    if bytes.len() < MAGIC.len() {
        return Err(truncated(HEADER_LEN as u64));
    }
    if bytes[..MAGIC.len()] != MAGIC {
        return Err(EntryError::BadMagic);
    }
    if bytes.len() < HEADER_LEN {
        return Err(truncated(HEADER_LEN as u64));
    }
    let mut header = Reader::new(&bytes[MAGIC.len()..HEADER_LEN]);
    // The header is exactly HEADER_LEN bytes, so these reads cannot fail.
    let version = header.u32().map_err(EntryError::Malformed)?;
    if version != FORMAT_VERSION {
        return Err(EntryError::StaleFormat {
            expected: FORMAT_VERSION,
            found: version,
        });
    }
    let key = CacheKey::from_bytes(header.array::<32>().map_err(EntryError::Malformed)?);
    if key != *expected {
        return Err(EntryError::KeyMismatch {
            expected: *expected,
            found: key,
        });
    }
    let payload_len = header.u64().map_err(EntryError::Malformed)?;
    let checksum = header.array::<32>().map_err(EntryError::Malformed)?;
    let payload = &bytes[HEADER_LEN..];
    let total = (HEADER_LEN as u64).saturating_add(payload_len);
    if (payload.len() as u64) < payload_len {
        return Err(truncated(total));
    }
    if (payload.len() as u64) > payload_len {
        return Err(EntryError::Malformed(format!(
            "{} bytes after the {payload_len}-byte payload",
            payload.len() as u64 - payload_len
        )));
    }
    if sha256(payload) != checksum {
        return Err(EntryError::Checksum);
    }
    decode_payload(payload).map_err(EntryError::Malformed)
}

fn decode_payload(payload: &[u8]) -> Result<CompiledKernel, String> {
    let mut r = Reader::new(payload);
    let name = r.string()?;
    let arch = GpuArch::new(r.u32()?, r.u32()?);
    let nvrtc_version = NvrtcVersion {
        major: r.u32()?,
        minor: r.u32()?,
    };
    let count = r.u32()?;
    let mut options = Vec::new();
    for _ in 0..count {
        options.push(r.string()?);
    }
    let log = r.string()?;
    let compile_time = Duration::from_nanos(r.u64()?);
    let cubin_len = r.u64()?;
    let cubin = r.bytes(cubin_len)?.to_vec();
    if !r.rest().is_empty() {
        return Err(format!("{} bytes after the CUBIN", r.rest().len()));
    }
    if !cubin.starts_with(ELF_MAGIC) {
        return Err("the CUBIN is not an ELF image".to_owned());
    }
    Ok(CompiledKernel {
        name,
        arch,
        cubin,
        nvrtc_version,
        options,
        log,
        compile_time,
    })
}

fn len_u32(len: usize) -> u32 {
    // Strings and option lists of 4 GiB do not occur; saturating keeps encode total and
    // the decoder then rejects the entry.
    u32::try_from(len).unwrap_or(u32::MAX)
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, len_u32(s.len()));
    out.extend_from_slice(s.as_bytes());
}

/// A bounds-checked little-endian reader; every failure is a message, never a panic.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    fn bytes(&mut self, n: u64) -> Result<&'a [u8], String> {
        let available = self.rest.len();
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= available)
            .ok_or_else(|| format!("a field of {n} bytes with only {available} left"))?;
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N as u64)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, String> {
        let len = self.u32()?;
        let bytes = self.bytes(u64::from(len))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "a string that is not UTF-8".to_owned())
    }

    fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> CompiledKernel {
        CompiledKernel {
            name: "k".into(),
            arch: GpuArch::SM90,
            cubin: b"\x7fELF and some machine code".to_vec(),
            nvrtc_version: NvrtcVersion {
                major: 13,
                minor: 0,
            },
            options: vec!["--std=c++17".into(), "--gpu-architecture=sm_90".into()],
            log: "a warning".into(),
            compile_time: Duration::from_micros(12_345),
        }
    }

    fn key() -> CacheKey {
        CacheKey::from_bytes([7; 32])
    }

    #[test]
    fn entries_round_trip() {
        let bytes = encode(&key(), &kernel());
        assert_eq!(&bytes[..8], b"NVFCUBIN");
        assert_eq!(decode(&bytes, &key()).unwrap(), kernel());
    }

    #[test]
    fn every_truncation_is_detected() {
        let bytes = encode(&key(), &kernel());
        for len in 0..bytes.len() {
            let err = decode(&bytes[..len], &key()).unwrap_err();
            assert!(
                matches!(err, EntryError::Truncated { .. }),
                "len {len}: {err}"
            );
        }
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = encode(&key(), &kernel());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                decode(&bad, &key()).is_err(),
                "flipping byte {i} went unnoticed"
            );
        }
    }

    #[test]
    fn stale_and_foreign_entries_are_named() {
        let bytes = encode(&key(), &kernel());
        let other = CacheKey::from_bytes([8; 32]);
        assert!(matches!(
            decode(&bytes, &other),
            Err(EntryError::KeyMismatch { .. })
        ));
        let mut old = bytes.clone();
        old[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            decode(&old, &key()),
            Err(EntryError::StaleFormat {
                expected: FORMAT_VERSION,
                found: 0
            })
        );
        assert_eq!(
            decode(b"GARBAGE! and more bytes", &key()),
            Err(EntryError::BadMagic)
        );
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            decode(&long, &key()),
            Err(EntryError::Malformed(_))
        ));
    }

    #[test]
    fn a_payload_with_a_valid_checksum_is_still_checked() {
        // Re-sign a payload whose CUBIN is not ELF: the checksum passes, decoding fails.
        let mut k = kernel();
        k.cubin = b"not elf".to_vec();
        let bytes = encode(&key(), &k);
        let err = decode(&bytes, &key()).unwrap_err();
        assert_eq!(
            err,
            EntryError::Malformed("the CUBIN is not an ELF image".into())
        );
    }
}
