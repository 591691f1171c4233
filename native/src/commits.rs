//! The live path's commit calls: the usual call's offsets checked and turned into record
//! fields in one pass (`plain_commit_fields`), and then, straight from the flat fields each
//! call queued
//! (`records.offset_commit_fields`: `(key, offset, commit_timestamp)` for a plain offset,
//! `(key, value, None)` for one with metadata or a leader epoch): framed as one batch, and
//! applied to the table, without building a Python record per offset.
//!
//! Both give exactly what the records would: `frame_fields` the bytes of
//! `frame_records(base, records_from_fields(fields), timestamp)`, `apply_fields` the table
//! `apply_records` leaves (the same `apply::put`). Tests check both against those paths.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySequence, PyString, PyTuple};
use rmp::encode as enc;

use crate::apply::{self, OFFSET_COMMIT, OFFSET_COMMIT_VERSION};
use crate::batch::{self, Frame, HEADER_SIZE};
use crate::key_cache::KeyCache;
use crate::msgpack;
use crate::wire_conn::Entry as WireEntry;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(frame_fields, m)?)?;
    m.add_function(wrap_pyfunction!(apply_fields, m)?)?;
    m.add_function(wrap_pyfunction!(plain_commit_fields, m)?)?;
    Ok(())
}

pub(crate) fn triples<'py>(fields: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PySequence>, usize)> {
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
pub fn frame_fields<'py>(py: Python<'py>, base_offset: i64, timestamp: i64,
                         calls: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let calls = calls.cast::<PySequence>()?;
    let mut all = Vec::new();
    let mut count = 0usize;
    for call in calls.try_iter()? {
        let (seq, n) = triples(&call?)?;
        count += n;
        all.push(seq);
    }
    frame_calls(py, base_offset, timestamp, &all, count, None)
}

/// `frame_fields` of calls already split into their field sequences (`count` triples in all);
/// with `producer` (its id and epoch), the batch of that producer's open transaction.
pub(crate) fn frame_calls<'py>(py: Python<'py>, base_offset: i64, timestamp: i64,
                               all: &[Bound<'py, PySequence>], count: usize,
                               producer: Option<(i64, i16)>)
                               -> PyResult<Bound<'py, PyBytes>> {
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
    for seq in all {
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
        attributes: if producer.is_some() { batch::TRANSACTIONAL } else { 0 },
        producer_id: producer.map_or(-1, |p| p.0),
        producer_epoch: producer.map_or(-1, |p| p.1),
    };
    batch::write_header(&mut buf, 0, &f).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &buf))
}

/// Apply the offsets of one commit call's `fields` to `offsets` (the table's dict of dicts),
/// in order, up to the first triple of a shape or types not taken here (`apply::full_entry`
/// says which values): returns how many were applied, all of them (`len(fields) // 3`)
/// usually. The caller applies the rest as records; applying a prefix again is harmless (each
/// `put` sets the entry the record gives).
#[pyfunction]
pub fn apply_fields(py: Python<'_>, offsets: &Bound<'_, PyDict>, fields: &Bound<'_, PyAny>,
                    intern: &Bound<'_, PyAny>) -> PyResult<usize> {
    let (seq, n) = triples(fields)?;
    apply_triples(py, offsets, &seq, n, intern)
}

/// `apply_fields` of fields already split into their `n` triples (`triples`).
pub(crate) fn apply_triples(py: Python<'_>, offsets: &Bound<'_, PyDict>,
                            seq: &Bound<'_, PySequence>, n: usize,
                            intern: &Bound<'_, PyAny>) -> PyResult<usize> {
    let empty = PyString::new(py, "");
    for i in 0..n {
        let ts = seq.get_item(3 * i + 2)?;
        let key = seq.get_item(3 * i)?;
        let key = key.cast::<PySequence>()?;
        if key.len()? != 3 {
            return Ok(i);
        }
        let (group, topic, partition) = (key.get_item(0)?, key.get_item(1)?, key.get_item(2)?);
        let value = seq.get_item(3 * i + 1)?;
        if !group.is_instance_of::<PyString>() || !topic.is_instance_of::<PyString>()
            || apply::int_of(&partition).is_none()
        {
            return Ok(i);
        }
        let entry = if ts.is_none() {
            // an offset with metadata or an epoch: its record's value is the list
            let Some(entry) = apply::full_entry(py, &value)? else { return Ok(i) };
            entry
        } else {
            if apply::int_of(&value).is_none() || apply::int_of(&ts).is_none() {
                return Ok(i);
            }
            apply::plain_entry(py, value, ts, &empty)?
        };
        let tp = apply::interned_key(topic, partition, intern)?;
        apply::put(py, offsets, &group, None, &tp, Some(entry))?;
    }
    Ok(n)
}

