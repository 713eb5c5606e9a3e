//! Arbitrary bytes: parsing, loading the string-table referrers and validating must return (an
//! error is fine) without panicking, hanging or reading out of bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    elfpatch_fuzz::check::parse_only(data);
});
