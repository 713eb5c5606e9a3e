//! A Python extension that links the system's libxml2 (and through it liblzma and ICU): what
//! `maturin build --auditwheel repair` must graft into the wheel, with elfpatch as `patchelf`.
//! `tests/maturin/check_import.py` imports it and checks which copies the loader mapped.

use libxml::parser::Parser;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The name of the root element of `text`, parsed by libxml2.
#[pyfunction]
fn root_name(text: &str) -> PyResult<String> {
    let doc = Parser::default()
        .parse_string(text)
        .map_err(|e| PyValueError::new_err(format!("libxml2 could not parse it: {e:?}")))?;
    let root = doc
        .get_root_element()
        .ok_or_else(|| PyValueError::new_err("no root element"))?;
    Ok(root.get_name())
}

/// The module: `xmlwheel.root_name("<a/>") == "a"`.
#[pymodule]
fn xmlwheel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(root_name, m)?)
}
