//! What to change: the links to make, replace, remove or keep in each driver link, the
//! tmpfiles entry, and the words for it. Pure: the state is read through a [`DriverFs`], and
//! [`super::run`] carries the plan out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ldso_model::fsview::{dirname, Bytes};

use super::discover::{join, Driver};
use super::{base, is_ours, lossy, DriverFs, DriverLinkError, Entry, IoFailure, Refusal, TMPFILES};

/// The prefix of the temporary link made next to a link before it is renamed over it (so that
/// a link is replaced at once, never missing): left behind only by a crash, and removed by the
/// next run.
pub const TEMP_PREFIX: &str = ".stubstrip-new.";

/// The first line of the tmpfiles entry: how `--remove` and a later `--persist` know the file
/// is this command's.
pub const TMPFILES_HEADER: &str = "# Written by `stubstrip driver-link --persist`";

/// Whether systemd runs the machine: `sd_booted()`'s test.
pub const SYSTEMD_MARK: &str = "/run/systemd/system";

/// What happens to one name in a driver link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// It is the link wanted already.
    Keep,
    /// A new link.
    Make,
    /// A link of ours to something else (an older driver): replaced; the old target.
    Replace(Bytes),
    /// A link of ours no library wants any more (or a temporary link): removed; its target.
    Remove(Bytes),
}

/// One name in a driver link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The name.
    pub name: Bytes,
    /// The target it gets (for [`Action::Remove`], none: empty).
    pub target: Bytes,
    /// What happens.
    pub action: Action,
}

/// One driver link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirPlan {
    /// The directory.
    pub dir: Bytes,
    /// Whether it is made.
    pub create: bool,
    /// Its names, sorted.
    pub steps: Vec<Step>,
}

/// The tmpfiles entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Not asked for.
    No,
    /// Write [`TMPFILES`] with this text (`unchanged` when it holds it already).
    Write {
        /// The file's text.
        text: String,
        /// Whether the file holds that text already.
        unchanged: bool,
    },
    /// Asked for, but systemd does not run this machine.
    NoSystemd,
}

/// Everything `driver-link` changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The driver linked.
    pub driver: Driver,
    /// The driver links (64-bit, then 32-bit where the driver has 32-bit libraries).
    pub dirs: Vec<DirPlan>,
    /// The tmpfiles entry.
    pub persist: Persist,
    /// Libraries left out, and why.
    pub notes: Vec<String>,
}

impl Plan {
    /// Whether carrying it out changes nothing.
    pub fn is_noop(&self) -> bool {
        self.dirs
            .iter()
            .all(|d| !d.create && d.steps.iter().all(|s| s.action == Action::Keep))
            && !matches!(
                self.persist,
                Persist::Write {
                    unchanged: false,
                    ..
                }
            )
    }
}

/// A short description of what is at a foreign name.
fn what_is(e: &Entry) -> String {
    match e {
        Entry::Link(t) => format!("a link to {}", lossy(t)),
        Entry::Dir => "a directory".into(),
        Entry::File => "a file".into(),
        Entry::Missing | Entry::Other => "not a file or a link".into(),
    }
}

/// `dir` when it is a directory that may be ours (or missing: `Ok(None)`), else the refusal.
/// Its parent must not be a symlink either: NixOS makes `/run/opengl-driver` one, into the
/// store.
fn usable_dir(fs: &dyn DriverFs, dir: &[u8]) -> Result<Option<Vec<Bytes>>, DriverLinkError> {
    let refuse = |path: &[u8], what| {
        DriverLinkError::from(Refusal::NotOurDirectory {
            path: lossy(path),
            what,
        })
    };
    let parent = dirname(dir);
    match fs.lstat(&parent) {
        Entry::Link(_) => return Err(refuse(&parent, "a symlink (NixOS makes it one)")),
        Entry::File | Entry::Other => return Err(refuse(&parent, "not a directory")),
        Entry::Dir | Entry::Missing => {}
    }
    match fs.lstat(dir) {
        Entry::Missing => Ok(None),
        Entry::Dir => fs.list(dir).map(Some).map_err(|source| {
            IoFailure::Read {
                path: lossy(dir),
                source,
            }
            .into()
        }),
        Entry::Link(_) => Err(refuse(dir, "a symlink")),
        Entry::File | Entry::Other => Err(refuse(dir, "not a directory")),
    }
}

