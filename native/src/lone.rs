//! The lone commit (`offsetlog/store/lone_commit.py` has its guarantees): a `commit_sync`
//! alone in its log partition decided, written and applied in one native call, with the GIL
//! released only for its `pwritev2(RWF_DSYNC)`. And `append_durable`, the durable write of a
//! group-commit round, which rounds and lone commits share.
//!
//! The state is the one the Python protocol uses, held natively (`state`: the partition's
//! lock, queue and flags, the log's next offset, the active segment's position and reserve,
//! the table's offsets): this module reads and sets it in the same lock holds and order as the
//! protocol's Python does, so rounds, the async writer and the tests see one protocol. What it
//! saves is the interpreter's work between the steps (31,400 -> 21,600 instructions per
//! `commit_sync`, docs/DESIGN.md). Every case off the usual path is left to the Python that
//! handles it: a partition that is not idle (`GroupCommitter._queue_sync`), a write that
//! needs a new segment, a reserve or a first `RWF_DSYNC` try (`PartitionLog.append_durable`),
//! and any failure (`lone_commit.failed`). A test's `segment._write_dsync` hook is called in
//! place of the system call, so fault injection reaches the native write's outcomes too.

use pyo3::exceptions::{PyNotImplementedError, PyOSError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyModule, PyString, PyTuple};

use crate::commits;
use crate::hooks;
use crate::route::{self, Member, Route};
use crate::txn_board;
use crate::wire_conn::Entry as WireEntry;
use crate::state::{LogState, PartitionState, SegmentState, TableState, WriterState};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(commit_lone, m)?)?;
    m.add_function(wrap_pyfunction!(append_durable, m)?)?;
    Ok(())
}

/// Modules and functions looked up once: `offsetlog.log.segment` (whose `_write_dsync` hook
/// tests replace), `offsetlog.store.lone_commit` (the failure path, and the `frame_fields`
/// hook tests replace), and this module's own `pwrite_dsync`, `frame_fields` and
/// `TableState.apply_commit_calls` objects (what the hooks hold when nobody replaced them).
struct Refs {
    segment: Py<PyModule>,
    lone: Py<PyModule>,
    failed: Py<PyAny>,
    pwrite_dsync: Option<Py<PyAny>>,
    frame_fields: Py<PyAny>,
    apply_commit_calls: Py<PyAny>,
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
            apply_commit_calls: native.getattr("TableState")?.getattr("apply_commit_calls")?
                .unbind(),
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
pub fn commit_lone<'py>(py: Python<'py>, writer: &Bound<'py, PyAny>,
                        part: &Bound<'py, PartitionState>,
                        fields: &Bound<'py, PyAny>, nbytes: &Bound<'py, PyAny>, timestamp: i64,
                        timeout: &Bound<'py, PyAny>, precheck: &Bound<'py, PyAny>)
                        -> PyResult<()> {
    lone(py, writer, part, fields, nbytes, timestamp, timeout, Check::of(precheck)).map(drop)
}

/// A commit's fencing check, run in the lock hold that queues or takes it.
pub(crate) enum Check<'a, 'py> {
    /// a callable (`routing.fencing`'s), or None for none
    Callable(&'a Bound<'py, PyAny>),
    /// a standalone group's (`route::Route`), run without a Python call
    Standalone(&'a Route),
    /// a group member's commit, passed by the partition's steady board (`steady`, which
    /// counts a classic member's commit as its heartbeat) or else checked by the classic or
    /// the KIP-848 coordinator (`route::fencing`, with the partitions it commits)
    Member {
        part: &'a Bound<'py, PartitionState>,
        group: &'a Bound<'py, PyString>,
        member: &'a Member<'a>,
        now: i64,
        partitions: Partitions<'a, 'py>,
    },
    /// a transaction's offsets (`route_wire::commit_txn`): declined unless the store's board of
    /// open transactions holds the producer with the group's log partition in its
    /// transaction (`txn_board`), then the group's check for a transactional commit
    Txn(&'a Txn<'a, 'py>),
}

/// The partitions a member's commit names, handed to the coordinator's check only when it
/// is called (a KIP-848 member's commit at an older epoch than its own is judged by them):
/// the embedded call's offsets (a mapping keyed by `(topic, partition)`), or the wire
/// request's entries.
#[derive(Clone, Copy)]
pub(crate) enum Partitions<'a, 'py> {
    Offsets(&'a Bound<'py, PyAny>),
    Wire(&'a [WireEntry<'a>]),
}

/// A transactional commit's producer and the group check it passes (`Check::Txn`).
pub(crate) struct Txn<'a, 'py> {
    pub board: &'a txn_board::Shared,
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// the group's log partition
    pub partition: u32,
    pub route: &'a Route,
    pub part: &'a Bound<'py, PartitionState>,
    pub group: &'a Bound<'py, PyString>,
    pub member: &'a Member<'a>,
    pub now: i64,
    /// the partitions it commits
    pub entries: &'a [WireEntry<'a>],
}

