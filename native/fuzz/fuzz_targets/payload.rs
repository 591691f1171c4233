//! A payload's bytes: the plain-commit parser replay uses, and the decoder to Python
//! values, either answer or refuse (a Python ValueError), never panic; and a payload the
//! parser takes as plain commits is one the full decoder reads too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offsetlog_native::{apply, msgpack};
use pyo3::Python;

fuzz_target!(|data: &[u8]| {
    let plain = apply::parse_payload(data).is_some();
    Python::attach(|py| {
        let decoded = msgpack::decode(py, data);
        assert!(!plain || decoded.is_ok(), "parsed as commits but does not decode");
    });
});
