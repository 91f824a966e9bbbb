//! Fusion IR, definition builder, dtype rules, CPU reference evaluator and printers.
//!
//! Architecture invariant: this crate never links CUDA. Everything up to the CUDA C++
//! string runs on a machine with no GPU and no CUDA toolkit.
#![deny(missing_docs)]

pub mod builder;
pub mod codegen;
pub mod dsl;
pub mod dtype;
pub mod error;
pub mod eval;
pub mod fp8;
pub mod ir;
pub mod philox;
pub mod plan;
pub mod print;
pub mod sched;
pub mod scheduler;
pub mod segment;
#[doc(hidden)]
pub mod testing;
/// The benchmark's fusions and inputs, shared by tests, the benchmark and tools (not
/// part of the library's API).
#[doc(hidden)]
pub mod workloads;

pub use builder::{FusionDefinition, Size};
pub use dtype::{DataType, ScalarValue};
pub use error::{Error, Result};
pub use fp8::{f8e4m3, f8e5m2};
pub use ir::{Fusion, ValId};

/// The names most programs need.
pub mod prelude {
    pub use crate::builder::{Contiguity, FusionDefinition, Size, Slice, TensorSpec};
    pub use crate::dtype::{DataType, ScalarValue};
    pub use crate::error::{Error, Result};
    pub use crate::ir::{Fusion, ValId};
}
