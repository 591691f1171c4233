//! The lone commit (`offsetlog/store/lone_commit.py` has its guarantees): a `commit_sync`
//! alone in its log partition decided, written and applied in one native call, with the GIL
//! released only for its `pwritev2(RWF_DSYNC)` (`durable`'s usual write); and a commit that
//! finds such a commit writing follows it (`follow`).
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

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyModule, PyString, PyTuple};

use crate::commits;
use crate::durable::{append_durable, usual_write, Usual};
use crate::follow::{Baton, Follow, Tail};
use crate::hooks;
use crate::part_lock::PartLock;
use crate::route::{self, Member, Route};
use crate::txn_board;
use crate::wire_conn::Entry as WireEntry;
use crate::state::{LogState, PartitionState, TableState, WriterState};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(commit_lone, m)?)?;
    Ok(())
}

/// Modules and functions looked up once: `offsetlog.store.lone_commit` (the failure path, and
/// the `frame_fields` hook tests replace), and this module's own `frame_fields` and
/// `TableState.apply_commit_calls` objects (what the hooks hold when nobody replaced them).
struct Refs {
    lone: Py<PyModule>,
    failed: Py<PyAny>,
    frame_fields: Py<PyAny>,
    apply_commit_calls: Py<PyAny>,
}

static REFS: PyOnceLock<Refs> = PyOnceLock::new();

