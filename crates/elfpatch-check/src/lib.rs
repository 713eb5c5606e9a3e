//! The properties every elfpatch edit must keep: what the fuzz targets (`fuzz/`) check, what
//! `tests/fuzz_corpus.rs` replays on the inputs fuzzing found (`regressions/`), and the reference
//! model of the edits ([`Info`], [`Model`]) that elfpatch's own tests compare with. A crate of its
//! own so that the fuzz workspace and the main one share it without reaching across the tree. It
//! depends only on `elfpatch` and on `elfsynth`, whose oracle reads files independently of
//! elfpatch.
//!
//! Its modules: `script`, the `plan_apply` input format (an ELF file and an edit script decoded
//! into batches of edits, and encoded for seeds); `model`, what each edit should do; `issues`,
//! which validation issues of an edited file are new; `properties`, the fuzz targets' checks.
//! Everything public is re-exported here.
//!
//! # Input format of `plan_apply`
//!
//! `[ELF file][edit script][script length: u16 little endian]`. The length sits at the end so that
//! the fuzzer's insertions and deletions inside the (much larger) ELF part keep the script intact.
//! A length larger than what precedes it is clamped; an input shorter than 2 bytes is all ELF.
//!
//! The script: one options byte (bit 7: `page_size = 4 KiB << (bits 0..2)`; bits 3..5:
//! `dynamic_spare`), then operations. An operation byte `op` selects the entry `op % 16` of
//! [`OPS`], which says what operands follow and which edit they make; one entry ends the batch,
//! and the operations after it form another batch, planned on the edited file.
//!
//! A string operand is one byte `s`: below `0x40` an entry of [`DICT`]; `0x40..0x80` a generated
//! path of `(s & 0x3f) * 16 + next byte` bytes; from `0x80` the next `s & 0x7f` raw bytes of the
//! script (NUL bytes included, which the planner must refuse). An existing-name operand is one byte
//! `e`: below `0x80` the `e % n`-th `DT_NEEDED` name of the file being edited (or a dictionary
//! entry when there is none), otherwise a string operand follows.
//!
//! # Properties
//!
//! For every batch: parsing, loading tables, validating and planning return without panicking. If
//! planning fails nothing is applied. If it succeeds, `apply_to_vec` succeeds, the result has the
//! plan's length, re-parses with elfpatch and (when the input did) with `elfsynth::oracle`, says
//! exactly what the edits asked (NEEDED, RUNPATH, RPATH, SONAME, interpreter, through both readers),
//! and neither `validate::check` nor `oracle::check_layout` reports anything new.

mod issues;
mod model;
mod properties;
mod script;

pub use issues::{new_issues, normalize, validate_issues};
pub use model::{Asked, Info, Model};
pub use properties::{
    counts_disagree, fixup_out_of_file, parse_only, plan_apply, plan_apply_checked, show, Failure,
    Stats,
};
pub use script::{
    encode, first_batch, generated_path, join, options, split, Op, DICT, MAX_BATCHES, MAX_EDITS,
    OPS,
};
