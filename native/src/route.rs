//! Where a group's commits go and the check of its standalone commits (`Route`), and the
//! store's commit calls entered natively for the usual call (`RouterState`, the native base
//! of `offsetlog.store.routing.CommitRouter`).
//!
//! The usual call is a group committing on its own (generation -1, no member, no instance:
//! Kafka's simple consumer), a dict of `TopicPartition -> int` or `OffsetAndMetadata`
//! (metadata the store's limit surely holds: `commits::plain_fields`) on an open store, with
//! a `commit_sync` timeout None or a number of seconds (`checked_timeout`). For it,
//! `OffsetStore.commit_sync` and `commit_async` make one call here, which finds the group's
//! route, reads the clock, checks the offsets into their record fields
//! (`commits::plain_fields`) and goes on to the lone commit (`lone`) or the queue
//! (`async_commit`), with the route's standalone check run natively in their lock hold.
//! A group member's commit takes the same way through the store's attribute
//! (`usual_sync`, `usual_async` with its `Member`, checked in the same lock hold). Any other
//! call (a transaction's, longer metadata, an argument that
//! is wrong, a store closing or failed) is left untouched to `CommitRouter.check` and the
//! Python path, which is where its errors are raised: the entries return False or None
//! before changing anything but the route and key caches. The wire server enters the same
//! way through `route_wire`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyInt, PyList, PyString, PyTuple};

use crate::async_commit;
use crate::commits;
use crate::key_cache::KeyCache;
use crate::lone;
use crate::state::PartitionState;
use crate::steady::{self, SteadyBoards};
use crate::txn_board::{self, TxnBoard};
use crate::wire_conn::Entry as WireEntry;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Route>()?;
    m.add_class::<RouterState>()?;
    m.add_function(wrap_pyfunction!(clock_ms, m)?)?;
    Ok(())
}

/// Wall-clock epoch milliseconds: the store's default `clock` (`config.system_clock_ms`).
#[pyfunction]
pub fn clock_ms() -> i64 {
    now_ms()
}

pub(crate) fn now_ms() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        // (a clock set before 1970: floor division, as time.time_ns() // 1_000_000 has it)
        Err(e) => -((e.duration().as_nanos() as i64 + 999_999) / 1_000_000),
    }
}

/// A group's log partition (`part`, its `PartitionWriter`) and, called, the check of its
/// standalone commits, run under the partition's lock: valid unless a managed group of that
/// name exists (its coordinator's `validate_offset_commit` then decides, at `clock()`'s time),
/// or a KIP-848 group with members (its coordinator's `check_offset_request`).
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct Route {
    #[pyo3(get)]
    pub part: Py<PartitionState>,
    /// `part.index`: the group's log partition
    pub partition: u32,
    group_id: Py<PyString>,
    coordinator: Py<PyAny>,
    /// `coordinator.managed_groups()`: a live view of its groups
    managed: Py<PyAny>,
    /// the KIP-848 coordinator (`part.consumer_coordinator`) and its live `groups`, or None
    consumer: Option<(Py<PyAny>, Py<PyAny>)>,
    clock: Py<PyAny>,
}

#[pymethods]
impl Route {
    #[new]
    fn new(part: Bound<'_, PartitionState>, group_id: Bound<'_, PyString>,
           clock: Py<PyAny>) -> PyResult<Self> {
        let py = part.py();
        let partition = part.getattr(intern!(py, "index"))?.extract()?;
        let coordinator = part.getattr(intern!(py, "coordinator"))?;
        let managed = coordinator.call_method0(intern!(py, "managed_groups"))?.unbind();
        let consumer = part.getattr(intern!(py, "consumer_coordinator"))?;
        let consumer = if consumer.is_none() {
            None
        } else {
            let groups = consumer.getattr(intern!(py, "groups"))?.unbind();
            Some((consumer.unbind(), groups))
        };
        Ok(Route { part: part.unbind(), partition, group_id: group_id.unbind(),
                   coordinator: coordinator.unbind(), managed, consumer, clock })
    }

    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        self.check(py)
    }

    /// (the clock may be anything a user gave: a cycle through it must stay collectable)
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.part)?;
        visit.call(&self.coordinator)?;
        visit.call(&self.managed)?;
        if let Some((consumer, groups)) = &self.consumer {
            visit.call(consumer)?;
            visit.call(groups)?;
        }
        visit.call(&self.clock)
    }
}