impl<'a, 'py> Check<'a, 'py> {
    /// `precheck`, a route's check read as one
    pub fn of(precheck: &'a Bound<'py, PyAny>) -> Self {
        match precheck.cast::<Route>() {
            Ok(route) => Check::Standalone(route.get()),
            Err(_) => Check::Callable(precheck),
        }
    }

    /// Passed: true; declined (a transaction's commit the board does not hold: nothing is
    /// done, the Python path takes it): false; fenced: the error.
    pub fn run(&self, py: Python<'py>) -> PyResult<bool> {
        match self {
            Check::Callable(c) if c.is_none() => Ok(true),
            Check::Callable(c) => c.call0().map(|_| true),
            Check::Standalone(route) => route.check(py).map(|_| true),
            Check::Member { part, group, member, now, partitions } => {
                if steady_passes(py, part, group, member, *now)? {
                    return Ok(true);
                }
                route::fencing(part, group, member, *now, false, *partitions)?.call0()
                    .map(|_| true)
            }
            Check::Txn(t) => {
                if !txn_board::lock(t.board).check(t.transactional_id, t.producer_id,
                                                   t.producer_epoch, t.partition) {
                    return Ok(false);
                }
                // (Kafka's rules 5 and 6 do not bind a transaction's commit: a standalone
                // one needs the coordinator only where a group of that name is managed)
                if t.member.standalone() && !t.route.managed_here(py)? {
                    return Ok(true);
                }
                if !t.member.standalone() && steady_passes(py, t.part, t.group, t.member, t.now)? {
                    return Ok(true);
                }
                route::fencing(t.part, t.group, t.member, t.now, true,
                               Partitions::Wire(t.entries))?.call0().map(|_| true)
            }
        }
    }

    /// The producer of a transaction's commit, None for any other
    fn producer(&self) -> Option<(i64, i16)> {
        match self {
            Check::Txn(t) => Some((t.producer_id, t.producer_epoch)),
            _ => None,
        }
    }
}

/// Whether the partition's steady board passes `member`'s commit (counted as its heartbeat).
fn steady_passes(py: Python<'_>, part: &Bound<'_, PartitionState>, group: &Bound<'_, PyString>,
                 member: &Member<'_>, now: i64) -> PyResult<bool> {
    let board = part.borrow().steady.as_ref().map(|b| b.clone_ref(py));
    match board {
        Some(board) => Ok(board.get().check(group.to_str()?, member.member_id,
                                            member.generation, member.instance, now)),
        None => Ok(false),
    }
}

