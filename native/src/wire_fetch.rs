//! The wire's plain OffsetFetch, answered in the native request loop (`wire_conn`, on
//! plaintext connections without an authorizer): each group's committed offsets read from
//! its partition's table under the partition lock, as `OffsetStore.fetch` reads them, and
//! encoded by the schema-generated codec (`wire_codec`), with no Python call.
//!
//! Plain means: no `require_stable`, no KIP-848 member named (v9+), and every group one the
//! store has routed lately (`route_wire::cached_route`: its name was checked then) on an open
//! store. Anything else returns None before reading anything, and the Python handler
//! (`offsetlog.server.offset_fetch`), the one that knows every rule, answers it.
//! What is answered here is what that handler answers for the same request, byte for byte
//! (tests/server/test_native_plain_fetch.py holds them to it).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::route::RouterState;
use crate::route_wire;
use crate::state::{PartitionState, TableState};
use crate::wire_codec::{self, Fetched, OffsetFetch};

/// One topic of a group's answer: its name and partitions, in the answer's order
type AnsweredTopic = (String, Vec<Fetched>);

/// The answer's bytes to a plain OffsetFetch (see the module), or None for any other.
pub(crate) fn plain_fetch(py: Python<'_>, router: &Bound<'_, RouterState>, f: &OffsetFetch)
                          -> PyResult<Option<Vec<u8>>> {
    if f.require_stable {
        return Ok(None); // (pending transactional offsets: the Python handler's)
    }
    let mut routed = Vec::with_capacity(f.groups.len());
    for (group, member, epoch, _) in &f.groups {
        // (v9+: a member named has its epoch checked, `consumer_groups.offset_check`)
        if f.version >= 9 && (member.as_deref().is_some_and(|m| !m.is_empty()) || *epoch >= 0) {
            return Ok(None);
        }
        let name = PyString::new(py, group);
        let Some(route) = route_wire::cached_route(router, &name)? else { return Ok(None) };
        routed.push((name, route));
    }
    let mut groups = Vec::with_capacity(f.groups.len());
    for ((group, _, _, topics), (name, route)) in f.groups.iter().zip(&routed) {
        let part = route.get().part.bind(py);
        let answered = match topics {
            Some(topics) => asked(py, part, name, topics)?,
            None => every(py, part, name)?,
        };
        groups.push((group.clone(), answered, 0));
    }
    wire_codec::encode_offset_fetch_response(f.correlation_id, f.version, &groups)
        .map(Some)
        .map_err(PyValueError::new_err)
}

/// Each topic of the request answered as it was asked, in its order (a topic named twice:
/// twice; one named with no partition: with none), each partition with its committed
/// offset or none (-1), as Kafka answers.
fn asked(py: Python<'_>, part: &Bound<'_, PartitionState>, group: &Bound<'_, PyString>,
         topics: &[(String, Vec<i32>)]) -> PyResult<Vec<AnsweredTopic>> {
    locked(py, part, |offsets| {
        let entries = group_entries(offsets, group)?;
        topics.iter().map(|(name, parts)| {
            let topic = PyString::new(py, name);
            let answered = parts.iter().map(|&partition| {
                let entry = match &entries {
                    Some(entries) => entries.get_item((&topic, partition))?,
                    None => None,
                };
                match entry {
                    Some(entry) => committed(partition, &entry),
                    None => Ok((partition, -1, -1, Some(String::new()), 0)),
                }
            }).collect::<PyResult<Vec<Fetched>>>()?;
            Ok((name.clone(), answered))
        }).collect()
    })
}

/// Every partition the group has an offset for, by topic and partition.
fn every(py: Python<'_>, part: &Bound<'_, PartitionState>, group: &Bound<'_, PyString>)
         -> PyResult<Vec<AnsweredTopic>> {
    let mut all: Vec<(String, Fetched)> = Vec::new();
    locked(py, part, |offsets| {
        if let Some(entries) = group_entries(offsets, group)? {
            all.reserve(entries.len());
            for (key, entry) in entries.iter() {
                let (topic, partition): (String, i32) = key.extract()?;
                all.push((topic, committed(partition, &entry)?));
            }
        }
        Ok(())
    })?;
    // (Python's order of the table's (topic, partition) keys: UTF-8's byte order is the
    // code points' order)
    all.sort_unstable_by(|a, b| (&a.0, a.1.0).cmp(&(&b.0, b.1.0)));
    let mut out: Vec<AnsweredTopic> = Vec::new();
    for (topic, fetched) in all {
        match out.last_mut() {
            Some((name, parts)) if *name == topic => parts.push(fetched),
            _ => out.push((topic, vec![fetched])),
        }
    }
    Ok(out)
}

/// `read(table.offsets)` under the partition's lock, as `OffsetStore.fetch` reads it: the
/// table as of its last applied commit (a commit still being written is not in it).
fn locked<T>(py: Python<'_>, part: &Bound<'_, PartitionState>,
             read: impl FnOnce(&Bound<'_, PyDict>) -> PyResult<T>) -> PyResult<T> {
    let lock = part.borrow().lock.clone_ref(py);
    lock.get().lock(py)?;
    let result = (|| {
        let table = part.borrow().table.clone_ref(py).into_bound(py);
        let offsets = table.cast::<TableState>()?.borrow().offsets.clone_ref(py).into_bound(py);
        read(&offsets)
    })();
    lock.get().unlock()?;
    result
}

/// The group's `{(topic, partition) -> entry}`, or None when it has no offsets
fn group_entries<'py>(offsets: &Bound<'py, PyDict>, group: &Bound<'py, PyString>)
                      -> PyResult<Option<Bound<'py, PyDict>>> {
    Ok(match offsets.get_item(group)? {
        Some(entries) => Some(entries.cast_into::<PyDict>()?),
        None => None,
    })
}

/// A partition's answer from its table entry `(offset, metadata, leader_epoch, ...)`
fn committed(partition: i32, entry: &Bound<'_, PyAny>) -> PyResult<Fetched> {
    let entry = entry.cast::<PyTuple>()?;
    let offset: i64 = entry.get_item(0)?.extract()?;
    let metadata: String = entry.get_item(1)?.extract()?;
    let epoch: Option<i32> = entry.get_item(2)?.extract()?;
    Ok((partition, offset, epoch.unwrap_or(-1), Some(metadata), 0))
}
