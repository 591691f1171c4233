//! The lone commit (`offsetlog/store/lone_commit.py` has its guarantees): a `commit_sync`
//! alone in its log partition decided, written and applied in one native call, with the GIL
//! released only for its `pwritev2(RWF_DSYNC)`. And `append_durable`, the durable write of a
//! group-commit round, which rounds and lone commits share.
//!
//! The state stays where the Python protocol keeps it (the `PartitionWriter`'s lock and flags,
//! the `PartitionLog`'s active `SegmentFile`, the `OffsetTable`): this module reads and sets
//! it as `lone_commit.py` did, so rounds, the async writer and the tests see one protocol. What
//! it saves is the interpreter's work between the steps (about half of a commit's Python,
//! bench/RESULTS.md). Every case off the usual path is left to the Python that handles it:
//! a partition that is not idle (`queue`), a write that needs a new segment, a reserve, a
//! first `RWF_DSYNC` try or a fault-injection hook (`PartitionLog.append_durable`), and any
//! failure (`lone_commit.failed`).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyModule, PyTuple};

use crate::commits;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(commit_lone, m)?)?;
    m.add_function(wrap_pyfunction!(append_durable, m)?)?;
    Ok(())
}

/// Modules and functions looked up once: `offsetlog.log.segment` (whose `_write_dsync` hook
/// tests replace), `offsetlog.store.lone_commit` (the failure path, and the `frame_fields`
/// hook tests replace), and this module's own
/// `pwrite_dsync` and `frame_fields` objects (what the hooks hold when nobody replaced them).
struct Refs {
    segment: Py<PyModule>,
    lone: Py<PyModule>,
    failed: Py<PyAny>,
    pwrite_dsync: Option<Py<PyAny>>,
    frame_fields: Py<PyAny>,
}

static REFS: PyOnceLock<Refs> = PyOnceLock::new();

fn refs(py: Python<'_>) -> PyResult<&Refs> {
    REFS.get_or_try_init(py, || {
        let native = py.import("offsetlog.log._native")?;
        let lone = py.import("offsetlog.store.lone_commit")?;
        Ok(Refs {
            segment: py.import("offsetlog.log.segment")?.unbind(),
            failed: lone.getattr("failed")?.unbind(),
            lone: lone.unbind(),
            pwrite_dsync: native.getattr("pwrite_dsync").ok().map(Bound::unbind),
            frame_fields: native.getattr("frame_fields")?.unbind(),
        })
    })
}

