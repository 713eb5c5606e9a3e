//! elfsynth's integration tests, one test binary: each module was a `tests/NAME.rs` of its own,
//! and as one crate they link elfsynth and its dependencies once rather than once per file, and
//! compile `common` once. One file's tests: `cargo test -p elfsynth --test it NAME::`.

mod common;

mod big_files;
mod external_tools;
mod roundtrip;
mod violations;
