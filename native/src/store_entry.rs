//! `OffsetStore.commit_sync` and `commit_async` as the store's own attributes (`CommitEntries`):
//! a simple consumer's call (the usual call, `route`) and a group member's (`route::usual_sync`,
//! `usual_async` with its `Member`: checked as the wire's member commits are) go from the caller's line into
//! native code with no Python frame between, and any other call is handed, arguments
//! unchanged, to the store's Python method, which is the documented one and decides
//! everything else.
//!
//! Why: a stream of `commit_async` calls spent a fifth of each call in the public method's
//! own frame (bench/RESULTS.md, twenty-first session); the method had nothing left to do but
//! pass its arguments on.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::{PyTraverseError, PyVisit};

use crate::route::{self, RouterState};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CommitEntries>()?;
    Ok(())
}

/// The store's two commit calls for `OffsetStore.__init__` to bind as its attributes:
/// `router` (the store's `CommitRouter`) takes the usual call; `sync_method` and
/// `async_method` (`OffsetStore.commit_sync` and `commit_async`, bound to the store) take
/// every other.
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct CommitEntries {
    router: Py<RouterState>,
    sync_method: Py<PyAny>,
    async_method: Py<PyAny>,
}

#[pymethods]
impl CommitEntries {
    #[new]
    fn new(router: Py<RouterState>, sync_method: Py<PyAny>, async_method: Py<PyAny>) -> Self {
        CommitEntries { router, sync_method, async_method }
    }

    /// Commit `offsets` for `group_id` and return once durable: `OffsetStore.commit_sync`,
    /// which documents it. A simple consumer's call or a member's (`member_of`), with a
    /// timeout the usual call takes (`route::checked_timeout`) and no `retention_time_ms`,
    /// is tried here; any other goes to that method.
    #[pyo3(signature = (group_id, offsets, *, generation_id = Given::Absent,
                        member_id = Given::Absent, group_instance_id = Given::Absent,
                        timeout = Given::Absent, retention_time_ms = Given::Absent),
           text_signature = "(group_id, offsets, *, generation_id=-1, member_id='', \
                             group_instance_id=None, timeout=None, retention_time_ms=None)")]
    #[allow(clippy::too_many_arguments)] // OffsetStore.commit_sync's, as it has them
    fn commit_sync<'py>(&self, py: Python<'py>, group_id: &Bound<'py, PyAny>,
                        offsets: &Bound<'py, PyAny>, generation_id: Given<'py>,
                        member_id: Given<'py>, group_instance_id: Given<'py>,
                        timeout: Given<'py>, retention_time_ms: Given<'py>)
                        -> PyResult<Bound<'py, PyAny>> {
        let member = [("generation_id", generation_id), ("member_id", member_id),
                      ("group_instance_id", group_instance_id)];
        let checked = match (&timeout, &retention_time_ms) {
            (_, Given::Value(_)) => None,
            (Given::Absent, Given::Absent) => Some(py.None().into_bound(py)),
            (Given::Value(timeout), Given::Absent) => route::checked_timeout(timeout)?,
        };
        if let Some(timeout) = checked {
            let router = self.router.bind(py);
            let done = if Given::all_absent(&member) {
                route::usual_sync(router, group_id, offsets, None, &timeout)?
            } else {
                match member_of(&member)? {
                    Some(m) => route::usual_sync(router, group_id, offsets, Some(&m), &timeout)?,
                    None => false,
                }
            };
            if done {
                return Ok(py.None().into_bound(py));
            }
        }
        let [generation_id, member_id, group_instance_id] = member;
        pass_on(py, &self.sync_method, group_id, offsets,
                [generation_id, member_id, group_instance_id, ("timeout", timeout),
                 ("retention_time_ms", retention_time_ms)])
    }

    /// Queue a commit and return a `Future` that resolves once it is durable:
    /// `OffsetStore.commit_async`, which documents it. A simple consumer's call or a
    /// member's (`member_of`), with no `retention_time_ms`, is tried here; any other goes to
    /// that method.
    #[pyo3(signature = (group_id, offsets, *, callback = Given::Absent,
                        generation_id = Given::Absent, member_id = Given::Absent,
                        group_instance_id = Given::Absent, retention_time_ms = Given::Absent),
           text_signature = "(group_id, offsets, *, callback=None, generation_id=-1, \
                             member_id='', group_instance_id=None, retention_time_ms=None)")]
    #[allow(clippy::too_many_arguments)] // OffsetStore.commit_async's, as it has them
    fn commit_async<'py>(&self, py: Python<'py>, group_id: &Bound<'py, PyAny>,
                         offsets: &Bound<'py, PyAny>, callback: Given<'py>,
                         generation_id: Given<'py>, member_id: Given<'py>,
                         group_instance_id: Given<'py>, retention_time_ms: Given<'py>)
                         -> PyResult<Bound<'py, PyAny>> {
        let member = [("generation_id", generation_id), ("member_id", member_id),
                      ("group_instance_id", group_instance_id)];
        let none = py.None().into_bound(py);
        let callback_or_none = match &callback {
            Given::Value(callback) => callback,
            Given::Absent => &none,
        };
        let router = self.router.bind(py);
        let future = if matches!(retention_time_ms, Given::Value(_)) {
            None
        } else if Given::all_absent(&member) {
            route::usual_async(router, group_id, offsets, None, callback_or_none)?
        } else {
            match member_of(&member)? {
                Some(m) => route::usual_async(router, group_id, offsets, Some(&m),
                                              callback_or_none)?,
                None => None,
            }
        };
        if let Some(future) = future {
            return Ok(future);
        }
        let [generation_id, member_id, group_instance_id] = member;
        pass_on(py, &self.async_method, group_id, offsets,
                [("callback", callback), generation_id, member_id, group_instance_id,
                 ("retention_time_ms", retention_time_ms)])
    }

    /// (the store holds this object and this object the store's methods: a cycle, which the
    /// collector breaks by clearing the store's attributes)
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.router)?;
        visit.call(&self.sync_method)?;
        visit.call(&self.async_method)
    }
}

