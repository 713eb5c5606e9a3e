//! What dynamic tags and section types mean to the planner: which tags hold addresses, which
//! point at tables the planner may move, which must not appear twice, and which sections are
//! tables a loader only reads. Plain predicates, shared by the preflight checks, the search for
//! room and the writes.

use object::elf;

/// `DT_RELR` (glibc 2.36): not among `object` 0.37's constants.
pub(super) const DT_RELR: u32 = 0x24;
/// `DT_RELRSZ`, see [`DT_RELR`].
pub(super) const DT_RELRSZ: u32 = 0x23;

/// `SHT_RELR` (the section of `DT_RELR`): not among `object` 0.37's constants.
pub(super) const SHT_RELR: u32 = 19;

/// Dynamic tags that name one table each (or its size): they must not appear with two values.
pub(super) const UNIQUE_TAGS: [u32; 13] = [
    elf::DT_STRTAB,
    elf::DT_STRSZ,
    elf::DT_SYMTAB,
    elf::DT_HASH,
    elf::DT_GNU_HASH,
    elf::DT_VERSYM,
    elf::DT_VERNEED,
    elf::DT_VERNEEDNUM,
    elf::DT_VERDEF,
    elf::DT_VERDEFNUM,
    elf::DT_SYMENT,
    elf::DT_SONAME,
    elf::DT_MIPS_RLD_MAP_REL,
];

/// Dynamic tags that point into sections the planner may move (all others stay fixed).
pub(super) fn is_movable_pointer_tag(tag: u64) -> bool {
    [
        elf::DT_HASH,
        elf::DT_GNU_HASH,
        elf::DT_SYMTAB,
        elf::DT_VERSYM,
        elf::DT_VERDEF,
        elf::DT_VERNEED,
    ]
    .iter()
    .any(|&t| u64::from(t) == tag)
}

/// Dynamic tags that point at relocation tables. The loader reads those tables through these tags
/// alone, so a table can move when its tag follows; the planner moves them only out of the string
/// table's way (a range of the tables after it, moved whole: a `DT_RELA` range that takes in
/// `DT_JMPREL`'s keeps doing so). Elsewhere they stay fixed.
pub(super) fn is_relocation_tag(tag: u64) -> bool {
    [elf::DT_RELA, elf::DT_REL, elf::DT_JMPREL, DT_RELR]
        .iter()
        .any(|&t| u64::from(t) == tag)
}

/// Address tags whose target the planner cannot update: anything they point into stays where it
/// is (`DT_STRTAB` is handled on its own, the movable pointers are relocated).
pub(super) fn is_fixed_address_tag(tag: u64) -> bool {
    is_address_tag(tag) && !is_movable_pointer_tag(tag) && tag != u64::from(elf::DT_STRTAB)
}

/// Dynamic tags whose value is an address (`d_ptr`), per the gABI and GNU extensions.
pub(super) fn is_address_tag(tag: u64) -> bool {
    let tag = tag as u32;
    matches!(
        tag,
        elf::DT_PLTGOT
            | elf::DT_HASH
            | elf::DT_STRTAB
            | elf::DT_SYMTAB
            | elf::DT_RELA
            | elf::DT_INIT
            | elf::DT_FINI
            | elf::DT_REL
            | elf::DT_JMPREL
            | elf::DT_INIT_ARRAY
            | elf::DT_FINI_ARRAY
            | elf::DT_PREINIT_ARRAY
            | elf::DT_SYMTAB_SHNDX
            | elf::DT_VERSYM
            | elf::DT_VERDEF
            | elf::DT_VERNEED
            | DT_RELR
    ) || (elf::DT_ADDRRNGLO..=elf::DT_ADDRRNGHI).contains(&tag)
}

/// Section types of the tables a loader only reads, which may therefore move into (or stay in) a
/// read-only segment: notes, hash tables, dynamic symbols and version records. `.dynstr` and
/// `.interp` are recognized by callers from what they are, not their type.
pub(super) fn is_read_only_table_type(sh_type: u32) -> bool {
    matches!(
        sh_type,
        elf::SHT_NOTE
            | elf::SHT_HASH
            | elf::SHT_GNU_HASH
            | elf::SHT_DYNSYM
            | elf::SHT_GNU_VERSYM
            | elf::SHT_GNU_VERNEED
            | elf::SHT_GNU_VERDEF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_table_pointers_move_and_the_rest_stay_fixed() {
        for tag in [
            elf::DT_HASH,
            elf::DT_GNU_HASH,
            elf::DT_SYMTAB,
            elf::DT_VERNEED,
        ] {
            assert!(is_movable_pointer_tag(tag.into()) && !is_fixed_address_tag(tag.into()));
        }
        for tag in [elf::DT_PLTGOT, elf::DT_INIT_ARRAY, elf::DT_JMPREL, DT_RELR] {
            assert!(is_address_tag(tag.into()) && is_fixed_address_tag(tag.into()));
        }
        // The string table moves on its own terms; values and sizes are no addresses.
        assert!(is_address_tag(elf::DT_STRTAB.into()));
        assert!(!is_fixed_address_tag(elf::DT_STRTAB.into()));
        for tag in [elf::DT_NEEDED, elf::DT_STRSZ, DT_RELRSZ, elf::DT_FLAGS_1] {
            assert!(!is_address_tag(tag.into()));
        }
        // GNU's address range (DT_GNU_HASH, DT_TLSDESC_*, ...) counts as addresses.
        assert!(is_address_tag(elf::DT_TLSDESC_GOT.into()));
    }
}
