//! The fusion! DSL grammar (in progress).
