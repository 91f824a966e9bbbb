//! [`Error`]: what goes wrong between candle tensors and a fusion, typed, and its
//! conversion into `candle_core::Error` (the error every candle op returns).
//!
//! Each variant names the op, the argument, what was expected and what was found. A
//! failure inside the fusion library (an argument the fusion's checks refuse, an index
//! out of range found while evaluating) keeps the library's own typed error as its source.

use candle_core::DType;

/// The errors of this crate. Every candle-facing function returns `candle_core::Result`;
/// these errors reach the caller inside `candle_core::Error` (its `Display` is this
/// error's message), while [`CandleFusion::try_run`](crate::CandleFusion::try_run) returns
/// them as they are.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tensor of a dtype the op or fusion does not take.
    #[error("{op}: {arg}: expected dtype {expected}, found {}", .found.as_str())]
    Dtype {
        /// The op or fusion.
        op: String,
        /// The argument (its name or position).
        arg: String,
        /// The dtypes it accepts.
        expected: String,
        /// The dtype it had.
        found: DType,
    },

    /// A tensor whose shape or rank does not fit.
    #[error("{op}: {arg}: expected {expected}, found shape {found:?}")]
    Shape {
        /// The op or fusion.
        op: String,
        /// The argument (its name or position).
        arg: String,
        /// The shape or rank it needs, in words.
        expected: String,
        /// The shape it had.
        found: Vec<usize>,
    },

    /// A tensor on a device this build cannot read.
    #[error("{op}: {arg}: expected a tensor on the CPU (this build reads candle's CPU storage only), found one on {found}")]
    Device {
        /// The op or fusion.
        op: String,
        /// The argument (its name or position).
        arg: String,
        /// Where it was.
        found: String,
    },

    /// The wrong number of arguments.
    #[error("{op}: expected {expected}, found {found}")]
    Arity {
        /// The op or fusion.
        op: String,
        /// What it takes, in words.
        expected: String,
        /// How many it was given.
        found: usize,
    },

    /// An argument of the wrong kind (a scalar where the fusion declares a tensor, or the
    /// reverse), or a scalar value the fusion cannot take.
    #[error("{op}: {arg}: expected {expected}, found {found}")]
    Argument {
        /// The op or fusion.
        op: String,
        /// The argument (its name or position).
        arg: String,
        /// What was expected.
        expected: String,
        /// What was found.
        found: String,
    },

    /// Something this adapter does not support (said in words: what, and what to do).
    #[error("{op}: {what}")]
    Unsupported {
        /// The op or fusion.
        op: String,
        /// What is not supported.
        what: String,
    },

    /// The fusion library refused the call or failed while running it; its typed error
    /// says what was expected and what was found (boxed: it is large).
    #[error("{op}: {source}")]
    Fusion {
        /// The op or fusion.
        op: String,
        /// The library's error.
        #[source]
        source: Box<nvfuser::Error>,
    },
}

impl Error {
    /// An [`Error::Fusion`] of `op`.
    pub(crate) fn fusion(op: &str, source: impl Into<nvfuser::Error>) -> Error {
        Error::Fusion {
            op: op.to_string(),
            source: Box::new(source.into()),
        }
    }
}

impl From<Error> for candle_core::Error {
    fn from(err: Error) -> Self {
        candle_core::Error::wrap(err)
    }
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
