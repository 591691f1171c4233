//! A table snapshot's body (docs/FORMAT.md, "Snapshot store"): a msgpack map of sections,
//! decoded as the generic decoder decodes it, except the `offsets` section, which goes from
//! its bytes straight into the table's dict of dicts (`apply::offsets_from_flat`'s result,
//! without the flat lists in between). Reopening with a snapshot spends its time here.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use crate::apply::{atomic, untrack};
use crate::msgpack::Reader;

fn malformed(what: &str) -> PyErr {
    PyValueError::new_err(format!("malformed snapshot offsets: {what}"))
}

/// The body as a dict of sections; `offsets` is the built table when `topics` came before
/// it (as `OffsetTable.snapshot_state` writes them), else the flat list as written.
#[pyfunction]
pub fn decode_snapshot_body<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let mut r = Reader::new(body);
    let m = r.marker()?;
    let n = r
        .map_len(m)?
        .ok_or_else(|| PyValueError::new_err("a snapshot body is a map of sections"))?;
    let out = PyDict::new(py);
    let mut topics: Option<Vec<Bound<'py, PyString>>> = None;
    for _ in 0..n {
        let km = r.marker()?;
        let key = r
            .str_after(km)?
            .ok_or_else(|| PyValueError::new_err("a snapshot section's name is not a str"))?;
        if key == "offsets" {
            if let Some(names) = &topics {
                out.set_item(key, offsets(py, &mut r, names)?)?;
                continue;
            }
        }
        let value = r.value(py, 1)?;
        if key == "topics" {
            let list = value.cast::<PyList>()?;
            topics = Some(
                list.iter()
                    .map(|t| Ok(PyString::intern(py, t.cast::<PyString>()?.to_str()?)))
                    .collect::<PyResult<Vec<_>>>()?,
            );
        }
        out.set_item(key, value)?;
    }
    if !r.at_end() {
        return Err(PyValueError::new_err("extra bytes after the snapshot body"));
    }
    Ok(out)
}

/// The `offsets` section, `[group, flat, group, flat, ...]` with 7 values a key in each
/// `flat`, as `{group: {(topic, partition): (offset, metadata, leader_epoch,
/// commit_timestamp, expire_timestamp)}}`.
fn offsets<'py>(py: Python<'py>, r: &mut Reader<'_>, names: &[Bound<'py, PyString>])
                -> PyResult<Bound<'py, PyDict>> {
    let m = r.marker()?;
    let n = r.array_len(m)?.ok_or_else(|| malformed("not an array"))?;
    if n % 2 != 0 {
        return Err(malformed("not group, offsets pairs"));
    }
    let out = PyDict::new(py);
    let mut keys: HashMap<(usize, i64), Bound<'py, PyTuple>> = HashMap::new();
    for _ in 0..n / 2 {
        let group = r.value(py, 2)?;
        let m = r.marker()?;
        let len = r.array_len(m)?.ok_or_else(|| malformed("a group's offsets are not an array"))?;
        if len % 7 != 0 {
            return Err(malformed("a group's offsets are not 7-tuples"));
        }
        let inner = PyDict::new(py);
        for _ in 0..len / 7 {
            let m = r.marker()?;
            let t = r.int_after(m)?.and_then(|t| usize::try_from(t).ok())
                .ok_or_else(|| malformed("a topic index that is not one"))?;
            let topic = names.get(t).ok_or_else(|| malformed("a topic index out of range"))?;
            let m = r.marker()?;
            let p = r.int_after(m)?.ok_or_else(|| malformed("a partition that is not an int"))?;
            let key = match keys.get(&(t, p)) {
                Some(k) => k.clone(),
                None => {
                    let k = PyTuple::new(py, [topic.clone().into_any(),
                                              p.into_pyobject(py)?.into_any()])?;
                    untrack(&k);
                    keys.insert((t, p), k.clone());
                    k
                }
            };
            let fields = [r.value(py, 3)?, r.value(py, 3)?, r.value(py, 3)?, r.value(py, 3)?,
                          r.value(py, 3)?];
            let entry = PyTuple::new(py, &fields)?;
            if fields.iter().all(atomic) {
                untrack(&entry);
            }
            inner.set_item(key, entry)?;
        }
        out.set_item(group, inner)?;
    }
    Ok(out)
}
