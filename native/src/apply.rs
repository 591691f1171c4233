//! Plain offset commits into the table's dicts: the hot half of `OffsetTable.apply_batches`.
//!
//! A *plain commit* is an `OFFSET_COMMIT` version 1 record of the canonical shape (key
//! `[group, topic, partition]` of str, str, int; value nil or `[offset, commit_timestamp,
//! metadata?, leader_epoch?, expire_timestamp?]` of ints, a str and ints or nils) in a batch
//! that is neither transactional nor control, of a group with no pending transactional
//! offsets. `apply_commit` is the one place such a record changes the table, for the live
//! path (records as Python objects, `apply_records`) and for replay (records still in their
//! bytes, `replay_chunk` in `scan`). Every other record, and every record of another shape,
//! is left to the Python table, which applies it (or refuses it) as before.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::exceptions::PyValueError;
use pyo3::types::{PyDict, PyInt, PyList, PySequence, PyString, PyTuple};
use rmp::Marker;

use crate::msgpack::Reader;

pub const OFFSET_COMMIT: i64 = 1;
pub const OFFSET_COMMIT_VERSION: i64 = 1;

/// A plain commit's value (None: a tombstone).
pub struct Value<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub metadata: &'a str,
    pub leader_epoch: Option<i64>,
    pub expire: Option<i64>,
}

/// One plain commit.
pub struct Commit<'a> {
    pub delta: i64,
    pub group: &'a str,
    pub topic: &'a str,
    pub partition: i64,
    pub value: Option<Value<'a>>,
}

/// What replay looks up again and again within one call: each group's name and dict (so a
/// group's string is made, hashed and found once, not per record), and each `(topic,
/// partition)` key (one tuple per key, shared by every group's dict: fewer objects too). Only
/// valid while nothing but `apply_commit` changes `offsets`, which holds within one native
/// call: it runs no Python code.
#[derive(Default)]
pub struct Cache<'a, 'py> {
    groups: HashMap<&'a str, (Bound<'py, PyString>, Bound<'py, PyDict>)>,
    keys: HashMap<(&'a str, i64), Bound<'py, PyTuple>>,
}

fn key_tuple<'py>(py: Python<'py>, topic: &str, partition: i64) -> PyResult<Bound<'py, PyTuple>> {
    let tp = PyTuple::new(py, [PyString::intern(py, topic).into_any(),
                               partition.into_pyobject(py)?.into_any()])?;
    untrack(&tp);
    Ok(tp)
}

/// Hide a tuple of ints, strs and Nones from the cyclic garbage collector. Such a tuple can
/// be in no reference cycle: CPython untracks it itself at the first collection that sees it,
/// after scanning it. Untracked at birth, a table's keys and entries are never scanned, and
/// the dicts holding only them stay untracked too, so a table of millions of entries adds
/// nothing to any collection (the one that follows replay took 0.1 s per million entries).
pub(crate) fn untrack(t: &Bound<'_, PyTuple>) {
    // `t` is a live tuple (a GC-capable object) owned by this thread, which holds the GIL;
    // PyObject_GC_UnTrack only unlinks it from the collector's list (a no-op if it is on
    // none), and a tuple of ints, strs and Nones can be in no reference cycle.
    // SAFETY: by those three facts the call touches nothing another thread or the GC uses.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(t.as_ptr().cast()) }
}

/// The one place a plain commit changes the table: `entry` becomes `(group, tp)`'s, or, for
/// a tombstone (None), the key goes (and the group's dict once empty). `g` is the group's
/// dict when the caller already knows it. Returns the group's dict as it now stands (None:
/// the group has none).
pub fn put<'py>(py: Python<'py>, offsets: &Bound<'py, PyDict>, group: &Bound<'py, PyAny>,
                g: Option<Bound<'py, PyDict>>, tp: &Bound<'py, PyTuple>,
                entry: Option<Bound<'py, PyTuple>>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let g = match g {
        Some(g) => Some(g),
        None => offsets.get_item(group)?.map(|g| g.cast_into::<PyDict>()).transpose()?,
    };
    match entry {
        None => {
            if let Some(g) = &g {
                if g.contains(tp)? {
                    g.del_item(tp)?;
                    if g.is_empty() {
                        offsets.del_item(group)?;
                        return Ok(None);
                    }
                }
            }
            Ok(g)
        }
        Some(entry) => {
            let g = match g {
                Some(g) => g,
                None => {
                    let g = PyDict::new(py);
                    offsets.set_item(group, &g)?;
                    g
                }
            };
            g.set_item(tp, entry)?;
            Ok(Some(g))
        }
    }
}

