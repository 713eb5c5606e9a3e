//! From the desired contents to the writes.
//!
//! Two ways, chosen by whether everything fits where it is:
//! - **in place** (`in_place.rs`): strings over unreferenced bytes of the string table, the
//!   dynamic array rewritten in its slots, the interpreter in its bytes. Each write is small; the
//!   ones that change live data are ordered so that every intermediate file is valid.
//! - **appended** (`appended/`, copy-on-write): everything that changes is written, modified, into
//!   the appended segment — the string table, `.dynamic`, the interpreter, the version tables —
//!   and one write of the program headers switches the file over. Interrupted before that write,
//!   the file is the old one; after it, the new one. Then section headers follow and dead bytes
//!   are zeroed.
//!
//! Both start from the same new contents (`contents.rs`) and end the same way (here): section
//! headers that changed, symbol fixups, the writes put in phase order and checked.

use object::elf;

use super::contents::{defines_versions, section_at, update_version_entries, NewVersions};
use super::edits::{Desired, Entry, SymbolEdits, VerneedEdits};
use super::header::NewTable;
use super::note_edit::NoteChange;
use super::{Data, Input, Layout, Phase, Plan, SectionMove, SymbolFixup, Write};
use crate::error::{Error, Result};
use crate::format::Shdr;
use crate::plan::appended::table_grows_in_place;
use crate::plan::contents::{new_versions, place_strings};
use crate::plan::edits::dynamic_changed;
use crate::plan::note_edit::note_fits;

/// What the writes of the file header are called: the only writes allowed over it.
pub(super) const ELF_HEADER: &str = "ELF header";
/// See [`ELF_HEADER`].
pub(super) const ELF_AND_PROGRAM_HEADERS: &str = "ELF and program headers";

/// Builds the plan once the desired contents are known.
pub(super) struct Builder<'p, 'a> {
    pub(super) planner: &'p Input<'a>,
    /// The dynamic entries to write (version tags adjusted once the records are known).
    pub(super) entries: Vec<Entry>,
    pub(super) verneed_edits: VerneedEdits,
    /// The new interpreter path, when it changes.
    pub(super) interp: Option<Vec<u8>>,
    /// Renamed symbols and cleared versions.
    pub(super) symbols: SymbolEdits,
    /// What becomes of the resolution-cache note.
    pub(super) note: NoteChange,
    /// The identification bytes and program headers the header edits ask for.
    pub(super) table: NewTable,
    writes: Vec<Write>,
}

impl<'p, 'a> Builder<'p, 'a> {
    pub(super) fn new(
        planner: &'p Input<'a>,
        desired: Desired,
        note: NoteChange,
        table: NewTable,
    ) -> Self {
        Builder {
            planner,
            entries: desired.entries,
            verneed_edits: desired.verneed,
            interp: desired.interp,
            symbols: desired.symbols,
            note,
            table,
            writes: Vec::new(),
        }
    }

