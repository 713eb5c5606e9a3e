//! The one count every subcommand reports for the same named paths (pure): files seen, ELF
//! files, loadable objects, skipped by reason, excluded. Built from one [`crate::scan::Scan`].

use serde::Serialize;

use crate::classify::{FileClass, SkipReason};
use crate::printout::count;

/// ELF files skipped, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Separate debug-info files.
    pub separate_debug_files: usize,
    /// Relocatable objects.
    pub relocatable_objects: usize,
    /// Core files.
    pub core_files: usize,
}

impl Skipped {
    /// How many were skipped for `reason`.
    pub fn get(&self, reason: SkipReason) -> usize {
        match reason {
            SkipReason::SeparateDebugFile => self.separate_debug_files,
            SkipReason::RelocatableObject => self.relocatable_objects,
            SkipReason::CoreFile => self.core_files,
        }
    }

    fn add(&mut self, reason: SkipReason) {
        match reason {
            SkipReason::SeparateDebugFile => self.separate_debug_files += 1,
            SkipReason::RelocatableObject => self.relocatable_objects += 1,
            SkipReason::CoreFile => self.core_files += 1,
        }
    }
}

/// What the walk found under the named paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Census {
    /// Regular files listed (named, or found in a named directory), not excluded, whether or
    /// not they could be read.
    pub files_seen: usize,
    /// Files with the ELF magic.
    pub elf_files: usize,
    /// ELF files read as programs and libraries (every ELF file not skipped).
    pub loadable_objects: usize,
    /// ELF files skipped, by reason.
    pub skipped: Skipped,
    /// Files and directories left out by `--exclude`.
    pub excluded: usize,
    /// Files whose first bytes could not be read, and paths that could not be listed.
    pub unreadable: usize,
}

impl Census {
    /// Counts the classes of the files read, `unreadable` paths besides.
    pub fn new<'a>(
        classes: impl IntoIterator<Item = &'a FileClass>,
        unreadable: usize,
        excluded: usize,
    ) -> Census {
        let mut c = Census {
            unreadable,
            excluded,
            ..Census::default()
        };
        for class in classes {
            c.files_seen += 1;
            match class {
                FileClass::NotElf => {}
                FileClass::Object => {
                    c.elf_files += 1;
                    c.loadable_objects += 1;
                }
                FileClass::Skipped(r) => {
                    c.elf_files += 1;
                    c.skipped.add(*r);
                }
            }
        }
        c
    }

    /// The line every subcommand prints, e.g. `stubstrip: 7 files, 4 ELF files, 2 loadable
    /// objects; skipped 1 separate debug-info file, 1 relocatable object; 1 excluded`.
    pub fn line(&self) -> String {
        format!("{}: {}", crate::prog::name(), self.counts())
    }

    /// The count without the program name: `7 files, 4 ELF files, 2 loadable objects; ...`.
    pub fn counts(&self) -> String {
        let mut s = format!(
            "{}, {}, {}",
            count(self.files_seen, "file", "files"),
            count(self.elf_files, "ELF file", "ELF files"),
            count(self.loadable_objects, "loadable object", "loadable objects"),
        );
        let skipped: Vec<String> = SkipReason::ALL
            .iter()
            .filter(|&&r| self.skipped.get(r) > 0)
            .map(|&r| {
                let (one, many) = r.nouns();
                count(self.skipped.get(r), one, many)
            })
            .collect();
        if !skipped.is_empty() {
            s.push_str("; skipped ");
            s.push_str(&skipped.join(", "));
        }
        if self.excluded > 0 {
            s.push_str(&format!("; {} excluded", self.excluded));
        }
        s
    }

    /// When nothing under the named paths can be worked on, the plain sentence saying so (the
    /// subcommand's summary then never says "passed").
    pub fn nothing_to_do(&self) -> Option<&'static str> {
        if self.loadable_objects > 0 {
            None
        } else if self.elf_files == 0 {
            Some("no ELF file under the named paths")
        } else {
            Some("no loadable ELF object under the named paths")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_words_each_class_once() {
        let classes = [
            FileClass::NotElf,
            FileClass::Object,
            FileClass::Object,
            FileClass::Skipped(SkipReason::SeparateDebugFile),
            FileClass::Skipped(SkipReason::RelocatableObject),
            FileClass::Skipped(SkipReason::RelocatableObject),
        ];
        let c = Census::new(&classes, 0, 3);
        assert_eq!((c.files_seen, c.elf_files, c.loadable_objects), (6, 5, 2));
        assert_eq!(SkipReason::ALL.map(|r| c.skipped.get(r)), [1, 2, 0]);
        assert_eq!(
            c.line(),
            "stubstrip: 6 files, 5 ELF files, 2 loadable objects; skipped 1 separate \
             debug-info file, 2 relocatable objects; 3 excluded"
        );
        assert_eq!(c.nothing_to_do(), None);
    }

    #[test]
    fn nothing_to_do_is_said_plainly() {
        let c = Census::new(&[FileClass::NotElf], 0, 0);
        assert_eq!(
            c.line(),
            "stubstrip: 1 file, 0 ELF files, 0 loadable objects"
        );
        assert_eq!(c.nothing_to_do(), Some("no ELF file under the named paths"));
        let c = Census::new(&[FileClass::Skipped(SkipReason::CoreFile)], 0, 0);
        assert_eq!(
            c.nothing_to_do(),
            Some("no loadable ELF object under the named paths")
        );
    }
}
