//! The reference model: what each [`elfpatch::Edit`] should do, by its documentation, to what the
//! loader reads (the `DT_NEEDED` list, the run paths, the soname, the interpreter, the files
//! version requirements name) and to the header and flags. The fuzz checks and elfpatch's property
//! tests (`crates/elfpatch/tests/it/synthetic.rs`) compare elfpatch's output with it.

use std::fmt;

use elfpatch::{Edit, Elf};
use elfsynth::oracle;

/// The loader-visible dynamic information, as a comparable value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// `DT_NEEDED` names, in order.
    pub needed: Vec<Vec<u8>>,
    /// First `DT_RUNPATH`.
    pub runpath: Option<Vec<u8>>,
    /// First `DT_RPATH`.
    pub rpath: Option<Vec<u8>>,
    /// First `DT_SONAME`.
    pub soname: Option<Vec<u8>>,
    /// `PT_INTERP`.
    pub interp: Option<Vec<u8>>,
}

impl Info {
    /// What elfpatch reads.
    pub fn of(e: &Elf) -> Info {
        Info {
            needed: e.needed().into_iter().map(<[u8]>::to_vec).collect(),
            runpath: e.runpath().map(<[u8]>::to_vec),
            rpath: e.rpath().map(<[u8]>::to_vec),
            soname: e.soname().map(<[u8]>::to_vec),
            interp: e.interpreter().map(<[u8]>::to_vec),
        }
    }

    /// What the oracle reads, in the oracle's (lossy UTF-8) terms.
    pub fn lossy(&self) -> (Vec<String>, [Option<String>; 4]) {
        let l = |v: &Option<Vec<u8>>| v.as_deref().map(lossy);
        (
            self.needed.iter().map(|b| lossy(b)).collect(),
            [
                l(&self.runpath),
                l(&self.rpath),
                l(&self.soname),
                l(&self.interp),
            ],
        )
    }

    /// The oracle's reading.
    pub fn of_oracle(o: &oracle::Elf) -> (Vec<String>, [Option<String>; 4]) {
        (
            o.needed.clone(),
            [
                o.runpath.clone(),
                o.rpath.clone(),
                o.soname.clone(),
                o.interpreter.clone(),
            ],
        )
    }

    /// The documented effect of `batch` (see [`Model::apply`]).
    pub fn apply(&self, batch: &[Edit]) -> Info {
        let mut m = Model {
            info: self.clone(),
            verneed_files: Vec::new(),
        };
        m.apply(batch);
        m.info
    }
}

/// [`Info`] and the files the version requirements name: what the edits of the dynamic section
/// change.
#[derive(Clone, PartialEq, Eq)]
pub struct Model {
    /// What the loader reads from the dynamic section and `PT_INTERP`.
    pub info: Info,
    /// The files the version requirements (`vn_file`) name, in order.
    pub verneed_files: Vec<Vec<u8>>,
}

/// What one batch asks of the header and the flags, which [`Model`] does not hold: the file's
/// values before the batch are the rest of the expectation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// The last `SetOsAbi`.
    pub os_abi: Option<u8>,
    /// The last `SetExecstack`.
    pub execstack: Option<bool>,
    /// The bits of every `AddFlags1` together, when there is one.
    pub flags_1: Option<u64>,
    /// Whether an `AddDebugTag` asks for a `DT_DEBUG` entry.
    pub debug_tag: bool,
}

impl Model {
    /// What the oracle reads, its strings as bytes (so only valid UTF-8 reads as it is).
    pub fn of_oracle(o: &oracle::Elf) -> Model {
        let b = |s: &String| s.clone().into_bytes();
        Model {
            info: Info {
                needed: o.needed.iter().map(b).collect(),
                runpath: o.runpath.as_ref().map(b),
                rpath: o.rpath.as_ref().map(b),
                soname: o.soname.as_ref().map(b),
                interp: o.interpreter.as_ref().map(b),
            },
            verneed_files: o.verneed.iter().map(|(f, _)| b(f)).collect(),
        }
    }

    /// Applies the documented effect of `batch` (see `elfpatch::Edit`); returns what it asks of
    /// the header and flags.
    pub fn apply(&mut self, batch: &[Edit]) -> Asked {
        let m = &mut self.info;
        let mut asked = Asked::default();
        // (name, added by this batch): additions go after the ones this batch made before.
        let mut needed: Vec<(Vec<u8>, bool)> =
            m.needed.iter().map(|n| (n.clone(), false)).collect();
        for e in batch {
            // Every edit, no `_` arm: a new edit does not compile until it is modelled.
            match e {
                Edit::SetRunpath(v) => m.runpath = Some(v.clone()),
                Edit::SetRpath(v) => m.rpath = Some(v.clone()),
                Edit::RemoveRunpath => m.runpath = None,
                Edit::RemoveRpath => m.rpath = None,
                Edit::RpathToRunpath => {
                    if m.runpath.is_some() {
                        m.rpath = None;
                    } else {
                        m.runpath = m.rpath.take();
                    }
                }
                Edit::RunpathToRpath => {
                    if m.runpath.is_some() {
                        m.rpath = m.runpath.take();
                    }
                }
                Edit::AddNeeded(n) => {
                    if !needed.iter().any(|(x, _)| x == n) {
                        let at = needed.iter().rposition(|(_, a)| *a).map_or(0, |i| i + 1);
                        needed.insert(at, (n.clone(), true));
                    }
                }
                Edit::RemoveNeeded(n) => {
                    needed.retain(|(x, _)| x != n);
                    self.verneed_files.retain(|x| x != n);
                }
                Edit::ReplaceNeeded { old, new } => {
                    let names = needed.iter_mut().map(|(x, _)| x);
                    for x in names.chain(self.verneed_files.iter_mut()) {
                        if x == old {
                            x.clone_from(new);
                        }
                    }
                }
                Edit::SetSoname(v) => m.soname = Some(v.clone()),
                Edit::SetInterpreter(v) => m.interp = Some(v.clone()),
                // Symbol edits change nothing the model describes.
                Edit::ClearSymbolVersion(_) | Edit::RenameDynamicSymbols(_) => {}
                // The note is none of what the model follows (elfpatch's tests/it/note.rs is).
                Edit::SetResolutionCache(_) | Edit::RemoveResolutionCache => {}
                Edit::SetOsAbi(v) => asked.os_abi = Some(*v),
                Edit::SetExecstack(x) => asked.execstack = Some(*x),
                Edit::AddFlags1(bits) => *asked.flags_1.get_or_insert(0) |= *bits,
                Edit::AddDebugTag => asked.debug_tag = true,
            }
        }
        m.needed = needed.into_iter().map(|(n, _)| n).collect();
        asked
    }
}

/// Shows the names as (lossy) strings: byte vectors are unreadable in a failed comparison.
impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (needed, [runpath, rpath, soname, interp]) = self.info.lossy();
        f.debug_struct("Model")
            .field("needed", &needed)
            .field("runpath", &runpath)
            .field("rpath", &rpath)
            .field("soname", &soname)
            .field("interp", &interp)
            .field(
                "verneed_files",
                &self
                    .verneed_files
                    .iter()
                    .map(|b| lossy(b))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
