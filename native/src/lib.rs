//! `offsetlog.log._native`: the byte path of offsetlog, in Rust (docs/DESIGN.md, "Python and
//! Rust"). Python keeps the policies (what a torn tail or corruption means, salvage, when to
//! sync); this crate holds the bytes: a batch's framing and CRCs (`batch`), its payload's
//! msgpack (`msgpack`), the loops that read a segment's batches (`scan`), and the
//! live path's commit calls framed and applied from their fields (`commits`), the
//! durable write of a round, its wait without the GIL (`write`), and the lone commit's pass
//! with the usual durable write (`lone`) and its checks for a test's hooks (`hooks`), a `commit_async` call's queueing (`async_commit`),
//! the usual commit call's entry from the store's API on and a group's route (`route`),
//! the hot state they read (`state`), the io_uring ring the store's async writer writes
//! through when an event loop leads it (`uring`, Linux), and the wire server's plaintext
//! request loop with its hot requests' codec (`wire_conn`, `wire_codec`), and the
//! classic groups' steady members that loop answers a Heartbeat from (`steady`), and the open
//! transactions it writes a TxnOffsetCommit in (`txn_board`, `wire_txn`).
//!
//! No panic crosses into Python: reads of untrusted bytes go through checked slicing, and
//! every failure is a Python exception (`ValueError` for a payload that does not decode,
//! offsetlog's `UnsupportedVersionError` for a batch of an unknown format).

// every `unsafe` block says why it is sound (`make test` runs clippy with this)
#![deny(clippy::undocumented_unsafe_blocks)]

use pyo3::prelude::*;

pub mod apply;
mod async_commit;
pub mod batch;
mod commits;
mod durable;
mod follow;
mod hooks;
mod huge_alloc;
mod key_cache;
mod lone;
mod part_lock;
mod route;
mod route_wire;
pub mod msgpack;
mod scan;
mod snapshot;
mod state;
mod steady;
mod store_entry;
mod txn_board;
#[cfg(target_os = "linux")]
mod uring;
pub mod wire_codec;
mod wire_conn;
mod wire_fetch;
mod wire_txn;
mod write;
pub mod write_ahead;
pub mod write_ahead_format;

/// (`huge_alloc` says why: a hostile frame's array counts must not abort the process)
#[global_allocator]
static ALLOCATOR: huge_alloc::HugeAlloc = huge_alloc::HugeAlloc;

#[pymodule]
#[pyo3(name = "_native")]
fn native_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HEADER_SIZE", batch::HEADER_SIZE)?;
    m.add("LENGTH_SIZE", batch::LENGTH_SIZE)?;
    m.add("CRC_START", batch::CRC_START)?;
    m.add("HEADER_AFTER_LENGTH", batch::HEADER_AFTER_LENGTH)?;
    m.add("MAGIC", batch::MAGIC)?;
    m.add("MAX_BATCH_BYTES", batch::MAX_BATCH_BYTES)?;
    m.add("KNOWN_ATTRIBUTES", batch::KNOWN_ATTRIBUTES)?;
    m.add("TRANSACTIONAL", batch::TRANSACTIONAL)?;
    m.add_function(wrap_pyfunction!(snapshot::decode_snapshot_body, m)?)?;
    commits::register(m)?;
    write::register(m)?;
    write_ahead::register(m)?;
    lone::register(m)?;
    durable::register(m)?;
    key_cache::register(m)?;
    part_lock::register(m)?;
    async_commit::register(m)?;
    route::register(m)?;
    state::register(m)?;
    steady::register(m)?;
    store_entry::register(m)?;
    txn_board::register(m)?;
    wire_conn::register(m)?;
    #[cfg(target_os = "linux")]
    uring::register(m)?;
    scan::register(m)
}