/// An offset's metadata and leader epoch as its record has them (`records.offset_commit`):
/// the value `[offset, commit_timestamp, metadata]`, with the epoch appended when there is
/// one, and what they add to the record's size bound. None (the outer option) for metadata
/// the usual call does not take (`PlainLimits::metadata_max`), Some(None) for an offset with
/// neither (a plain one).
#[allow(clippy::type_complexity)]
fn with_extra<'py>(offset: &Bound<'py, PyAny>, timestamp: &Bound<'py, PyAny>,
                   metadata: &Bound<'py, PyString>, metadata_bytes: usize,
                   epoch: Option<Bound<'py, PyAny>>, limits: &PlainLimits)
                   -> PyResult<Option<Option<(Bound<'py, PyAny>, usize)>>> {
    if metadata_bytes == 0 && epoch.is_none() {
        return Ok(Some(None));
    }
    if metadata_bytes > limits.metadata_max {
        return Ok(None); // (it may still be within the limit: the long way counts it)
    }
    let mut items = vec![offset.clone(), timestamp.clone(), metadata.clone().into_any()];
    items.extend(epoch);
    let value = PyList::new(offset.py(), items)?.into_any();
    Ok(Some(Some((value, EXTRA_BOUND + metadata_bytes))))
}

/// What an offset's metadata and epoch add to its record's size beyond the metadata's text:
/// the metadata's str header (5 bytes at most) and the epoch (an int32: 5 at most).
const EXTRA_BOUND: usize = 5 + 5;

/// The record fields of the usual commit call, checked in one pass: `offsets` a dict of
/// `TopicPartition` (exactly `tp_type`) to an int, or to an `OffsetAndMetadata` (exactly
/// `oam_type`) whose metadata is None or a str of at most `metadata_max` UTF-8 bytes and
/// whose leader epoch is None or an int in -1..=2**31-1 (-1: none); topics non-empty ASCII
/// strs, partitions ints in 0..=2**31-1, offsets ints in 0..=2**63-1. Returns the flat
/// triples (`(key, offset, commit_timestamp)` for a plain offset, `(key, value, None)` for one
/// with metadata or an epoch, as `records.offset_commit_fields` has them) and an upper bound
/// of their encoded size (what `max_group_commit_bytes` counts: per offset,
/// `bound_per_offset` plus the group's and the topic's UTF-8 lengths, plus `EXTRA_BOUND` and
/// the metadata's for an offset that has either), or None for any other call, which the
/// caller checks the long way (`validation.check_offsets`). Record keys come from `keys` (a
/// `KeyCache`, or None), so that the records of one key share one list.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the call, its time, the key cache, the limits, the types
#[pyo3(signature = (group, offsets, timestamp, keys, bound_per_offset, metadata_max, tp_type,
                    oam_type))]
pub fn plain_commit_fields<'py>(
    py: Python<'py>,
    group: &Bound<'py, PyString>,
    offsets: &Bound<'py, PyAny>,
    timestamp: &Bound<'py, PyAny>,
    keys: Option<&Bound<'py, KeyCache>>,
    bound_per_offset: usize,
    metadata_max: usize,
    tp_type: &Bound<'py, PyAny>,
    oam_type: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyTuple>, usize)>> {
    let keys = keys.map(Bound::get);
    let limits = PlainLimits { bound_per_offset, metadata_max, tp_type: tp_type.clone().unbind(),
                               oam_type: oam_type.clone().unbind() };
    let Some((fields, n)) = plain_fields(py, group, offsets, timestamp, keys, &limits)? else {
        return Ok(None);
    };
    Ok(Some((PyTuple::new(py, fields)?, n)))
}

