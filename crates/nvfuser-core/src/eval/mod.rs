//! The CPU reference evaluator (in progress).
