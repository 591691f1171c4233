//! The usual durable write of a batch into a log partition's active segment
//! (`append_durable`), which group-commit rounds and lone commits share: one
//! `pwritev2(RWF_DSYNC)` without the GIL into the segment's reserve, then the segment's size
//! and the log's next offset moved on. Split in two steps (`Usual::write`, `Usual::settle`) so
//! that a lone commit's follower (`follow`) can write beside its predecessor and move the
//! segment and the log on only once its predecessor has.

use pyo3::exceptions::{PyNotImplementedError, PyOSError, PyRuntimeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyModule};

use crate::hooks;
use crate::state::{LogState, SegmentState};
use crate::write_ahead::WriteAhead;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(append_durable, m)?)?;
    Ok(())
}

/// Looked up once: `offsetlog.log.segment` (whose `_write_dsync` hook tests replace) and this
/// module's own `pwrite_dsync` (what the hook holds when nobody replaced it; none without
/// `pwritev2`).
struct Refs {
    segment: Py<PyModule>,
    pwrite_dsync: Option<Py<PyAny>>,
}

static REFS: PyOnceLock<Refs> = PyOnceLock::new();

fn refs(py: Python<'_>) -> PyResult<&Refs> {
    REFS.get_or_try_init(py, || {
        let native = py.import("offsetlog.log._native")?;
        Ok(Refs {
            segment: py.import("offsetlog.log.segment")?.unbind(),
            pwrite_dsync: native.getattr("pwrite_dsync").ok().map(Bound::unbind),
        })
    })
}

/// `log.append_durable(data, next_offset)` (`PartitionLog`): `data` appended to the active
/// segment and durable on return. The usual write, into the reserved space of an active segment
/// where `RWF_DSYNC` already worked, with nothing unsynced before it, is made here: one
/// `pwritev2(RWF_DSYNC)` without the GIL (or the `segment._write_dsync` hook a test put in its
/// place, so fault injection sees this path), then the segment's size and the log's next
/// offset moved on (a short write or an error is the segment's `end_durable` to finish or
/// raise, as `SegmentFile.append_durable` has it). Anything else is
/// `PartitionLog.append_durable`'s.
#[pyfunction]
pub fn append_durable(py: Python<'_>, log: &Bound<'_, PyAny>, data: &Bound<'_, PyBytes>,
                      next_offset: i64) -> PyResult<()> {
    let Some(usual) = usual_write(py, log, data.as_bytes().len() as i64, None)? else {
        log.call_method1(intern!(py, "append_durable"), (data, next_offset))?;
        return Ok(());
    };
    let written = usual.write(py, data);
    usual.settle(py, data, written, next_offset)
}

/// The usual write's state (see `append_durable`): the log's state, its active segment (its
/// position left behind: `pwritev2` does not move it), the segment's fd, the offset to write
/// at, and the `_write_dsync` hook to call if a test replaced the native one.
pub(crate) struct Usual<'py> {
    state: Bound<'py, LogState>,
    active: Bound<'py, SegmentState>,
    fd: i32,
    pub at: i64,
    hook: Option<Bound<'py, PyAny>>,
    /// the store's write-ahead file, with the entry's partition and segment base offset
    ahead: Option<(Py<WriteAhead>, u32, i64)>,
}

impl<'py> Usual<'py> {
    /// The write itself: its bytes written, or its error (the GIL released for the system
    /// call; no borrow of either state is held meanwhile).
    pub fn write(&self, py: Python<'py>, data: &Bound<'py, PyBytes>) -> PyResult<usize> {
        self.write_then(py, data, || ()).0
    }

