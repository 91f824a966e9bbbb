//! Printers (in progress).
