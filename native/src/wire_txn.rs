//! The wire's TxnOffsetCommit, written in the native request loop (`wire_conn`, on plaintext
//! connections without an authorizer) when it is plain: every partition plain as the plain
//! OffsetCommit's (`wire_conn::plain_entries`), a group the store has routed lately, and a
//! producer the store's board of open transactions holds (`txn_board`) with the group's log
//! partition already in its transaction. Its offsets are then written pending by the lone
//! commit (`route_wire::commit_txn`), with no Python call but the table's pending apply and, for a
//! member the steady board does not pass, the coordinator's check.
//!
//! Anything else returns None before anything is written, and the Python handler
//! (`offsetlog.server.txn.txn_offset_commit`), which knows every rule, answers it: an unknown
//! or stale producer, a transaction not open, a group joining the transaction (its durable
//! state is written first), a bad partition.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::route;
use crate::route_wire;
use crate::wire_codec::{self, TxnOffsetCommit};
use crate::wire_conn::{coded, plain_entries, Plain};

/// The answer's bytes to a plain TxnOffsetCommit (see the module), or None for any other.
/// A fencing error from the group's check is coded by `conn.txn_commit_error(version,
/// error)`, as the Python handler codes it.
pub(crate) fn txn_commit(py: Python<'_>, conn: &Bound<'_, PyAny>, (router, topics): &Plain<'_>,
                         t: &TxnOffsetCommit) -> PyResult<Option<Vec<u8>>> {
    let Some(entries) = plain_entries(py, topics, &t.topics)? else { return Ok(None) };
    let group = PyString::new(py, &t.group_id);
    let member = route::Member { generation: t.generation, member_id: &t.member_id,
                                 instance: t.group_instance_id.as_deref() };
    let producer = (t.producer_id, t.producer_epoch);
    let code = match route_wire::commit_txn(router, &group, &entries, &member, &t.transactional_id,
                                       producer) {
        Ok(false) => return Ok(None),
        Ok(true) => 0,
        Err(error) => conn.call_method1(pyo3::intern!(py, "txn_commit_error"),
                                        (t.version, error.into_value(py)))?
                          .extract::<i16>()?,
    };
    wire_codec::encode_txn_offset_commit_response(t.correlation_id, t.version,
                                                  &coded(&t.topics, code))
        .map(Some)
        .map_err(PyValueError::new_err)
}
