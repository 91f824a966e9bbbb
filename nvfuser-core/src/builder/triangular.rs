//! `triu` and `tril`: the upper or lower triangle of the last two dims, the rest zero.
//!
//! Expanded into primitive expressions (the printers show them and every device runs
//! them): the row and column indices as `iota`s over the two dims' sizes, broadcast to a
//! `[rows, cols]` mask `col - row >= diagonal` (`<=` for `tril`), broadcast over the
//! leading dims, and `where(mask, x, 0)`.

use super::{FusionDefinition, Size};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, ValId};

impl FusionDefinition {
    /// The upper triangle of the last two dims of `x` (rank 2 or more): elements with
    /// `col - row >= diagonal` are kept, the others are zero. `diagonal` 0 is the main
    /// diagonal, positive values are above it, negative below (PyTorch's `triu`).
    pub fn triu(&mut self, x: ValId, diagonal: i64) -> Result<ValId> {
        self.triangle("triu", x, diagonal, BinaryOp::Ge)
    }

    /// The lower triangle of the last two dims of `x` (rank 2 or more): elements with
    /// `col - row <= diagonal` are kept, the others are zero (PyTorch's `tril`).
    pub fn tril(&mut self, x: ValId, diagonal: i64) -> Result<ValId> {
        self.triangle("tril", x, diagonal, BinaryOp::Le)
    }

    fn triangle(&mut self, op: &str, x: ValId, diagonal: i64, keep: BinaryOp) -> Result<ValId> {
        let rank = self.tensor_type(op, x)?.rank();
        if rank < 2 {
            return Err(Error::invalid(
                op,
                format!("a tensor of rank 2 or more, found rank {rank}"),
            ));
        }
        let dtype = self.dtype(op, x)?;
        let rows = self.size(x, -2)?;
        let cols = self.size(x, -1)?;
        let zero = self.constant_of(0i64, DataType::I64);
        let one = self.constant_of(1i64, DataType::I64);
        let row = self.iota(Size::Val(rows), zero, one, DataType::I64)?;
        let col = self.iota(Size::Val(cols), zero, one, DataType::I64)?;
        let row = self.broadcast(row, &[false, true])?;
        let col = self.broadcast(col, &[true, false])?;
        let offset = self.binary(BinaryOp::Sub, col, row)?;
        let k = self.constant_of(diagonal, DataType::I64);
        let mask = self.binary(keep, offset, k)?;
        let mut lead = vec![true; rank - 2];
        lead.extend([false, false]);
        let mask = if rank > 2 {
            self.broadcast(mask, &lead)?
        } else {
            mask
        };
        let zero = self.constant_of(0i64, dtype);
        self.where_(mask, x, zero)
    }
}
