//! The `fusion!` procedural macro (see the macro issue). Thin until then.