fn refs(py: Python<'_>) -> PyResult<&Refs> {
    REFS.get_or_try_init(py, || {
        let native = py.import("offsetlog.log._native")?;
        let lone = py.import("offsetlog.store.lone_commit")?;
        Ok(Refs {
            failed: lone.getattr("failed")?.unbind(),
            lone: lone.unbind(),
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
/// (nothing done). A plain commit that finds a lone commit writing follows it (`follow`).
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
    // (a call with a timeout queues rather than follows: a follower cannot give up its wait)
    let may_follow = producer.is_none() && timeout.is_none();
    let decided = decide(py, writer, part, &precheck, may_follow).and_then(|decided| match decided {
        Decided::Busy => {
            let args = (part, fields, nbytes, timestamp, timeout, producer);
            writer.call_method1(intern!(py, "_queue_sync"), args).map(Path::Queued)
        }
        Decided::Declined => Ok(Path::Declined),
        Decided::Lone => Ok(Path::Lead(None)),
        Decided::Follow(follow) => Ok(Path::Lead(Some(follow))),
    });
    lock.unlock()?;
    let follow = match decided? {
        Path::Declined => return Ok(false),
        Path::Queued(queued) => {
            let mut args = vec![part.clone().into_any()];
            args.extend(queued.try_iter()?.collect::<PyResult<Vec<_>>>()?);
            writer.call_method1(intern!(py, "_await"), PyTuple::new(py, args)?)?;
            return Ok(true);
        }
        Path::Lead(follow) => follow,
    };

    // The leadership is ours (or, following, will be once our predecessor passes it on):
    // nothing else writes or applies in this partition until we give it up or pass it on.
    // (from here on every error goes to the failure path, which gives it up or passes it on)
    let batch = Batch { fields, timestamp, producer };
    let mut mine = None; // the tail we publish for a follower of our own
    let base = frame_and_write(py, refs, writer, part, lock, &batch, follow.as_ref(), &mut mine)
        .map_err(|e| fail(py, refs, writer.as_any(), part, lock, mine, e, "write to"))?;
    lock.lock_quietly(py);
    let table = part.borrow().table.clone_ref(py).into_bound(py);
    let applied = match producer {
        None => apply(py, refs, &table, base, fields),
        Some((producer_id, producer_epoch)) => table.call_method1(
            intern!(py, "apply_transactional_call"),
            (base, fields, producer_id, producer_epoch)).map(drop),
    };
    if let Err(error) = applied {
        lock.unlock()?;
        // (durable, but the table no longer follows the log: the failure path poisons the
        // store and passes the failure on)
        return Err(fail(py, refs, writer.as_any(), part, lock, mine, error,
                        "applying a round of"));
    }
    let ended = end_leadership(py, writer.as_any(), part, mine);
    lock.unlock()?;
    // (applied, but what queued could not be handed on: the failure path poisons the store
    // and gives the leadership up, as it would have been)
    ended.map_err(|e| failed(py, refs, writer.as_any(), part, e, "applying a round of", false))?;
    Ok(true)
}

/// What `lone` does with a commit after its first lock hold.
enum Path<'py> {
    Declined,
    /// queued: `GroupCommitter._queue_sync`'s answer, `_await`'s arguments after `part`
    Queued(Bound<'py, PyAny>),
    /// leading, or following a lone commit that writes (`follow`)
    Lead(Option<Follow>),
}

/// A commit's batch: its checked fields, stamp, and producer (a transaction's).
struct Batch<'a, 'py> {
    fields: &'a Bound<'py, PyAny>,
    timestamp: i64,
    producer: Option<(i64, i16)>,
}

/// Frame `batch` at the log's next offset (a follower: its predecessor's tail) and write it,
/// durably under `fsync="always"`; its base offset. The usual write publishes its tail for a
/// follower (`mine`) before it starts; a follower writes beside its predecessor when its batch
/// fits the reserve there (the write and the wait below in one release of the GIL), and in
/// every case, whatever happened to its own batch, waits for
/// its predecessor to pass the leadership before it moves the segment and the log on or
/// reports a failure (which would otherwise give up a leadership that is not yet its own).
#[allow(clippy::too_many_arguments)]
fn frame_and_write<'py>(py: Python<'py>, refs: &Refs, writer: &Bound<'py, WriterState>,
                        part: &Bound<'py, PartitionState>, lock: &PartLock,
                        batch: &Batch<'_, 'py>, follow: Option<&Follow>,
                        mine: &mut Option<Tail>) -> PyResult<i64> {
    let log = part.borrow().log.clone_ref(py).into_bound(py);
    let begun = begin(py, refs, writer, part, lock, &log, batch, follow, mine);
    // The usual write where it applies, and a follower's wait for its turn (whatever became
    // of its own batch), in one release of the GIL.
    let wait = || follow.is_none_or(|f| f.baton.wait_released());
    let (written, passed) = match &begun {
        Ok(Begun { data, usual: Some(usual), .. }) => {
            let (written, passed) = usual.write_then(py, data, wait);
            (Some(written), passed)
        }
        _ => (None, follow.is_none_or(|f| f.baton.wait(py))),
    };
    if !passed {
        // (the predecessor poisoned the store before it passed: this raises its error)
        writer.call_method0(intern!(py, "check_usable"))?;
        return Err(PyRuntimeError::new_err("the commit before this one failed"));
    }
    let Begun { base, after, data, usual } = begun?;
    match usual.zip(written) {
        Some((usual, written)) => usual.settle(py, &data, written, after)?,
        None if writer.borrow().fsync_always => append_durable(py, &log, &data, after)?,
        None => drop(log.call_method1(intern!(py, "append"), (data, after))?),
    }
    Ok(base)
}

/// A batch framed (`begin`), and its usual write if one applies.
struct Begun<'py> {
    base: i64,
    after: i64,
    data: Bound<'py, PyBytes>,
    usual: Option<Usual<'py>>,
}

/// `frame_and_write`'s steps before the write: the frame, and the usual write's state where
/// it applies, its tail published for a follower.
#[allow(clippy::too_many_arguments)]
fn begin<'py>(py: Python<'py>, refs: &Refs, writer: &Bound<'py, WriterState>,
              part: &Bound<'py, PartitionState>, lock: &PartLock, log: &Bound<'py, PyAny>,
              batch: &Batch<'_, 'py>, follow: Option<&Follow>, mine: &mut Option<Tail>)
              -> PyResult<Begun<'py>> {
    let base = match follow {
        Some(follow) => follow.tail.after,
        None => log.cast::<LogState>()?.borrow().next_offset,
    };
    let (seq, n) = commits::triples(batch.fields)?;
    let after = base + n as i64;
    let name = intern!(py, "frame_fields");
    // (the hook frames plain commits only: a transaction's batch is always framed here)
    let data = if batch.producer.is_some()
        || hooks::global_is(refs.lone.bind(py), name, refs.frame_fields.bind(py))?
    {
        commits::frame_calls(py, base, batch.timestamp, std::slice::from_ref(&seq), n,
                             batch.producer)?
    } else {
        refs.lone.bind(py).getattr(name)?.call1((base, batch.timestamp, (batch.fields,)))?
            .cast_into::<PyBytes>()?
    };
    let usual = if writer.borrow().fsync_always {
        usual_write(py, log, data.as_bytes().len() as i64, follow.map(|f| f.tail.end))?
    } else {
        None
    };
    if let Some(usual) = &usual {
        let tail = Tail { after, end: usual.at + data.as_bytes().len() as i64 };
        lock.lock_quietly(py);
        part.borrow_mut().tail = Some(tail);
        *mine = Some(tail);
        lock.unlock()?;
    }
    Ok(Begun { base, after, data, usual })
}