/// `commit_lone`, with its check (see there); a transaction's offsets (`Check::Txn`) are
/// framed as its batch (`TRANSACTIONAL`, its producer id and epoch) and applied as pending
/// (`OffsetTable.apply_transactional_call`). True once applied; false when the check declined
/// (nothing done).
#[allow(clippy::too_many_arguments)]
pub(crate) fn lone<'py>(py: Python<'py>, writer: &Bound<'py, PyAny>,
                        part: &Bound<'py, PartitionState>,
                        fields: &Bound<'py, PyAny>, nbytes: &Bound<'py, PyAny>, timestamp: i64,
                        timeout: &Bound<'py, PyAny>, precheck: Check<'_, 'py>) -> PyResult<bool> {
    let refs = refs(py)?;
    let writer = writer.cast::<WriterState>()?;
    let producer = precheck.producer();
    let lock = part.borrow().lock.clone_ref(py);
    let lock = lock.get();
    lock.lock(py)?;
    let decided = decide(py, writer, part, &precheck).and_then(|lone| match lone {
        Decided::Declined => Ok(Err(())),
        Decided::Lone => Ok(Ok(None)),
        Decided::Busy => {
            let args = (part, fields, nbytes, timestamp, timeout, producer);
            writer.call_method1(intern!(py, "_queue_sync"), args).map(|q| Ok(Some(q)))
        }
    });
    lock.unlock()?;
    let Ok(decided) = decided? else { return Ok(false) };
    if let Some(queued) = decided {
        let mut args = vec![part.clone().into_any()];
        args.extend(queued.try_iter()?.collect::<PyResult<Vec<_>>>()?);
        writer.call_method1(intern!(py, "_await"), PyTuple::new(py, args)?)?;
        return Ok(true);
    }

    // The leadership is ours: nothing else writes or applies in this partition until we
    // give it up.
    // (from here on every error goes to the failure path, which gives the leadership up)
    let written = (|| -> PyResult<i64> {
        let log = part.borrow().log.clone_ref(py).into_bound(py);
        let base = log.cast::<LogState>()?.borrow().next_offset;
        let (seq, n) = commits::triples(fields)?;
        let after = base + n as i64;
        let name = intern!(py, "frame_fields");
        // (the hook frames plain commits only: a transaction's batch is always framed here)
        let data = if producer.is_some()
            || hooks::global_is(refs.lone.bind(py), name, refs.frame_fields.bind(py))?
        {
            commits::frame_calls(py, base, timestamp, std::slice::from_ref(&seq), n, producer)?
        } else {
            refs.lone.bind(py).getattr(name)?.call1((base, timestamp, (fields,)))?
                .cast_into::<PyBytes>()?
        };
        if writer.borrow().fsync_always {
            append_durable(py, &log, &data, after)?;
        } else {
            log.call_method1(intern!(py, "append"), (data, after))?;
        }
        Ok(base)
    })();
    let base = written.map_err(|e| failed(py, refs, writer.as_any(), part, e, "write to"))?;
    lock.lock(py)?;
    let table = part.borrow().table.clone_ref(py).into_bound(py);
    let applied = match producer {
        None => apply(py, refs, &table, base, fields),
        Some((producer_id, producer_epoch)) => table.call_method1(
            intern!(py, "apply_transactional_call"),
            (base, fields, producer_id, producer_epoch)).map(drop),
    };
    let ended = applied.and_then(|_| end_leadership(py, writer.as_any(), part));
    lock.unlock()?;
    // (durable, but the table no longer follows the log: the failure path poisons the store,
    // and ends the leadership if that is what failed)
    ended.map_err(|e| failed(py, refs, writer.as_any(), part, e, "applying a round of"))?;
    Ok(true)
}

/// What a commit found in its first lock hold (`decide`).
enum Decided {
    /// its check declined it: nothing done
    Declined,
    /// the partition was idle: its leadership is the commit's
    Lone,
    /// the partition was busy: the commit is to be queued (in the same hold)
    Busy,
}

/// Under `part.lock`: the store usable, the fencing check passed (or declined), and whether
/// the partition is idle; if it is, its leadership is taken.
fn decide(py: Python<'_>, writer: &Bound<'_, WriterState>, part: &Bound<'_, PartitionState>,
          precheck: &Check<'_, '_>) -> PyResult<Decided> {
    if !writer.borrow().usable(py) {
        writer.call_method0(intern!(py, "check_usable"))?;
    }
    if !precheck.run(py)? {
        return Ok(Decided::Declined);
    }
    let mut p = part.borrow_mut();
    // (a deque's truth runs no Python code)
    if p.leader_active || p.async_scheduled || p.exclusive_waiting != 0
        || p.queue.bind(py).is_truthy()?
    {
        return Ok(Decided::Busy);
    }
    p.leader_active = true;
    Ok(Decided::Lone)
}