impl Route {
    /// The standalone check (see the type); raises the error that fences the commit.
    pub fn check(&self, py: Python<'_>) -> PyResult<()> {
        let group = self.group_id.bind(py);
        if self.managed.bind(py).contains(group)? {
            let now = self.clock.bind(py).call0()?;
            let kwargs = PyDict::new(py);
            kwargs.set_item(intern!(py, "now_ms"), now)?;
            self.coordinator.bind(py).call_method(intern!(py, "validate_offset_commit"),
                                                  (group,), Some(&kwargs))?;
        } else if let Some((consumer, groups)) = &self.consumer {
            if groups.bind(py).contains(group)? {
                let error = consumer.bind(py)
                    .call_method1(intern!(py, "check_offset_request"), (group, "", -1))?;
                if !error.is_none() {
                    return Err(PyErr::from_value(error));
                }
            }
        }
        Ok(())
    }

    /// Whether a coordinator holds a group of this name (a managed classic group, or a
    /// KIP-848 group): a standalone transactional commit is then the coordinator's to check.
    pub fn managed_here(&self, py: Python<'_>) -> PyResult<bool> {
        let group = self.group_id.bind(py);
        if self.managed.bind(py).contains(group)? {
            return Ok(true);
        }
        self.consumer_group_here(py)
    }

    /// Whether the KIP-848 coordinator holds a group of this name.
    pub fn consumer_group_here(&self, py: Python<'_>) -> PyResult<bool> {
        match &self.consumer {
            Some((_, groups)) => groups.bind(py).contains(self.group_id.bind(py)),
            None => Ok(false),
        }
    }
}

/// `CommitRouter`'s state (`offsetlog.store.routing` has the rest): the route cache, the
/// record key cache, the clock and what the usual call's entries need. `_setup` sets it.
#[pyclass(subclass, module = "offsetlog.log._native")]
pub struct RouterState {
    /// group -> its `Route`; a cache (`CommitRouter.route` fills and bounds it)
    #[pyo3(get)]
    pub(crate) routes: Py<PyDict>,
    /// record keys shared by commits of one key (`records.offset_commit_fields`); `_setup`
    /// makes it
    #[pyo3(get, name = "_keys")]
    keys: Py<KeyCache>,
    /// the store is closed: no call is taken here (the Python path raises), and no steady
    /// board passes anything (`closed`'s setter tells them)
    #[pyo3(get)]
    pub(crate) closed: bool,
    writer: Option<Py<PyAny>>,
    pub(crate) clock: Option<Py<PyAny>>,
    /// `clock` is `clock_ms`: read here without a call
    pub(crate) native_clock: bool,
    limits: commits::PlainLimits,
    max_call_bytes: usize,
    yield_at: i64,
    /// the store's steady boards (`_set_steady`)
    pub(crate) steady: Option<steady::Shared>,
    /// the store's board of open transactions (`_set_txn_board`)
    pub(crate) txn: Option<txn_board::Shared>,
}

/// The usual call's route, record fields, their size bound and time, and the store's
/// `GroupCommitter` and `yield_at` (`_setup`'s)
pub(crate) struct Usual<'py> {
    pub(crate) route: Bound<'py, Route>,
    /// the flat `(key, offset, timestamp)` triples (`commits::plain_fields`)
    fields: Vec<Bound<'py, PyAny>>,
    nbytes: usize,
    pub(crate) now: i64,
    writer: Bound<'py, PyAny>,
    yield_at: i64,
}