/// A `commit_sync` call's checked `fields` (`CommitRouter.check`'s, of encoded size at most
/// `nbytes`), stamped `timestamp`, for `writer` (the store's `GroupCommitter`) in `part` (its
/// `PartitionWriter`); returns once they are applied (durable under `fsync="always"`).
///
/// Under `part.lock`: the store's usability, `precheck()` (the call's fencing check), and
/// whether the partition is idle (nothing queued, no leader, no one waiting for exclusive
/// use, the async writer not scheduled). Not idle: the call is queued in that same lock hold
/// (`writer._queue_sync`) and awaited (`writer._await`), as the group-commit protocol has it.
/// Idle: the call takes the leadership in that hold, frames its batch (with
/// `lone_commit.frame_fields`), writes it (durably under `fsync="always"`:
/// `append_durable`), applies it under the lock (`OffsetTable.apply_commit_calls`), gives the
/// leadership up and hands on what queued meanwhile. A failed frame, write or apply goes to
/// `lone_commit.failed`, which poisons the store, gives up the leadership and raises.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // OffsetStore.commit_sync's call, as it has it
pub fn commit_lone<'py>(py: Python<'py>, writer: &Bound<'py, PyAny>, part: &Bound<'py, PyAny>,
                        fields: &Bound<'py, PyAny>, nbytes: &Bound<'py, PyAny>, timestamp: i64,
                        timeout: &Bound<'py, PyAny>, precheck: &Bound<'py, PyAny>)
                        -> PyResult<()> {
    let refs = refs(py)?;
    let lock = part.getattr(intern!(py, "lock"))?;
    lock.call_method0(intern!(py, "acquire"))?;
    let decided = decide(py, writer, part, precheck).and_then(|lone| {
        if lone {
            Ok(None)
        } else {
            let args = (part, fields, nbytes, timestamp, timeout);
            writer.call_method1(intern!(py, "_queue_sync"), args).map(Some)
        }
    });
    lock.call_method0(intern!(py, "release"))?;
    if let Some(queued) = decided? {
        let mut args = vec![part.clone()];
        args.extend(queued.try_iter()?.collect::<PyResult<Vec<_>>>()?);
        writer.call_method1(intern!(py, "_await"), PyTuple::new(py, args)?)?;
        return Ok(());
    }

    // The leadership is ours: nothing else writes or applies in this partition until we
    // give it up.
    // (from here on every error goes to the failure path, which gives the leadership up)
    let written = (|| -> PyResult<i64> {
        let log = part.getattr(intern!(py, "log"))?;
        let base: i64 = log.getattr(intern!(py, "next_offset"))?.extract()?;
        let (seq, n) = commits::triples(fields)?;
        let after = base + n as i64;
        let frame = refs.lone.bind(py).getattr(intern!(py, "frame_fields"))?;
        let data = if frame.is(refs.frame_fields.bind(py)) {
            commits::frame_calls(py, base, timestamp, std::slice::from_ref(&seq), n)?
        } else {
            frame.call1((base, timestamp, (fields,)))?.cast_into::<PyBytes>()?
        };
        if writer.getattr(intern!(py, "fsync_always"))?.is_truthy()? {
            append_durable(py, &log, &data, after)?;
        } else {
            log.call_method1(intern!(py, "append"), (data, after))?;
        }
        Ok(base)
    })();
    let base = written.map_err(|e| failed(py, refs, writer, part, e, "write to"))?;
    lock.call_method0(intern!(py, "acquire"))?;
    let ended = part
        .getattr(intern!(py, "table"))
        .and_then(|table| table.call_method1(intern!(py, "apply_commit_calls"),
                                            (base, (fields,))))
        .and_then(|_| end_leadership(py, writer, part));
    lock.call_method0(intern!(py, "release"))?;
    // (durable, but the table no longer follows the log: the failure path poisons the store,
    // and ends the leadership if that is what failed)
    ended.map_err(|e| failed(py, refs, writer, part, e, "applying a round of"))
}

/// Under `part.lock`: the store usable, the fencing check passed, and whether the partition is
/// idle; if it is, its leadership is taken.
fn decide(py: Python<'_>, writer: &Bound<'_, PyAny>, part: &Bound<'_, PyAny>,
          precheck: &Bound<'_, PyAny>) -> PyResult<bool> {
    if writer.getattr(intern!(py, "closing"))?.is_truthy()?
        || !writer.getattr(intern!(py, "failure"))?.is_none()
    {
        writer.call_method0(intern!(py, "check_usable"))?;
    }
    precheck.call0()?;
    for busy in [intern!(py, "queue"), intern!(py, "leader_active"),
                 intern!(py, "exclusive_waiting"), intern!(py, "async_scheduled")] {
        if part.getattr(busy)?.is_truthy()? {
            return Ok(false);
        }
    }
    part.setattr(intern!(py, "leader_active"), true)?;
    Ok(true)
}

