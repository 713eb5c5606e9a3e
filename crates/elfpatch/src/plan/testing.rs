//! Unit-test support: an [`Input`] over a file elfsynth builds from a spec, with the layout of
//! that file to compare the planner's decisions with.

use super::input::Input;
use super::{Dynstr, Options};
use crate::read::Elf;
use crate::refs::Tables;

/// Builds `spec`, parses it and runs `check` on the input of a plan of it (preflight included).
pub(super) fn with_input<R>(
    spec: &elfsynth::Spec,
    opts: &Options,
    check: impl FnOnce(&Input<'_>, &elfsynth::Layout) -> R,
) -> R {
    with_edited_input(spec, opts, |_| {}, check)
}

/// [`with_input`], with the parsed headers changed by `edit` first (what elfsynth cannot
/// build: an entry point or an alignment elsewhere).
pub(super) fn with_edited_input<R>(
    spec: &elfsynth::Spec,
    opts: &Options,
    edit: impl FnOnce(&mut Elf),
    check: impl FnOnce(&Input<'_>, &elfsynth::Layout) -> R,
) -> R {
    let bytes = elfsynth::build(spec);
    let layout = elfsynth::layout(spec).expect("a valid spec");
    let mut elf = Elf::parse(&bytes).expect("elfpatch reads what elfsynth builds");
    edit(&mut elf);
    let tables = Tables::read(bytes.as_slice(), &elf).expect("and its tables");
    let whole = elf.strtab.as_ref().and_then(|s| s.bytes()).unwrap_or(&[]);
    let dynstr = Dynstr::whole(whole);
    let input = Input::new(&elf, &tables, &dynstr, opts).expect("a sane file passes preflight");
    check(&input, &layout)
}

/// Where the program header table of a built file ends.
pub(super) fn phdr_table_end(layout: &elfsynth::Layout, spec: &elfsynth::Spec) -> u64 {
    let entry = match spec.class {
        elfsynth::Class::Elf32 => 32,
        elfsynth::Class::Elf64 => 56,
    };
    layout.phoff + entry * layout.segments.len() as u64
}