/// What a commit found in its first lock hold (`decide`).
enum Decided {
    /// its check declined it: nothing done
    Declined,
    /// the partition was idle: its leadership is the commit's
    Lone,
    /// a lone commit was writing, with no one queued or following: the commit follows it
    Follow(Follow),
    /// the partition was busy: the commit is to be queued (in the same hold)
    Busy,
}

/// Under `part.lock`: the store usable, the fencing check passed (or declined), and whether
/// the partition is idle; if it is, its leadership is taken. A commit that `may_follow` (a
/// plain one, not a transaction's, with no timeout) and finds a lone commit's tail published,
/// with nothing queued, no one following and no one waiting, takes the tail and follows,
/// where the partition is `followable`.
fn decide(py: Python<'_>, writer: &Bound<'_, WriterState>, part: &Bound<'_, PartitionState>,
          precheck: &Check<'_, '_>, may_follow: bool) -> PyResult<Decided> {
    if !writer.borrow().usable(py) {
        writer.call_method0(intern!(py, "check_usable"))?;
    }
    if !precheck.run(py)? {
        return Ok(Decided::Declined);
    }
    let mut p = part.borrow_mut();
    let waiting = p.async_scheduled || p.exclusive_waiting != 0;
    // (a deque's truth runs no Python code)
    if p.leader_active {
        if waiting || !may_follow || p.follower.is_some() || !p.followable
            || p.queue.bind(py).is_truthy()?
        {
            return Ok(Decided::Busy);
        }
        let Some(tail) = p.tail.take() else { return Ok(Decided::Busy) };
        let baton = Baton::new();
        p.follower = Some(baton.clone());
        return Ok(Decided::Follow(Follow { baton, tail }));
    }
    if waiting || p.queue.bind(py).is_truthy()? {
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

/// End the commit's leadership (`part.lock` held): withdraw its tail (`mine`) if no follower
/// took it, and pass the leadership to the follower if there is one; else give it up and hand
/// on what queued meanwhile.
fn end_leadership(py: Python<'_>, writer: &Bound<'_, PyAny>, part: &Bound<'_, PartitionState>,
                  mine: Option<Tail>) -> PyResult<()> {
    let hand_on = {
        let mut p = part.borrow_mut();
        if let Some(follower) = leave(&mut p, mine) {
            follower.pass(true);
            return Ok(());
        }
        p.leader_active = false;
        p.idle_waiters != 0 || p.queue.bind(py).is_truthy()?
    };
    if hand_on {
        writer.call_method1(intern!(py, "hand_on"), (part,))?;
    }
    Ok(())
}

/// Withdraw the commit's tail if it is still the published one, and take its follower.
fn leave(p: &mut PartitionState, mine: Option<Tail>) -> Option<std::sync::Arc<Baton>> {
    if mine.is_some() && p.tail == mine {
        p.tail = None;
    }
    p.follower.take()
}

/// The failure path of a commit that holds the leadership: withdraw its tail, poison the store
/// (`failed`), then pass the failure to its follower if it has one (else `failed` gave the
/// leadership up); the error to raise.
#[allow(clippy::too_many_arguments)]
fn fail(py: Python<'_>, refs: &Refs, writer: &Bound<'_, PyAny>,
        part: &Bound<'_, PartitionState>, lock: &PartLock, mine: Option<Tail>, error: PyErr,
        what: &str) -> PyErr {
    lock.lock_quietly(py);
    let follower = leave(&mut part.borrow_mut(), mine);
    // (it is ours: taken just above)
    let _ = lock.unlock();
    let raised = failed(py, refs, writer, part, error, what, follower.is_some());
    if let Some(follower) = follower {
        follower.pass(false); // (after the poison: the follower fails, and so does what follows)
    }
    raised
}

/// `lone_commit.failed(writer, part, error, what, handed)`: poisons the store, gives the
/// leadership up unless it is `handed` to a follower, and returns the error to raise.
fn failed(py: Python<'_>, refs: &Refs, writer: &Bound<'_, PyAny>,
          part: &Bound<'_, PartitionState>,
          error: PyErr, what: &str, handed: bool) -> PyErr {
    match refs.failed.bind(py).call1((writer, part, error.into_value(py), what, handed)) {
        Ok(_) => PyRuntimeError::new_err("lone_commit.failed returned"),
        Err(e) => e,
    }
}
