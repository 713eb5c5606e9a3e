//! The exit statuses: the one type every subcommand returns, and the words `--help`, each
//! subcommand's help and the manual page print for them, kept side by side so that a number and
//! its meaning cannot drift apart.

use std::process::ExitCode;

/// How a run of stubstrip ended. The rows elfpatch shares (0, 2, 3 and the general meaning of 1)
/// are worded as in its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done, nothing found.
    Done,
    /// 1: the answer is "found" (a stub entry, a library missing, a finding), or driver-link
    /// refused; which subcommands, and what each found: [`SUBCOMMANDS`].
    Found,
    /// 2: the command line cannot be used.
    Usage,
    /// 3: a file could not be opened, read, edited or written, or stdout could not be written.
    Failed,
}

impl Exit {
    /// Every status, in the order the tables list them.
    pub const ALL: [Exit; 4] = [Exit::Done, Exit::Found, Exit::Usage, Exit::Failed];

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::Found => 1,
            Exit::Usage => 2,
            Exit::Failed => 3,
        }
    }

    /// What it means, for every subcommand: its row of the top-level table (`--help`, the
    /// manual page).
    pub fn meaning(self) -> String {
        match self {
            Exit::Done => "done; nothing found".to_string(),
            Exit::Found => {
                let each: Vec<String> = SUBCOMMANDS
                    .iter()
                    .filter_map(|s| s.found.map(|f| format!("{} {}", s.name, f.summary)))
                    .collect();
                format!("the answer is \"found\": {}", each.join("; "))
            }
            Exit::Usage => "usage error (bad command line)".to_string(),
            Exit::Failed => "a file could not be opened (for reading, or fix's for writing), read \
                 or edited (the other files still are, and one that failed is left \
                 byte-identical); or stdout could not be written (a closed pipe ends the printing \
                 quietly instead)"
                .to_string(),
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}

/// What status 1 means for a subcommand that exits with it.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// In the top-level table, after the subcommand's name: `check found stub entries`.
    pub summary: &'static str,
    /// In the subcommand's own help.
    pub help: &'static str,
}

/// What each status means for one subcommand, in the words of its help.
#[derive(Clone, Copy, Debug)]
pub struct Statuses {
    /// The subcommand.
    pub name: &'static str,
    /// Status 0.
    pub done: &'static str,
    /// Status 1; `None` for a subcommand that never exits with it.
    pub found: Option<Found>,
    /// Status 3.
    pub failed: &'static str,
}

/// Every subcommand's statuses, in the order the top-level table names them under status 1.
pub const SUBCOMMANDS: &[Statuses] = &[
    Statuses {
        name: "fix",
        done: "done",
        found: None,
        failed: "some file could not be opened for reading or writing, read or edited (the \
                 others are processed, and it is left byte-identical)",
    },
    Statuses {
        name: "check",
        done: "no stub entry (also when PATH... holds no ELF file: an output of headers or \
               documentation is clean, and the summary says 'nothing checked')",
        found: Some(Found {
            summary: "found stub entries",
            help: "stub entries found (even if some file could not be read)",
        }),
        failed: "some file could not be read",
    },
    Statuses {
        name: "explain",
        done: "every library found",
        found: Some(Found {
            summary: "found a library missing, unloadable or a stub",
            help: "a library is not found, cannot be loaded or is a stub (a dlopen() the program \
                   makes itself and copes without is not counted; a driver library only the \
                   driver link provides is, unless --assume-driver)",
        }),
        failed: "FILE cannot be read",
    },
    Statuses {
        name: "audit",
        done: "no finding at or above --deny",
        found: Some(Found {
            summary: "found a finding at or above --deny",
            help: "a finding at or above --deny",
        }),
        failed: "some file could not be read",
    },
    Statuses {
        name: "fixup",
        done: "done",
        found: Some(Found {
            summary: "left a stub entry or met an audit finding at or above --audit",
            help: "a stub entry is left after the fix, or an audit finding at or above --audit",
        }),
        failed: "the check could not read some file, or the check libraries or the reply could \
                 not be written",
    },
    Statuses {
        name: "driver-link",
        done: "done (or nothing to change)",
        found: Some(Found {
            summary: "refused (nothing changed)",
            help: "refused, nothing changed: no driver, a driver/library version mismatch, two \
                   driver versions and no kernel module to choose, files in the driver link this \
                   command did not make, or NixOS",
        }),
        failed: "a file could not be read or written (as far as it got is done; run it again)",
    },
];

impl Statuses {
    /// What `e` means for this subcommand; `None` if it never exits with `e`.
    pub fn of(&self, e: Exit) -> Option<&'static str> {
        match e {
            Exit::Done => Some(self.done),
            Exit::Found => self.found.map(|f| f.help),
            Exit::Usage => Some("usage error"),
            Exit::Failed => Some(self.failed),
        }
    }
}

/// The line a subcommand's help gives its exit statuses: `Exit status: 0 done; 2 usage error;
/// 3 ...`.
pub fn subcommand_help(name: &str) -> String {
    let s = SUBCOMMANDS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no exit statuses for the subcommand {name}"));
    let each: Vec<String> = Exit::ALL
        .iter()
        .filter_map(|&e| s.of(e).map(|what| format!("{} {what}", e.code())))
        .collect();
    format!("Exit status: {}.", each.join("; "))
}

/// The top-level table as `--help` shows it, wrapped at 100 columns.
pub fn help_table() -> String {
    let mut s = String::from("Exit status:\n");
    for e in Exit::ALL {
        let mut line = format!("  {} ", e.code());
        for word in e.meaning().split_whitespace() {
            if line.len() + 1 + word.len() > 100 {
                s.push_str(&line);
                s.push('\n');
                line = " ".repeat(4);
            }
            line.push(' ');
            line.push_str(word);
        }
        s.push_str(&line);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_are_the_documented_ones() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3]);
    }

    #[test]
    fn every_subcommand_that_finds_is_named_under_status_1() {
        let found = Exit::Found.meaning();
        for s in SUBCOMMANDS {
            assert_eq!(
                found.contains(&format!("{} ", s.name)),
                s.found.is_some(),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn a_subcommand_line_lists_its_statuses_in_order() {
        assert_eq!(
            subcommand_help("audit"),
            "Exit status: 0 no finding at or above --deny; 1 a finding at or above --deny; \
             2 usage error; 3 some file could not be read."
        );
        assert!(subcommand_help("fix").starts_with("Exit status: 0 done; 2 usage error; 3 "));
    }
}