    /// The new contents, then the writes: in place when everything fits, appended otherwise.
    pub(super) fn build(mut self) -> Result<Plan> {
        let elf = self.planner.elf;
        let records_before = self
            .planner
            .tables
            .verneed
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let planner = self.planner;
        let place = |own_spots| {
            place_strings(
                planner,
                &self.entries,
                &self.verneed_edits,
                &records_before,
                &self.symbols,
                own_spots,
            )
        };
        let mut strings = place(true)?;
        if strings.alloc.grows() && strings.live_writes {
            // A string over the one it replaces switches with its own write, not with the
            // others: a table that grows where it is (`appended/tail.rs`) takes its new strings
            // only where nothing was, so that they all switch together.
            strings = place(false)?;
        }
        // Tables read for edits that change no symbol version hold none (`Tables::read_with`).
        let versions_needed =
            !self.verneed_edits.removals.is_empty() || !self.symbols.cleared.is_empty();
        let unread = planner
            .tables
            .versym
            .as_ref()
            .is_some_and(|(r, v)| v.is_empty() && r.size > 0);
        if versions_needed && unread {
            return Err(crate::error::Error::refused(
                "the edit changes symbol versions, which these tables were read without",
            ));
        }
        let versions = new_versions(
            planner,
            &self.verneed_edits,
            records_before,
            &strings,
            &self.symbols,
        );
        update_version_entries(&mut self.entries, &self.verneed_edits, &versions, elf);

        let entries_changed = dynamic_changed(self.planner, &self.entries);
        let capacity = elf.dynamic.as_ref().map_or(0, |d| d.capacity());
        let interp_fits = match (&self.interp, &elf.interp) {
            (Some(new), Some(old)) => (new.len() as u64) < old.capacity,
            _ => true,
        };
        // Program headers the edits add fit when zeros follow the table (a PT_NULL entry is
        // already in the table).
        let table_fits = table_grows_in_place(self.planner, &self.table);
        // Renamed symbols always go the appended way: the symbol table, both hash tables and the
        // strings change together, so they are written as copies and switched to in one write.
        let fits = self.symbols.renames.is_empty()
            && !strings.alloc.grows()
            && (!entries_changed || self.entries.len() < capacity)
            && interp_fits
            && note_fits(self.planner, &self.note)
            && table_fits;
        if fits {
            self.in_place(strings, versions, entries_changed)
        } else {
            self.appended(strings, versions, entries_changed)
        }
    }

    pub(super) fn push(&mut self, offset: u64, data: Data, len: u64, phase: Phase, what: &str) {
        if len > 0 {
            self.writes.push(Write {
                offset,
                len,
                data,
                phase,
                what: what.to_string(),
            });
        }
    }

    pub(super) fn push_bytes(&mut self, offset: u64, bytes: Vec<u8>, phase: Phase, what: &str) {
        let len = bytes.len() as u64;
        self.push(offset, Data::Bytes(bytes), len, phase, what);
    }

    /// Records that section `index` now lives at `offset`/`addr` with `size`. A section can move
    /// twice in one plan (with the block, then on its own): symbols follow the composition, from
    /// the original address.
    pub(super) fn note_move(
        &self,
        shdrs: &mut [Shdr],
        moves: &mut Vec<SectionMove>,
        index: usize,
        offset: u64,
        addr: u64,
        size: u64,
    ) {
        let original = self.planner.elf.sections[index].shdr;
        moves.retain(|m| m.shndx != index as u16);
        if original.sh_addr != addr {
            moves.push(SectionMove {
                shndx: index as u16,
                old_addr: original.sh_addr,
                old_size: original.sh_size,
                delta: addr.wrapping_sub(original.sh_addr),
                absolute_start: original.sh_type == elf::SHT_DYNAMIC,
            });
        }
        let sh = &mut shdrs[index];
        (sh.sh_offset, sh.sh_addr, sh.sh_size) = (offset, addr, size);
    }

    /// `.gnu.version_r`'s `sh_info` is its record count. When no record is left and the file
    /// defines no versions, `.gnu.version` describes nothing any more: `DT_VERSYM` goes
    /// (`update_version_entries`) and its section header becomes an all-zero `SHT_NULL` entry, as
    /// a removed note's does (no index changes).
    pub(super) fn version_section_counts(&self, shdrs: &mut [Shdr], versions: &NewVersions) {
        if versions.kept == versions.entries.len() {
            return;
        }
        let planner = self.planner;
        let region = planner.tables.verneed.as_ref().map(|(r, _)| *r);
        if let Some(i) = section_at(planner.elf, elf::SHT_GNU_VERNEED, region) {
            shdrs[i].sh_info = versions.kept as u32;
        }
        if versions.kept == 0 && !defines_versions(planner.elf) {
            let region = planner.tables.versym.as_ref().map(|(r, _)| *r);
            if let Some(i) = section_at(planner.elf, elf::SHT_GNU_VERSYM, region) {
                shdrs[i] = Shdr::default();
            }
        }
    }