/// Apply one plain commit parsed from a payload (`put`, with the look-ups of `cache`).
/// Topics are interned, as the Python table interns them.
pub fn apply_commit<'a, 'py>(py: Python<'py>, offsets: &Bound<'py, PyDict>, c: &Commit<'a>,
                             cache: &mut Cache<'a, 'py>) -> PyResult<()> {
    let tp = match cache.keys.get(&(c.topic, c.partition)) {
        Some(tp) => tp.clone(),
        None => {
            let tp = key_tuple(py, c.topic, c.partition)?;
            cache.keys.insert((c.topic, c.partition), tp.clone());
            tp
        }
    };
    let (group, g) = match cache.groups.get(c.group).cloned() {
        Some((name, g)) => (name, Some(g)),
        None => (PyString::new(py, c.group), None),
    };
    let entry = match &c.value {
        None => None,
        Some(v) => {
            let entry = (v.offset, v.metadata, v.leader_epoch, v.timestamp, v.expire)
                .into_pyobject(py)?;
            untrack(&entry);
            Some(entry)
        }
    };
    match put(py, offsets, group.as_any(), g, &tp, entry)? {
        Some(g) => cache.groups.insert(c.group, (group, g)),
        None => cache.groups.remove(c.group),
    };
    Ok(())
}

/// An int or nil, for the optional fields.
fn opt_int(r: &mut Reader<'_>) -> PyResult<Option<Option<i64>>> {
    let m = r.marker()?;
    if matches!(m, Marker::Null) {
        return Ok(Some(None));
    }
    Ok(r.int_after(m)?.map(Some))
}

/// The plain commit at the reader's position, or None if the record there is anything
/// else (the reader is then somewhere inside it: the caller gives up on the batch).
pub fn parse_commit<'a>(r: &mut Reader<'a>) -> PyResult<Option<Commit<'a>>> {
    macro_rules! want {
        ($e:expr) => {
            match $e {
                Some(v) => v,
                None => return Ok(None),
            }
        };
    }
    let m = r.marker()?;
    if want!(r.array_len(m)?) != 5 {
        return Ok(None);
    }
    let m = r.marker()?;
    let delta = want!(r.int_after(m)?);
    let m = r.marker()?;
    if want!(r.int_after(m)?) != OFFSET_COMMIT {
        return Ok(None);
    }
    let m = r.marker()?;
    if want!(r.int_after(m)?) != OFFSET_COMMIT_VERSION {
        return Ok(None);
    }
    let m = r.marker()?;
    if want!(r.array_len(m)?) != 3 {
        return Ok(None);
    }
    let m = r.marker()?;
    let group = want!(r.str_after(m)?);
    let m = r.marker()?;
    let topic = want!(r.str_after(m)?);
    let m = r.marker()?;
    let partition = want!(r.int_after(m)?);
    let m = r.marker()?;
    if matches!(m, Marker::Null) {
        return Ok(Some(Commit { delta, group, topic, partition, value: None }));
    }
    let n = want!(r.array_len(m)?);
    if !(2..=5).contains(&n) {
        return Ok(None); // fewer is corrupt, more holds fields of a later writer: Python's
    }
    let m = r.marker()?;
    let offset = want!(r.int_after(m)?);
    let m = r.marker()?;
    let timestamp = want!(r.int_after(m)?);
    let mut value = Value { offset, timestamp, metadata: "", leader_epoch: None, expire: None };
    if n > 2 {
        let m = r.marker()?;
        value.metadata = want!(r.str_after(m)?);
    }
    if n > 3 {
        value.leader_epoch = want!(opt_int(r)?);
    }
    if n > 4 {
        value.expire = want!(opt_int(r)?);
    }
    Ok(Some(Commit { delta, group, topic, partition, value: Some(value) }))
}