#[pymethods]
impl RouterState {
    /// (the subclass's `__init__` calls `_setup`)
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(py: Python<'_>, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>)
           -> PyResult<Self> {
        Ok(RouterState { routes: PyDict::new(py).unbind(),
                         keys: Py::new(py, KeyCache::new(py, 0))?,
                         closed: false, writer: None, clock: None, native_clock: false,
                         limits: commits::PlainLimits::default(py), max_call_bytes: 0,
                         yield_at: 1, steady: None, txn: None })
    }

    /// (a cycle through the writer or a user's clock must stay collectable)
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.routes)?;
        visit.call(&self.keys)?;
        visit.call(&self.writer)?;
        visit.call(&self.clock)?;
        visit.call(&self.limits.tp_type)?;
        visit.call(&self.limits.oam_type)
    }

    fn __clear__(&mut self) {
        self.writer = None;
        self.clock = None;
    }

    /// The store's `GroupCommitter`, its `clock`, the call limit (`records.MAX_CALL_BYTES`),
    /// the key cache's size (`records.KEYS_CACHED`), a plain record's size bound beyond its
    /// text (`records.PLAIN_COMMIT_BOUND`), the store's `metadata_max_bytes`, the two types
    /// of the usual call, and how often a
    /// `commit_async` caller steps aside (`group_commit.YIELD_AT`).
    #[allow(clippy::too_many_arguments)]
    fn _setup(&mut self, writer: Py<PyAny>, clock: Bound<'_, PyAny>, max_call_bytes: usize,
              keys_max: usize, bound_per_offset: usize, metadata_max: usize,
              tp_type: Py<PyAny>, oam_type: Py<PyAny>, yield_at: i64) -> PyResult<()> {
        let py = clock.py();
        let native = py.import("offsetlog.log._native")?.getattr("clock_ms")?;
        self.native_clock = clock.is(&native);
        self.clock = Some(clock.unbind());
        self.writer = Some(writer);
        self.max_call_bytes = max_call_bytes;
        self.keys = Py::new(py, KeyCache::new(py, keys_max))?;
        self.limits = commits::PlainLimits { bound_per_offset, metadata_max, tp_type, oam_type };
        self.yield_at = yield_at.max(1);
        Ok(())
    }

    #[setter]
    fn set_closed(&mut self, closed: bool) {
        self.closed = closed;
        if let Some(steady) = &self.steady {
            steady::lock(steady).closed = closed;
        }
    }

    /// The store's board of open transactions (`txn_board::TxnBoard`), which the wire's
    /// TxnOffsetCommit is checked against.
    fn _set_txn_board(&mut self, board: &Bound<'_, TxnBoard>) {
        self.txn = Some(board.get().shared.clone());
    }

    /// The store's steady boards (`steady::SteadyBoards`), which the wire's steady members'
    /// Heartbeats are checked against.
    fn _set_steady(&mut self, boards: &Bound<'_, SteadyBoards>) {
        let shared = boards.get().shared.clone();
        steady::lock(&shared).closed = self.closed;
        self.steady = Some(shared);
    }

    /// `OffsetStore.commit_sync`'s usual call (see the module), committed: True. Any other
    /// call: False, and nothing done. Raises what the commit raises (fencing, a failed or
    /// closing store found in the lock hold, a failed write).
    fn commit_sync(slf: &Bound<'_, Self>, group_id: &Bound<'_, PyAny>,
                   offsets: &Bound<'_, PyAny>, generation_id: &Bound<'_, PyAny>,
                   member_id: &Bound<'_, PyAny>, group_instance_id: &Bound<'_, PyAny>,
                   timeout: &Bound<'_, PyAny>) -> PyResult<bool> {
        if !standalone(generation_id, member_id, group_instance_id) {
            return Ok(false);
        }
        let Some(timeout) = checked_timeout(timeout)? else { return Ok(false) };
        usual_sync(slf, group_id, offsets, None, &timeout)
    }

    /// `OffsetStore.commit_async`'s usual call (see the module; `callback` None or callable),
    /// queued: its future. Any other call, or a store found closing or failed in the lock
    /// hold: None, and nothing done. Raises what the check raises (fencing).
    fn commit_async<'py>(slf: &Bound<'py, Self>, group_id: &Bound<'py, PyAny>,
                         offsets: &Bound<'py, PyAny>, callback: &Bound<'py, PyAny>,
                         generation_id: &Bound<'py, PyAny>, member_id: &Bound<'py, PyAny>,
                         group_instance_id: &Bound<'py, PyAny>)
                         -> PyResult<Option<Bound<'py, PyAny>>> {
        if !standalone(generation_id, member_id, group_instance_id) {
            return Ok(None);
        }
        usual_async(slf, group_id, offsets, None, callback)
    }
}

