//! The commit path's hot state, held natively so that the lone commit and the native write
//! (`lone`) read and move it without a Python attribute lookup: the active segment's write
//! position and reserve (`SegmentState`), the log partition's next offset and sync flag
//! (`LogState`), its group-commit flags (`PartitionState`), and the table's offsets and
//! counters with their usual apply (`TableState`).
//!
//! Python subclasses each and keeps all the logic: `segment.SegmentFile` (appends, the
//! reserve, the `RWF_DSYNC` fallback, trimming), `partition_log.PartitionLog` (rolls, syncs,
//! the manifest), `commit_queue.PartitionWriter` (with `group_commit`'s protocol) and
//! `table.OffsetTable` (every other record) read and set these fields as plain attributes. No borrow of any is held while the GIL is released
//! or Python code runs.

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyTuple};

use std::sync::Arc;

use crate::commits;
use crate::follow::{Baton, Tail};
use crate::part_lock::PartLock;
use crate::steady::SteadyBoard;
use crate::write_ahead::WriteAhead;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SegmentState>()?;
    m.add_class::<LogState>()?;
    m.add_class::<PartitionState>()?;
    m.add_class::<TableState>()?;
    m.add_class::<WriterState>()?;
    m.add_class::<RunState>()?;
    Ok(())
}

/// An open segment file's write state (`segment.SegmentFile` has what each field means).
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct SegmentState {
    #[pyo3(get, set)]
    pub path: Py<PyAny>,
    #[pyo3(get, set)]
    pub base_offset: i64,
    /// the file descriptor, open for writing; -1 once closed
    #[pyo3(get, set)]
    pub fd: i32,
    /// bytes of data: where the next append goes
    #[pyo3(get, set)]
    pub size: i64,
    /// bytes reserved (`fallocate`) ahead of `size`
    #[pyo3(get, set)]
    pub allocated: i64,
    /// never reserve past this size (the segment rolls there); 0 disables preallocation
    #[pyo3(get, set)]
    pub limit: i64,
    /// a write failed: what is on disk past `size` is unknown
    #[pyo3(get, set)]
    pub failed: bool,
    /// the fd's file position is `size`
    #[pyo3(get, set)]
    pub positioned: bool,
    /// `RWF_DSYNC` on this fd: None untried, True worked, False refused
    #[pyo3(get, set)]
    pub dsync: Option<bool>,
}

#[pymethods]
impl SegmentState {
    #[new]
    #[pyo3(signature = (path, base_offset, fd, size, limit = 0))]
    fn new(path: Py<PyAny>, base_offset: i64, fd: i32, size: i64, limit: i64) -> Self {
        SegmentState { path, base_offset, fd, size, allocated: size, limit, failed: false,
                       positioned: true, dsync: None }
    }
}

/// A log partition's append state (`partition_log.PartitionLog` has the rest).
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct LogState {
    /// log offset the next record gets; never reused, even after a truncation
    #[pyo3(get, set)]
    pub next_offset: i64,
    /// written since the last sync
    #[pyo3(get, set)]
    pub dirty: bool,
    /// the size a segment rolls at
    #[pyo3(get, set)]
    pub segment_bytes: i64,
    /// the active segment (a `SegmentFile`), None until the first append opens it
    #[pyo3(get, set, name = "_active")]
    pub active: Option<Py<PyAny>>,
    /// the log partition's number
    #[pyo3(get, set)]
    pub partition: u32,
    /// the store's write-ahead file, where the usual write's batches become durable (None:
    /// each is synced in its segment)
    #[pyo3(get, set)]
    pub write_ahead: Option<Py<WriteAhead>>,
}

#[pymethods]
impl LogState {
    /// (the subclass's `__init__` sets every field)
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        LogState { next_offset: 0, dirty: false, segment_bytes: 0, active: None, partition: 0,
                   write_ahead: None }
    }
}

