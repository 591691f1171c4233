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
//! Both sides work under the partition's lock, with the GIL held, so a check here and a
//! coordinator's call never interleave.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
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

/// A log partition's steady members (group -> member id -> what is known of it) and the
/// heartbeats checked here that the coordinator has not taken yet.
#[pyclass(module = "offsetlog.log._native")]
#[derive(Default)]
pub struct SteadyBoard {
    groups: HashMap<String, HashMap<String, Steady>>,
    /// `(group, member, time)` of each heartbeat or commit that passed here
    stamps: Vec<(String, String, i64)>,
}

#[pymethods]
impl SteadyBoard {
    #[new]
    fn new() -> Self {
        SteadyBoard::default()
    }

    /// The coordinator states that `member_id` of Stable `group_id` is at `generation`, is the
    /// static member `instance` (or not static: None), and that its session of
    /// `session_timeout_ms` lapses at `deadline_ms`.
    #[pyo3(signature = (group_id, member_id, generation, instance, session_timeout_ms,
                        deadline_ms))]
    fn publish(&mut self, group_id: String, member_id: String, generation: i32,
               instance: Option<String>, session_timeout_ms: i64, deadline_ms: i64) {
        self.groups.entry(group_id).or_default().insert(member_id, Steady {
            generation, instance, session_timeout_ms, deadline_ms,
        });
    }

    /// The stamps not taken yet, oldest first (None when there are none), and every entry
    /// forgotten unless `keep`: the coordinator's call that may change a group begins here.
    fn take<'py>(&mut self, py: Python<'py>, keep: bool) -> PyResult<Option<Bound<'py, PyList>>> {
        if !keep {
            self.groups.clear();
        }
        if self.stamps.is_empty() {
            return Ok(None);
        }
        let stamps = std::mem::take(&mut self.stamps);
        PyList::new(py, stamps.into_iter().map(|(group, member, at)| {
            (PyString::new(py, &group), PyString::new(py, &member), at)
        })).map(Some)
    }

    /// (for tests and the Python path's checks) `check` with a Python call's arguments
    #[pyo3(name = "check", signature = (group_id, member_id, generation, instance, now_ms))]
    fn py_check(&mut self, group_id: &str, member_id: &str, generation: i32,
                instance: Option<&str>, now_ms: i64) -> bool {
        self.check(group_id, member_id, generation, instance, now_ms)
    }

    /// How many members are on the board.
    fn __len__(&self) -> usize {
        self.groups.values().map(HashMap::len).sum()
    }
}

impl SteadyBoard {
    /// Whether a Heartbeat (or a member's OffsetCommit) of `member_id` in `group_id` at
    /// `generation`, naming static `instance` if any, at `now_ms`, is one the coordinator would
    /// accept as it stands: the member is on the board at that generation, the instance (if
    /// named) is its own, and its session has not lapsed. If so it is stamped (a heartbeat, as
    /// the coordinator counts it) and true. False changes nothing: the coordinator decides
    /// (with every rule, including the errors).
    pub fn check(&mut self, group_id: &str, member_id: &str, generation: i32,
                 instance: Option<&str>, now_ms: i64) -> bool {
        let Some(steady) = self.groups.get_mut(group_id).and_then(|g| g.get_mut(member_id))
        else {
            return false;
        };
        if steady.generation != generation || now_ms >= steady.deadline_ms
            || instance.is_some_and(|i| steady.instance.as_deref() != Some(i))
        {
            return false;
        }
        steady.deadline_ms = steady.deadline_ms.max(now_ms.saturating_add(steady.session_timeout_ms));
        self.stamps.push((group_id.to_owned(), member_id.to_owned(), now_ms));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> SteadyBoard {
        let mut b = SteadyBoard::default();
        b.publish("g".into(), "m".into(), 3, Some("i".into()), 10_000, 20_000);
        b.publish("g".into(), "n".into(), 3, None, 10_000, 20_000);
        b
    }

    #[test]
    fn a_published_member_passes_and_is_stamped() {
        let mut b = board();
        assert!(b.check("g", "m", 3, Some("i"), 15_000));
        assert!(b.check("g", "m", 3, None, 15_001));
        assert_eq!(b.stamps, vec![("g".into(), "m".into(), 15_000), ("g".into(), "m".into(), 15_001)]);
        // the stamp pushed its session on: later than the published deadline now passes
        assert!(b.check("g", "m", 3, None, 24_000));
    }

    #[test]
    fn anything_else_is_left_to_the_coordinator_unstamped() {
        let mut b = board();
        assert!(!b.check("g", "m", 2, None, 15_000)); // another generation
        assert!(!b.check("g", "m", 3, Some("j"), 15_000)); // another instance
        assert!(!b.check("g", "n", 3, Some("i"), 15_000)); // not static, named as one
        assert!(!b.check("g", "x", 3, None, 15_000)); // not on the board
        assert!(!b.check("h", "m", 3, None, 15_000)); // another group
        assert!(!b.check("g", "m", 3, None, 20_000)); // its session lapsed
        assert!(b.stamps.is_empty());
    }

    #[test]
    fn clearing_keeps_the_stamps_for_the_coordinator() {
        let mut b = board();
        assert!(b.check("g", "n", 3, None, 15_000));
        b.groups.clear();
        assert!(!b.check("g", "n", 3, None, 15_001));
        assert_eq!(b.stamps.len(), 1);
    }
}