    /// One cleanup write per section header that changed.
    pub(super) fn section_header_writes(&mut self, shdrs: &[Shdr]) {
        let elf = self.planner.elf;
        let format = self.planner.format;
        for (i, (new, old)) in shdrs.iter().zip(elf.sections.iter()).enumerate() {
            if *new != old.shdr {
                let at = elf.header.e_shoff + (i * format.shdr_size()) as u64;
                self.push_bytes(
                    at,
                    format.encode_shdr(new),
                    Phase::Cleanup,
                    "section header",
                );
            }
        }
    }

    /// The symbol tables whose symbols must follow the moved sections.
    pub(super) fn symbol_fixups(
        &self,
        shdrs: &[Shdr],
        moves: Vec<SectionMove>,
    ) -> Vec<SymbolFixup> {
        if moves.is_empty() {
            return Vec::new();
        }
        let sym_size = self.planner.format.sym_size() as u64;
        self.planner
            .elf
            .sections
            .iter()
            // An empty table has nothing to fix, and its offset is checked by nobody: a garbage
            // one may point anywhere.
            .filter(|x| {
                matches!(x.shdr.sh_type, elf::SHT_SYMTAB | elf::SHT_DYNSYM)
                    && x.shdr.sh_size >= sym_size
            })
            .map(|x| SymbolFixup {
                table: x.index,
                offset: shdrs[x.index].sh_offset,
                count: x.shdr.sh_size / sym_size,
                moves: moves.clone(),
            })
            .collect()
    }

    /// Orders the writes and checks they stay inside the new file.
    pub(super) fn finish(
        mut self,
        layout: Layout,
        new_len: u64,
        symbol_fixups: Vec<SymbolFixup>,
    ) -> Result<Plan> {
        // The last line of defence: only the header write itself may touch the ELF header. The
        // checks in `preflight` refuse the inputs known to lead here; anything else that does is
        // refused too rather than written.
        let ehdr = self.planner.format.ehdr_size() as u64;
        if let Some(w) = self
            .writes
            .iter()
            .find(|w| w.offset < ehdr && w.what != ELF_HEADER && w.what != ELF_AND_PROGRAM_HEADERS)
        {
            return Err(Error::refused(format!(
                "the edit would write {} over the ELF header: the file's tables are not where its headers say",
                w.what
            )));
        }
        // Stage, commit, cleanup; within cleanup, section headers before zeroing (right after the
        // commit they are the only thing still describing the old layout). Stable otherwise.
        self.writes
            .sort_by_key(|w| (w.phase, w.phase == Phase::Cleanup && w.data == Data::Zero));
        debug_assert!(
            self.writes.iter().all(|w| w.offset + w.len <= new_len),
            "write past the end"
        );
        Ok(Plan {
            writes: self.writes,
            old_len: self.planner.elf.file_len,
            new_len,
            symbol_fixups,
            layout,
        })
    }
}

#[cfg(test)]
mod tests {
    use elfsynth::Spec;

    use crate::plan::{plan, Edit, Layout, Options};
    use crate::{Elf, Tables};

    fn layout_of(spec: &Spec, edits: &[Edit]) -> Layout {
        layout_of_bytes(&elfsynth::build(spec), edits)
    }

    fn layout_of_bytes(bytes: &[u8], edits: &[Edit]) -> Layout {
        let elf = Elf::parse(bytes).unwrap();
        let tables = Tables::read(bytes, &elf).unwrap();
        plan(&elf, &tables, edits, &Options::default())
            .unwrap()
            .layout
    }

    fn moved_names(layout: &Layout) -> Vec<String> {
        match layout {
            Layout::Appended { moved, .. } => moved.clone(),
            other => panic!("not appended: {other:?}"),
        }
    }

    #[test]
    fn what_fits_where_it_is_is_written_in_place() {
        let spec = Spec {
            runpath: Some("/nix/store/aaaa-cuda-stubs/lib/stubs".into()),
            ..Spec::default()
        };
        let shorter = Edit::SetRunpath(b"/run/opengl-driver/lib".to_vec());
        assert_eq!(layout_of(&spec, &[shorter]), Layout::InPlace);
        let shorter = Edit::SetInterpreter(b"/lib/ld.so".to_vec());
        assert_eq!(layout_of(&spec, &[shorter]), Layout::InPlace);
        let nothing = Edit::SetRunpath(spec.runpath.clone().unwrap().into_bytes());
        assert_eq!(layout_of(&spec, &[nothing]), Layout::Unchanged);
    }