/// `commit_sync`'s usual call, a simple consumer's (`member` None, or the standalone one) or a
/// group member's, its `timeout` checked (`checked_timeout`): committed under the group's
/// check in the lone commit's lock hold (`check`), true; false, nothing done, for a call the
/// usual one's checks leave to the Python path. Raises what the commit raises (fencing first).
pub(crate) fn usual_sync(slf: &Bound<'_, RouterState>, group_id: &Bound<'_, PyAny>,
                         offsets: &Bound<'_, PyAny>, member: Option<&Member<'_>>,
                         timeout: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = slf.py();
    let Some(call) = usual(slf, group_id, offsets)? else { return Ok(false) };
    let route = call.route.clone();
    let part = route.get().part.clone_ref(py).into_bound(py);
    let group = group_id.cast::<PyString>()?; // (an exact str: `usual` took it)
    let check = check(route.get(), &part, group, member, call.now, offsets);
    commit_lone(slf, call, timeout, check)
}

/// The check a usual call's commit runs in its lock hold: a simple consumer's, the route's
/// standalone check; a group member's (`lone::Check::Member`), the partition's steady board,
/// else `routing.fencing`'s, in the Python path's order, as the wire's member commits have it.
fn check<'a, 'py>(route: &'a Route, part: &'a Bound<'py, PartitionState>,
                  group: &'a Bound<'py, PyString>, member: Option<&'a Member<'a>>, now: i64,
                  offsets: &'a Bound<'py, PyAny>) -> lone::Check<'a, 'py> {
    match member {
        Some(member) if !member.standalone() => {
            let partitions = lone::Partitions::Offsets(offsets);
            lone::Check::Member { part, group, member, now, partitions }
        }
        _ => lone::Check::Standalone(route),
    }
}

/// A `commit_sync` timeout as `validation.check_timeout` makes it: None, or a float of
/// seconds >= 0 (None for more than `threading.TIMEOUT_MAX`, infinity included), from None
/// or an int or float (not a bool, nor another subclass). None (the outer option) for
/// anything else, which the Python path judges and refuses (NaN, a negative number, another
/// type).
pub(crate) fn checked_timeout<'py>(timeout: &Bound<'py, PyAny>)
                                   -> PyResult<Option<Bound<'py, PyAny>>> {
    static TIMEOUT_MAX: pyo3::sync::PyOnceLock<f64> = pyo3::sync::PyOnceLock::new();
    let py = timeout.py();
    if timeout.is_none() {
        return Ok(Some(timeout.clone()));
    }
    let seconds = if timeout.is_exact_instance_of::<pyo3::types::PyFloat>() {
        timeout.extract::<f64>()?
    } else if timeout.is_exact_instance_of::<PyInt>() {
        match timeout.extract::<f64>() {
            Ok(seconds) => seconds,
            Err(_) => return Ok(None), // (an int too large for a float: Python's to refuse)
        }
    } else {
        return Ok(None);
    };
    if seconds.is_nan() || seconds < 0.0 {
        return Ok(None);
    }
    let max = *TIMEOUT_MAX.get_or_try_init(py, || {
        py.import("threading")?.getattr("TIMEOUT_MAX")?.extract::<f64>()
    })?;
    Ok(Some(if seconds > max {
        py.None().into_bound(py)
    } else {
        pyo3::types::PyFloat::new(py, seconds).into_any()
    }))
}

