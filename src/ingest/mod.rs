//! Ways records come in besides plain SQL, and the rules they all share.
//!
//! - [`validate`]: one rulebook for what a valid record is, and how it is
//!   normalised, whatever the record came through.

pub mod validate;