/// The plain commits of a whole payload, or None if any record is something else (or the
/// payload does not decode: Python's decoder then says why).
pub fn parse_payload<'a>(payload: &'a [u8]) -> Option<Vec<Commit<'a>>> {
    let mut r = Reader::new(payload);
    let m = r.marker().ok()?;
    let n = r.array_len(m).ok()??;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(parse_commit(&mut r).ok()??);
    }
    if !r.at_end() {
        return None;
    }
    Some(out)
}

/// Apply the plain commits of `records` (Python records, in order) from `start` on, up to
/// the first record that is not one: returns its index (`len(records)` when all were). Of
/// the values, a tombstone, the plain `[offset, commit_timestamp]` pair and a version 1 value
/// of ints, a str and Nones (`full_entry`: metadata, an epoch, an expiry) are taken here;
/// any other is left to the Python table like any other record. The records' own objects go
/// into the table
/// (the group's str, the offset's and timestamp's ints), the topic interned by `intern`
/// (`sys.intern`), as the Python table would put them.
#[pyfunction]
pub fn apply_records(py: Python<'_>, offsets: &Bound<'_, PyDict>, records: &Bound<'_, PyAny>,
                     start: usize, intern: &Bound<'_, PyAny>) -> PyResult<usize> {
    let records = records.cast::<PySequence>()?;
    let n = records.len()?;
    let empty = PyString::new(py, "");
    for i in start..n {
        if !apply_python_record(py, offsets, &records.get_item(i)?, intern, &empty)? {
            return Ok(i);
        }
    }
    Ok(n)
}

/// `put` for one Python record, if it is a plain commit in a form taken here.
fn apply_python_record<'py>(py: Python<'py>, offsets: &Bound<'py, PyDict>,
                            record: &Bound<'py, PyAny>, intern: &Bound<'py, PyAny>,
                            empty: &Bound<'py, PyString>) -> PyResult<bool> {
    let Ok(rec) = record.cast::<PySequence>() else { return Ok(false) };
    if rec.len()? != 5 || int_of(&rec.get_item(1)?) != Some(OFFSET_COMMIT)
        || int_of(&rec.get_item(2)?) != Some(OFFSET_COMMIT_VERSION)
        || int_of(&rec.get_item(0)?).is_none()
    {
        return Ok(false);
    }
    let key = rec.get_item(3)?;
    let Ok(key) = key.cast::<PySequence>() else { return Ok(false) };
    if key.len()? != 3 {
        return Ok(false);
    }
    let (group, topic, partition) = (key.get_item(0)?, key.get_item(1)?, key.get_item(2)?);
    if !group.is_instance_of::<PyString>() || !topic.is_instance_of::<PyString>()
        || int_of(&partition).is_none()
    {
        return Ok(false);
    }
    let value = rec.get_item(4)?;
    let entry = if value.is_none() {
        None
    } else {
        let Ok(v) = value.cast::<PySequence>() else { return Ok(false) };
        if v.len()? == 2 {
            let (offset, timestamp) = (v.get_item(0)?, v.get_item(1)?);
            if int_of(&offset).is_none() || int_of(&timestamp).is_none() {
                return Ok(false);
            }
            Some(plain_entry(py, offset, timestamp, empty)?)
        } else {
            // (with metadata or an epoch, as `records.offset_commit` makes the value)
            let Some(entry) = full_entry(py, &value)? else { return Ok(false) };
            Some(entry)
        }
    };
    put(py, offsets, &group, None, &interned_key(topic, partition, intern)?, entry)?;
    Ok(true)
}

/// The table entry `(offset, metadata, leader_epoch, commit_timestamp, expire_timestamp)` of
/// a version 1 record value `[offset, commit_timestamp, metadata(, leader_epoch(,
/// expire_timestamp))]` (`records.commit_entry`'s), hidden from the GC; None for a value of
/// another shape or types, which the caller leaves to the records' path.
pub(crate) fn full_entry<'py>(py: Python<'py>, value: &Bound<'py, PyAny>)
                   -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Ok(v) = value.cast::<PyList>() else { return Ok(None) };
    let n = v.len();
    if !(3..=5).contains(&n) {
        return Ok(None);
    }
    let (offset, ts, metadata) = (v.get_item(0)?, v.get_item(1)?, v.get_item(2)?);
    let none = || py.None().into_bound(py);
    let epoch = if n > 3 { v.get_item(3)? } else { none() };
    let expire = if n > 4 { v.get_item(4)? } else { none() };
    if int_of(&offset).is_none() || int_of(&ts).is_none()
        || !metadata.is_exact_instance_of::<PyString>()
        || !(epoch.is_none() || int_of(&epoch).is_some())
        || !(expire.is_none() || int_of(&expire).is_some())
    {
        return Ok(None);
    }
    let entry = PyTuple::new(py, [offset, metadata, epoch, ts, expire])?;
    untrack(&entry);
    Ok(Some(entry))
}

