//! Pipelined lone commits: a `commit_sync` that finds its log partition's leader to be a lone
//! commit (`lone`) with its durable write in flight writes its own batch right behind that one,
//! at the next log offsets and the next bytes of the active segment, while the first is still
//! on its way to the disk; it then takes the leadership when the leader ends it, and finishes
//! and applies its write as any leader would.
//!
//! Why: two groups' committers sharing a log partition otherwise take turns, one write each at
//! the disk's latency, where each alone gets a write per latency: the bench's 32 groups share
//! 30 log partitions, and its row with every group apart ran 6-16% faster (bench/RESULTS.md,
//! twenty-fifth session, has what the pipeline gets back).
//!
//! What keeps the protocol's guarantees (`offsetlog/store/lone_commit.py`):
//!
//! * one follower at most, and only behind a lone commit's usual write (`Plan`: the space
//!   reserved, no roll due, `RWF_DSYNC` known to work there), under `fsync="always"`, with
//!   nothing queued, no one waiting for exclusive use and the async writer not scheduled;
//! * the leader publishes where its write ends (`publish`, under `part.lock`), so the follower
//!   takes the log offsets and segment bytes after it; a follower whose batch would not fit
//!   there writes nothing ahead, and writes as a leader once it holds the leadership;
//! * the leadership is never given up between the two: the leader hands it to the follower
//!   (`PartitionState.leadership_ends`, on success and in the failure path alike), which ends
//!   it; drains, exclusive users and queued rounds wait for both;
//! * the table and the log's state (the segment's size, the next offset) move in log order:
//!   the follower moves them for its write only once it holds the leadership, when the
//!   leader's have moved;
//! * nothing after an unknown state is acknowledged: a follower that takes over from a failed
//!   leader (the store then poisoned) fails too, without applying. Its bytes may be on disk
//!   behind a failed or torn write: the recovery point never covers them (it follows the next
//!   offset, which never moved past the failed write), so recovery cuts them with the torn
//!   tail (docs/FORMAT.md, "Recovery points").

use parking_lot::{Condvar, Mutex};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::exceptions::PyRuntimeError;

use crate::lone::{self, Plan};
use crate::state::{LogState, PartitionState, SegmentState, WriterState};

/// Where the leader's write in flight ends: the offset and segment bytes a follower takes.
pub(crate) struct Pipe {
    /// the log offset after the leader's batch
    end_offset: i64,
    /// the segment's size after it
    end_size: i64,
    /// the active segment it goes to
    segment: Py<SegmentState>,
}

impl Pipe {
    fn clone_ref(&self, py: Python<'_>) -> Pipe {
        Pipe { end_offset: self.end_offset, end_size: self.end_size,
               segment: self.segment.clone_ref(py) }
    }
}

/// Where a follower waits for the leadership, without the GIL: set by the leader that hands it
/// over, taken back by the follower when it wakes (so one baton serves every follower).
#[derive(Default)]
pub(crate) struct Baton {
    passed: Mutex<bool>,
    handed: Condvar,
}

impl Baton {
    pub fn pass(&self) {
        *self.passed.lock() = true;
        self.handed.notify_one();
    }

    /// Block, the GIL released, until the leadership is handed over. Not interrupted by
    /// signals: the leader ends it once its write returns and its batch is applied, and a
    /// follower that left before would leave the leadership with no one.
    fn wait(&self, py: Python<'_>) {
        py.detach(|| {
            let mut passed = self.passed.lock();
            while !*passed {
                self.handed.wait(&mut passed);
            }
            *passed = false;
        });
    }
}

/// (`part.lock` held, by a lone commit that leads with `plan` made) Let one commit write behind
/// this one: its batch ends at log offset `after`, at `len` bytes past the plan's offset.
pub(crate) fn publish(py: Python<'_>, part: &Bound<'_, PartitionState>, plan: &Plan<'_>,
                      after: i64, len: i64) -> PyResult<()> {
    let lock = part.borrow().lock.clone_ref(py);
    let lock = lock.get();
    lock.lock(py)?;
    part.borrow_mut().pipe = Some(Pipe { end_offset: after, end_size: plan.at + len,
                                         segment: plan.active.clone().unbind() });
    lock.unlock()
}