/// Whether a name is a temporary link a crashed run left.
fn is_temp(name: &[u8], e: &Entry) -> bool {
    name.starts_with(TEMP_PREFIX.as_bytes()) && matches!(e, Entry::Link(_))
}

/// The steps that make `dir` hold exactly `wanted` (name → target), or the refusal naming
/// what is there that this command did not make.
fn plan_dir(
    fs: &dyn DriverFs,
    dir: &[u8],
    wanted: &BTreeMap<Bytes, Bytes>,
) -> Result<DirPlan, DriverLinkError> {
    let existing = usable_dir(fs, dir)?;
    let mut steps = Vec::new();
    let mut foreign = Vec::new();
    let mut seen = Vec::new();
    for name in existing.iter().flatten() {
        let e = fs.lstat(&join(dir, name));
        let old = || match &e {
            Entry::Link(t) => t.clone(),
            _ => Vec::new(),
        };
        let action = match wanted.get(name) {
            Some(t) if e == Entry::Link(t.clone()) => Action::Keep,
            Some(_) if is_ours(name, &e) => Action::Replace(old()),
            None if is_ours(name, &e) || is_temp(name, &e) => Action::Remove(old()),
            _ => {
                foreign.push(format!("{} ({})", lossy(name), what_is(&e)));
                continue;
            }
        };
        seen.push(name.clone());
        steps.push(Step {
            name: name.clone(),
            target: wanted.get(name).cloned().unwrap_or_default(),
            action,
        });
    }
    if !foreign.is_empty() {
        const SHOWN: usize = 5;
        let mut names = foreign[..foreign.len().min(SHOWN)].join(", ");
        if foreign.len() > SHOWN {
            let _ = write!(names, " and {} more", foreign.len() - SHOWN);
        }
        return Err(Refusal::Foreign {
            dir: lossy(dir),
            names,
        }
        .into());
    }
    for (name, target) in wanted {
        if !seen.contains(name) {
            steps.push(Step {
                name: name.clone(),
                target: target.clone(),
                action: Action::Make,
            });
        }
    }
    steps.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(DirPlan {
        dir: dir.to_vec(),
        create: existing.is_none(),
        steps,
    })
}

/// The links the driver's libraries of one class want: name → file, the first library of a
/// name winning. A link this command would not recognise as its own later is left out (with a
/// note), so that every run can replace what the one before made.
fn wanted(driver: &Driver, bits32: bool, notes: &mut Vec<String>) -> BTreeMap<Bytes, Bytes> {
    let mut w = BTreeMap::new();
    for lib in driver.libs.iter().filter(|l| l.bits32 == bits32) {
        for name in &lib.names {
            if !is_ours(name, &Entry::Link(lib.file.clone())) {
                notes.push(format!(
                    "{} left out: its name {} is not the name of the library it is ({})",
                    lossy(&lib.file),
                    lossy(name),
                    lossy(base(&lib.file))
                ));
                continue;
            }
            w.entry(name.clone()).or_insert_with(|| lib.file.clone());
        }
    }
    w
}

/// The tmpfiles entry that makes `dirs` at boot as they are after the plan.
pub fn tmpfiles_text(driver: &Driver, dirs: &[DirPlan]) -> String {
    let mut t = format!(
        "{TMPFILES_HEADER} ({}, {}).\n\
         # /run is emptied at boot; systemd-tmpfiles makes the driver link again from this file.\n\
         # After a driver upgrade run `stubstrip driver-link --persist` again; \
         `stubstrip driver-link --remove` deletes this file.\n",
        driver.name(),
        driver.location()
    );
    for d in dirs {
        let _ = writeln!(t, "d {} 0755 root root -", lossy(&dirname(&d.dir)));
        let _ = writeln!(t, "d {} 0755 root root -", lossy(&d.dir));
        for s in d
            .steps
            .iter()
            .filter(|s| !matches!(s.action, Action::Remove(_)))
        {
            let _ = writeln!(
                t,
                "L+ {} - - - - {}",
                lossy(&join(&d.dir, &s.name)),
                lossy(&s.target)
            );
        }
    }
    t
}

