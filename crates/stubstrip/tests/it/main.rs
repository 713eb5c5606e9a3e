//! stubstrip's integration tests, one test binary: each module was a `tests/NAME.rs` of its own,
//! and as one crate they link stubstrip and its dependencies once rather than once per file, and
//! compile `common` once. One file's tests: `cargo test -p stubstrip --test it NAME::`.

mod common;

mod audit_real;
mod cli;
mod damaged;
mod docs_examples;
mod driver_link;
mod explain_loader;
mod fix_check;
mod fixup;
mod layout;
mod note;
mod note_dlopen_real;
mod one_count;
