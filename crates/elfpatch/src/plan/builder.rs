//! The top of planning: from the desired contents (`desired.rs`) to the plan.
//!
//! The desired contents are placed first (`placed.rs`), which chooses between two strategies,
//! each a function of the input and the placement that returns the plan:
//! - **in place** (`in_place.rs`): strings over unreferenced bytes of the string table, the
//!   dynamic array rewritten in its slots, the interpreter in its bytes. Each write is small; the
//!   ones that change live data are ordered so that every intermediate file is valid.
//! - **appended** (`appended/`, copy-on-write): everything that changes is written, modified, into
//!   the appended segment — the string table, `.dynamic`, the interpreter, the version tables —
//!   and one write of the program headers switches the file over. Interrupted before that write,
//!   the file is the old one; after it, the new one. Then section headers follow and dead bytes
//!   are zeroed.
//!
//! Both collect their writes in the same accumulator (`writes.rs`), which ends every plan the
//! same way: section headers that changed, symbol fixups, the writes put in phase order and
//! checked.

use super::appended;
use super::desired::Desired;
use super::in_place;
use super::input::Input;
use super::placed::{place, Strategy};
use super::Plan;
use crate::error::Result;

/// The plan that writes `desired` into `input`'s file: in place when everything fits, appended
/// otherwise.
pub(super) fn build(input: &Input<'_>, desired: Desired) -> Result<Plan> {
    let placed = place(input, desired)?;
    match placed.strategy {
        Strategy::InPlace => in_place::plan(input, &placed),
        Strategy::Appended => appended::plan(input, &placed),
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