    /// `write`, then `then()` (a wait), in one release of the GIL where no hook is set: a
    /// follower's write and its wait for its predecessor, which would otherwise take the GIL
    /// back between them only to let it go again.
    pub fn write_then<T: Send>(&self, py: Python<'py>, data: &Bound<'py, PyBytes>,
                               then: impl FnOnce() -> T + Send) -> (PyResult<usize>, T) {
        match &self.hook {
            None => {
                let (fd, buf, at) = (self.fd, data.as_bytes(), self.at);
                let ahead = self.ahead.as_ref().map(|(w, p, b)| (w.get(), *p, *b));
                let (written, direct, after) = py.detach(|| {
                    let (written, direct) = match ahead {
                        None => (raw_write(fd, buf, at), false),
                        Some((w, partition, base)) => write_ahead(w, fd, buf, at, partition, base),
                    };
                    (written, direct, then())
                });
                if direct {
                    if let Ok(n) = &written {
                        observe_direct(py, fd, at, *n);
                    }
                }
                (written.map_err(crate::write::os_error), after)
            }
            Some(hook) => {
                let written = hook.call1((self.fd, data, self.at))
                    .and_then(|n| n.extract::<usize>());
                (written, py.detach(then))
            }
        }
    }

    /// After the write (and, for a follower, once its predecessor moved them on): the
    /// segment's size and the log's next offset moved on (a short write or an error is the
    /// segment's `end_durable` to finish or raise, as `SegmentFile.append_durable` has it).
    pub fn settle(&self, py: Python<'py>, data: &Bound<'py, PyBytes>, written: PyResult<usize>,
              next_offset: i64) -> PyResult<()> {
        if self.active.borrow().size != self.at {
            // (the segment moved under a write that held the leadership: never expected, and
            // what the file holds is then unknown)
            return Err(PyRuntimeError::new_err(format!(
                "the active segment's end moved from {} during a write", self.at)));
        }
        let len = data.as_bytes().len();
        let end_durable = intern!(py, "end_durable");
        match written {
            Ok(n) if n == len => self.active.borrow_mut().size = self.at + n as i64,
            Ok(n) => drop(self.active.call_method1(end_durable, (data, n))?),
            // (the errors `SegmentFile.append_durable` passes on; any other is raised as it is)
            Err(e) if e.is_instance_of::<PyOSError>(py)
                || e.is_instance_of::<PyNotImplementedError>(py) =>
            {
                drop(self.active.call_method1(end_durable, (data, e.into_value(py)))?)
            }
            Err(e) => return Err(e),
        }
        self.state.borrow_mut().next_offset = next_offset;
        Ok(())
    }
}

/// For the usual write of `len` bytes (see `append_durable`) at the active segment's end, or
/// at `at` (a follower's, beside its predecessor's write): its `Usual`; else None (also when a
/// test set the hook to None: no combined write at all).
pub(crate) fn usual_write<'py>(py: Python<'py>, log: &Bound<'py, PyAny>, len: i64, at: Option<i64>)
                    -> PyResult<Option<Usual<'py>>> {
    let refs = refs(py)?;
    let Some(native) = refs.pwrite_dsync.as_ref() else { return Ok(None) };
    let Ok(state) = log.cast::<LogState>() else { return Ok(None) };
    let (active, limit) = {
        let s = state.borrow();
        match &s.active {
            Some(active) if !s.dirty && len > 0 => (active.clone_ref(py), s.segment_bytes),
            _ => return Ok(None),
        }
    };
    let Ok(active) = active.into_bound(py).cast_into::<SegmentState>() else { return Ok(None) };
    let hook = match hooks::global(refs.segment.bind(py), intern!(py, "_write_dsync"))? {
        Some(f) if f.is(native.bind(py)) => None,
        Some(f) if !f.is_none() => Some(f),
        _ => return Ok(None),
    };
    let ahead = state.borrow().write_ahead.as_ref().map(|w| w.clone_ref(py));
    let (fd, at, ahead) = {
        let mut a = active.borrow_mut();
        let at = at.unwrap_or(a.size);
        let end = at + len;
        if a.dsync != Some(true) || a.failed || end > a.allocated || end > limit {
            return Ok(None); // a first try, a reserve or a roll: the Python path's
        }
        a.positioned = false;
        let partition = state.borrow().partition;
        (a.fd, at, ahead.map(|w| (w, partition, a.base_offset)))
    };
    Ok(Some(Usual { state: state.clone(), active, fd, at, hook, ahead }))
}