/// Whether the tmpfiles entry's file is this command's (or missing); its text if it is there.
fn our_tmpfiles(fs: &dyn DriverFs) -> Result<Option<String>, DriverLinkError> {
    match fs.lstat(TMPFILES.as_bytes()) {
        Entry::Missing => Ok(None),
        Entry::File => {
            let text = fs.read_small(TMPFILES.as_bytes()).map_err(|source| {
                DriverLinkError::from(IoFailure::Read {
                    path: TMPFILES.into(),
                    source,
                })
            })?;
            let text = String::from_utf8_lossy(&text).into_owned();
            if text.starts_with(TMPFILES_HEADER) {
                Ok(Some(text))
            } else {
                Err(Refusal::ForeignTmpfiles(TMPFILES.into()).into())
            }
        }
        _ => Err(Refusal::ForeignTmpfiles(TMPFILES.into()).into()),
    }
}

/// The plan that links `driver` into `link64` (and its 32-bit libraries, if any, into
/// `link32`), with the tmpfiles entry when `persist`.
pub fn plan(
    fs: &dyn DriverFs,
    driver: Driver,
    link64: &[u8],
    link32: &[u8],
    persist: bool,
) -> Result<Plan, DriverLinkError> {
    let mut notes = Vec::new();
    let mut dirs = vec![plan_dir(fs, link64, &wanted(&driver, false, &mut notes))?];
    let w32 = wanted(&driver, true, &mut notes);
    if !w32.is_empty() {
        dirs.push(plan_dir(fs, link32, &w32)?);
    }
    let persist = if !persist {
        Persist::No
    } else if fs.lstat(SYSTEMD_MARK.as_bytes()) != Entry::Dir {
        Persist::NoSystemd
    } else {
        let old = our_tmpfiles(fs)?;
        let text = tmpfiles_text(&driver, &dirs);
        Persist::Write {
            unchanged: old.as_deref() == Some(text.as_str()),
            text,
        }
    };
    Ok(Plan {
        driver,
        dirs,
        persist,
        notes,
    })
}

/// What `--remove` takes away in one driver link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoveDir {
    /// The directory.
    pub dir: Bytes,
    /// The links of ours in it, with their targets.
    pub links: Vec<(Bytes, Bytes)>,
    /// What stays: names this command did not make.
    pub left: Vec<Bytes>,
    /// Whether the directory goes too (nothing else in it).
    pub rmdir: bool,
    /// Whether its parent goes too (it held only the directory).
    pub rmdir_parent: bool,
}

/// Everything `--remove` takes away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovePlan {
    /// The driver links that exist.
    pub dirs: Vec<RemoveDir>,
    /// Whether the tmpfiles entry is there to delete.
    pub tmpfiles: bool,
}

/// The plan that undoes `driver-link`: every link of ours in `links` (and the directories,
/// when nothing else is in them), and the tmpfiles entry. What it did not make stays.
pub fn plan_remove(fs: &dyn DriverFs, links: &[&[u8]]) -> Result<RemovePlan, DriverLinkError> {
    let mut dirs = Vec::new();
    for &dir in links {
        let Some(names) = usable_dir(fs, dir)? else {
            continue;
        };
        let mut r = RemoveDir {
            dir: dir.to_vec(),
            links: Vec::new(),
            left: Vec::new(),
            rmdir: false,
            rmdir_parent: false,
        };
        for name in names {
            match fs.lstat(&join(dir, &name)) {
                e @ Entry::Link(_) if is_ours(&name, &e) || is_temp(&name, &e) => {
                    let Entry::Link(t) = e else { continue };
                    r.links.push((name, t));
                }
                _ => r.left.push(name),
            }
        }
        r.rmdir = r.left.is_empty();
        let parent = dirname(dir);
        r.rmdir_parent =
            r.rmdir && fs.list(&parent).is_ok_and(|n| n == [base(dir).to_vec()]) && parent != b"/";
        dirs.push(r);
    }
    Ok(RemovePlan {
        dirs,
        tmpfiles: our_tmpfiles(fs)?.is_some(),
    })
}

/// The words for an action, done or (`dry_run`) to be done.
fn verb(a: &Action, dry_run: bool) -> &'static str {
    match (a, dry_run) {
        (Action::Keep, false) => "kept",
        (Action::Keep, true) => "would keep",
        (Action::Make, false) => "made",
        (Action::Make, true) => "would make",
        (Action::Replace(_), false) => "replaced",
        (Action::Replace(_), true) => "would replace",
        (Action::Remove(_), false) => "removed",
        (Action::Remove(_), true) => "would remove",
    }
}

