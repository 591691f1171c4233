//! The wire server's hot requests in and their answers out, with the `kafka-protocol` crate
//! (generated from Kafka's message schemas): OffsetCommit, decoded into the fields the
//! Python handler checks (`offsetlog.server.offsets.commit_fields`) and answered from the
//! error codes it gives back. Nothing here decides anything: a frame the crate refuses goes
//! to the Python path, which answers it as every other bad frame (kio's decoder, closing
//! the connection).
//!
//! Requests in: `requests` (each frame's fields, or None to leave it to Python); answers out:
//! `responses` (length-prefixed frames).

mod requests;
mod responses;
#[cfg(test)]
mod tests;

pub use requests::*;
pub use responses::*;

/// OffsetCommit's API key and the versions taken natively (those the server offers:
/// `offsetlog.server.apis.APIS`, checked there against this module's `OFFSET_COMMIT_VERSIONS`)
pub const OFFSET_COMMIT: i16 = 8;
pub const OFFSET_COMMIT_VERSIONS: (i16, i16) = (2, 9);
/// OffsetCommit's first version with the member epoch (KIP-848): a consumer-protocol
/// member's commit below it is refused (UNSUPPORTED_VERSION, by the Python path)
pub const OFFSET_COMMIT_MEMBER_EPOCH_VERSION: i16 = 9;

/// Heartbeat's API key and versions (all the server offers)
pub const HEARTBEAT: i16 = 12;
pub const HEARTBEAT_VERSIONS: (i16, i16) = (0, 4);

/// TxnOffsetCommit's API key and the versions the server offers
pub const TXN_OFFSET_COMMIT: i16 = 28;
pub const TXN_OFFSET_COMMIT_VERSIONS: (i16, i16) = (0, 4);

/// OffsetFetch's API key and the versions the server offers
pub const OFFSET_FETCH: i16 = 9;
pub const OFFSET_FETCH_VERSIONS: (i16, i16) = (1, 9);

/// The request's API key and version (the first four bytes of every request header), if
/// the frame has them.
pub fn peek(frame: &[u8]) -> Option<(i16, i16)> {
    let key = frame.get(0..2)?;
    let version = frame.get(2..4)?;
    Some((i16::from_be_bytes([key[0], key[1]]), i16::from_be_bytes([version[0], version[1]])))
}