/// Give the leadership up (`part.lock` held) and hand on what queued meanwhile.
fn end_leadership(py: Python<'_>, writer: &Bound<'_, PyAny>, part: &Bound<'_, PyAny>)
                  -> PyResult<()> {
    part.setattr(intern!(py, "leader_active"), false)?;
    if part.getattr(intern!(py, "queue"))?.is_truthy()?
        || part.getattr(intern!(py, "idle_waiters"))?.is_truthy()?
    {
        writer.call_method1(intern!(py, "hand_on"), (part,))?;
    }
    Ok(())
}

/// `lone_commit.failed(writer, part, error, what)`: poisons the store, gives the leadership
/// up and returns the error to raise.
fn failed(py: Python<'_>, refs: &Refs, writer: &Bound<'_, PyAny>, part: &Bound<'_, PyAny>,
          error: PyErr, what: &str) -> PyErr {
    match refs.failed.bind(py).call1((writer, part, error.into_value(py), what)) {
        Ok(_) => pyo3::exceptions::PyRuntimeError::new_err("lone_commit.failed returned"),
        Err(e) => e,
    }
}

/// `log.append_durable(data, next_offset)` (`PartitionLog`): `data` appended to the active
/// segment and durable on return. The usual write, into the reserved space of an active segment
/// where `RWF_DSYNC` already worked, with nothing unsynced before it and the hook not
/// replaced, is made here: one `pwritev2(RWF_DSYNC)` without the GIL, then the segment's size
/// and the log's next offset moved on (a short write or an error is the segment's
/// `end_durable` to finish or raise). Anything else is `PartitionLog.append_durable`'s.
#[pyfunction]
pub fn append_durable(py: Python<'_>, log: &Bound<'_, PyAny>, data: &Bound<'_, PyBytes>,
                      next_offset: i64) -> PyResult<()> {
    if let Some((active, fd, at)) = usual_write(py, log, data.as_bytes().len())? {
        active.setattr(intern!(py, "positioned"), false)?; // pwritev2 leaves the position
        let result = write(py, fd, data.as_bytes(), at);
        match result {
            Ok(n) if n == data.as_bytes().len() => {
                active.setattr(intern!(py, "size"), at + n as i64)?;
            }
            Ok(n) => {
                active.call_method1(intern!(py, "end_durable"), (data, n))?;
            }
            Err(e) => {
                let e = crate::write::os_error(e).into_value(py);
                active.call_method1(intern!(py, "end_durable"), (data, e))?;
            }
        }
        log.setattr(intern!(py, "next_offset"), next_offset)?;
        return Ok(());
    }
    log.call_method1(intern!(py, "append_durable"), (data, next_offset))?;
    Ok(())
}

/// `(active segment, its fd, the offset to write at)` when the write of `len` bytes is the
/// usual one (see `append_durable`), else None.
fn usual_write<'py>(py: Python<'py>, log: &Bound<'py, PyAny>, len: usize)
                    -> PyResult<Option<(Bound<'py, PyAny>, i32, i64)>> {
    let refs = refs(py)?;
    let Some(native) = refs.pwrite_dsync.as_ref() else { return Ok(None) };
    if len == 0 || log.getattr(intern!(py, "dirty"))?.is_truthy()?
        || !refs.segment.bind(py).getattr(intern!(py, "_write_dsync"))?.is(native.bind(py))
    {
        return Ok(None);
    }
    let active = log.getattr(intern!(py, "_active"))?;
    if active.is_none() || !active.getattr(intern!(py, "dsync"))?.is_truthy()? {
        return Ok(None);
    }
    let size: i64 = active.getattr(intern!(py, "size"))?.extract()?;
    let end = size + len as i64;
    let allocated: i64 = active.getattr(intern!(py, "allocated"))?.extract()?;
    let limit: i64 = log.getattr(intern!(py, "segment_bytes"))?.extract()?;
    if end > allocated || end > limit {
        return Ok(None); // a reserve or a roll: the Python path's
    }
    let fd: i32 = active.getattr(intern!(py, "fd"))?.extract()?;
    Ok(Some((active, fd, size)))
}

#[cfg(target_os = "linux")]
fn write(py: Python<'_>, fd: i32, buf: &[u8], at: i64) -> std::io::Result<usize> {
    crate::write::write_dsync(py, fd, buf, at)
}

#[cfg(not(target_os = "linux"))]
fn write(_py: Python<'_>, _fd: i32, _buf: &[u8], _at: i64) -> std::io::Result<usize> {
    // (never called: without pwritev2 there is no pwrite_dsync, so no usual write)
    Err(std::io::ErrorKind::Unsupported.into())
}
