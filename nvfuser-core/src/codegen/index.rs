//! Index expressions of the kernel IR ([`Idx`]), defined with the value expressions they
//! embed in [`super::kir`] (the two types hold each other); this module keeps the path.

pub use super::kir::{Idx, ShapeField};