/// `plain_commit_fields`' settings: a record's size bound beyond its text, the metadata the
/// usual call takes, and the two types of the usual call.
pub(crate) struct PlainLimits {
    pub bound_per_offset: usize,
    /// the store's `metadata_max_bytes` (a limit in UTF-16 code units, as Kafka's): metadata
    /// of at most that many UTF-8 bytes is within it, as no code unit takes less than a byte;
    /// longer metadata goes the long way, which counts its code units
    pub metadata_max: usize,
    pub tp_type: Py<PyAny>,
    pub oam_type: Py<PyAny>,
}

impl PlainLimits {
    /// (no call is usual until the types are set: None is no value's type)
    pub fn default(py: Python<'_>) -> Self {
        PlainLimits { bound_per_offset: 0, metadata_max: 0, tp_type: py.None(),
                      oam_type: py.None() }
    }

    pub fn clone_ref(&self, py: Python<'_>) -> Self {
        PlainLimits { bound_per_offset: self.bound_per_offset, metadata_max: self.metadata_max,
                      tp_type: self.tp_type.clone_ref(py), oam_type: self.oam_type.clone_ref(py) }
    }
}

/// `plain_commit_fields`, for native callers.
pub(crate) fn plain_fields<'py>(py: Python<'py>, group: &Bound<'py, PyString>,
                                offsets: &Bound<'py, PyAny>, timestamp: &Bound<'py, PyAny>,
                                keys: Option<&KeyCache>, limits: &PlainLimits)
                                -> PyResult<Option<(Vec<Bound<'py, PyAny>>, usize)>> {
    let (tp_type, oam_type) = (limits.tp_type.bind(py), limits.oam_type.bind(py));
    let Ok(offsets) = offsets.cast_exact::<PyDict>() else { return Ok(None) };
    // text that UTF-8 cannot hold (a lone surrogate) is for the long way to refuse
    let Ok(group_bytes) = group.to_str().map(str::len) else { return Ok(None) };
    let per_offset = limits.bound_per_offset + group_bytes;
    let mut out: Vec<Bound<'py, PyAny>> = Vec::with_capacity(3 * offsets.len());
    let mut text = 0usize;
    let empty = pyo3::intern!(py, "");
    for (tp, value) in offsets.iter() {
        let (value, metadata, epoch) = if value.get_type().is(oam_type) {
            let v = value.cast::<PyTuple>()?;
            if v.len() != 3 {
                return Ok(None);
            }
            let (metadata, epoch) = (v.get_item(1)?, v.get_item(2)?);
            let metadata = if metadata.is_none() {
                empty.clone()
            } else {
                let Ok(m) = metadata.cast_into_exact::<PyString>() else { return Ok(None) };
                m
            };
            let epoch = if epoch.is_none() || exact_int_in(&epoch, -1, -1) {
                None
            } else if exact_int_in(&epoch, 0, i64::from(i32::MAX)) {
                Some(epoch)
            } else {
                return Ok(None);
            };
            (v.get_item(0)?, Some(metadata), epoch)
        } else {
            (value, None, None)
        };
        if !tp.get_type().is(tp_type) || !exact_int_in(&value, 0, i64::MAX) {
            return Ok(None);
        }
        let extra = match metadata {
            None => None,
            Some(metadata) => {
                // (text UTF-8 cannot hold, a lone surrogate, is for the long way to refuse)
                let Ok(bytes) = metadata.to_str().map(str::len) else { return Ok(None) };
                let Some(extra) = with_extra(&value, timestamp, &metadata, bytes, epoch,
                                             limits)? else { return Ok(None) };
                extra
            }
        };
        let tp = tp.cast::<PyTuple>()?;
        if tp.len() != 2 {
            return Ok(None);
        }
        let (topic, partition) = (tp.get_item(0)?, tp.get_item(1)?);
        let Ok(name) = topic.cast_exact::<PyString>() else { return Ok(None) };
        let Ok(name_str) = name.to_str() else { return Ok(None) }; // (a lone surrogate)
        if name_str.is_empty() || !name_str.is_ascii()
            || !exact_int_in(&partition, 0, i64::from(i32::MAX))
        {
            return Ok(None);
        }
        text += name_str.len()
            + push_fields(py, &mut out, keys, group, tp.as_any(), &topic, &partition, value,
                          timestamp, extra)?;
    }
    let n = text + out.len() / 3 * per_offset;
    Ok(Some((out, n)))
}

