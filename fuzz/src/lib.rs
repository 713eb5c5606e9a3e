//! Shared code of the fuzz targets: the input format of `plan_apply` (an ELF file followed by an
//! encoded edit script) and the properties both targets check. `crates/elfpatch/tests/fuzz_corpus.rs`
//! includes `check.rs` by path to replay `fuzz/regressions/` under `cargo test`.

pub mod check;