/// `commit_async`'s usual call (see `usual_sync`; `callback` None or callable), queued under
/// the group's check: its future; any other call (a `callback` neither None nor callable
/// included) None, and nothing done.
pub(crate) fn usual_async<'py>(slf: &Bound<'py, RouterState>, group_id: &Bound<'py, PyAny>,
                               offsets: &Bound<'py, PyAny>, member: Option<&Member<'_>>,
                               callback: &Bound<'py, PyAny>)
                               -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = slf.py();
    if !(callback.is_none() || callback.is_callable()) {
        return Ok(None);
    }
    let Some(call) = usual(slf, group_id, offsets)? else { return Ok(None) };
    let route = call.route.get();
    let part = route.part.bind(py);
    let group = group_id.cast::<PyString>()?;
    async_commit::submit(py, &call.writer, part, &call.fields, call.nbytes as i64, call.now,
                         check(route, part, group, member, call.now, offsets), callback, offsets,
                         call.yield_at, true)
}

/// The standalone commit's arguments: generation -1 (an int), member "" (a str), no instance.
fn standalone(generation_id: &Bound<'_, PyAny>, member_id: &Bound<'_, PyAny>,
              group_instance_id: &Bound<'_, PyAny>) -> bool {
    group_instance_id.is_none()
        && generation_id.is_exact_instance_of::<PyInt>()
        && generation_id.extract::<i64>().is_ok_and(|g| g == -1)
        && member_id.cast_exact::<PyString>().is_ok_and(|m| m.to_str().is_ok_and(str::is_empty))
}

/// The usual call's route, fields, size bound and time, or None for any other call (or a
/// closed store).
fn usual<'py>(slf: &Bound<'py, RouterState>, group_id: &Bound<'py, PyAny>,
              offsets: &Bound<'py, PyAny>) -> PyResult<Option<Usual<'py>>> {
    let Ok(group) = group_id.cast_exact::<PyString>() else { return Ok(None) };
    let Some(at) = entry(slf, group, true)? else { return Ok(None) };
    let fields = commits::plain_fields(slf.py(), group, offsets, &at.stamp, Some(at.keys.get()),
                                       &at.limits)?;
    Ok(at.with(fields))
}

/// What every usual call starts from: the group's route, the time (and its stamp for the
/// records), the key cache, the limits and what the call goes on to (all of the router's
/// read in one borrow). None: a closed store (or one not set up), a clock of another type,
/// or (unless `look_up`) a group whose route is not cached.
struct Entry<'py> {
    route: Bound<'py, Route>,
    now: i64,
    stamp: Bound<'py, PyAny>,
    keys: Bound<'py, KeyCache>,
    limits: commits::PlainLimits,
    max_call_bytes: usize,
    writer: Bound<'py, PyAny>,
    yield_at: i64,
}

impl<'py> Entry<'py> {
    /// The call, once its offsets are record fields (`commits::plain_fields`); None for
    /// no offsets or over the limit: the Python path's (which raises for the latter).
    fn with(self, fields: Option<(Vec<Bound<'py, PyAny>>, usize)>) -> Option<Usual<'py>> {
        let (fields, nbytes) = fields?;
        if fields.is_empty() || nbytes > self.max_call_bytes {
            return None;
        }
        Some(Usual { route: self.route, fields, nbytes, now: self.now, writer: self.writer,
                     yield_at: self.yield_at })
    }
}

fn entry<'py>(slf: &Bound<'py, RouterState>, group: &Bound<'py, PyString>, look_up: bool)
              -> PyResult<Option<Entry<'py>>> {
    let py = slf.py();
    let (routes, keys, clock, native_clock, limits, max_call_bytes, writer, yield_at) = {
        let s = slf.borrow();
        if s.closed {
            return Ok(None);
        }
        let (Some(clock), Some(writer)) = (&s.clock, &s.writer) else { return Ok(None) };
        (s.routes.clone_ref(py).into_bound(py), s.keys.clone_ref(py).into_bound(py),
         clock.clone_ref(py).into_bound(py), s.native_clock, s.limits.clone_ref(py),
         s.max_call_bytes, writer.clone_ref(py).into_bound(py), s.yield_at)
    };
    let route = match routes.get_item(group)? {
        Some(route) => route,
        // a group not seen lately: `CommitRouter.route` checks its name and caches its route
        None if look_up => slf.call_method1(intern!(py, "route"), (group,))?,
        None => return Ok(None),
    };
    let Ok(route) = route.cast_into::<Route>() else { return Ok(None) };
    let Some((now, stamp)) = read_clock(&clock, native_clock)? else { return Ok(None) };
    Ok(Some(Entry { route, now, stamp, keys, limits, max_call_bytes, writer, yield_at }))
}

/// The store's clock read: the time and the object it gave (an int made here for
/// `clock_ms`, `native`, read without a call), or None for a clock of another type (the
/// Python path's, which reads the clock again).
pub(crate) fn read_clock<'py>(clock: &Bound<'py, PyAny>, native: bool)
                   -> PyResult<Option<(i64, Bound<'py, PyAny>)>> {
    if native {
        let now = now_ms();
        return Ok(Some((now, PyInt::new(clock.py(), now).into_any())));
    }
    let stamp = clock.call0()?;
    Ok(stamp.extract::<i64>().ok().map(|now| (now, stamp)))
}

