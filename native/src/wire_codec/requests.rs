//! The hot requests' frames decoded with the `kafka-protocol` crate into the fields the
//! Python handlers take; a frame the crate does not decode whole is None.

use kafka_protocol::messages::{
    HeartbeatRequest, OffsetCommitRequest, OffsetFetchRequest, RequestHeader,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Decodable, HeaderVersion, StrBytes};

use super::{
    peek, HEARTBEAT, HEARTBEAT_VERSIONS, OFFSET_COMMIT, OFFSET_COMMIT_VERSIONS, OFFSET_FETCH,
    OFFSET_FETCH_VERSIONS, TXN_OFFSET_COMMIT, TXN_OFFSET_COMMIT_VERSIONS,
};

/// One partition of a commit: index, offset, leader epoch (-1: none), metadata (None: null)
pub type Partition = (i32, i64, i32, Option<String>);

/// An OffsetCommit request's fields, as the Python handler takes them.
#[derive(Debug, PartialEq)]
pub struct OffsetCommit {
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub version: i16,
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<(String, Vec<Partition>)>,
    /// versions 2-4: the commit's own retention (-1: none, and for every other version)
    pub retention_time_ms: i64,
}

/// A request of API `key` at a version in `versions`: its header, body and version; None
/// when it is another API or version, or the crate does not decode it whole (bytes left
/// over included).
fn decode<M: Decodable + HeaderVersion>(frame: &[u8], key: i16, (lo, hi): (i16, i16))
                                        -> Option<(RequestHeader, M, i16)> {
    let (k, version) = peek(frame)?;
    if k != key || version < lo || version > hi {
        return None;
    }
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, M::header_version(version)).ok()?;
    let body = M::decode(&mut buf, version).ok()?;
    buf.is_empty().then_some((header, body, version))
}

fn text(s: &StrBytes) -> String {
    s.as_str().to_owned()
}

/// An OffsetCommit frame's fields (the frame without its length prefix); None when the crate
/// does not decode it whole (trailing bytes included), or it is not a natively taken
/// version.
pub fn decode_offset_commit(frame: &[u8]) -> Option<OffsetCommit> {
    let (header, body, version) = decode::<OffsetCommitRequest>(frame, OFFSET_COMMIT, OFFSET_COMMIT_VERSIONS)?;
    Some(OffsetCommit {
        correlation_id: header.correlation_id,
        client_id: header.client_id.as_ref().map(text),
        version,
        group_id: text(&body.group_id.0),
        generation: body.generation_id_or_member_epoch,
        member_id: text(&body.member_id),
        group_instance_id: body.group_instance_id.as_ref().map(text),
        topics: body.topics.iter().map(|t| (text(&t.name.0), t.partitions.iter().map(|p| (
            p.partition_index, p.committed_offset, p.committed_leader_epoch,
            p.committed_metadata.as_ref().map(text))).collect())).collect(),
        retention_time_ms: body.retention_time_ms,
    })
}

/// A TxnOffsetCommit request's fields, as the Python handler takes them.
#[derive(Debug, PartialEq)]
pub struct TxnOffsetCommit {
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub version: i16,
    pub transactional_id: String,
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<(String, Vec<Partition>)>,
}

/// A TxnOffsetCommit frame's fields; None when the crate does not decode it whole.
pub fn decode_txn_offset_commit(frame: &[u8]) -> Option<TxnOffsetCommit> {
    let (header, body, version) = decode::<TxnOffsetCommitRequest>(frame, TXN_OFFSET_COMMIT, TXN_OFFSET_COMMIT_VERSIONS)?;
    Some(TxnOffsetCommit {
        correlation_id: header.correlation_id,
        client_id: header.client_id.as_ref().map(text),
        version,
        transactional_id: text(&body.transactional_id.0),
        group_id: text(&body.group_id.0),
        producer_id: body.producer_id.0,
        producer_epoch: body.producer_epoch,
        generation: body.generation_id,
        member_id: text(&body.member_id),
        group_instance_id: body.group_instance_id.as_ref().map(text),
        topics: body.topics.iter().map(|t| (text(&t.name.0), t.partitions.iter().map(|p| (
            p.partition_index, p.committed_offset, p.committed_leader_epoch,
            p.committed_metadata.as_ref().map(text))).collect())).collect(),
    })
}

/// One group of an OffsetFetch: its id, the member and its epoch (v9+: KIP-848; else None
/// and -1), and the topics with their partitions asked for (None: every one)
pub type FetchGroup = (String, Option<String>, i32, Option<Vec<(String, Vec<i32>)>>);

/// An OffsetFetch request's fields: before v8 its one group as the only one of `groups`.
#[derive(Debug, PartialEq)]
pub struct OffsetFetch {
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub version: i16,
    pub require_stable: bool,
    pub groups: Vec<FetchGroup>,
}

/// An OffsetFetch frame's fields; None when the crate does not decode it whole.
pub fn decode_offset_fetch(frame: &[u8]) -> Option<OffsetFetch> {
    let (header, body, version) = decode::<OffsetFetchRequest>(frame, OFFSET_FETCH, OFFSET_FETCH_VERSIONS)?;
    let groups = if version >= 8 {
        body.groups.iter().map(|g| (text(&g.group_id.0), g.member_id.as_ref().map(text),
            g.member_epoch, g.topics.as_ref().map(|ts| ts.iter().map(|t| (
                text(&t.name.0), t.partition_indexes.clone())).collect()))).collect()
    } else {
        vec![(text(&body.group_id.0), None, -1, body.topics.as_ref().map(|ts| ts.iter().map(|t| (
            text(&t.name.0), t.partition_indexes.clone())).collect()))]
    };
    Some(OffsetFetch {
        correlation_id: header.correlation_id,
        client_id: header.client_id.as_ref().map(text),
        version,
        require_stable: body.require_stable,
        groups,
    })
}

/// A classic group's Heartbeat request's fields, as the Python handler takes them.
#[derive(Debug, PartialEq)]
pub struct Heartbeat {
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub version: i16,
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// A Heartbeat frame's fields; None when the crate does not decode it whole.
pub fn decode_heartbeat(frame: &[u8]) -> Option<Heartbeat> {
    let (header, body, version) = decode::<HeartbeatRequest>(frame, HEARTBEAT, HEARTBEAT_VERSIONS)?;
    Some(Heartbeat {
        correlation_id: header.correlation_id,
        client_id: header.client_id.as_ref().map(text),
        version,
        group_id: text(&body.group_id.0),
        generation: body.generation_id,
        member_id: text(&body.member_id),
        group_instance_id: body.group_instance_id.as_ref().map(text),
    })
}
