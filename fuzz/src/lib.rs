//! Shared code of the fuzz targets: the input format of `plan_apply` (an ELF file followed by an
//! encoded edit script) and the properties both targets check live in `crates/elfpatch-check`,
//! which the main workspace's tests use too; this crate re-exports it as `check`.

pub use elfpatch_check as check;
