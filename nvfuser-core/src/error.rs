//! The one error type of `nvfuser-core`.
//!
//! Every variant says what was expected and what was found, so a message can be read
//! without the code that produced it. Nothing in this crate panics on user input.

use crate::ir::ValId;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while defining or evaluating a fusion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operand has a type the op does not accept.
    #[error("{op}: expected {expected}, found {found}")]
    DType {
        /// The op (or builder method).
        op: String,
        /// What the op accepts.
        expected: String,
        /// What it got.
        found: String,
    },
    /// A tensor has the wrong number of dims.
    #[error("{op}: expected rank {expected}, found rank {found}")]
    Rank {
        /// The op.
        op: String,
        /// The rank (or rank rule) expected.
        expected: String,
        /// The rank found.
        found: usize,
    },
    /// A dim index outside `-rank..rank`.
    #[error(
        "{op}: axis {axis} is out of range for a tensor of rank {rank} (expected -{rank}..{rank})"
    )]
    AxisOutOfRange {
        /// The op.
        op: String,
        /// The axis given.
        axis: i64,
        /// The tensor's rank.
        rank: usize,
    },
    /// Shapes that do not agree (broadcasting, reshape, cat, ...).
    #[error("{op}: shape mismatch: expected {expected}, found {found}")]
    Shape {
        /// The op.
        op: String,
        /// The shape (or rule) expected.
        expected: String,
        /// What was found.
        found: String,
    },
    /// Wrong number of operands or outputs.
    #[error("{op}: expected {expected} {what}, found {found}")]
    Arity {
        /// The op.
        op: String,
        /// "inputs", "outputs", "sizes", ...
        what: String,
        /// How many were expected.
        expected: usize,
        /// How many were given.
        found: usize,
    },
    /// A scalar where a tensor was needed or the reverse.
    #[error("{op}: expected a {expected}, found a {found}")]
    Kind {
        /// The op.
        op: String,
        /// "tensor" or "scalar" (or more detail).
        expected: String,
        /// What was given.
        found: String,
    },
    /// Any other invalid argument (negative sizes, bad permutation, zero step, ...).
    #[error("{op}: invalid argument: {reason}")]
    InvalidArgument {
        /// The op.
        op: String,
        /// What is wrong, in words.
        reason: String,
    },
    /// A value id that does not belong to this fusion.
    #[error("{op}: value {id} does not belong to this fusion (it has {count} values)")]
    UnknownValue {
        /// The op.
        op: String,
        /// The id.
        id: ValId,
        /// How many values the fusion has.
        count: usize,
    },
    /// A value id that another [`FusionDefinition`](crate::builder::FusionDefinition)
    /// returned (its index may be in range here, but it names another value).
    #[error(
        "{op}: value {id} was returned by another FusionDefinition; use ids of this definition"
    )]
    ForeignValue {
        /// The op.
        op: String,
        /// The id.
        id: ValId,
    },
    /// A size, element count, nesting depth or other quantity above a documented limit
    /// (see [`crate::ir::MAX_NUMEL`]).
    #[error("{op}: {what}: expected at most {limit}, found {found}")]
    SizeLimit {
        /// The op (or phase).
        op: String,
        /// What was measured.
        what: String,
        /// The limit.
        limit: String,
        /// The value found.
        found: String,
    },
    /// The IR violates an invariant (reported by the verifier).
    #[error("invalid IR: {0}")]
    InvalidIr(String),
    /// Inputs given at evaluation time do not match the fusion's declaration.
    #[error("input {index}: expected {expected}, found {found}")]
    Input {
        /// Which input.
        index: usize,
        /// What the fusion declared.
        expected: String,
        /// What was given.
        found: String,
    },
    /// The sizes of the arguments break an equality (or a bound) between extents that
    /// the fusion relies on, e.g. two operands of an elementwise op. Checked before
    /// anything runs, on every device (see [`crate::ir::bind`]).
    #[error("{found}, but it must {expected}: {why}")]
    ArgumentSizes {
        /// The relation and the other side, e.g. `equal argument 0 dim 1 (size 5)`.
        expected: String,
        /// The argument dim and its size, e.g. `argument 1 dim 1: size 6`.
        found: String,
        /// The op that ties them, in words.
        why: String,
    },
    /// A feature that is not implemented (yet) for this case.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Error {
    pub(crate) fn dtype(op: &str, expected: impl Into<String>, found: impl ToString) -> Self {
        Error::DType {
            op: op.to_string(),
            expected: expected.into(),
            found: found.to_string(),
        }
    }

    pub(crate) fn invalid(op: &str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op: op.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn shape(op: &str, expected: impl Into<String>, found: impl Into<String>) -> Self {
        Error::Shape {
            op: op.to_string(),
            expected: expected.into(),
            found: found.into(),
        }
    }

    pub(crate) fn arity(op: &str, what: &str, expected: usize, found: usize) -> Self {
        Error::Arity {
            op: op.to_string(),
            what: what.to_string(),
            expected,
            found,
        }
    }
}