/// A log partition's group-commit state (`commit_queue.PartitionWriter` has the rest, and
/// `group_commit` the protocol that reads and sets these): its lock, queue, log and table,
/// and the flags `lone::commit_lone` reads in the lock hold that decides a commit's path.
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct PartitionState {
    /// the partition's lock (`threading.Lock`'s interface, `part_lock`): every field here
    /// is read and set under it
    #[pyo3(get)]
    pub lock: Py<PartLock>,
    /// the queued items (a `collections.deque`)
    #[pyo3(get)]
    pub queue: Py<PyAny>,
    /// the `PartitionLog`
    #[pyo3(get, set)]
    pub log: Py<PyAny>,
    /// the `OffsetTable`
    #[pyo3(get, set)]
    pub table: Py<PyAny>,
    /// a leader is writing or applying a round (or a lone commit): no one else may
    #[pyo3(get, set)]
    pub leader_active: bool,
    /// handed to the async writer thread and not yet found empty by it
    #[pyo3(get, set)]
    pub async_scheduled: bool,
    /// callers waiting for exclusive use: no new round starts while there are any
    #[pyo3(get, set)]
    pub exclusive_waiting: i64,
    /// threads waiting on the partition's condition (drain, exclusive)
    #[pyo3(get, set)]
    pub idle_waiters: i64,
    /// the run (`AsyncRun`) that `commit_async` calls join while it is the last queued item;
    /// None once a leader took it
    #[pyo3(get, set)]
    pub open_run: Py<PyAny>,
    /// `commit_async` calls ever queued here (when to step aside: `async_commit`)
    #[pyo3(get, set)]
    pub async_calls: i64,
    /// the partition's steady board (`steady`: its classic groups' steady members), the
    /// coordinator's to publish on and clear; None until the store's router sets it
    #[pyo3(get, set)]
    pub steady: Option<Py<SteadyBoard>>,
    /// where the batch of the lone commit writing now ends, until a follower takes it or that
    /// commit ends (`follow`)
    pub tail: Option<Tail>,
    /// the follower waiting for the leadership (`follow`): at most one
    pub follower: Option<Arc<Baton>>,
    /// the store's RECOVERY-POINTS file holds this partition's point, so recovery cuts a hole
    /// past it as a torn tail: a lone commit may be followed (`follow`); set at open
    #[pyo3(get, set)]
    pub followable: bool,
}

#[pymethods]
impl PartitionState {
    /// A new lock and an empty `collections.deque` (the subclass's `__init__` sets the rest)
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(py: Python<'_>, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>)
           -> PyResult<Self> {
        let lock = Py::new(py, PartLock::new())?;
        let queue = py.import("collections")?.getattr("deque")?.call0()?.unbind();
        Ok(PartitionState { lock, queue, log: py.None(),
                            table: py.None(), leader_active: false, async_scheduled: false,
                            exclusive_waiting: 0, idle_waiters: 0, open_run: py.None(),
                            async_calls: 0,
                            steady: None, tail: None, follower: None,
                            followable: false })
    }
}

/// The group committer's flags that every commit reads in its lock hold
/// (`group_commit.GroupCommitter` has the rest, and what each means).
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct WriterState {
    /// the store's `close()` began its final drain: nothing new is queued
    #[pyo3(get, set)]
    pub closing: bool,
    /// the error that poisoned the store, or None
    #[pyo3(get, set)]
    pub failure: Py<PyAny>,
    /// `fsync="always"`: every write is durable before its commit returns
    #[pyo3(get, set)]
    pub fsync_always: bool,
    /// `max_group_commit_bytes`: the most a round (and a run) takes
    #[pyo3(get, set)]
    pub max_bytes: i64,
}

#[pymethods]
impl WriterState {
    /// (the subclass's `__init__` sets every field)
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(py: Python<'_>, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>)
           -> Self {
        WriterState { closing: false, failure: py.None(), fsync_always: false, max_bytes: 0 }
    }

    /// (a failure's traceback may lead back here: the cycle must stay collectable)
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.failure)
    }
}

impl WriterState {
    /// Neither closing nor failed (else `check_usable` says which).
    pub fn usable(&self, py: Python<'_>) -> bool {
        !self.closing && self.failure.is_none(py)
    }
}

/// A run of back-to-back `commit_async` calls, as `async_commit` joins calls to it
/// (`commit_queue.AsyncRun` has the rest, and the meaning of each).
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct RunState {
    /// the calls' flat field triples (a list); None once a leader took them
    #[pyo3(get, set)]
    pub fields: Py<PyAny>,
    #[pyo3(get, set)]
    pub nbytes: i64,
    #[pyo3(get, set)]
    pub timestamp: i64,
    #[pyo3(get, set)]
    pub future: Py<PyAny>,
}