/// `plain_fields` of a commit already in native values (`wire_conn::Entry`s, in call order
/// with no key twice: the wire's OffsetCommit): the same fields and size bound; None when an
/// entry is not one `plain_fields` takes. A negative epoch is none, as the wire's Python path
/// reads it.
pub(crate) fn plain_fields_of<'py>(py: Python<'py>, group: &Bound<'py, PyString>,
                                   entries: &[WireEntry<'_>], timestamp: &Bound<'py, PyAny>,
                                   keys: Option<&KeyCache>, limits: &PlainLimits)
                                   -> PyResult<Option<(Vec<Bound<'py, PyAny>>, usize)>> {
    let Ok(group_bytes) = group.to_str().map(str::len) else { return Ok(None) };
    let per_offset = limits.bound_per_offset + group_bytes;
    let mut out: Vec<Bound<'py, PyAny>> = Vec::with_capacity(3 * entries.len());
    let mut text = 0usize;
    for &(name, partition, offset, epoch, metadata) in entries {
        if name.is_empty() || !name.is_ascii() || partition < 0 || offset < 0 {
            return Ok(None);
        }
        // (interned: a topic's name is one object for all its commits, as Python's are)
        let topic = PyString::intern(py, name).into_any();
        let partition = partition.into_pyobject(py)?.into_any();
        let value = offset.into_pyobject(py)?.into_any();
        let epoch = (epoch >= 0).then(|| epoch.into_pyobject(py).map(Bound::into_any))
            .transpose()?;
        let Some(extra) = with_extra(&value, timestamp, &PyString::new(py, metadata),
                                     metadata.len(), epoch, limits)? else { return Ok(None) };
        let tp = PyTuple::new(py, [&topic, &partition])?;
        text += name.len()
            + push_fields(py, &mut out, keys, group, tp.as_any(), &topic, &partition, value,
                          timestamp, extra)?;
    }
    let n = text + out.len() / 3 * per_offset;
    Ok(Some((out, n)))
}

/// One offset's record fields: its key (shared through `keys`; `tp` is its `(topic,
/// partition)`, as a `TopicPartition` or a tuple), then its offset and the commit's time, or,
/// for an offset with metadata or an epoch (`extra`, `with_extra`'s), its record value and
/// None. Returns what `extra` adds to the size bound.
#[allow(clippy::too_many_arguments)]
fn push_fields<'py>(py: Python<'py>, out: &mut Vec<Bound<'py, PyAny>>, keys: Option<&KeyCache>,
                    group: &Bound<'py, PyString>, tp: &Bound<'py, PyAny>,
                    topic: &Bound<'py, PyAny>, partition: &Bound<'py, PyAny>,
                    offset: Bound<'py, PyAny>, timestamp: &Bound<'py, PyAny>,
                    extra: Option<(Bound<'py, PyAny>, usize)>) -> PyResult<usize> {
    out.push(match keys {
        Some(keys) => keys.key(group, tp, topic, partition)?,
        None => PyList::new(py, [group.as_any(), topic, partition])?.into_any(),
    });
    Ok(match extra {
        None => {
            out.push(offset);
            out.push(timestamp.clone());
            0
        }
        Some((value, bound)) => {
            out.push(value);
            out.push(py.None().into_bound(py));
            bound
        }
    })
}

/// An exact int (not a bool, nor another subclass) within `lo..=hi`.
fn exact_int_in(v: &Bound<'_, PyAny>, lo: i64, hi: i64) -> bool {
    v.is_exact_instance_of::<pyo3::types::PyInt>()
        && v.extract::<i64>().is_ok_and(|x| (lo..=hi).contains(&x))
}
