//! `stubstrip driver-link`: on a machine that is not NixOS, make the driver link
//! (`/run/opengl-driver/lib`) that fixed programs look in, from the driver the machine runs.
//!
//! Only NixOS makes that directory. Elsewhere a program whose stub entry `stubstrip fix` replaced
//! by the driver link fails with `libcuda.so.1: cannot open shared object file`, since Nix's
//! loader reads neither the host's `ld.so.cache` nor its library directories. This command finds
//! the running driver ([`discover`]: the kernel module's version, the host's cache and the places
//! distributions, containers, WSL2 and Jetson put the libraries), decides which links to make,
//! replace or remove ([`plan`]), and [`run`] does it: the one module that writes. Discovery and
//! planning are pure functions over a [`DriverFs`], so that every layout is tested on a model
//! file system.
//!
//! Which links are this command's own: a symlink whose name is a library's name and whose target
//! is an absolute path to a file of the same library (`libcuda.so.1 ->
//! /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14`), outside the Nix store ([`is_ours`]). No
//! marker file: the links made at boot by the `--persist` entry (systemd-tmpfiles) and links of
//! that shape made by hand before are recognised the same way, and each one names what it stands
//! for. Anything else in the directory (a file, a directory, a relative link, a link into the
//! Nix store as NixOS makes them) is someone else's, and the command refuses to touch it.

pub mod discover;
pub mod plan;
pub mod run;

use std::io;
use std::path::PathBuf;

use ldso_model::fsview::{Bytes, FsView};
use thiserror::Error;

use crate::exit::Exit;

/// The systemd-tmpfiles entry `--persist` writes.
pub const TMPFILES: &str = "/etc/tmpfiles.d/stubstrip-driver-link.conf";

/// What `driver-link` does, decided from the arguments.
#[derive(Clone, Debug)]
pub struct DriverLinkConfig {
    /// The system as seen from this directory (`/` when `None`): the driver is looked for and
    /// the links are made inside it, with targets as the system inside sees them.
    pub root: Option<PathBuf>,
    /// The driver link for 64-bit libraries.
    pub link64: Bytes,
    /// The driver link for 32-bit libraries.
    pub link32: Bytes,
    /// Print the plan, change nothing.
    pub dry_run: bool,
    /// Undo: remove the links this command made (and its tmpfiles entry).
    pub remove: bool,
    /// Also write the systemd-tmpfiles entry that makes the links at boot.
    pub persist: bool,
}

/// What is at a path, the last component not followed (`lstat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Nothing.
    Missing,
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink, with its target as written.
    Link(Bytes),
    /// A device, socket, fifo, or something that could not be examined.
    Other,
}

/// The file system as driver discovery and planning see it: the loader model's view (to
/// follow symlinks and read ELF headers) and what only this command needs.
pub trait DriverFs: FsView {
    /// What is at `path`, not following a symlink there.
    fn lstat(&self, path: &[u8]) -> Entry;
    /// The names in directory `dir`, sorted.
    fn list(&self, dir: &[u8]) -> io::Result<Vec<Bytes>>;
    /// The contents of a small file (the kernel module's version, `ld.so.cache`).
    fn read_small(&self, path: &[u8]) -> io::Result<Vec<u8>>;
    /// The `DT_SONAME` of the ELF file at `path`, when it has one that can be read.
    fn soname(&self, path: &[u8]) -> Option<Bytes>;
}

