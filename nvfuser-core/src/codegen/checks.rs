//! Device-side checks: data-dependent reads and integer division, checked in the kernel.
//!
//! Some errors can only be seen on the device, element by element: an index of
//! `gather`, `take_along_axis` or `index_select` outside `0..size` of the indexed dim
//! (negative indices included, as on the CPU reference), and an integer `div`, `fmod` or
//! `remainder` by zero. The CPU reference refuses both (see [`crate::eval`]); a kernel
//! that contains such a *check site* gets one extra parameter, the error buffer
//! ([`crate::codegen::abi::ParamKind::ErrorFlag`]): [`ERROR_WORDS`] `unsigned long long`
//! words in device memory, zero while no error happened.
//!
//! The first thread that fails a check claims word 0 with `atomicCAS(err, 0, code)` and,
//! having won, writes the bad value to word 1 and the bound to word 2 (later failures
//! leave the buffer alone: the first error wins). The failing element then gets a
//! defined value and nothing is read out of bounds: an out-of-range index reads no
//! input element and yields zero, a division by zero yields zero. The `code` is
//! `fingerprint << 32 | site`: the [`fingerprint`] of the kernel's check table and the
//! 1-based position of the site in it, so the host can tell which kernel and which
//! expression failed ([`decode`]) after any number of launches sharing one buffer.
//!
//! Architecture invariant: every check site has an entry in its kernel's ABI (the
//! `ErrorFlag` parameter's table); the generated code only ever writes codes of that
//! table, and the launcher zeroes the buffer before the first launch and after reporting
//! an error.

use serde::{Deserialize, Serialize};

/// Words of the error buffer: code, value, bound, reserved.
pub const ERROR_WORDS: usize = 4;

/// What one check site tests.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CheckKind {
    /// A data-dependent index into dim `axis` of the input must lie in `0..size`.
    Index {
        /// The indexed dim of the input.
        axis: usize,
    },
    /// An integer divisor must not be zero.
    DivisionByZero,
}

/// One check site of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceCheck {
    /// The op's name (`gather`, `index_select`, `take_along_axis`, `div`, `fmod`,
    /// `remainder`).
    pub op: String,
    /// What is checked.
    pub kind: CheckKind,
    /// The expression, as the math printer would write it (`T3 = T1 / T2`).
    pub expr: String,
}

/// A failed device-side check, decoded from the error buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAssert {
    /// The op that failed (`gather`, `div`, ...); `unknown` when the kernel's check
    /// table is not known to the decoder.
    pub op: String,
    /// The expression, when known.
    pub expr: Option<String>,
    /// The indexed dim (index checks).
    pub axis: Option<usize>,
    /// The bad value: the index, or the dividend of a division by zero.
    pub value: i64,
    /// The index bound (`size`, the valid range is `0..size`); 0 for a division.
    pub bound: i64,
    /// The raw code word (fingerprint and site).
    pub code: u64,
}

impl std::fmt::Display for DeviceAssert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let expr = self
            .expr
            .as_deref()
            .map(|e| format!(" in {e}"))
            .unwrap_or_default();
        match (self.op.as_str(), self.axis) {
            (op, Some(axis)) => write!(
                f,
                "{op} index {} out of range 0..{} at dim {axis}{expr}",
                self.value, self.bound
            ),
            ("div", None) => write!(f, "integer division by zero{expr}"),
            ("fmod" | "remainder", None) => {
                write!(f, "integer {} by zero{expr}", self.op)
            }
            (op, None) => write!(
                f,
                "device-side check failed ({op}, code {:#018x}, value {}, bound {})",
                self.code, self.value, self.bound
            ),
        }
    }
}

/// A 32-bit fingerprint of a kernel's check table (FNV-1a over the sites), never 0.
/// Generated code writes it into the high half of the error code.
pub fn fingerprint(checks: &[DeviceCheck]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u32;
            h = h.wrapping_mul(0x0100_0193);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0193);
    };
    for c in checks {
        eat(c.op.as_bytes());
        match c.kind {
            CheckKind::Index { axis } => eat(&(axis as u64 + 1).to_le_bytes()),
            CheckKind::DivisionByZero => eat(&[0]),
        }
        eat(c.expr.as_bytes());
    }
    h.max(1)
}