/// What `driver-link` did (or, `dry_run`, would do): the driver, each change (every link with
/// `dry_run`), a count per driver link, the tmpfiles entry.
pub fn render_plan(p: &Plan, dry_run: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({}) at {}",
        p.driver.name(),
        p.driver.version_source(),
        p.driver.location()
    );
    for n in p.driver.notes.iter().chain(&p.notes) {
        let _ = writeln!(o, "note: {n}");
    }
    for d in &p.dirs {
        let dir = lossy(&d.dir);
        if d.create {
            let made = if dry_run { "would create" } else { "created" };
            let _ = writeln!(o, "{dir}: {made}");
        }
        let mut counts = [0usize; 4];
        for s in &d.steps {
            let k = match s.action {
                Action::Make => 0,
                Action::Replace(_) => 1,
                Action::Remove(_) => 2,
                Action::Keep => 3,
            };
            counts[k] += 1;
            if s.action == Action::Keep && !dry_run {
                continue;
            }
            let what = match &s.action {
                Action::Remove(old) => format!("{} (was -> {})", lossy(&s.name), lossy(old)),
                Action::Replace(old) => format!(
                    "{} -> {} (was -> {})",
                    lossy(&s.name),
                    lossy(&s.target),
                    lossy(old)
                ),
                _ => format!("{} -> {}", lossy(&s.name), lossy(&s.target)),
            };
            let _ = writeln!(o, "  {:<13} {what}", verb(&s.action, dry_run));
        }
        let links = counts[0] + counts[1] + counts[3];
        if counts[..3].iter().sum::<usize>() == 0 && !d.create {
            let _ = writeln!(
                o,
                "{dir}: up to date: {} to {}",
                crate::printout::count(links, "link", "links"),
                p.driver.name()
            );
        } else {
            let [m, r, x, k] = counts;
            let _ = writeln!(
                o,
                "{dir}: {}: {m} {}, {r} {}, {x} {}, {k} {}",
                crate::printout::count(links, "link", "links"),
                verb(&Action::Make, dry_run),
                verb(&Action::Replace(Vec::new()), dry_run),
                verb(&Action::Remove(Vec::new()), dry_run),
                verb(&Action::Keep, dry_run),
            );
        }
    }
    match &p.persist {
        Persist::No => {}
        Persist::Write {
            unchanged: true, ..
        } => {
            let _ = writeln!(o, "{TMPFILES}: up to date");
        }
        Persist::Write { .. } => {
            let w = if dry_run { "would write" } else { "written" };
            let _ = writeln!(
                o,
                "{TMPFILES}: {w}: systemd-tmpfiles makes the driver link again at boot"
            );
        }
        Persist::NoSystemd => {
            let _ = writeln!(
                o,
                "note: --persist: systemd does not run this machine ({SYSTEMD_MARK} is missing), \
                 so no tmpfiles entry was written; /run is emptied at boot: run `stubstrip \
                 driver-link` from a boot script (/etc/rc.local, an init script, or the \
                 container's entrypoint)"
            );
        }
    }
    o
}

