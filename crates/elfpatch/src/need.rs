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

use object::elf;

use crate::error::{Error, Result};
use crate::read::Elf;

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
fn type_name(e_type: u16) -> String {
    match e_type {
        elf::ET_NONE => "no file type (e_type ET_NONE)".into(),
        elf::ET_REL => "a relocatable object (e_type ET_REL)".into(),
        elf::ET_CORE => "a core dump (e_type ET_CORE)".into(),
        t => format!("an unknown file type (e_type {t:#x})"),
    }
}

impl Elf {
    /// Whether the file has what `need` asks for; the error says what it is instead.
    pub fn require(&self, need: Need) -> Result<()> {
        let t = self.e_type();
        if t != elf::ET_EXEC && t != elf::ET_DYN {
            return Err(Error::absent(format!(
                "wrong ELF type: {}, not an executable or a shared library",
                type_name(t)
            )));
        }
        match need {
            Need::Image => Ok(()),
            Need::Dynamic if self.dynamic.is_none() => Err(self.no_dynamic()),
            Need::Interpreter if self.interp.is_none() => Err(Error::absent(
                "no PT_INTERP: the file has no program interpreter (a shared library, or a \
                 statically linked program)",
            )),
            Need::Dynamic | Need::Interpreter => Ok(()),
        }
    }

    /// Why a file without a dynamic array cannot answer or take a request of it.
    fn no_dynamic(&self) -> Error {
        if self.phdrs.iter().any(|p| p.p_type == elf::PT_DYNAMIC) {
            // An empty PT_DYNAMIC (linker scripts that list one with nothing in it): glibc reads
            // the array at its address all the same, so no loader uses what a .dynamic section
            // outside it would say, and an array there would be one the loader never meant.
            Error::unsupported("the file's PT_DYNAMIC is empty: there is no dynamic array")
        } else if let Some(reason) = &self.unread_dynamic_section {
            // A .dynamic section no PT_DYNAMIC describes is read when it reads soundly
            // (`Elf::read_dynamic_section`); this one does not.
            Error::unsupported(format!(
                "the file has a .dynamic section but no PT_DYNAMIC, and the section cannot be \
                 read soundly: {reason}"
            ))
        } else if self
            .sections
            .iter()
            .any(|s| s.shdr.sh_type == elf::SHT_DYNAMIC)
        {
            // SHT_NOBITS: a debug-info file's placeholder, not an array.
            Error::unsupported(
                "the file's .dynamic section holds no bytes and there is no PT_DYNAMIC",
            )
        } else {
            Error::absent(
                "no dynamic section (no PT_DYNAMIC): the file is most likely statically linked",
            )
        }
    }
}
