//! The section header table after an appended edit.
//!
//! Linkers and `strip` put the section header table last in the file, and tools rely on it
//! (patchelf's test helper `pad-to-page` refuses a file whose table does not end it). An
//! appended edit puts its segment at the end of the file, after the table; when the table ended
//! the input ([`Elf::section_headers_end_file`](crate::Elf::section_headers_end_file)), an
//! updated copy of it is written after the segment, so that it ends the output too. A table
//! that did not end the input (data after it: an appended payload, a signature) stays where it
//! is: the property is kept, not imposed.
//!
//! The old copy is left as it is, not zeroed: nothing points at it once `e_shoff` moves, it
//! holds no string that the edit removes (only offsets and indexes into the section name table,
//! which stays), and zeroing it would be a write of the whole table where the edit needs none.
//! The library writes only what changes.

use object::elf;

use crate::format::{Header, Shdr};
use crate::note;
use crate::plan::input::Input;
use crate::plan::note_writes::note_extra_phdrs;
use crate::plan::placed::Placed;
use crate::plan::writes::Writes;
use crate::plan::{Data, Phase};

/// Whether the appended edit moves the section header table after its segment: the table
/// ends the input file.
pub(super) fn section_table_follows(input: &Input<'_>) -> bool {
    input.elf.section_headers_end_file()
}

/// Stages `table` as the section header table at `at` (rounded up to the word size), where
/// nothing points yet, and points `header` at it (the commit write switches to it). Returns
/// where it ends: the new end of the file.
pub(super) fn stage_section_table(
    input: &Input<'_>,
    w: &mut Writes<'_>,
    table: &[Shdr],
    header: &mut Header,
    at: u64,
) -> u64 {
    let format = input.format;
    let table_at = at.next_multiple_of(format.word_size());
    let bytes: Vec<u8> = table.iter().flat_map(|sh| format.encode_shdr(sh)).collect();
    let table_end = table_at + bytes.len() as u64;
    w.push_bytes(table_at, bytes, Phase::Stage, "section header table");
    header.e_shoff = table_at;
    table_end
}

/// A note added to a file with usable section headers gets a section `.note.nixos.ldcache`:
/// a copy of the section name table with the name appended, and a copy of the section header
/// table (`shdrs`, as the edit leaves them) with the header of the note at `new_note` (offset,
/// address, size) appended, both staged from
/// `end` on; `header` points at them. Returns the new end of the file, `None` when no
/// section is added.
pub(super) fn add_note_section(
    input: &Input<'_>,
    placed: &Placed,
    w: &mut Writes<'_>,
    new_note: (u64, u64, u64),
    header: &mut Header,
    shdrs: &[Shdr],
    end: u64,
) -> Option<u64> {
    let elf = input.elf;
    let format = input.format;
    let shstrndx = usize::from(elf.header.e_shstrndx);
    let usable = note_extra_phdrs(input, placed) == 1
        && !elf.sections.is_empty()
        && !elf.section_headers_unusable()
        && usize::from(elf.header.e_shentsize) == format.shdr_size()
        && shstrndx > 0
        && shstrndx < elf.sections.len()
        && elf.sections.len() + 1 < usize::from(elf::SHN_LORESERVE)
        && elf.sections[shstrndx].shdr.sh_type == elf::SHT_STRTAB;
    if !usable {
        return None;
    }
    let old_names = elf.sections[shstrndx].shdr;
    let mut name = note::SECTION_NAME.to_vec();
    name.push(0);
    let names_at = end;
    w.push(
        names_at,
        Data::Copy(old_names.sh_offset),
        old_names.sh_size,
        Phase::Stage,
        "section names",
    );
    let name_at = names_at + old_names.sh_size;
    w.push_bytes(name_at, name.clone(), Phase::Stage, "section name");
    let mut table = shdrs.to_vec();
    table[shstrndx].sh_offset = names_at;
    table[shstrndx].sh_size = old_names.sh_size + name.len() as u64;
    let (offset, vaddr, size) = new_note;
    table.push(Shdr {
        sh_name: old_names.sh_size as u32,
        sh_type: elf::SHT_NOTE,
        sh_flags: u64::from(elf::SHF_ALLOC),
        sh_addr: vaddr,
        sh_offset: offset,
        sh_size: size,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: note::NOTE_ALIGN,
        sh_entsize: 0,
    });
    header.e_shnum = table.len() as u16;
    Some(stage_section_table(
        input,
        w,
        &table,
        header,
        name_at + name.len() as u64,
    ))
}

#[cfg(test)]
mod tests {
    use elfsynth::{Class, Endian, Spec};
    use object::elf;

    use crate::plan::{plan, Edit, Options};
    use crate::{Elf, Tables};