/// `table.apply_commit_calls(base, (fields,))`, called natively unless a test replaced the
/// method (its fault-injection hook).
fn apply(py: Python<'_>, refs: &Refs, table: &Bound<'_, PyAny>, base: i64,
         fields: &Bound<'_, PyAny>) -> PyResult<()> {
    static NATIVE_APPLY: hooks::MethodIs = hooks::MethodIs::new();
    let name = intern!(py, "apply_commit_calls");
    match table.cast::<TableState>() {
        Ok(state) if NATIVE_APPLY.check(&table.get_type(), name,
                                        refs.apply_commit_calls.bind(py))? => {
            crate::state::apply_calls(state, base, std::iter::once(Ok(fields.clone())))
        }
        _ => table.call_method1(intern!(py, "apply_commit_calls"), (base, (fields,))).map(drop),
    }
}

/// Give the leadership up (`part.lock` held) and hand on what queued meanwhile.
fn end_leadership(py: Python<'_>, writer: &Bound<'_, PyAny>, part: &Bound<'_, PartitionState>)
                  -> PyResult<()> {
    let hand_on = {
        let mut p = part.borrow_mut();
        p.leader_active = false;
        p.idle_waiters != 0 || p.queue.bind(py).is_truthy()?
    };
    if hand_on {
        writer.call_method1(intern!(py, "hand_on"), (part,))?;
    }
    Ok(())
}

/// `lone_commit.failed(writer, part, error, what)`: poisons the store, gives the leadership
/// up and returns the error to raise.
fn failed(py: Python<'_>, refs: &Refs, writer: &Bound<'_, PyAny>,
          part: &Bound<'_, PartitionState>,
          error: PyErr, what: &str) -> PyErr {
    match refs.failed.bind(py).call1((writer, part, error.into_value(py), what)) {
        Ok(_) => pyo3::exceptions::PyRuntimeError::new_err("lone_commit.failed returned"),
        Err(e) => e,
    }
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
    let bytes = data.as_bytes();
    let Some((state, active, fd, at, hook)) = usual_write(py, log, bytes.len() as i64)? else {
        log.call_method1(intern!(py, "append_durable"), (data, next_offset))?;
        return Ok(());
    };
    let written = match hook {
        // (no borrow of either state is held while the GIL is released)
        None => write(py, fd, bytes, at).map_err(crate::write::os_error),
        Some(hook) => hook.call1((fd, data, at)).and_then(|n| n.extract::<usize>()),
    };
    let end_durable = intern!(py, "end_durable");
    match written {
        Ok(n) if n == bytes.len() => active.borrow_mut().size = at + n as i64,
        Ok(n) => drop(active.call_method1(end_durable, (data, n))?),
        // (the errors `SegmentFile.append_durable` passes on; any other is raised as it is)
        Err(e) if e.is_instance_of::<PyOSError>(py)
            || e.is_instance_of::<PyNotImplementedError>(py) =>
        {
            drop(active.call_method1(end_durable, (data, e.into_value(py)))?)
        }
        Err(e) => return Err(e),
    }
    state.borrow_mut().next_offset = next_offset;
    Ok(())
}

/// For the usual write of `len` bytes (see `append_durable`): the log's state, its active
/// segment (its position left behind: `pwritev2` does not move it), the segment's fd, the
/// offset to write at, and the `_write_dsync` hook to call if a test replaced the native one;
/// else None (also when a test set it to None: no combined write at all).
#[allow(clippy::type_complexity)]
fn usual_write<'py>(py: Python<'py>, log: &Bound<'py, PyAny>, len: i64)
                    -> PyResult<Option<(Bound<'py, LogState>, Bound<'py, SegmentState>, i32,
                                        i64, Option<Bound<'py, PyAny>>)>> {
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
    let (fd, at) = {
        let mut a = active.borrow_mut();
        let end = a.size + len;
        if a.dsync != Some(true) || end > a.allocated || end > limit {
            return Ok(None); // a first try, a reserve or a roll: the Python path's
        }
        a.positioned = false;
        (a.fd, a.size)
    };
    Ok(Some((state.clone(), active, fd, at, hook)))
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
