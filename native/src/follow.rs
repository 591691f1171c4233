//! A lone commit's follower: a `commit_sync` that finds its log partition's lone commit
//! (`lone`) in the middle of its durable write writes its own batch right behind it, at the
//! same time, instead of queueing for the round after it.
//!
//! Why: two groups whose names hash to one log partition took turns at the disk. Each commit
//! found its partner's write in flight, queued, and was written alone once that write ended,
//! so the two ran at half the pace of a group alone in its partition (the many-groups case's
//! 32 groups fill 30 of 50 partitions: 3% of its commits queued, about 5% of its throughput
//! at 32 threads, bench/RESULTS.md). Two `pwritev2(RWF_DSYNC)` calls into one ext4 file at
//! disjoint positions run side by side as two files' do (46,880 against 49,133 writes/s at
//! 32 threads, two to a file), so the follower's write need not wait for its predecessor's.
//!
//! What keeps the protocol's guarantees (`offsetlog/store/group_commit.py`):
//!
//! * **order**: the lone commit publishes where its batch ends (`Tail`: the log offset after
//!   it and the file position after it) once it has framed it; the follower takes that tail in
//!   the lock hold that runs its fencing check, so its offsets come right after the
//!   predecessor's, and its batch lands right after it in the file;
//! * **one leader**: the partition's leadership (`leader_active`) passes from the predecessor
//!   to the follower without being given up (`Baton`), so no round, swap or close runs while
//!   either writes, and what queued meanwhile is handed on when the last of them ends;
//! * **visibility only once durable, in order**: the follower moves the segment's size and the
//!   log's next offset, and applies its offsets, only after its predecessor has done all three
//!   (the predecessor's `end_leadership` passes the baton once its offsets are applied). The
//!   store's recovery point (`durable_offset`, the log's next offset) never covers a batch
//!   before one that is not yet durable;
//! * **nothing acknowledged after a failure**: a predecessor that fails poisons the store
//!   before it passes the baton, and the follower then fails too, whatever its own write did.
//!   Its batch may be on disk past a hole where the predecessor's should be: both were past
//!   the recovery point, so recovery cuts the log at the hole as a torn tail (docs/FORMAT.md,
//!   "Recovery"), as it does for a disk that persisted pages out of order;
//! * **timeouts**: a call with a timeout never follows. A follower's batch is on its way to
//!   the disk and only the follower can apply it, so it cannot give up waiting for its
//!   predecessor; such a call queues instead, and a `CommitTimeoutError` still leaves it
//!   queued, as the protocol has it;
//! * **no starvation**: a follower is taken only while nothing is queued, no one waits for
//!   exclusive use and the async writer is not scheduled, and there is at most one waiting
//!   follower; so two committers cannot pass the leadership back and forth past a third.

use std::sync::{Arc, Condvar, Mutex};

use pyo3::prelude::*;

/// Where the batch being written by the partition's leader ends: the log offset after its
/// records and the file position after its bytes, in the active segment.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tail {
    pub after: i64,
    pub end: i64,
}

/// The leadership's hand-over from a predecessor to its follower: passed once, with whether
/// the predecessor's batch was written and applied (true) or the store was poisoned (false).
pub struct Baton {
    passed: Mutex<Option<bool>>,
    turn: Condvar,
}

impl Baton {
    pub fn new() -> Arc<Self> {
        Arc::new(Baton { passed: Mutex::new(None), turn: Condvar::new() })
    }

    /// The predecessor is done (`ok`) or failed: the follower's turn.
    pub fn pass(&self, ok: bool) {
        // (a poisoned mutex only means a panic elsewhere; the flag it guards is still sound)
        let mut passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
        *passed = Some(ok);
        self.turn.notify_one();
    }

    /// Wait, with the GIL released, until the predecessor passes; what it passed. A
    /// predecessor always passes: every way its commit ends (applied, a failed write, a
    /// failed apply) goes through the place that passes the baton (`lone`).
    pub fn wait(&self, py: Python<'_>) -> bool {
        py.detach(|| self.wait_released())
    }

    /// `wait`, for a caller that has released the GIL.
    pub fn wait_released(&self) -> bool {
        let mut passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(ok) = *passed {
                return ok;
            }
            passed = self.turn.wait(passed).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A commit that follows (`lone::decide`): the baton its predecessor will pass, and where its
/// own batch goes (the predecessor's tail).
pub struct Follow {
    pub baton: Arc<Baton>,
    pub tail: Tail,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baton_wakes_its_waiter_with_what_was_passed() {
        Python::attach(|py| {
            for ok in [true, false] {
                let baton = Baton::new();
                let passer = {
                    let baton = baton.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        baton.pass(ok);
                    })
                };
                assert_eq!(baton.wait(py), ok);
                passer.join().unwrap();
                // (passed before the wait: no wake-up is lost)
                let early = Baton::new();
                early.pass(ok);
                assert_eq!(early.wait(py), ok);
            }
        });
    }
}