/// The usual write where the store has a write-ahead file: `buf` written at `at` of the
/// segment `fd` without a sync, then made durable in a round of the file (`WriteAhead::commit`;
/// a short segment write is finished here: the entry holds the whole batch). Where nothing
/// would share the round (no round writing or waiting, no other write alone in flight:
/// `WriteAhead::begin_alone`), it is the segment's own `RWF_DSYNC` write instead, which is
/// a system call fewer for a lone committer (its p50 1.13-1.16x a bare write's through the
/// file, bench/RESULTS.md, thirty-fourth session). The bytes written or the error, and
/// whether the write was the segment's own.
#[cfg(target_os = "linux")]
fn write_ahead(w: &WriteAhead, fd: i32, buf: &[u8], at: i64, partition: u32, base: i64)
               -> (std::io::Result<usize>, bool) {
    if w.begin_alone() {
        let written = raw_write(fd, buf, at);
        w.end_alone();
        return (written, true);
    }
    (write_shared(w, fd, buf, at, partition, base), false)
}

#[cfg(target_os = "linux")]
fn write_shared(w: &WriteAhead, fd: i32, buf: &[u8], at: i64, partition: u32, base: i64)
                -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &buf[done..];
        // SAFETY: `rest` is borrowed for the whole call (the contents of a `bytes` object,
        // immutable and kept alive by the caller's reference while the GIL is released); the
        // kernel only reads those `rest.len()` bytes.
        let n = unsafe {
            libc::pwrite(fd, rest.as_ptr() as *const libc::c_void, rest.len(), at + done as i64)
        };
        if n < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        done += n as usize;
    }
    if let Err(error) = w.commit(partition, base, at, buf, fd) {
        // Not durable, and the commit fails: take the batch back out of the segment (zeros
        // read as the reserve's), so that a reopen does not find a commit that was refused.
        // Best effort: where this fails too, the batch is one whose outcome was unknown.
        let zeros = vec![0u8; buf.len()];
        // SAFETY: `zeros` is ours and outlives the call; the kernel only reads its bytes.
        let _ = unsafe { libc::pwrite(fd, zeros.as_ptr() as *const libc::c_void, zeros.len(), at) };
        return Err(error);
    }
    Ok(buf.len())
}

#[cfg(not(target_os = "linux"))]
fn write_ahead(_w: &WriteAhead, _fd: i32, _buf: &[u8], _at: i64, _partition: u32, _base: i64)
               -> (std::io::Result<usize>, bool) {
    // (never called: without pwritev2 there is no usual write)
    (Err(std::io::ErrorKind::Unsupported.into()), false)
}

/// A write the segment made durable itself where the store has a write-ahead file (no
/// entry holds it), told to `segment._durable_observer` if one is set (the crash harness's
/// child logs it as synced, docs/CRASHTEST.md). An observer that raises is reported as
/// unraisable: the write is durable whatever it says.
fn observe_direct(py: Python<'_>, fd: i32, at: i64, n: usize) {
    let observed = refs(py).and_then(|refs| {
        match hooks::global(refs.segment.bind(py), intern!(py, "_durable_observer"))? {
            Some(f) if !f.is_none() => f.call1((fd, at, at + n as i64)).map(drop),
            _ => Ok(()),
        }
    });
    if let Err(e) = observed {
        e.write_unraisable(py, None);
    }
}

#[cfg(target_os = "linux")]
fn raw_write(fd: i32, buf: &[u8], at: i64) -> std::io::Result<usize> {
    crate::write::pwritev2_dsync(fd, buf, at)
}

#[cfg(not(target_os = "linux"))]
fn raw_write(_fd: i32, _buf: &[u8], _at: i64) -> std::io::Result<usize> {
    // (never called: without pwritev2 there is no pwrite_dsync, so no usual write)
    Err(std::io::ErrorKind::Unsupported.into())
}
