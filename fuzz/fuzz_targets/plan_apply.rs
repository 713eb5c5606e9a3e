//! An ELF file followed by an edit script (see `check::split`): parse, plan each batch, apply in
//! memory, and check the result (see `check::plan_apply`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    elfpatch_fuzz::check::plan_apply(data);
});