/// A commit's member arguments (`generation_id`, `member_id`, `group_instance_id`, each
/// absent for its default) as a `route::Member`, when each is of the exact type the Python
/// path takes as it is (an int within an int32, a str, None or a str); else None, and the
/// Python path judges them.
fn member_of<'a>(named: &'a [(&str, Given<'_>); 3]) -> PyResult<Option<route::Member<'a>>> {
    let [(_, generation), (_, member_id), (_, instance)] = named;
    let generation = match generation {
        Given::Absent => -1,
        Given::Value(g) if g.is_exact_instance_of::<pyo3::types::PyInt>() => {
            match g.extract::<i32>() {
                Ok(g) => g,
                Err(_) => return Ok(None),
            }
        }
        Given::Value(_) => return Ok(None),
    };
    let member_id = match member_id {
        Given::Absent => "",
        Given::Value(m) => match m.cast_exact::<pyo3::types::PyString>() {
            Ok(m) => match m.to_str() {
                Ok(m) => m,
                Err(_) => return Ok(None),
            },
            Err(_) => return Ok(None),
        },
    };
    let instance = match instance {
        Given::Absent => None,
        Given::Value(i) if i.is_none() => None,
        Given::Value(i) => match i.cast_exact::<pyo3::types::PyString>() {
            Ok(i) => match i.to_str() {
                Ok(i) => Some(i),
                Err(_) => return Ok(None),
            },
            Err(_) => return Ok(None),
        },
    };
    Ok(Some(route::Member { generation, member_id, instance }))
}

/// The call as it came, to the store's Python method: `named`, its keyword arguments (those
/// given).
fn pass_on<'py, const N: usize>(py: Python<'py>, method: &Py<PyAny>,
                                group_id: &Bound<'py, PyAny>, offsets: &Bound<'py, PyAny>,
                                named: [(&str, Given<'py>); N]) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    for (name, given) in named {
        if let Given::Value(value) = given {
            kwargs.set_item(name, value)?;
        }
    }
    method.bind(py).call((group_id, offsets), Some(&kwargs))
}

/// An argument as the call has it: absent, or given (None included). Here only an absent one
/// leaves the call usual: a given one, even the default's value, is the Python method's to
/// judge, as before (`part_lock` reads `acquire`'s `blocking` through it too).
pub enum Given<'py> {
    Absent,
    Value(Bound<'py, PyAny>),
}

impl Given<'_> {
    /// Whether none of a call's `named` arguments was given
    fn all_absent(named: &[(&str, Given<'_>)]) -> bool {
        named.iter().all(|(_, given)| matches!(given, Given::Absent))
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Given<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Given::Value(obj.to_owned()))
    }
}