/// The table entry of a plain `[offset, commit_timestamp]` value: `(offset, "", None,
/// commit_timestamp, None)` of the value's own ints, hidden from the GC (`untrack`).
pub(crate) fn plain_entry<'py>(py: Python<'py>, offset: Bound<'py, PyAny>,
                               timestamp: Bound<'py, PyAny>, empty: &Bound<'py, PyString>)
                               -> PyResult<Bound<'py, PyTuple>> {
    let entry = PyTuple::new(py, [offset, empty.clone().into_any(), py.None().into_bound(py),
                                  timestamp, py.None().into_bound(py)])?;
    untrack(&entry);
    Ok(entry)
}

/// The table key `(topic, partition)`, the topic `interned` as the Python table interns it,
/// hidden from the GC (`untrack`).
pub(crate) fn interned_key<'py>(topic: Bound<'py, PyAny>, partition: Bound<'py, PyAny>,
                                intern: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let tp = PyTuple::new(topic.py(), [interned(topic, intern)?, partition])?;
    untrack(&tp);
    Ok(tp)
}

/// `topic` interned by `intern` (`sys.intern`, `sys_intern`), or as it is when it already is
/// (the usual call's record keys hold interned topics: `key_cache`): the check is a bit, the
/// call a Python call.
pub(crate) fn interned<'py>(topic: Bound<'py, PyAny>, intern: &Bound<'py, PyAny>)
                            -> PyResult<Bound<'py, PyAny>> {
    if is_interned(&topic) { Ok(topic) } else { intern.call1((topic,)) }
}

/// `sys.intern`, which the table's keys go through
pub(crate) fn sys_intern(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static INTERN: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    Ok(INTERN.get_or_try_init(py, || Ok::<_, PyErr>(py.import("sys")?.getattr("intern")?.unbind()))?
        .bind(py))
}

/// Whether `s` is an interned str (exactly a str: `sys.intern` refuses subclasses), which
/// `sys.intern` would give back as it is.
fn is_interned(s: &Bound<'_, PyAny>) -> bool {
    // SAFETY: an exact str begins with CPython's PyASCIIObject (every str does, whatever its
    // kind), alive as long as `s`; its state bits are what PyUnicode_CHECK_INTERNED reads.
    s.is_exact_instance_of::<PyString>()
        && unsafe { (*s.as_ptr().cast::<pyo3::ffi::PyASCIIObject>()).interned() != 0 }
}

/// An exact int (not a bool) that fits an i64.
pub(crate) fn int_of(v: &Bound<'_, PyAny>) -> Option<i64> {
    if v.is_exact_instance_of::<PyInt>() || (v.is_instance_of::<PyInt>() && !v.is_instance_of::<pyo3::types::PyBool>()) {
        v.extract().ok()
    } else {
        None
    }
}

/// Whether a value is an int, a str or None: what an entry holds, and no cycle can.
pub(crate) fn atomic(v: &Bound<'_, PyAny>) -> bool {
    v.is_none() || v.is_instance_of::<PyInt>() || v.is_instance_of::<PyString>()
}