/// The error code site `site` (0-based) of a kernel with this fingerprint writes.
pub fn code(fingerprint: u32, site: usize) -> u64 {
    (fingerprint as u64) << 32 | (site as u64 + 1)
}

/// Decodes the error buffer: `None` when no check failed (word 0 is zero). `table`
/// finds the check table of a fingerprint (the launcher keeps those of the kernels it
/// launched); without it the error names only the raw code, value and bound.
pub fn decode<'a>(
    words: [u64; ERROR_WORDS],
    table: impl FnOnce(u32) -> Option<&'a [DeviceCheck]>,
) -> Option<DeviceAssert> {
    if words[0] == 0 {
        return None;
    }
    let fp = (words[0] >> 32) as u32;
    let site = (words[0] & 0xffff_ffff) as usize;
    let check = site
        .checked_sub(1)
        .and_then(|s| table(fp).and_then(|t| t.get(s)));
    let (op, expr, axis) = match check {
        Some(c) => (
            c.op.clone(),
            Some(c.expr.clone()),
            match c.kind {
                CheckKind::Index { axis } => Some(axis),
                CheckKind::DivisionByZero => None,
            },
        ),
        None => ("unknown".to_string(), None, None),
    };
    Some(DeviceAssert {
        op,
        expr,
        axis,
        value: words[1] as i64,
        bound: words[2] as i64,
        code: words[0],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<DeviceCheck> {
        vec![
            DeviceCheck {
                op: "gather".into(),
                kind: CheckKind::Index { axis: 1 },
                expr: "T2 = gather(T0, T1, axis=1)".into(),
            },
            DeviceCheck {
                op: "div".into(),
                kind: CheckKind::DivisionByZero,
                expr: "T3 = T1 / T2".into(),
            },
            DeviceCheck {
                op: "remainder".into(),
                kind: CheckKind::DivisionByZero,
                expr: "T4 = remainder(T1, T2)".into(),
            },
        ]
    }

    #[test]
    fn zero_words_mean_no_error() {
        let t = table();
        assert_eq!(decode([0; 4], |_| Some(&t[..])), None);
    }

    #[test]
    fn index_errors_name_the_op_value_range_and_dim() {
        let t = table();
        let fp = fingerprint(&t);
        let e = decode([code(fp, 0), 17, 16, 0], |f| (f == fp).then_some(&t[..])).unwrap();
        assert_eq!(
            (e.op.as_str(), e.axis, e.value, e.bound),
            ("gather", Some(1), 17, 16)
        );
        assert_eq!(
            e.to_string(),
            "gather index 17 out of range 0..16 at dim 1 in T2 = gather(T0, T1, axis=1)"
        );
        // Negative indices come back as negative values.
        let e = decode([code(fp, 0), (-3i64) as u64, 16, 0], |_| Some(&t[..])).unwrap();
        assert_eq!(e.value, -3);
        assert!(e.to_string().contains("index -3 out of range 0..16"));
    }

    #[test]
    fn division_errors_name_the_expression() {
        let t = table();
        let fp = fingerprint(&t);
        let e = decode([code(fp, 1), 7, 0, 0], |_| Some(&t[..])).unwrap();
        assert_eq!(e.to_string(), "integer division by zero in T3 = T1 / T2");
        let e = decode([code(fp, 2), 7, 0, 0], |_| Some(&t[..])).unwrap();
        assert_eq!(
            e.to_string(),
            "integer remainder by zero in T4 = remainder(T1, T2)"
        );
    }

    #[test]
    fn unknown_tables_and_sites_still_report_the_raw_words() {
        let t = table();
        let fp = fingerprint(&t);
        let e = decode([code(fp ^ 1, 0), 5, 4, 0], |f| (f == fp).then_some(&t[..])).unwrap();
        assert_eq!(e.op, "unknown");
        assert!(e.to_string().contains("value 5, bound 4"), "{e}");
        let e = decode([code(fp, 9), 5, 4, 0], |_| Some(&t[..])).unwrap();
        assert_eq!(e.op, "unknown");
    }

    #[test]
    fn fingerprints_tell_tables_apart_and_are_never_zero() {
        let t = table();
        assert_ne!(fingerprint(&t), fingerprint(&t[..2]));
        assert_ne!(fingerprint(&[]), 0);
        assert_eq!(code(0xdead_beef, 0), 0xdead_beef_0000_0001);
    }
}
