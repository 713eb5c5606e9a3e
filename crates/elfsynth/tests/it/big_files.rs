//! `build_to` creates huge files cheaply (the `.text` zeros are seeked
//! over), and files beyond 4 GiB use 64-bit offsets correctly.

use crate::common;

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom};
use std::time::Instant;

use common::*;
use elfsynth::oracle;
use elfsynth::{Class, Endian, FileType, Machine, Spec};

/// Reads the file back without touching the big zero region of `.text`:
/// everything before `.text`'s zero tail and everything after `.text`, into
/// a zero-initialised buffer of the full size (lazily allocated by the OS).
fn read_sparse(path: &std::path::Path, spec: &Spec) -> Vec<u8> {
    let layout = elfsynth::layout(spec).unwrap();
    let text = layout.section(".text").unwrap();
    let mut buf = vec![0u8; layout.file_size as usize];
    let mut f = File::open(path).unwrap();
    let head_end = (text.offset + 4096) as usize;
    f.read_exact(&mut buf[..head_end]).unwrap();
    let tail = (text.offset + text.size) as usize;
    f.seek(SeekFrom::Start(tail as u64)).unwrap();
    f.read_exact(&mut buf[tail..]).unwrap();
    buf
}

fn big(spec: &Spec) {
    let t = TempFile::new("big");
    let start = Instant::now();
    let mut w = BufWriter::new(File::create(&t.0).unwrap());
    elfsynth::build_to(spec, &mut w).unwrap();
    drop(w);
    let took = start.elapsed();
    let layout = elfsynth::layout(spec).unwrap();
    assert_eq!(std::fs::metadata(&t.0).unwrap().len(), layout.file_size);
    println!("built {} bytes in {took:?}", layout.file_size);
    assert!(took.as_secs() < 20, "build_to took {took:?}");

    let bytes = read_sparse(&t.0, spec);
    let v = oracle::check_layout(&bytes);
    assert!(v.is_empty(), "{v:#?}");
    let elf = oracle::read(&bytes).unwrap();
    check_model(spec, &elf);
    let rw = elf
        .program_headers
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .nth(2)
        .unwrap();
    assert!(rw.p_offset > spec.text_size);
}

#[test]
fn one_gib_text() {
    big(&Spec {
        text_size: 1 << 30,
        ..Spec::default()
    });
}

#[test]
fn beyond_4_gib_64_bit_offsets() {
    for endian in Endian::ALL {
        big(&Spec {
            text_size: 5 << 30,
            endian,
            machine: Machine::AArch64,
            page_size: 0x10000,
            e_type: FileType::Exec,
            base: 0x40_0000,
            ..Spec::default()
        });
    }
}

#[test]
fn thirty_two_bit_near_the_limit() {
    big(&Spec {
        class: Class::Elf32,
        machine: Machine::I386,
        text_size: 3 << 30,
        ..Spec::default()
    });
}