/// The offsets of a snapshot (`OffsetTable.snapshot_state`'s `offsets` section, `[group,
/// flat, ...]` with 7 values a key in `flat`, and its `topics`) as the table's dict of
/// dicts: each key tuple made once and shared, topics interned, and what holds only ints,
/// strs and Nones hidden from the garbage collector (`untrack`), as replay leaves it.
#[pyfunction]
pub fn offsets_from_flat<'py>(py: Python<'py>, offsets: &Bound<'py, PyAny>,
                              topics: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let offsets = offsets.cast::<PyList>()?;
    let names = topics
        .cast::<PyList>()?
        .iter()
        .map(|t| Ok(PyString::intern(py, t.cast::<PyString>()?.to_str()?)))
        .collect::<PyResult<Vec<_>>>()?;
    let n = offsets.len();
    if n % 2 != 0 {
        return Err(PyValueError::new_err("the offsets section is not group, offsets pairs"));
    }
    let out = PyDict::new(py);
    let mut keys: HashMap<(usize, i64), Bound<'py, PyTuple>> = HashMap::new();
    for i in (0..n).step_by(2) {
        let group = offsets.get_item(i)?;
        let flat = offsets.get_item(i + 1)?;
        let flat = flat.cast::<PyList>()?;
        if flat.len() % 7 != 0 {
            return Err(PyValueError::new_err(format!(
                "offsets of group {} are not 7-tuples", group.repr()?)));
        }
        let inner = PyDict::new(py);
        let values: Vec<Bound<'py, PyAny>> = flat.iter().collect();
        for v in values.chunks_exact(7) {
            let t: usize = v[0].extract()?;
            let topic = names.get(t).ok_or_else(|| {
                PyValueError::new_err(format!("topic index {t} of {} topics", names.len()))
            })?;
            let p: i64 = v[1].extract()?;
            let key = match keys.get(&(t, p)) {
                Some(k) => k.clone(),
                None => {
                    let k = PyTuple::new(py, [topic.clone().into_any(), v[1].clone()])?;
                    untrack(&k);
                    keys.insert((t, p), k.clone());
                    k
                }
            };
            let fields = &v[2..7];
            let entry = PyTuple::new(py, fields)?;
            if fields.iter().all(atomic) {
                untrack(&entry);
            }
            inner.set_item(key, entry)?;
        }
        out.set_item(group, inner)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[delta, 1, 1, [group, topic, partition], value]` records, as msgpack.
    fn payload(values: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![0x90 | values.len() as u8];
        for (delta, value) in values.iter().enumerate() {
            out.extend_from_slice(&[0x95, delta as u8, 0x01, 0x01, 0x93, 0xa1, b'g', 0xa1, b't', 0x07]);
            out.extend_from_slice(value);
        }
        out
    }

    #[test]
    fn plain_commits_and_tombstones_parse() {
        let data = payload(&[b"\x92\x2a\x05", b"\xc0", b"\x95\x2b\x06\xa1m\x03\xc0"]);
        let commits = parse_payload(&data).unwrap();
        assert_eq!(commits.len(), 3);
        let v = commits[0].value.as_ref().unwrap();
        assert_eq!((commits[0].group, commits[0].topic, commits[0].partition), ("g", "t", 7));
        assert_eq!((v.offset, v.timestamp, v.metadata, v.leader_epoch), (42, 5, "", None));
        assert!(commits[1].value.is_none());
        let v = commits[2].value.as_ref().unwrap();
        assert_eq!((v.metadata, v.leader_epoch, v.expire, commits[2].delta), ("m", Some(3), None, 2));
    }

    #[test]
    fn anything_else_is_left_to_python() {
        // another record type, a value of one field, one of six, extra bytes, a cut
        for data in [
            b"\x91\x95\x00\x02\x00\x81\xa1g\xa1g\xc0".to_vec(),
            payload(&[b"\x91\x2a"]),
            payload(&[b"\x96\x01\x02\xa0\xc0\xc0\x07"]),
            [payload(&[b"\x92\x01\x02"]), vec![0xc0]].concat(),
            payload(&[b"\x92\x01\x02"])[..12].to_vec(),
        ] {
            assert!(parse_payload(&data).is_none(), "{data:?}");
        }
    }

    #[test]
    fn replayed_commits_land_in_the_table_as_python_would_put_them() {
        Python::attach(|py| {
            let offsets = PyDict::new(py);
            let data = payload(&[b"\x92\x2a\x05", b"\x92\x2b\x06"]);
            let mut cache = Cache::default();
            for c in parse_payload(&data).unwrap() {
                apply_commit(py, &offsets, &c, &mut cache).unwrap();
            }
            let shown = offsets.repr().unwrap().to_string();
            assert_eq!(shown, "{'g': {('t', 7): (43, '', None, 6, None)}}");
            let tombstone = payload(&[b"\xc0"]);
            for c in parse_payload(&tombstone).unwrap() {
                apply_commit(py, &offsets, &c, &mut Cache::default()).unwrap();
            }
            assert!(offsets.is_empty(), "the group's last key gone: the group is gone");
        });
    }
}
