//! The live path's commit calls, straight from the flat fields each call queued
//! (`records.offset_commit_fields`: `(key, offset, commit_timestamp)` for a plain offset,
//! `(key, value, None)` for one with metadata or a leader epoch): framed as one batch, and
//! applied to the table, without building a Python record per offset.
//!
//! Both give exactly what the records would: `frame_fields` the bytes of
//! `frame_records(base, records_from_fields(fields), timestamp)`, `apply_fields` the table
//! `apply_records` leaves (the same `apply::put`). Tests check both against those paths.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PySequence, PyString, PyTuple};
use rmp::encode as enc;

use crate::apply::{self, OFFSET_COMMIT, OFFSET_COMMIT_VERSION};
use crate::batch::{self, Frame, HEADER_SIZE};
use crate::msgpack;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(frame_fields, m)?)?;
    m.add_function(wrap_pyfunction!(apply_fields, m)?)?;
    Ok(())
}

fn triples<'py>(fields: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PySequence>, usize)> {
    let seq = fields.cast::<PySequence>()?.clone();
    let n = seq.len()?;
    if n % 3 != 0 {
        return Err(PyValueError::new_err("commit fields come in (key, value, timestamp) triples"));
    }
    Ok((seq, n / 3))
}

/// One batch (not transactional) of the commit calls in `calls` (a sequence of flat field
/// sequences), numbered from 0 at `base_offset`, stamped `timestamp`.
#[pyfunction]
fn frame_fields<'py>(py: Python<'py>, base_offset: i64, timestamp: i64,
                     calls: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let calls = calls.cast::<PySequence>()?;
    let mut all = Vec::new();
    let mut count = 0usize;
    for call in calls.try_iter()? {
        let (seq, n) = triples(&call?)?;
        count += n;
        all.push(seq);
    }
    if count == 0 {
        return Err(PyValueError::new_err("a batch holds at least one record"));
    }
    let record_count =
        u32::try_from(count).map_err(|_| PyValueError::new_err("too many records"))?;
    let mut buf = Vec::with_capacity(HEADER_SIZE + 48 * count);
    buf.resize(HEADER_SIZE, 0);
    // the payload: an array of `[delta, type, version, key, value]` records
    let _ = enc::write_array_len(&mut buf, record_count);
    let mut delta = 0u64;
    for seq in &all {
        let n = seq.len()?;
        for i in (0..n).step_by(3) {
            let _ = enc::write_array_len(&mut buf, 5);
            let _ = enc::write_uint(&mut buf, delta);
            let _ = enc::write_uint(&mut buf, OFFSET_COMMIT as u64);
            let _ = enc::write_uint(&mut buf, OFFSET_COMMIT_VERSION as u64);
            msgpack::encode(&seq.get_item(i)?, &mut buf, 1)?;
            let ts = seq.get_item(i + 2)?;
            if ts.is_none() {
                msgpack::encode(&seq.get_item(i + 1)?, &mut buf, 1)?;
            } else {
                let _ = enc::write_array_len(&mut buf, 2);
                msgpack::encode(&seq.get_item(i + 1)?, &mut buf, 2)?;
                msgpack::encode(&ts, &mut buf, 2)?;
            }
            delta += 1;
        }
    }
    let f = Frame {
        base_offset,
        record_count,
        last_offset_delta: record_count - 1,
        timestamp,
        attributes: 0,
        producer_id: -1,
        producer_epoch: -1,
    };
    batch::write_header(&mut buf, 0, &f).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &buf))
}

/// Apply the plain offsets of one commit call's `fields` to `offsets` (the table's dict of
/// dicts), in order, up to the first triple that is not a plain offset (one with metadata or
/// an epoch): returns how many were applied, all of them (`len(fields) // 3`) usually. The
/// caller applies the rest as records; applying a prefix again is harmless (each `put` sets
/// the entry the record gives).
#[pyfunction]
pub fn apply_fields(py: Python<'_>, offsets: &Bound<'_, PyDict>, fields: &Bound<'_, PyAny>,
                    intern: &Bound<'_, PyAny>) -> PyResult<usize> {
    let (seq, n) = triples(fields)?;
    let empty = PyString::new(py, "");
    for i in 0..n {
        let ts = seq.get_item(3 * i + 2)?;
        if ts.is_none() {
            return Ok(i);
        }
        let key = seq.get_item(3 * i)?;
        let key = key.cast::<PySequence>()?;
        if key.len()? != 3 {
            return Ok(i);
        }
        let (group, topic, partition) = (key.get_item(0)?, key.get_item(1)?, key.get_item(2)?);
        let offset = seq.get_item(3 * i + 1)?;
        if !group.is_instance_of::<PyString>() || !topic.is_instance_of::<PyString>()
            || apply::int_of(&partition).is_none() || apply::int_of(&offset).is_none()
            || apply::int_of(&ts).is_none()
        {
            return Ok(i);
        }
        let entry = PyTuple::new(py, [offset, empty.clone().into_any(),
                                      py.None().into_bound(py), ts, py.None().into_bound(py)])?;
        apply::untrack(&entry);
        let tp = PyTuple::new(py, [intern.call1((topic,))?, partition])?;
        apply::untrack(&tp);
        apply::put(py, offsets, &group, None, &tp, Some(entry))?;
    }
    Ok(n)
}