/// (`part.lock` held, in a busy partition) Whether a commit may follow the leader's write: if
/// so, it is the follower now and this is where it writes.
pub(crate) fn may_follow(py: Python<'_>, writer: &Bound<'_, WriterState>,
                         p: &mut PartitionState) -> PyResult<Option<Pipe>> {
    let Some(pipe) = p.pipe.as_ref() else { return Ok(None) };
    if p.follower || !p.leader_active || p.async_scheduled || p.exclusive_waiting != 0
        || p.idle_waiters != 0 || !writer.borrow().fsync_always
        || p.queue.bind(py).is_truthy()?
    {
        return Ok(None);
    }
    let pipe = pipe.clone_ref(py);
    p.follower = true;
    Ok(Some(pipe))
}

/// A follower's commit (`lone::lone` decided it, `may_follow`): framed at the pipe's offset
/// and written behind the leader's write if it fits there, then, once the leadership is
/// handed over, finished (or written, if it did not fit), applied and the leadership ended, as
/// a lone commit's. True once applied; a failure (its own, or the leader's that poisoned the
/// store) goes to the failure path, which raises.
pub(crate) fn follow<'py>(py: Python<'py>, writer: &Bound<'py, WriterState>,
                          part: &Bound<'py, PartitionState>, pipe: Pipe,
                          fields: &Bound<'py, PyAny>, timestamp: i64,
                          producer: Option<(i64, i16)>) -> PyResult<bool> {
    let log = part.borrow().log.clone_ref(py).into_bound(py);
    // (nothing here may skip the wait below: the leader hands the leadership over whatever
    // happens, and only the follower can end it)
    let ahead = (|| -> PyResult<_> {
        let (data, after) = lone::frame(py, pipe.end_offset, timestamp, fields, producer)?;
        let state = log.cast::<LogState>()?;
        let limit = {
            let s = state.borrow();
            match &s.active {
                Some(active) if !s.dirty && active.is(&pipe.segment) => Some(s.segment_bytes),
                _ => None,
            }
        };
        let segment = pipe.segment.bind(py).clone();
        let plan = match limit {
            Some(limit) => lone::plan_at(py, state, segment, Some(pipe.end_size), limit,
                                         data.as_bytes().len() as i64)?,
            None => None,
        };
        let result = plan.as_ref().map(|plan| plan.write(py, &data));
        Ok((data, after, plan, result))
    })();
    // (no borrow of the partition's state is held while the GIL is released)
    let baton = part.borrow().baton.clone();
    baton.wait(py);

    // The leadership is ours.
    let written = (|| -> PyResult<i64> {
        if !writer.borrow().usable(py) {
            // (the leader failed: our write may stand behind an unknown state)
            writer.call_method0(intern!(py, "check_usable"))?;
        }
        let (data, after, plan, result) = ahead?;
        let state = log.cast::<LogState>()?;
        if state.borrow().next_offset != pipe.end_offset {
            return Err(PyRuntimeError::new_err("the leader's write did not end where published"));
        }
        match (plan, result) {
            (Some(plan), Some(result)) => {
                if plan.active.borrow().size != plan.at
                    || !state.borrow().active.as_ref().is_some_and(|a| a.is(&plan.active))
                {
                    return Err(PyRuntimeError::new_err(
                        "the leader's write did not end where published"));
                }
                plan.finish(&data, result, after)?;
            }
            // (followers exist under fsync="always" only: written as the leader would have)
            _ => lone::append_durable(py, &log, &data, after)?,
        }
        Ok(pipe.end_offset)
    })();
    let base = written.map_err(|e| lone::failed(py, writer.as_any(), part, e, "write to"))?;
    lone::apply_and_end(py, writer, part, base, fields, producer)
}
