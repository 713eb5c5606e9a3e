//! What a request needs of a file, and why a file cannot answer it: one rule for reading and
//! editing, so that a print never succeeds where the matching edit refuses, or the reverse.
//!
//! The kinds of file a request does not apply to are patchelf's: an object that is not an
//! executable or a shared library ("wrong ELF type": relocatable objects, cores), a file without
//! a dynamic section ("The input file is most likely statically linked"), one without
//! `PT_INTERP`. They are [`ErrorKind::Absent`](crate::ErrorKind::Absent), which elfpatch's CLI
//! reports with patchelf's status 1. A dynamic section that exists but cannot be used (an empty
//! `PT_DYNAMIC`, a `.dynamic` section no `PT_DYNAMIC` describes that does not read soundly) is
//! another matter: it is [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported).
//!
//! The rule itself is [`Elf::require`](crate::Elf::require), beside the reader whose facts it
//! reads, so that this module, which the planner and the CLI name, does not depend on the reader.

use object::elf;

/// What a request reads or edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The file header and program headers of an executable or shared library (`--print-os-abi`,
    /// `--print-execstack` and their edits).
    Image,
    /// The dynamic array (the run path, `DT_NEEDED`, `DT_SONAME`, the flags, the symbols).
    Dynamic,
    /// `PT_INTERP`.
    Interpreter,
}

/// What a non-loadable `e_type` is, for messages.
pub(crate) fn type_name(e_type: u16) -> String {
    match e_type {
        elf::ET_NONE => "no file type (e_type ET_NONE)".into(),
        elf::ET_REL => "a relocatable object (e_type ET_REL)".into(),
        elf::ET_CORE => "a core dump (e_type ET_CORE)".into(),
        t => format!("an unknown file type (e_type {t:#x})"),
    }
}
