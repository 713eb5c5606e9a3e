//! The one description of a section both halves of the crate use: the builder says with it where
//! it placed each section ([`crate::Layout::sections`]), the oracle what a file's section headers
//! say ([`crate::oracle::Elf::sections`]). It is plain data, so the oracle still decodes every
//! header itself.

/// One section: a section header's fields, with its name. Field meanings follow `Elf*_Shdr`.
///
/// The builder lists every section it placed, whether or not it writes section headers
/// ([`crate::PlacedSection`]); the oracle lists the headers a file has
/// ([`crate::oracle::SectionHeader`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Section name, e.g. `.dynstr` (the oracle leaves it empty when it cannot be resolved
    /// through `e_shstrndx`).
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr` (0 for sections the builder does not allocate).
    pub addr: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size`.
    pub size: u64,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info`.
    pub info: u32,
    /// `sh_addralign`.
    pub addralign: u64,
    /// `sh_entsize`.
    pub entsize: u64,
}