/// What `--remove` did (or would do).
pub fn render_remove(p: &RemovePlan, dry_run: bool) -> String {
    let mut o = String::new();
    let v = |done: &'static str, todo: &'static str| if dry_run { todo } else { done };
    for d in &p.dirs {
        let dir = lossy(&d.dir);
        for (name, target) in &d.links {
            let _ = writeln!(
                o,
                "  {:<13} {} (was -> {})",
                v("removed", "would remove"),
                lossy(name),
                lossy(target)
            );
        }
        let n = crate::printout::count(d.links.len(), "link", "links");
        if d.rmdir {
            let _ = writeln!(
                o,
                "{dir}: {n} {}, and the directory{}",
                v("removed", "would be removed"),
                if d.rmdir_parent {
                    format!(" and {}", lossy(&dirname(&d.dir)))
                } else {
                    String::new()
                }
            );
        } else {
            let left: Vec<String> = d.left.iter().map(|l| lossy(l)).collect();
            let _ = writeln!(
                o,
                "{dir}: {n} {}; kept, with what this command did not make: {}",
                v("removed", "would be removed"),
                left.join(", ")
            );
        }
    }
    if p.dirs.is_empty() {
        let _ = writeln!(o, "no driver link to remove");
    }
    if p.tmpfiles {
        let _ = writeln!(o, "{TMPFILES}: {}", v("removed", "would be removed"));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::discover::tests::{install, install32, proc_line};
    use super::super::discover::{discover, PROC_VERSION};
    use super::*;
    use ldso_model::memfs::MemFs;

    const L64: &[u8] = b"/run/opengl-driver/lib";
    const L32: &[u8] = b"/run/opengl-driver-32/lib";

    fn ubuntu(version: &str) -> MemFs {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib/x86_64-linux-gnu", version);
        fs.data(PROC_VERSION, proc_line(version).as_bytes());
        fs
    }

    fn plan_of(fs: &MemFs, persist: bool) -> Result<Plan, DriverLinkError> {
        plan(fs, discover(fs).unwrap(), L64, L32, persist)
    }

    /// Carries a plan out on the model: what `run` does on the disk.
    fn apply(fs: &mut MemFs, p: &Plan) {
        for d in &p.dirs {
            if d.create {
                fs.dir(&lossy(&d.dir));
            }
            for s in &d.steps {
                let path = lossy(&join(&d.dir, &s.name));
                match s.action {
                    Action::Remove(_) => {
                        fs.nodes.remove(path.as_bytes());
                    }
                    Action::Keep => {}
                    _ => {
                        fs.link(&path, &lossy(&s.target));
                    }
                }
            }
        }
    }

    fn actions(p: &Plan) -> Vec<(String, Action)> {
        p.dirs
            .iter()
            .flat_map(|d| {
                d.steps
                    .iter()
                    .map(|s| (lossy(&join(&d.dir, &s.name)), s.action.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn a_fresh_machine_gets_every_library_and_a_second_run_changes_nothing() {
        let mut fs = ubuntu("550.54.14");
        install32(&mut fs, "/usr/lib/i386-linux-gnu", "550.54.14");
        let p = plan_of(&fs, false).unwrap();
        assert_eq!(p.dirs.len(), 2);
        assert!(p.dirs.iter().all(|d| d.create));
        assert_eq!(p.dirs[0].steps.len(), 6);
        assert_eq!(p.dirs[1].steps.len(), 2);
        assert!(actions(&p).iter().all(|(_, a)| *a == Action::Make));
        let text = render_plan(&p, false);
        assert!(
            text.starts_with(
                "driver 550.54.14 (the kernel module's, /proc/driver/nvidia/version) at \
                 /usr/lib/x86_64-linux-gnu\n/run/opengl-driver/lib: created\n  made          \
                 libcuda.so -> /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("/run/opengl-driver/lib: 6 links: 6 made, 0 replaced, 0 removed, 0 kept"),
            "{text}"
        );
        apply(&mut fs, &p);
        let again = plan_of(&fs, false).unwrap();
        assert!(again.is_noop());
        assert!(
            render_plan(&again, false)
                .contains("/run/opengl-driver/lib: up to date: 6 links to driver 550.54.14"),
            "{}",
            render_plan(&again, false)
        );
    }

    #[test]
    fn after_a_driver_upgrade_our_links_are_replaced_and_stale_ones_removed() {
        let mut fs = ubuntu("535.183.01");
        let p = plan_of(&fs, false).unwrap();
        apply(&mut fs, &p);
        // The upgrade: the old files go, the new ones come; the old version named its own
        // glcore library.
        let mut up = ubuntu("550.54.14");
        for (k, v) in fs.nodes.iter().filter(|(k, _)| k.starts_with(L64)) {
            up.nodes.insert(k.clone(), v.clone());
        }
        let p = plan_of(&up, false).unwrap();
        let a = actions(&p);
        assert!(a.contains(&(
            "/run/opengl-driver/lib/libcuda.so.1".into(),
            Action::Replace(b"/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01".to_vec())
        )));
        assert!(a.contains(&(
            "/run/opengl-driver/lib/libnvidia-glcore.so.535.183.01".into(),
            Action::Remove(b"/usr/lib/x86_64-linux-gnu/libnvidia-glcore.so.535.183.01".to_vec())
        )));
        assert!(a.contains(&(
            "/run/opengl-driver/lib/libnvidia-glcore.so.550.54.14".into(),
            Action::Make
        )));
    }

    #[test]
    fn a_foreign_file_in_the_driver_link_is_refused() {
        let mut fs = ubuntu("550.54.14");
        fs.data("/run/opengl-driver/lib/libcuda.so.1", b"copied by hand");
        fs.link("/run/opengl-driver/lib/libfoo.so", "libcuda.so.1");
        fs.dir("/run/opengl-driver/lib/vdpau");
        let e = plan_of(&fs, false).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::Exit::Found);
        assert_eq!(
            e.to_string(),
            "refused: /run/opengl-driver/lib holds files this command did not make: \
             libcuda.so.1 (a file), libfoo.so (a link to libcuda.so.1), vdpau (a directory); \
             move them away (or choose another --driver-link), then run this again; nothing \
             was changed"
        );
    }

    #[test]
    fn hand_made_links_of_our_shape_are_taken_over() {
        // The seeds' workaround: `ln -s /usr/lib/x86_64-linux-gnu/libcuda.so.1` by hand.
        let mut fs = ubuntu("550.54.14");
        fs.link(
            "/run/opengl-driver/lib/libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        );
        let p = plan_of(&fs, false).unwrap();
        assert!(actions(&p).contains(&(
            "/run/opengl-driver/lib/libcuda.so.1".into(),
            Action::Replace(b"/usr/lib/x86_64-linux-gnu/libcuda.so.1".to_vec())
        )));
    }

    #[test]
    fn nixos_style_driver_link_is_refused() {
        let mut fs = ubuntu("550.54.14");
        fs.link("/run/opengl-driver", "/nix/store/0123-graphics-drivers");
        let e = plan_of(&fs, false).unwrap_err();
        assert!(
            e.to_string().contains("/run/opengl-driver is a symlink"),
            "{e}"
        );
    }

    #[test]
    fn persist_writes_the_tmpfiles_entry_only_under_systemd() {
        let mut fs = ubuntu("550.54.14");
        let p = plan_of(&fs, true).unwrap();
        assert_eq!(p.persist, Persist::NoSystemd);
        assert!(render_plan(&p, false).contains("run `stubstrip driver-link` from a boot script"));
        fs.dir(SYSTEMD_MARK);
        let p = plan_of(&fs, true).unwrap();
        let Persist::Write { text, unchanged } = &p.persist else {
            panic!("{:?}", p.persist)
        };
        assert!(!unchanged);
        assert!(text.starts_with(TMPFILES_HEADER));
        assert!(
            text.contains("\nd /run/opengl-driver 0755 root root -\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\nL+ /run/opengl-driver/lib/libcuda.so - - - - \
                 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14\n"
            ),
            "{text}"
        );
        fs.data(super::super::TMPFILES, text.as_bytes());
        let Persist::Write { unchanged, .. } = plan_of(&fs, true).unwrap().persist else {
            panic!()
        };
        assert!(unchanged);
        fs.data(super::super::TMPFILES, b"L /run/x - - - - /y\n");
        let e = plan_of(&fs, true).unwrap_err();
        assert!(matches!(
            e,
            DriverLinkError::Refused(Refusal::ForeignTmpfiles(_))
        ));
    }

    #[test]
    fn remove_takes_only_ours_and_the_directories_when_empty() {
        let mut fs = ubuntu("550.54.14");
        let p = plan_of(&fs, false).unwrap();
        apply(&mut fs, &p);
        let r = plan_remove(&fs, &[L64, L32]).unwrap();
        assert_eq!(r.dirs.len(), 1);
        assert_eq!(r.dirs[0].links.len(), 6);
        assert!(r.dirs[0].rmdir && r.dirs[0].rmdir_parent);
        assert!(!r.tmpfiles);
        fs.data("/run/opengl-driver/lib/mine", b"");
        let r = plan_remove(&fs, &[L64, L32]).unwrap();
        assert!(!r.dirs[0].rmdir);
        assert_eq!(r.dirs[0].left, vec![b"mine".to_vec()]);
        assert!(
            render_remove(&r, false).contains("kept, with what this command did not make: mine")
        );
    }
}
