//! The steady members of a log partition's classic groups (`SteadyBoard`): what the wire's
//! Heartbeat and a member's OffsetCommit need to be answered without a Python call.
//!
//! The Python coordinator stays the single writer of group state. It publishes a member here
//! only when it has just answered that member's Heartbeat with no error in a Stable group (the
//! store's `Groups.heartbeat`), and it clears the whole board at the start of every call that
//! may change a group (a join, a sync, a leave, a deletion, retention, a deadline that fires,
//! a reload): an entry is only ever a fact the coordinator stated since its last change. What
//! the native path adds is a heartbeat's time: a check that passes here records a stamp, and
//! the coordinator takes the stamps (`take`) before it decides anything, restarting those
//! members' sessions as of their stamps.
//!
//! The boards sit behind one mutex, held for a check, a publication or a take and never
//! across Python code or I/O, so the request loop checks a Heartbeat without the GIL (where
//! the store's clock is the system's). A check may fall between a coordinator call's first
//! take and its end; such a call either cleared the board first (then nothing passes) or
//! changes no group unless a deadline fires, which clears the board before it changes
//! anything: a heartbeat passed in between is one the coordinator would have answered the
//! same way just before, and its stamp is taken at the next call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SteadyBoards>()?;
    m.add_class::<SteadyBoard>()
}

/// What the coordinator stated of one member of a Stable group.
struct Steady {
    generation: i32,
    /// its static instance id, if it is a static member
    instance: Option<String>,
    session_timeout_ms: i64,
    /// when its session lapses (as the coordinator had it, pushed later by stamps here)
    deadline_ms: i64,
}

/// One log partition's board: its steady members (group -> member id -> what is known of
/// it) and the heartbeats passed here that its coordinator has not taken yet.
#[derive(Default)]
struct PartBoard {
    groups: HashMap<String, HashMap<String, Steady>>,
    /// group -> member -> the time of its latest heartbeat or commit that passed here (only
    /// the latest counts, so a client that heartbeats in a tight loop costs no memory)
    stamps: HashMap<String, HashMap<String, i64>>,
}

/// Every log partition's board, behind one mutex (held for a lookup or an update, never
/// across Python code or I/O).
#[derive(Default)]
pub(crate) struct Boards {
    /// the store is closed: nothing passes
    pub(crate) closed: bool,
    parts: Vec<PartBoard>,
    /// the partition of each group on a board (a group's partition never changes)
    partition_of: HashMap<String, usize>,
}

pub(crate) type Shared = Arc<Mutex<Boards>>;

/// (no code panics while holding the lock, so a poisoned one holds consistent data)
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Boards> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Boards {
    /// Whether a Heartbeat (or a member's OffsetCommit) of `member_id` in `group_id` at
    /// `generation`, naming static `instance` if any, at `now_ms`, is one the coordinator would
    /// accept as it stands: the member is on the board at that generation, the instance (if
    /// named) is its own, and its session has not lapsed. If so it is stamped (a heartbeat, as
    /// the coordinator counts it) and true. False changes nothing: the coordinator decides
    /// (with every rule, including the errors).
    pub fn check(&mut self, group_id: &str, member_id: &str, generation: i32,
                 instance: Option<&str>, now_ms: i64) -> bool {
        if self.closed {
            return false;
        }
        let Some(part) = self.partition_of.get(group_id).and_then(|&p| self.parts.get_mut(p))
        else {
            return false;
        };
        let Some(steady) = part.groups.get_mut(group_id).and_then(|g| g.get_mut(member_id))
        else {
            return false;
        };
        if steady.generation != generation || now_ms >= steady.deadline_ms
            || instance.is_some_and(|i| steady.instance.as_deref() != Some(i))
        {
            return false;
        }
        steady.deadline_ms =
            steady.deadline_ms.max(now_ms.saturating_add(steady.session_timeout_ms));
        stamp(&mut part.stamps, group_id, member_id, now_ms);
        true
    }

    fn publish(&mut self, partition: usize, group_id: String, member_id: String,
               steady: Steady) {
        let Some(part) = self.parts.get_mut(partition) else { return };
        self.partition_of.entry(group_id.clone()).or_insert(partition);
        part.groups.entry(group_id).or_default().insert(member_id, steady);
    }

    /// `partition`'s stamps, and its members forgotten unless `keep`.
    fn take(&mut self, partition: usize, keep: bool) -> Vec<(String, String, i64)> {
        let Some(part) = self.parts.get_mut(partition) else { return Vec::new() };
        if !keep {
            for group in part.groups.keys() {
                self.partition_of.remove(group);
            }
            part.groups.clear();
        }
        std::mem::take(&mut part.stamps).into_iter()
            .flat_map(|(group, members)| {
                members.into_iter().map(move |(member, at)| (group.clone(), member, at))
            })
            .collect()
    }
}

/// `at` as `member_id`'s latest stamp in `group_id` (a later one than it had, if any).
fn stamp(stamps: &mut HashMap<String, HashMap<String, i64>>, group_id: &str, member_id: &str,
         at: i64) {
    // (looked up by reference: a key is allocated only for a member's first stamp)
    let members = match stamps.get_mut(group_id) {
        Some(members) => members,
        None => stamps.entry(group_id.to_owned()).or_default(),
    };
    match members.get_mut(member_id) {
        Some(latest) => *latest = (*latest).max(at),
        None => {
            members.insert(member_id.to_owned(), at);
        }
    }
}