/// Why the command would not change the system. Each is one line that says what to do.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    /// NixOS makes its own driver link.
    #[error("this is NixOS ({0} exists): NixOS makes its driver link itself (hardware.graphics)")]
    NixOs(String),
    /// No driver anywhere.
    #[error(
        "no NVIDIA driver found: no libcuda.so.VERSION in the directories of ld.so.cache or in \
         {searched}, and no WSL2 or Jetson driver directory ({special}); install the driver first"
    )]
    NoDriver {
        /// The directories looked in.
        searched: String,
        /// The WSL2 and Jetson directories.
        special: String,
    },
    /// The libraries are not the kernel module's version.
    #[error(
        "driver/library version mismatch: the kernel module is {kernel} ({proc}) but the \
         libraries are {libraries} ({found}); reboot (or reload the nvidia module) after a \
         driver upgrade, then run this again"
    )]
    Mismatch {
        /// The kernel module's version.
        kernel: String,
        /// Where it was read.
        proc: String,
        /// The libraries' versions.
        libraries: String,
        /// Where their libcuda is.
        found: String,
    },
    /// Two versions and no kernel module to choose.
    #[error(
        "two driver versions are installed ({found}) and no kernel module says which one runs \
         ({proc} is missing); load the driver (modprobe nvidia) or uninstall the other version, \
         then run this again"
    )]
    TwoVersions {
        /// Each version and where its libcuda is.
        found: String,
        /// The kernel module's version file.
        proc: String,
    },
    /// The driver link holds what this command did not make.
    #[error(
        "{dir} holds files this command did not make: {names}; move them away (or choose \
         another --driver-link), then run this again"
    )]
    Foreign {
        /// The directory.
        dir: String,
        /// What is in it.
        names: String,
    },
    /// The driver link (or its parent) is not a directory this command could have made.
    #[error(
        "{path} is {what}, not a directory this command made; move it away, then run this again"
    )]
    NotOurDirectory {
        /// The path.
        path: String,
        /// What it is.
        what: &'static str,
    },
    /// The tmpfiles entry's file exists and is not this command's.
    #[error("{0} exists and was not written by this command; move it away, then run this again")]
    ForeignTmpfiles(String),
}

/// A failure to read or change the file system.
#[derive(Debug, Error)]
pub enum IoFailure {
    /// Reading a directory or a file.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path (in the modelled system).
        path: String,
        /// Why.
        source: io::Error,
    },
    /// Changing something.
    #[error("cannot {op} {path}: {source}{}", root_hint(source))]
    Write {
        /// What was being done (`create`, `remove`, `link`, `write`).
        op: &'static str,
        /// The path (in the modelled system).
        path: String,
        /// Why.
        source: io::Error,
    },
}

/// The hint after a permission error: `/run` and `/etc` belong to root.
fn root_hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied {
        " (run it as root, e.g. with sudo)"
    } else {
        ""
    }
}