    /// Plans `edits` on `bytes` and applies them in memory.
    fn edited(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
        let elf = Elf::parse(bytes).unwrap();
        let tables = Tables::read(bytes, &elf).unwrap();
        let plan = plan(&elf, &tables, edits, &Options::default()).unwrap();
        let mut out = bytes.to_vec();
        plan.apply_to_vec(&mut out, elf.format).unwrap();
        out
    }

    fn run_path(len: usize) -> Edit {
        Edit::SetRunpath(vec![b'r'; len])
    }

    fn interpreter(len: usize) -> Edit {
        let mut path = vec![b'i'; len];
        path[0] = b'/';
        Edit::SetInterpreter(path)
    }

    fn loads(elf: &Elf) -> usize {
        elf.phdrs
            .iter()
            .filter(|p| p.p_type == elf::PT_LOAD)
            .count()
    }

    fn specs() -> Vec<Spec> {
        let mut v = Vec::new();
        for class in Class::ALL {
            for endian in Endian::ALL {
                v.push(Spec {
                    class,
                    endian,
                    ..Spec::default()
                });
            }
        }
        v
    }

    #[test]
    fn only_fewer_than_a_page_of_zeros_after_the_table_leave_it_last() {
        for spec in specs() {
            let bytes = elfsynth::build(&spec);
            assert!(Elf::parse(&bytes).unwrap().section_headers_end_file());
            let after = |tail: &[u8]| {
                let mut b = bytes.clone();
                b.extend_from_slice(tail);
                Elf::parse(&b).unwrap().section_headers_end_file()
            };
            assert!(after(&[0; 8]) && after(&[0; 4095]), "{spec:?}");
            assert!(!after(&[0; 4096]), "a page of zeros is data: {spec:?}");
            assert!(!after(b"SIG\0"), "{spec:?}");
            assert!(!after(&[0, 0, 0, 1]), "{spec:?}");
        }
        let bare = Spec {
            with_section_headers: false,
            ..Spec::default()
        };
        assert!(!Elf::parse(&elfsynth::build(&bare))
            .unwrap()
            .section_headers_end_file());
    }

    #[test]
    fn the_table_still_ends_the_file_edit_after_edit_in_both_classes_and_byte_orders() {
        for spec in specs() {
            let input = elfsynth::build(&spec);
            let before = Elf::parse(&input).unwrap();
            // A longer interpreter moves into an appended segment (a string table that grows
            // where it is adds none, `tail.rs`).
            let once = edited(&input, &[interpreter(300)]);
            let after = Elf::parse(&once).unwrap();
            assert!(after.section_headers_end_file(), "{spec:?}");
            assert_eq!(
                after.section_table_end(),
                Some(once.len() as u64),
                "{spec:?}"
            );
            assert!(after.header.e_shoff >= input.len() as u64, "{spec:?}");
            assert_eq!(loads(&after), loads(&before) + 1, "{spec:?}");
            // The section headers the edit updated are the ones in the new table.
            let interp = after.section_by_name(b".interp").unwrap().shdr;
            assert_eq!(
                Some(interp.sh_offset),
                after.interp.as_ref().map(|i| i.offset),
                "{spec:?}"
            );
            // Again and again: the appended segment grows over the old table, no segment is
            // added, and each edit adds its copies and one table.
            let mut last = once;
            for round in 0..4 {
                let next = edited(&last, &[interpreter(400 + 100 * round)]);
                let elf = Elf::parse(&next).unwrap();
                assert!(elf.section_headers_end_file(), "{spec:?} round {round}");
                assert_eq!(loads(&elf), loads(&after), "{spec:?} round {round}");
                let table = elf.sections.len() as u64 * u64::from(elf.header.e_shentsize);
                let grown = (next.len() - last.len()) as u64;
                assert!(grown <= table + 2048, "{spec:?} round {round}: {grown}");
                last = next;
            }
            // A run path that grows where its string table is leaves the table where it is.
            let grown = edited(&last, &[run_path(300)]);
            let elf = Elf::parse(&grown).unwrap();
            assert!(elf.section_headers_end_file(), "{spec:?}");
            assert_eq!(loads(&elf), loads(&after), "{spec:?}");
        }
    }

    #[test]
    fn a_table_with_data_after_it_stays_where_it_is() {
        for spec in specs() {
            let mut input = elfsynth::build(&spec);
            input.extend_from_slice(b"PAYLOAD");
            let before = Elf::parse(&input).unwrap();
            let out = edited(&input, &[run_path(300)]);
            let after = Elf::parse(&out).unwrap();
            assert_eq!(after.header.e_shoff, before.header.e_shoff, "{spec:?}");
            let end = before.section_table_end().unwrap() as usize;
            assert_eq!(&out[end..end + 7], b"PAYLOAD", "{spec:?}");
        }
    }
}
