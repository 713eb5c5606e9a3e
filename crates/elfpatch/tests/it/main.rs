//! elfpatch's integration tests, one test binary: each module was a `tests/NAME.rs` of its own,
//! and as one crate they link elfpatch and its dependencies once rather than once per file, and
//! compile `common` once. One file's tests: `cargo test -p elfpatch --test it NAME::`.
//!
//! proptest keeps the seeds of failures it found in `tests/proptest-regressions/NAME.txt`: it
//! looks beside the directory holding `main.rs`, not beside the module's file.

mod common;

mod bad_input;
mod build_resolution_cache;
mod cli_docs;
mod cli_rules;
mod example_package;
mod fault_injection;
mod maturin_repair;
mod no_pt_dynamic;
mod note;
mod patchelf_options;
mod paths;
mod post_strip;
mod real_binaries;
mod refusals;
mod section_headers_last;
mod symbols;
mod synthetic;
mod versions;
