//! A `commit_async` call queued in one native call (`submit_async`): the lock hold that checks
//! it, joins it to the run at the tail of its partition's queue (or starts one) and decides
//! whether the async writer must be woken, as `GroupCommitter.submit_async` had it in Python.
//! The caller of `commit_async` holds the GIL for most of a stream of calls (bench/RESULTS.md),
//! so the interpreter's work here was most of what bounds that stream.
//!
//! The usual call comes from the router's native entry (`route`), with its standalone check;
//! a run's fields, size, time and future are its native base (`state::RunState`), which the
//! leader frames and completes in Python; the partition's flags and counters, and the group
//! committer's, are native state too (`state`).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyModule};

use crate::lone::Check;
use crate::state::{PartitionState, RunState, WriterState};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(submit_async, m)?)?;
    Ok(())
}

/// `commit_queue.AsyncRun`, looked up once
static ASYNC_RUN: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// What the call does once the lock is released.
enum After {
    Nothing,
    /// step aside (the writer thread, back from its write, is waiting for the GIL)
    Yield,
    /// wake the async writer for this partition
    Wake,
}

/// Queue one `commit_async` call for `writer` (the store's `GroupCommitter`) in `part`: its
/// offsets' `fields` (`records.offset_commit_fields`), their encoded size bound `nbytes`,
/// stamped `timestamp`, after `precheck()` (its fencing check, or None) under the partition
/// lock; `callback(callback_arg, error)` is queued with the run. Returns the future that
/// resolves once they are durable.
///
/// The call joins the run at the tail of the queue (`AsyncRun`: one batch, one future) unless
/// something else was queued behind it, a leader has taken it (`open_run` cleared), or it
/// would pass `writer.max_bytes`; otherwise it starts a new run. With no leader and the async
/// writer not scheduled, it schedules and wakes it; with one busy, every `yield_at`-th call
/// to the partition steps aside (`time.sleep(0)`: a caller committing in a loop would hold
/// the GIL for the whole switch interval while the writer waits for it).
#[pyfunction]
#[allow(clippy::too_many_arguments)] // OffsetStore.commit_async's call, as it has it
pub fn submit_async<'py>(py: Python<'py>, writer: &Bound<'py, PyAny>,
                         part: &Bound<'py, PartitionState>, fields: &Bound<'py, PyAny>,
                         nbytes: i64, timestamp: i64, precheck: &Bound<'py, PyAny>,
                         callback: &Bound<'py, PyAny>, callback_arg: &Bound<'py, PyAny>,
                         yield_at: i64) -> PyResult<Bound<'py, PyAny>> {
    let fields = fields.try_iter()?.collect::<PyResult<Vec<_>>>()?;
    let future = submit(py, writer, part, &fields, nbytes, timestamp, Check::of(precheck),
                        callback, callback_arg, yield_at, false)?;
    future.ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("submit gave up"))
}

/// `submit_async`, with its check; `give_up`: a store found closing or failed is not
/// checked (`check_usable` raises) but left to the caller: None, and nothing done.
#[allow(clippy::too_many_arguments)]
pub(crate) fn submit<'py>(py: Python<'py>, writer: &Bound<'py, PyAny>,
                          part: &Bound<'py, PartitionState>, fields: &[Bound<'py, PyAny>],
                          nbytes: i64, timestamp: i64, precheck: Check<'_, 'py>,
                          callback: &Bound<'py, PyAny>, callback_arg: &Bound<'py, PyAny>,
                          yield_at: i64, give_up: bool) -> PyResult<Option<Bound<'py, PyAny>>> {
    let async_run = ASYNC_RUN.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("offsetlog.store.commit_queue")?.getattr("AsyncRun")?.unbind())
    })?;
    let lock = part.borrow().lock.clone_ref(py);
    let writer = writer.cast::<WriterState>()?; // (before the lock: an error must not hold it)
    lock.get().lock(py)?;
    let queued = queue(py, writer, part, fields, nbytes, timestamp, &precheck, callback,
                       callback_arg, yield_at, async_run.bind(py), give_up);
    lock.get().unlock()?;
    let Some((future, after)) = queued? else { return Ok(None) };
    match after {
        After::Nothing => {}
        After::Yield => {
            py.import("time")?.getattr(intern!(py, "sleep"))?.call1((0,))?;
        }
        After::Wake => {
            writer.call_method1(intern!(py, "_wake_async"), (part,))?;
        }
    }
    Ok(Some(future))
}

/// `submit_async`'s lock hold: the run's future and what to do after it (None: `give_up`,
/// and the store closing or failed).
#[allow(clippy::too_many_arguments)]
fn queue<'py>(py: Python<'py>, writer: &Bound<'py, WriterState>,
              part: &Bound<'py, PartitionState>, fields: &[Bound<'py, PyAny>], nbytes: i64,
              timestamp: i64, precheck: &Check<'_, 'py>, callback: &Bound<'py, PyAny>,
              callback_arg: &Bound<'py, PyAny>, yield_at: i64, async_run: &Bound<'py, PyAny>,
              give_up: bool) -> PyResult<Option<(Bound<'py, PyAny>, After)>> {
    let (usable, max_bytes) = {
        let w = writer.borrow();
        (w.usable(py), w.max_bytes)
    };
    if !usable {
        if give_up {
            return Ok(None);
        }
        writer.call_method0(intern!(py, "check_usable"))?;
    }
    precheck.run(py)?;
    let (q, open) = {
        let p = part.borrow();
        (p.queue.clone_ref(py).into_bound(py), p.open_run.clone_ref(py).into_bound(py))
    };
    let open = open.cast_into::<RunState>().ok();
    let joins = match &open {
        Some(open) => q.is_truthy()? && q.get_item(-1)?.is(open)
            && open.borrow().nbytes + nbytes <= max_bytes,
        None => false,
    };
    let run = match open {
        Some(open) if joins => open,
        _ => {
            let run = async_run.call0()?.cast_into::<RunState>()?;
            part.borrow_mut().open_run = run.clone().into_any().unbind();
            q.call_method1(intern!(py, "append"), (&run,))?;
            run
        }
    };
    let future = {
        let mut r = run.borrow_mut();
        // the run's fields are extended here, not in a method: a call less per commit_async
        let list = r.fields.bind(py).cast::<PyList>()?.clone();
        for field in fields {
            list.append(field)?;
        }
        r.nbytes += nbytes;
        r.timestamp = timestamp; // the batch carries its last call's time
        r.future.clone_ref(py).into_bound(py)
    };
    if !callback.is_none() {
        run.call_method1(intern!(py, "add_callback"), (callback, callback_arg))?;
    }
    let mut p = part.borrow_mut();
    p.async_calls += 1;
    let after = if p.leader_active || p.async_scheduled {
        if p.async_calls % yield_at != 0 { After::Nothing } else { After::Yield }
    } else {
        p.async_scheduled = true;
        After::Wake
    };
    Ok(Some((future, after)))
}