    #[test]
    fn an_added_entry_stays_in_place_only_when_a_spare_slot_and_its_string_are_there() {
        // "printf" is a symbol name already in .dynstr: only the entry is new.
        let soname = Edit::SetSoname(b"printf".to_vec());
        let spare = Spec {
            spare_dynamic_slots: 1,
            ..Spec::default()
        };
        assert_eq!(
            layout_of(&spare, std::slice::from_ref(&soname)),
            Layout::InPlace
        );
        let moved = moved_names(&layout_of(&Spec::default(), &[soname]));
        assert!(moved.contains(&".dynamic".to_string()), "{moved:?}");
        assert!(!moved.contains(&".dynstr".to_string()), "{moved:?}");
    }

    #[test]
    fn a_string_table_with_room_after_it_grows_where_it_is() {
        // elfsynth puts the version tables after .dynstr and the code on the next page: they
        // move into the rest of the first segment's last page, and .dynstr grows over them.
        let longer = Edit::SetRunpath(b"/a/much/longer/run/path/than/the/one/there".to_vec());
        let moved = match layout_of(&Spec::default(), std::slice::from_ref(&longer)) {
            Layout::Grown { moved } => moved,
            other => panic!("not grown where it is: {other:?}"),
        };
        assert!(moved.contains(&".gnu.version".to_string()), "{moved:?}");
        assert!(!moved.contains(&".dynstr".to_string()), "{moved:?}");
        // Growing it again needs nothing more to move: the room left after it takes the strings.
        let bytes = elfsynth::build(&Spec::default());
        let elf = Elf::parse(&bytes).unwrap();
        let tables = Tables::read(bytes.as_slice(), &elf).unwrap();
        let plan = plan(&elf, &tables, &[longer], &Options::default()).unwrap();
        let mut once = bytes.clone();
        plan.apply_to_vec(&mut once, elf.format).unwrap();
        let again = Edit::SetRunpath(b"/an/even/longer/run/path/than/the/one/there/now".to_vec());
        assert_eq!(
            layout_of_bytes(&once, &[again]),
            Layout::Grown { moved: Vec::new() }
        );
    }

    #[test]
    fn what_grows_without_room_is_copied_into_the_appended_segment() {
        let longer = Edit::SetRunpath(b"/a/much/longer/run/path/than/the/one/there".to_vec());
        // Without section headers nothing tells padding from data after the string table.
        let tail = Spec {
            with_section_headers: false,
            bss_size: 0,
            ..Spec::default()
        };
        let layout = layout_of(&tail, std::slice::from_ref(&longer));
        assert!(
            matches!(layout, Layout::Appended { extended: true, .. }),
            "{layout:?}"
        );
        // More than the rest of the page after the tables: a new PT_LOAD (its header in room
        // made by moving the tables after the program headers) with a copy of .dynstr.
        let much_longer = Edit::SetRunpath(vec![b'r'; 5000]);
        let layout = layout_of(&Spec::default(), &[much_longer]);
        let Layout::Appended {
            extended,
            moved_phdrs,
            moved,
        } = &layout
        else {
            panic!("{layout:?}");
        };
        assert!(!extended && !moved_phdrs, "{layout:?}");
        for name in [".interp", ".dynstr", ".dynamic"] {
            assert!(moved.contains(&name.to_string()), "{name} in {moved:?}");
        }
        let longer = Edit::SetInterpreter(b"/a/much/longer/interpreter/path/ld.so".to_vec());
        let moved = moved_names(&layout_of(&Spec::default(), &[longer]));
        assert!(moved.contains(&".interp".to_string()), "{moved:?}");
        assert!(!moved.contains(&".dynamic".to_string()), "{moved:?}");
    }
}