/// Why `driver-link` failed.
#[derive(Debug, Error)]
pub enum DriverLinkError {
    /// Refused: nothing changed.
    #[error("refused: {0}; nothing was changed")]
    Refused(#[from] Refusal),
    /// An I/O failure.
    #[error(transparent)]
    Io(#[from] IoFailure),
}

impl DriverLinkError {
    /// The exit status it ends the command with.
    pub fn exit_code(&self) -> Exit {
        match self {
            DriverLinkError::Refused(_) => Exit::Found,
            DriverLinkError::Io(_) => Exit::Failed,
        }
    }
}

/// What `explain` says of a driver library found nowhere, on a machine whose driver link
/// ([`crate::driver::RUNTIME_DIRS`]) is missing while a driver is installed: that the link is
/// what is missing, and what makes it (or why it cannot yet). `None` where the link exists, on
/// NixOS, or with no driver (a builder: `explain`'s own words stand).
pub fn explain_hint(fs: &dyn DriverFs) -> Option<String> {
    let link = crate::driver::RUNTIME_DIRS[0];
    if fs.lstat(link.as_bytes()) != Entry::Missing {
        return None;
    }
    match discover::discover(fs) {
        Ok(d) => Some(format!(
            "the driver link is missing on this machine; `stubstrip driver-link` creates it from \
             {} found at {}",
            d.name(),
            d.location()
        )),
        Err(e @ (Refusal::Mismatch { .. } | Refusal::TwoVersions { .. })) => Some(format!(
            "the driver link is missing on this machine, and `stubstrip driver-link` cannot \
             create it yet: {e}"
        )),
        Err(_) => None,
    }
}

/// `path` as text, for messages.
pub fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// The file name of a path.
pub fn base(path: &[u8]) -> &[u8] {
    path.rsplit(|&c| c == b'/').next().unwrap_or(path)
}

/// The library a file name is of: `libcuda.so` for `libcuda.so`, `libcuda.so.1` and
/// `libcuda.so.550.54.14`; `None` for a name that is not `lib*.so[.*]`.
pub fn library_of(name: &[u8]) -> Option<&[u8]> {
    if !name.starts_with(b"lib") {
        return None;
    }
    let at = name.windows(3).position(|w| w == b".so")?;
    let end = at + 3;
    (end == name.len() || name[end] == b'.').then(|| &name[..end])
}

/// Whether `entry`, found at `name` in the driver link, is a link this command makes: a symlink
/// to an absolute path outside the Nix store whose file is of the same library as `name`.
pub fn is_ours(name: &[u8], entry: &Entry) -> bool {
    let Entry::Link(target) = entry else {
        return false;
    };
    target.starts_with(b"/")
        && !target.starts_with(b"/nix/store/")
        && library_of(name).is_some_and(|lib| library_of(base(target)) == Some(lib))
}

#[cfg(test)]
pub mod model {
    //! [`DriverFs`] over the loader model's in-memory tree, for the tests of every layout.

    use std::io;

    use ldso_model::fsview::{Bytes, FsView};
    use ldso_model::memfs::{MemFs, Node};

    use super::{DriverFs, Entry};

    impl DriverFs for MemFs {
        fn lstat(&self, path: &[u8]) -> Entry {
            match self.nodes.get(path) {
                Some(Node::Dir) => Entry::Dir,
                Some(Node::Link(t)) => Entry::Link(t.clone()),
                Some(Node::Elf(..) | Node::Data(_)) => Entry::File,
                None if self.is_dir(path) => Entry::Dir,
                None => Entry::Missing,
            }
        }

        fn list(&self, dir: &[u8]) -> io::Result<Vec<Bytes>> {
            if !self.is_dir(dir) {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            }
            let mut prefix = dir.to_vec();
            if !prefix.ends_with(b"/") {
                prefix.push(b'/');
            }
            let mut names: Vec<Bytes> = self
                .nodes
                .keys()
                .filter_map(|k| k.strip_prefix(prefix.as_slice()))
                .map(|rest| rest.split(|&c| c == b'/').next().unwrap_or(rest).to_vec())
                .collect();
            names.sort();
            names.dedup();
            Ok(names)
        }

        fn read_small(&self, path: &[u8]) -> io::Result<Vec<u8>> {
            let p = self.canonical(path).unwrap_or_else(|| path.to_vec());
            match self.nodes.get(&p) {
                Some(Node::Data(d)) => Ok(d.clone()),
                _ => Err(io::Error::from(io::ErrorKind::NotFound)),
            }
        }

        fn soname(&self, path: &[u8]) -> Option<Bytes> {
            self.read_elf(path).ok()?.soname
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_ours_when_it_names_the_same_library_by_an_absolute_path() {
        let l = |t: &str| Entry::Link(t.as_bytes().to_vec());
        assert!(is_ours(
            b"libcuda.so.1",
            &l("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14")
        ));
        assert!(is_ours(b"libcuda.so", &l("/usr/lib/wsl/lib/libcuda.so.1")));
        assert!(!is_ours(b"libcuda.so.1", &l("libcuda.so.550.54.14")));
        assert!(!is_ours(b"libcuda.so.1", &l("/usr/lib/libnvidia-ml.so.1")));
        assert!(!is_ours(
            b"libcuda.so.1",
            &l("/nix/store/0123-nvidia-x11/lib/libcuda.so.1")
        ));
        assert!(!is_ours(b"libcuda.so.1", &Entry::File));
        assert!(!is_ours(b"vdpau", &Entry::Dir));
        assert_eq!(library_of(b"libcuda.so"), Some(&b"libcuda.so"[..]));
        assert_eq!(library_of(b"libcudart.so.13"), Some(&b"libcudart.so"[..]));
        assert_eq!(library_of(b"libcuda.sox"), None);
        assert_eq!(library_of(b"cuda.so"), None);
    }

    #[test]
    fn explain_hears_of_the_missing_link_only_where_a_driver_is_installed() {
        use discover::tests::{install, proc_line};
        use ldso_model::memfs::MemFs;
        let mut fs = MemFs::default();
        assert_eq!(explain_hint(&fs), None, "a builder without a driver");
        install(&mut fs, "/usr/lib64", "550.54.14");
        fs.data(discover::PROC_VERSION, proc_line("550.54.14").as_bytes());
        assert_eq!(
            explain_hint(&fs).as_deref(),
            Some(
                "the driver link is missing on this machine; `stubstrip driver-link` creates it \
                 from driver 550.54.14 found at /usr/lib64"
            )
        );
        fs.data(discover::PROC_VERSION, proc_line("550.67").as_bytes());
        assert!(explain_hint(&fs)
            .unwrap()
            .contains("cannot create it yet: driver/library version mismatch"));
        fs.dir("/run/opengl-driver/lib");
        assert_eq!(explain_hint(&fs), None, "the link is there");
    }
}