/// A member's place in its group, as an OffsetCommit names it: generation (a KIP-848
/// member's epoch), member id, static instance id.
pub(crate) struct Member<'a> {
    pub generation: i32,
    pub member_id: &'a str,
    pub instance: Option<&'a str>,
}

impl Member<'_> {
    /// Kafka's simple consumer: generation -1, no member, no instance
    pub fn standalone(&self) -> bool {
        self.generation == -1 && self.member_id.is_empty() && self.instance.is_none()
    }
}

/// `offsetlog.store.routing.fencing`, looked up once
static FENCING: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// The wire's plain `entries` of `group` as the usual call (route, record fields, size bound,
/// time), or None where `entry` or `Entry::with` says so (a route not cached unless
/// `look_up`).
pub(crate) fn plain_call<'py>(slf: &Bound<'py, RouterState>, group: &Bound<'py, PyString>,
                   entries: &[WireEntry<'_>], look_up: bool) -> PyResult<Option<Usual<'py>>> {
    let Some(at) = entry(slf, group, look_up)? else { return Ok(None) };
    let fields = commits::plain_fields_of(slf.py(), group, entries, &at.stamp, Some(at.keys.get()),
                                          &at.limits)?;
    Ok(at.with(fields))
}

/// `routing.fencing`'s check of `member`'s commit of `partitions` to `group` at `now` (the
/// coordinator's, in full; a transaction's with `transactional`), built to be run in the
/// commit's lock hold: what a member's commit that the steady board does not pass is checked
/// by.
pub(crate) fn fencing<'py>(part: &Bound<'py, PartitionState>, group: &Bound<'py, PyString>,
                           member: &Member<'_>, now: i64, transactional: bool,
                           partitions: lone::Partitions<'_, 'py>)
                           -> PyResult<Bound<'py, PyAny>> {
    let py = part.py();
    let fencing = FENCING.get_or_try_init(py, || {
        py.import("offsetlog.store.routing")?.getattr("fencing").map(Bound::unbind)
    })?;
    let partitions = match partitions {
        lone::Partitions::Offsets(offsets) => offsets.clone(),
        lone::Partitions::Wire(entries) => {
            PyList::new(py, entries.iter().map(|e| (e.0, e.1)))?.into_any()
        }
    };
    fencing.bind(py).call1((part, group, member.generation, member.member_id, member.instance,
                            now, transactional, partitions))
}

/// The usual call, committed by the lone commit (which waits for it to be durable, or for
/// `timeout`, None or seconds, if it has to queue) under `check`, run in its lock hold: true;
/// false when the check declined it (nothing done).
pub(crate) fn commit_lone(slf: &Bound<'_, RouterState>, call: Usual<'_>, timeout: &Bound<'_, PyAny>,
               check: lone::Check<'_, '_>) -> PyResult<bool> {
    let py = slf.py();
    let nbytes = PyInt::new(py, call.nbytes as u64);
    let route = call.route.get();
    let fields = PyTuple::new(py, call.fields)?;
    lone::lone(py, &call.writer, route.part.bind(py), fields.as_any(), nbytes.as_any(),
               call.now, timeout, check)
}
