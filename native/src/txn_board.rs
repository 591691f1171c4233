//! The open transactions of the store's transactional producers (`TxnBoard`): what the wire's
//! TxnOffsetCommit needs to be written without a Python call.
//!
//! The store's `Transactions` part stays the single writer of transaction state. A handle
//! publishes its producer here once its log partition for a group is durably part of its
//! Ongoing transaction (`Transaction._join`, with the id's lock held), and the part clears the
//! id before it writes any other state of it (`Transactions.write_state`: a decision, a
//! prepare, an epoch bump, a timeout's abort), so an entry is only ever a fact the part
//! stated since the id's last change.
//!
//! A commit checks the board in the lock hold of the group's log partition that places its
//! record in the log. A marker is queued in that partition only after the decision's state
//! record, so after the board was cleared: a commit that passed the board is in the log
//! before its transaction's marker, as a commit that took the id's lock would be.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TxnBoard>()
}

/// What the store stated of one transactional id's open transaction.
struct Open {
    producer_id: i64,
    producer_epoch: i16,
    /// the log partitions durably in the transaction (its groups' offsets may go there)
    partitions: HashSet<u32>,
}

/// (A closed store's commits never reach the board: the router's entry refuses them first.)
#[derive(Default)]
pub(crate) struct Board {
    open: HashMap<String, Open>,
}

pub(crate) type Shared = Arc<Mutex<Board>>;

/// (no code panics while holding the lock, so a poisoned one holds consistent data)
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Board> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Board {
    /// Whether `producer_id` at `producer_epoch` is `transactional_id`'s producer, in an open
    /// transaction that log partition `partition` is durably part of. False: the store's
    /// handle decides (with every rule, including the errors).
    pub fn check(&self, transactional_id: &str, producer_id: i64, producer_epoch: i16,
                 partition: u32) -> bool {
        self.open.get(transactional_id).is_some_and(|o| {
            o.producer_id == producer_id && o.producer_epoch == producer_epoch
                && o.partitions.contains(&partition)
        })
    }
}

/// The store's board of open transactions (see the module).
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct TxnBoard {
    pub(crate) shared: Shared,
}

#[pymethods]
impl TxnBoard {
    #[new]
    fn new() -> Self {
        TxnBoard { shared: Arc::new(Mutex::new(Board::default())) }
    }

    /// The store states that `transactional_id`'s producer is `producer_id` at
    /// `producer_epoch`, in an Ongoing transaction that `partitions` are durably part of.
    fn publish(&self, transactional_id: String, producer_id: i64, producer_epoch: i16,
               partitions: Vec<u32>) {
        lock(&self.shared).open.insert(transactional_id, Open {
            producer_id, producer_epoch, partitions: partitions.into_iter().collect(),
        });
    }

    /// Forget `transactional_id`: its state is about to change.
    fn clear(&self, transactional_id: &str) {
        lock(&self.shared).open.remove(transactional_id);
    }

    /// `Board::check` (for tests)
    fn check(&self, transactional_id: &str, producer_id: i64, producer_epoch: i16,
             partition: u32) -> bool {
        lock(&self.shared).check(transactional_id, producer_id, producer_epoch, partition)
    }

    /// How many transactional ids are on the board.
    fn __len__(&self) -> usize {
        lock(&self.shared).open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> Board {
        let mut b = Board::default();
        b.open.insert("t".into(), Open { producer_id: 7, producer_epoch: 2,
                                          partitions: [1, 4].into_iter().collect() });
        b
    }

    #[test]
    fn the_stated_producer_passes_in_its_partitions_only() {
        let b = board();
        assert!(b.check("t", 7, 2, 1));
        assert!(b.check("t", 7, 2, 4));
        assert!(!b.check("t", 7, 2, 0)); // not in the transaction yet
        assert!(!b.check("t", 7, 1, 1)); // a stale epoch
        assert!(!b.check("t", 7, 3, 1)); // an epoch the store never stated
        assert!(!b.check("t", 8, 2, 1)); // another producer
        assert!(!b.check("u", 7, 2, 1)); // another id
    }
}