/// The store's steady boards, one per log partition (`partition(i)` is one's handle), shared
/// by the coordinators (through the handles), the commit path and the wire's request loops.
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct SteadyBoards {
    pub(crate) shared: Shared,
}

#[pymethods]
impl SteadyBoards {
    #[new]
    fn new(partitions: usize) -> Self {
        let parts = (0..partitions).map(|_| PartBoard::default()).collect();
        SteadyBoards { shared: Arc::new(Mutex::new(Boards { parts, ..Boards::default() })) }
    }

    /// Log partition `index`'s board.
    fn partition(&self, index: usize) -> PyResult<SteadyBoard> {
        if index >= lock(&self.shared).parts.len() {
            return Err(PyIndexError::new_err(format!("no log partition {index}")));
        }
        Ok(SteadyBoard { shared: self.shared.clone(), partition: index })
    }

}

/// One log partition's steady board: its classic coordinator's to publish members on and
/// take stamps from (see the module).
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct SteadyBoard {
    shared: Shared,
    partition: usize,
}

#[pymethods]
impl SteadyBoard {
    /// The coordinator states that `member_id` of Stable `group_id` is at `generation`, is the
    /// static member `instance` (or not static: None), and that its session of
    /// `session_timeout_ms` lapses at `deadline_ms`.
    #[pyo3(signature = (group_id, member_id, generation, instance, session_timeout_ms,
                        deadline_ms))]
    fn publish(&self, group_id: String, member_id: String, generation: i32,
               instance: Option<String>, session_timeout_ms: i64, deadline_ms: i64) {
        lock(&self.shared).publish(self.partition, group_id, member_id, Steady {
            generation, instance, session_timeout_ms, deadline_ms,
        });
    }

    /// The stamps not taken yet, each member's latest (None when there are none), and every
    /// member forgotten unless `keep`: the coordinator's call that may change a group begins
    /// here.
    fn take<'py>(&self, py: Python<'py>, keep: bool) -> PyResult<Option<Bound<'py, PyList>>> {
        let stamps = lock(&self.shared).take(self.partition, keep);
        if stamps.is_empty() {
            return Ok(None);
        }
        PyList::new(py, stamps.into_iter().map(|(group, member, at)| {
            (PyString::new(py, &group), PyString::new(py, &member), at)
        })).map(Some)
    }

    /// `Boards::check` (for the commit path's check, and tests)
    #[pyo3(signature = (group_id, member_id, generation, instance, now_ms))]
    pub fn check(&self, group_id: &str, member_id: &str, generation: i32,
                 instance: Option<&str>, now_ms: i64) -> bool {
        lock(&self.shared).check(group_id, member_id, generation, instance, now_ms)
    }

    /// How many members are on this board.
    fn __len__(&self) -> usize {
        lock(&self.shared).parts.get(self.partition)
            .map_or(0, |p| p.groups.values().map(HashMap::len).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady(generation: i32, instance: Option<&str>) -> Steady {
        Steady { generation, instance: instance.map(str::to_owned), session_timeout_ms: 10_000,
                 deadline_ms: 20_000 }
    }

    fn boards() -> Boards {
        let mut b = Boards { parts: vec![PartBoard::default(), PartBoard::default()],
                             ..Boards::default() };
        b.publish(1, "g".into(), "m".into(), steady(3, Some("i")));
        b.publish(1, "g".into(), "n".into(), steady(3, None));
        b.publish(0, "h".into(), "m".into(), steady(3, None));
        b
    }

    #[test]
    fn a_published_member_passes_and_is_stamped() {
        let mut b = boards();
        assert!(b.check("g", "m", 3, Some("i"), 15_000));
        assert!(b.check("g", "m", 3, None, 15_001));
        // (the latest of a member's stamps is the one that counts)
        assert_eq!(b.take(1, true), vec![("g".into(), "m".into(), 15_001)]);
        // the stamp pushed its session on: later than the published deadline now passes
        assert!(b.check("g", "m", 3, None, 24_000));
    }

    #[test]
    fn anything_else_is_left_to_the_coordinator_unstamped() {
        let mut b = boards();
        assert!(!b.check("g", "m", 2, None, 15_000)); // another generation
        assert!(!b.check("g", "m", 3, Some("j"), 15_000)); // another instance
        assert!(!b.check("g", "n", 3, Some("i"), 15_000)); // not static, named as one
        assert!(!b.check("g", "x", 3, None, 15_000)); // not on the board
        assert!(!b.check("x", "m", 3, None, 15_000)); // another group
        assert!(!b.check("g", "m", 3, None, 20_000)); // its session lapsed
        b.closed = true;
        assert!(!b.check("g", "n", 3, None, 15_000)); // a closed store
        assert!(b.parts.iter().all(|p| p.stamps.is_empty()));
    }

    #[test]
    fn a_take_clears_one_partition_and_keeps_nothing_it_took() {
        let mut b = boards();
        assert!(b.check("g", "n", 3, None, 15_000));
        assert!(b.check("h", "m", 3, None, 15_000));
        assert_eq!(b.take(1, true), vec![("g".into(), "n".into(), 15_000)]);
        assert!(b.take(1, true).is_empty());
        assert!(b.check("g", "n", 3, None, 15_001)); // kept
        assert_eq!(b.take(1, false).len(), 1);
        assert!(!b.check("g", "n", 3, None, 15_002)); // cleared
        assert!(!b.partition_of.contains_key("g"));
        assert!(b.check("h", "m", 3, None, 15_002)); // the other partition's is not
        assert_eq!(b.take(0, false), vec![("h".into(), "m".into(), 15_002)]);
    }
}
