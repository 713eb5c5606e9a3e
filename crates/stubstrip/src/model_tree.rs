//! A tree of real programs and libraries, built with gcc, for the tests of `audit` and
//! `explain` that the shared cache changes nothing: test-only, shared so that neither
//! subcommand's tests reach into the other's.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const HASH: &str = "0123456789abcdfghijklmnpqrsvwxyz";
const STUB: &str = "int cuInit(unsigned f) { (void)f; return 34; }\n";
/// Like libcudart: `dlopen`s `libcuda.so.1` itself, no `DT_NEEDED` on it.
const CUDART: &str = "#include <dlfcn.h>\n\
    int cudart_probe(void) { return dlopen(\"libcuda.so.1\", RTLD_NOW) != 0; }\n";
const ZLIB: &str = "int z_fn(void) { return 1; }\n";
const DEP: &str = "int z_fn(void);\nint dep_fn(void) { return z_fn(); }\n";
const MAIN: &str = "int cudart_probe(void);\nint dep_fn(void);\n\
    int main(void) { return cudart_probe() + dep_fn(); }\n";
/// A libcudart_static-like program (the name in `.rodata`) that also declares a `dlopen`
/// of `libplug.so.3` or `libplug.so.2` in `.note.dlopen`.
const NOTED: &str = include_str!("../tests/common/noted_app.c");

fn gcc(out: &Path, src: &str, args: &[&str]) {
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    let c = out.with_extension("c");
    fs::write(&c, src).unwrap();
    testkit::run_ok(Command::new("gcc").arg("-o").arg(out).arg(&c).args(args));
    fs::remove_file(c).unwrap();
}

fn lib(dir: &Path, file: &str, src: &str, args: &[&str]) -> PathBuf {
    let out = dir.join(file);
    let soname = format!("-Wl,-soname,{file}");
    let mut a = vec!["-shared", "-fPIC", &soname];
    a.extend_from_slice(args);
    gcc(&out, src, &a);
    out
}

/// A tree under `t` where the loader model has work to share between files: programs and
/// libraries that load the same libraries under several names (a symlink, `$ORIGIN`, an
/// absolute path), an RPATH chain, a libcudart whose RUNPATH finds the CUDA stub through a
/// `dlopen`, a program with `libcuda.so.1` in `.rodata` and a `.note.dlopen`, and a library
/// that is cut short (its ELF header is fine, reading it fails). Returns the output
/// directory (`t/out`), or `None` without gcc.
pub fn model_tree(t: &Path) -> Option<PathBuf> {
    if !cfg!(target_arch = "x86_64") || !testkit::have("gcc") {
        testkit::skip("needs gcc on x86-64");
        return None;
    }
    let stubs = t.join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib"));
    let driver = t.join("run/opengl-driver/lib");
    let out = t.join("out");
    let libdir = out.join("lib");
    let s = |p: &Path| p.display().to_string();
    lib(&stubs, "libcuda.so.1", STUB, &[]);
    lib(&driver, "libcuda.so.1", STUB, &[]);
    lib(&out.join("plugins"), "libplug.so.2", "int plug;\n", &[]);
    let rp_stubs = format!("-Wl,-rpath,{}", s(&stubs));
    lib(
        &libdir,
        "libcudart.so.12",
        CUDART,
        &["-ldl", "-Wl,--enable-new-dtags", &rp_stubs],
    );
    lib(&libdir, "libz.so.1", ZLIB, &[]);
    std::os::unix::fs::symlink("libz.so.1", libdir.join("libz.so")).unwrap();
    let l = format!("-L{}", s(&libdir));
    lib(
        &libdir,
        "libdep.so.1",
        DEP,
        &[&l, "-lz", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN"],
    );
    lib(&libdir, "libbroken.so.1", ZLIB, &[]);
    let runpaths = [
        (
            "app-origin",
            "-Wl,--enable-new-dtags",
            "$ORIGIN/../lib".to_string(),
        ),
        (
            "app-rpath",
            "-Wl,--disable-new-dtags",
            "$ORIGIN/../lib".to_string(),
        ),
        (
            "app-absolute",
            "-Wl,--enable-new-dtags",
            format!("{}:{}", s(&libdir), s(&driver)),
        ),
        (
            "app-stubs-first",
            "-Wl,--enable-new-dtags",
            format!("{}:$ORIGIN/../lib", s(&stubs)),
        ),
    ];
    for (name, dtags, rp) in runpaths {
        let rp = format!("-Wl,-rpath,{rp}");
        let args = [
            l.as_str(),
            "-l:libcudart.so.12",
            "-l:libdep.so.1",
            "-lz",
            dtags,
            &rp,
        ];
        gcc(&out.join("bin").join(name), MAIN, &args);
    }
    let rp = format!("-Wl,-rpath,{}:{}", s(&stubs), s(&out.join("plugins")));
    gcc(
        &out.join("bin/app-noted"),
        NOTED,
        &["-ldl", "-Wl,--enable-new-dtags", &rp],
    );
    gcc(
        &out.join("bin/app-broken"),
        "int z_fn(void);\nint main(void) { return z_fn(); }\n",
        &[
            &l,
            "-l:libbroken.so.1",
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../lib",
        ],
    );
    // Cut after the ELF header and part of the program headers: the loader model's probe
    // accepts it, reading its dynamic section fails.
    let broken = libdir.join("libbroken.so.1");
    let head = fs::read(&broken).unwrap()[..100].to_vec();
    fs::write(&broken, head).unwrap();
    Some(out)
}
