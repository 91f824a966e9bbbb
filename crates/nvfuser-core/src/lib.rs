//! Fusion IR, definition builder, dtype rules, CPU reference evaluator and printers.
//!
//! Architecture invariant: this crate never links CUDA. Everything up to the CUDA C++
//! string runs on a machine with no GPU and no CUDA toolkit.
#![deny(missing_docs)]

pub mod philox;
