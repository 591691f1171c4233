//! The wire server's entries into the store's router (`RouterState`, `route`): its plain
//! OffsetCommit (`commit_plain`), its TxnOffsetCommit (`commit_txn`), a steady member's
//! Heartbeat (`steady_heartbeat`, `steady_without_gil`) and the route a plain OffsetFetch
//! reads (`cached_route`). Each does what the store's own call would, or returns false (None)
//! with nothing done, so the request goes the Python path.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::lone;
use crate::route::{commit_lone, plain_call, read_clock, Member, Route, RouterState};
use crate::steady;
use crate::wire_conn::Entry as WireEntry;

/// The wire's plain OffsetCommit (`wire_conn`): `entries` (`wire_conn::Entry`'s, in request
/// order, no partition twice) committed for `group` as `OffsetStore.commit_sync`
/// commits them (the lone commit, the group's check in its lock hold: the route's standalone
/// check natively for a simple consumer, else `routing.fencing`'s, the coordinator's
/// `validate_offset_commit` or a KIP-848 member's epoch): true. False, with nothing done,
/// when it is not one here: the group's route is not cached (so its name was never checked:
/// the Python path checks it), the store is closed, an entry is not plain, the call is too
/// large, or it is a member's commit of the classic versions (`classic`) to a KIP-848 group
/// (the Python path answers what Kafka does to a consumer-protocol member's). Raises what
/// the commit raises (fencing first).
pub(crate) fn commit_plain(slf: &Bound<'_, RouterState>, group: &Bound<'_, PyString>,
                           entries: &[WireEntry<'_>], member: &Member<'_>, classic: bool)
                           -> PyResult<bool> {
    let py = slf.py();
    let Some(call) = plain_call(slf, group, entries, false)? else { return Ok(false) };
    if classic && !member.standalone() && call.route.get().consumer_group_here(py)? {
        return Ok(false);
    }
    let none = py.None().into_bound(py); // (no timeout: a wire commit waits as Kafka's does)
    if member.standalone() {
        let route = call.route.clone();
        commit_lone(slf, call, &none, lone::Check::Standalone(route.get()))?;
    } else {
        let part = call.route.get().part.clone_ref(py).into_bound(py);
        let now = call.now;
        let partitions = lone::Partitions::Wire(entries);
        commit_lone(slf, call, &none,
                    lone::Check::Member { part: &part, group, member, now, partitions })?;
    }
    Ok(true)
}

/// The wire's TxnOffsetCommit: `entries` (as `commit_plain` takes them) of `group`, written
/// pending in the open transaction of `transactional_id`'s producer `producer` (its id and
/// epoch), as the store's `Transaction.commit_offsets` writes them (the lone commit, its
/// checks in its lock hold: the board of open transactions, then the group's check for a
/// transactional commit): true. False, with nothing done, when it is not one here: what
/// `commit_plain` leaves to the Python path but a group not routed lately, and a producer
/// the board does not hold in an open transaction with the group's log partition (the
/// store's handle decides, with its errors). Raises what the commit raises (a bad group
/// id, the group's fencing).
pub(crate) fn commit_txn(slf: &Bound<'_, RouterState>, group: &Bound<'_, PyString>,
                         entries: &[WireEntry<'_>], member: &Member<'_>,
                         transactional_id: &str, producer: (i64, i16)) -> PyResult<bool> {
    let py = slf.py();
    let Some(board) = slf.borrow().txn.clone() else { return Ok(false) };
    // (a group not routed lately is routed here: its name checked, a bad one raising what
    // the Python handler answers first; AddOffsetsToTxn does not route the group it adds)
    let Some(call) = plain_call(slf, group, entries, true)? else { return Ok(false) };
    let route = call.route.clone();
    let route = route.get();
    let part = route.part.clone_ref(py).into_bound(py);
    let txn = lone::Txn { board: &board, transactional_id, producer_id: producer.0,
                          producer_epoch: producer.1, partition: route.partition, route,
                          part: &part, group, member, now: call.now, entries };
    commit_lone(slf, call, &py.None().into_bound(py), lone::Check::Txn(&txn))
}

/// The wire's Heartbeat of `member` in `group` at the store's clock's time, answered with no
/// error if the store's steady boards (`steady`) pass it: true, and the heartbeat stamped for
/// the coordinator. False, with nothing done, for any other (the Python path answers it): a
/// closed store, a clock that is not a number, a member the boards do not hold as it is
/// named. (The request loop passes a steady member's Heartbeat without the GIL where the
/// clock is `clock_ms`: `steady_without_gil`; this is the way with any other clock.)
pub(crate) fn steady_heartbeat(slf: &Bound<'_, RouterState>, group: &str, member: &Member<'_>)
                               -> PyResult<bool> {
    let py = slf.py();
    let (steady, clock, native_clock) = {
        let s = slf.borrow();
        let Some(steady) = s.steady.clone() else { return Ok(false) };
        let Some(clock) = &s.clock else { return Ok(false) };
        (steady, clock.clone_ref(py).into_bound(py), s.native_clock)
    };
    let Some((now, _)) = read_clock(&clock, native_clock)? else { return Ok(false) };
    let passed = steady::lock(&steady).check(group, member.member_id, member.generation,
                                             member.instance, now);
    Ok(passed)
}

/// The store's steady boards, if its clock is `clock_ms` (read without the GIL): what the
/// request loop checks a Heartbeat against without the GIL, at `now_ms()`.
pub(crate) fn steady_without_gil(slf: &Bound<'_, RouterState>) -> Option<steady::Shared> {
    let s = slf.borrow();
    if s.native_clock { s.steady.clone() } else { None }
}

/// The cached route of `group` on an open store, or None: a group the store has not routed
/// lately, so whose name it has not checked (the Python path checks it), or a closed store.
/// (The wire's plain OffsetFetch, `wire_fetch`: a read, so no clock.)
pub(crate) fn cached_route<'py>(slf: &Bound<'py, RouterState>, group: &Bound<'py, PyString>)
                                -> PyResult<Option<Bound<'py, Route>>> {
    let routes = {
        let s = slf.borrow();
        if s.closed {
            return Ok(None);
        }
        s.routes.clone_ref(slf.py()).into_bound(slf.py())
    };
    Ok(routes.get_item(group)?.and_then(|route| route.cast_into::<Route>().ok()))
}
