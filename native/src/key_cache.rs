//! The record keys of commits, shared (`KeyCache`): the records of one `(group, topic,
//! partition)` hold one `[group, topic, partition]` list rather than a list each, its topic
//! interned as the table's key has it (so the apply need not intern it again).
//!
//! Looked up as `{group: {(topic, partition): key}}`, by the caller's own `TopicPartition`
//! (a tuple, equal to and hashed as `(topic, partition)`): no tuple is built to look a key up,
//! and the caller's object is found by identity. Built for the usual commit call, where a
//! look-up keyed by a new `(group, topic, partition)` tuple was ~900 instructions of a
//! `commit_async` call's ~9,600 (bench/RESULTS.md, twenty-first session).

use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::{PyTraverseError, PyVisit};

use crate::apply;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<KeyCache>()?;
    Ok(())
}

/// A cache of record keys holding at most `max` keys: it starts over when full (keys come and
/// go with the groups' partitions, and a cache must not grow without bound). Read and changed
/// with the GIL held only.
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct KeyCache {
    /// group -> {(topic, partition) -> [group, topic, partition]}
    groups: Py<PyDict>,
    /// keys held (every group's); an atomic only to be `Sync`: the GIL orders all access
    count: AtomicUsize,
    max: usize,
}

#[pymethods]
impl KeyCache {
    #[new]
    pub fn new(py: Python<'_>, max: usize) -> Self {
        KeyCache { groups: PyDict::new(py).unbind(), count: AtomicUsize::new(0), max }
    }

    fn __len__(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// (a group named by a str subclass may hold anything, this cache included)
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.groups)
    }
}

impl KeyCache {
    /// The record key of `tp` (a `TopicPartition`, or a `(topic, partition)` tuple: `topic`
    /// and `partition` are its items) in `group`, the cached one if there is one.
    pub(crate) fn key<'py>(&self, group: &Bound<'py, PyString>, tp: &Bound<'py, PyAny>,
                           topic: &Bound<'py, PyAny>, partition: &Bound<'py, PyAny>)
                           -> PyResult<Bound<'py, PyAny>> {
        let py = group.py();
        let groups = self.groups.bind(py);
        let held = groups.get_item(group)?;
        if let Some(keys) = &held {
            if let Some(key) = keys.cast::<PyDict>()?.get_item(tp)? {
                return Ok(key);
            }
        }
        let keys = match held {
            Some(keys) if self.count.load(Ordering::Relaxed) < self.max => {
                keys.cast_into::<PyDict>()?
            }
            _ => {
                if self.count.load(Ordering::Relaxed) >= self.max {
                    groups.clear();
                    self.count.store(0, Ordering::Relaxed);
                }
                let keys = PyDict::new(py);
                groups.set_item(group, &keys)?;
                keys
            }
        };
        let topic = apply::interned(topic.clone(), apply::sys_intern(py)?)?;
        let key = PyList::new(py, [group.as_any(), &topic, partition])?.into_any();
        keys.set_item(tp, &key)?;
        self.count.store(self.count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(key)
    }
}