#[pymethods]
impl RunState {
    /// (the subclass's `__init__` sets every field)
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(py: Python<'_>, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>)
           -> Self {
        RunState { fields: py.None(), nbytes: 0, timestamp: 0, future: py.None() }
    }

    /// (a future's done-callbacks may lead back here: the cycle must stay collectable)
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.fields)?;
        visit.call(&self.future)
    }
}

/// The offset table's committed offsets and counters (`offsetlog.table.OffsetTable` has the
/// rest), and its usual apply: commit calls' fields straight into `offsets`.
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct TableState {
    /// group -> {(topic, partition) -> entry}: the committed offsets
    #[pyo3(get, set)]
    pub offsets: Py<PyDict>,
    /// log offset after the last applied record: the table is "as of" this offset
    #[pyo3(get, set)]
    pub next_offset: i64,
    #[pyo3(get, set)]
    pub records_applied: i64,
    /// pending transactional offsets and transaction metadata (`table.txn`, a
    /// `PendingTransactions`)
    pub txn: Py<PyAny>,
    /// `txn.keys` (the groups with pending transactional offsets) when it is a dict, read on
    /// every apply: kept when `txn` is set (`PendingTransactions` never rebinds its `keys`)
    txn_keys: Option<Py<PyDict>>,
}

#[pymethods]
impl TableState {
    /// An empty table (the subclass's `__init__` sets the rest)
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(py: Python<'_>, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>)
           -> Self {
        TableState { offsets: PyDict::new(py).unbind(), next_offset: 0, records_applied: 0,
                     txn: py.None(), txn_keys: None }
    }

    #[getter]
    fn txn(&self, py: Python<'_>) -> Py<PyAny> {
        self.txn.clone_ref(py)
    }

    #[setter]
    fn set_txn(&mut self, txn: &Bound<'_, PyAny>) -> PyResult<()> {
        let keys = match txn.getattr(pyo3::intern!(txn.py(), "keys")) {
            Ok(keys) => keys.cast_into::<PyDict>().ok().map(Bound::unbind),
            Err(_) => None,
        };
        self.txn = txn.clone().unbind();
        self.txn_keys = keys;
        Ok(())
    }

    /// Apply commit calls written as one plain batch at `base_offset`, each call's offsets
    /// the flat triples `records.offset_commit_fields` gives: the same change as
    /// `apply_batches` of `records_from_fields` of all their fields there, without building
    /// the records (a group-commit round's calls, a lone commit). The usual call goes into
    /// `offsets` here (`commits::apply_fields`, the same `put` as every plain commit); a call
    /// with metadata or epochs, or any while a group has pending transactional offsets, goes
    /// through the subclass's `_apply_calls_as_records(base_offset, fields, at)`.
    fn apply_commit_calls(slf: &Bound<'_, Self>, base_offset: i64, calls: &Bound<'_, PyAny>)
                          -> PyResult<()> {
        apply_calls(slf, base_offset, calls.try_iter()?)
    }
}

/// `TableState.apply_commit_calls` of the calls `calls` yields (the lone commit's one call
/// without a tuple around it).
pub(crate) fn apply_calls<'py>(slf: &Bound<'py, TableState>, base_offset: i64,
                               calls: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>)
                               -> PyResult<()> {
    let py = slf.py();
    let (offsets, pending, keys) = {
        let t = slf.borrow();
        (t.offsets.clone_ref(py).into_bound(py), t.txn.clone_ref(py).into_bound(py),
         t.txn_keys.as_ref().map(|k| k.clone_ref(py).into_bound(py)))
    };
    let plain = match keys {
        Some(keys) => keys.is_empty(),
        None => !pending.getattr(pyo3::intern!(py, "keys"))?.is_truthy()?,
    };
    let intern = crate::apply::sys_intern(py)?;
    let mut base = base_offset;
    for fields in calls {
        let fields = fields?;
        let (seq, count) = commits::triples(&fields)?;
        let n = count as i64;
        // (apply_triples runs no Python code: no borrow is held across it anyway)
        if !plain || commits::apply_triples(py, &offsets, &seq, count, intern)? != count {
            // (re-applying what apply_fields put sets the same entries again)
            slf.call_method1(pyo3::intern!(py, "_apply_calls_as_records"),
                             (base_offset, &fields, base))?;
        } else {
            let mut t = slf.borrow_mut();
            t.next_offset = base + n;
            t.records_applied += n;
        }
        base += n;
    }
    Ok(())
}
