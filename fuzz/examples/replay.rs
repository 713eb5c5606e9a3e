//! Replays inputs through the `plan_apply` properties without libFuzzer, for triage:
//! `cargo run --example replay -- FILE_OR_DIR...` prints one line per input (panics caught) and
//! exits non-zero if any failed. `REPLAY_TIMES=1`: print the time each input took.

use std::panic;
use std::path::PathBuf;

use elfpatch_fuzz::check::plan_apply_checked;

fn main() {
    let mut files: Vec<PathBuf> = Vec::new();
    for a in std::env::args().skip(1) {
        let p = PathBuf::from(a);
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            v.sort();
            files.extend(v);
        } else {
            files.push(p);
        }
    }
    panic::set_hook(Box::new(|info| {
        if let Some(l) = info.location() {
            eprintln!("  (panic at {}:{})", l.file(), l.line());
        }
    }));
    let mut failed = 0;
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let t0 = std::time::Instant::now();
        let r = panic::catch_unwind(|| plan_apply_checked(&data));
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if std::env::var_os("REPLAY_TIMES").is_some() {
            println!("{ms:9.2} ms {}", f.display());
        }
        match r {
            Ok(Ok(stats)) => println!("ok     {}: {stats:?}", f.display()),
            Ok(Err(e)) => {
                failed += 1;
                println!("FAILED {}: {}", f.display(), e.0)
            }
            Err(p) => {
                failed += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                println!("PANIC  {}: {msg}", f.display())
            }
        }
    }
    println!("{} inputs, {failed} failed", files.len());
    std::process::exit(i32::from(failed > 0));
}
