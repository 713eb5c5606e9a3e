//! Read and edit the dynamic section of ELF files — RUNPATH, RPATH, NEEDED, SONAME, the
//! interpreter, `DT_FLAGS_1` and `DT_DEBUG`, and in the headers the OS ABI and the stack's
//! `PT_GNU_STACK` — touching only the bytes that change.
//!
//! `elfpatch` reads a file through its program headers (so files without section headers are
//! first-class), plans an edit as pure data ([`plan::Plan`]: which bytes go where, in which order)
//! and applies it with positioned writes: a shrinking RUNPATH costs one small write, a growing one
//! appends a segment at the end of the file and rewrites the headers last. Reading and editing cost
//! the same for a 10 KiB executable and a 1 GiB CUDA library.
//!
//! ```
//! use elfpatch::{Edit, Elf, Options, Tables};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let path = std::env::current_exe()?; // any dynamically linked ELF file will do
//! let bytes = std::fs::read(&path)?;
//! let elf = Elf::parse(&bytes)?;
//! println!("NEEDED: {:?}", elf.needed());
//!
//! // Plan a growing RUNPATH edit and apply it to a copy in memory.
//! let tables = Tables::read(bytes.as_slice(), &elf)?;
//! let edits = [Edit::SetRunpath(b"/run/opengl-driver/lib:/opt/a/very/long/directory".to_vec())];
//! let plan = elfpatch::plan(&elf, &tables, &edits, &Options::default())?;
//! let mut edited = bytes.clone();
//! plan.apply_to_vec(&mut edited, elf.format)?;
//! let after = Elf::parse(&edited)?;
//! assert_eq!(after.runpath(), Some(&b"/run/opengl-driver/lib:/opt/a/very/long/directory"[..]));
//! assert_eq!(after.needed(), elf.needed());
//! # Ok(()) }
//! ```
//!
//! On disk, [`edit_in_place`] does the same to a file (keeping its inode, mode and owner, never
//! following a symlink), and [`edit_to`] writes the result to another path (following it through
//! symlinks and writing through devices, FIFOs and hard links rather than replacing them).
//!
//! # Every file the loader loads
//!
//! What elfpatch reads and edits is what the loader maps: a table lying in the rest of a
//! segment's last page, past `p_filesz`, is the file's as far as the kernel and glibc are
//! concerned (they map whole pages), and so it is here ([`Elf::mapped_tail`]). Files that other
//! tools rewrote have such layouts: patchelf 0.17.2 leaves one in every non-PIE program it grows.
//! [`refusals`] lists every reason elfpatch refuses a file, whether a file the loader loads can
//! meet it, and the tests that show it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apply;
pub mod error;
pub mod file;
pub mod format;
pub mod hash;
pub mod layout;
pub mod need;
pub mod note;
pub mod plan;
pub mod read;
pub mod refs;
pub mod resolution;
#[doc = include_str!("refusals.md")]
pub mod refusals {}
pub mod source;
pub mod symmap;
pub mod validate;

#[cfg(feature = "fault-injection")]
pub use apply::Fault;
pub use apply::{ApplyOptions, ApplyReport};
pub use error::{Error, ErrorKind, Result, Warning, WarningKind};
pub use file::{edit_in_place, edit_to, read_headers, resolve_symlinks, ElfFile, Outcome};
pub use format::{Class, Endian, Format};
pub use need::Need;
pub use plan::{dropped, plan, Edit, Layout, Options, Plan};
pub use read::Elf;
pub use refs::Tables;

/// The repository README's Rust snippet, compiled and run by `cargo test --doc`, so the first
/// example a library user meets cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
