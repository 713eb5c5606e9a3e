//! A model of how glibc's dynamic loader (`ld.so`) finds the libraries of a program, computed
//! from the files alone: nothing is run, so it works on a sysroot of another architecture, in a
//! build sandbox, or on a program that would crash.
//!
//! The layers, from pure to I/O:
//!
//! - [`target`]: what a loader of one architecture accepts (pure data from an ELF header);
//! - [`ldcache`]: `ld.so.cache` parsing and lookup (pure, over bytes);
//! - [`dlopen`]: the libraries an object loads with `dlopen` (`.note.dlopen`, NVIDIA's table);
//! - [`resolve`]: the search itself, breadth-first from the program, over a [`fsview::FsView`];
//! - [`settings`]: what the loader knows before it starts, read from its own binary and cache;
//! - [`hostfs`]: the disk as an [`fsview::FsView`] (optionally inside a sysroot);
//!   [`memfs`]: an in-memory tree for tests; [`cachedfs`]: any view, each question asked of it
//!   once (for tools that resolve many programs over one tree).
//!
//! ```
//! use ldso_model::fsview::ElfInfo;
//! use ldso_model::memfs::{dynamic_info, x86_64_settings, MemFs};
//! use ldso_model::resolve::{resolve, LookupOutcome, Program};
//!
//! let mut fs = MemFs::default();
//! fs.lib("/opt/lib/libfoo.so.1", ElfInfo::default());
//! let program = Program {
//!     path: b"/opt/bin/app".to_vec(),
//!     origin: b"/opt/bin".to_vec(),
//!     info: dynamic_info(&["libfoo.so.1"], Some("$ORIGIN/../lib"), None),
//! };
//! let found = resolve(program, &[], &x86_64_settings(None), &fs);
//! let request = &found.requests[0];
//! assert!(matches!(request.outcome, LookupOutcome::Loaded(..)));
//! ```

pub mod cachedfs;
pub mod dlopen;
pub mod fsview;
pub mod hostfs;
pub mod ldcache;
pub mod memfs;
pub mod resolve;
pub mod settings;
pub mod target;
