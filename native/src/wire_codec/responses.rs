//! The hot requests' answers as length-prefixed response frames, encoded with the
//! `kafka-protocol` crate from what the handlers give back.

use bytes::BytesMut;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    GroupId, HeartbeatResponse, OffsetCommitResponse, OffsetFetchResponse, ResponseHeader,
    TopicName, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

/// A response of topics, each partition with its error code, in the order given:
/// OffsetCommit's and TxnOffsetCommit's, one shape in two generated types.
macro_rules! codes_response {
    ($response:ident, $topic:ident, $partition:ident, $correlation_id:expr, $version:expr,
     $topics:expr) => {{
        let response = $response::default().with_topics($topics.iter().map(|(name, parts)| {
            $topic::default()
                .with_name(TopicName(StrBytes::from_string(name.clone())))
                .with_partitions(parts.iter().map(|&(index, code)| {
                    $partition::default().with_partition_index(index).with_error_code(code)
                }).collect())
        }).collect());
        framed($correlation_id, $response::header_version($version), |out| {
            response.encode(out, $version).map_err(|e| e.to_string())
        })
    }};
}

/// The length-prefixed OffsetCommit response frame: each topic's partitions with their
/// error codes, in the order given.
pub fn encode_offset_commit_response(correlation_id: i32, version: i16,
                                     topics: &[(String, Vec<(i32, i16)>)])
                                     -> Result<Vec<u8>, String> {
    codes_response!(OffsetCommitResponse, OffsetCommitResponseTopic,
                    OffsetCommitResponsePartition, correlation_id, version, topics)
}

/// The length-prefixed TxnOffsetCommit response frame: each topic's partitions with their
/// error codes, in the order given.
pub fn encode_txn_offset_commit_response(correlation_id: i32, version: i16,
                                         topics: &[(String, Vec<(i32, i16)>)])
                                         -> Result<Vec<u8>, String> {
    codes_response!(TxnOffsetCommitResponse, TxnOffsetCommitResponseTopic,
                    TxnOffsetCommitResponsePartition, correlation_id, version, topics)
}

/// One partition of an OffsetFetch answer: index, offset, leader epoch, metadata, code
pub type Fetched = (i32, i64, i32, Option<String>, i16);
/// One group of an OffsetFetch answer: its id, topics (name, partitions) and error code
pub type FetchedGroup = (String, Vec<(String, Vec<Fetched>)>, i16);

/// The length-prefixed OffsetFetch response frame: before v8 the one group's topics and
/// code at the top (the code from v2 on), each field only where the version has it.
pub fn encode_offset_fetch_response(correlation_id: i32, version: i16, groups: &[FetchedGroup])
                                    -> Result<Vec<u8>, String> {
    let name = |n: &String| TopicName(StrBytes::from_string(n.clone()));
    let epoch = |e: i32| if version >= 5 { e } else { -1 };
    let metadata = |m: &Option<String>| m.clone().map(StrBytes::from_string);
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        response = response.with_groups(groups.iter().map(|(id, topics, code)| {
            OffsetFetchResponseGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id.clone())))
                .with_error_code(*code)
                .with_topics(topics.iter().map(|(n, parts)| OffsetFetchResponseTopics::default()
                    .with_name(name(n))
                    .with_partitions(parts.iter().map(|(p, o, e, m, c)| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(*p)
                            .with_committed_offset(*o)
                            .with_committed_leader_epoch(epoch(*e))
                            .with_metadata(metadata(m))
                            .with_error_code(*c)
                    }).collect())).collect())
        }).collect());
    } else {
        let (_, topics, code) = groups.first().ok_or("an OffsetFetch answer without its group")?;
        response = response
            .with_error_code(if version >= 2 { *code } else { 0 })
            .with_topics(topics.iter().map(|(n, parts)| OffsetFetchResponseTopic::default()
                .with_name(name(n))
                .with_partitions(parts.iter().map(|(p, o, e, m, c)| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(*p)
                        .with_committed_offset(*o)
                        .with_committed_leader_epoch(epoch(*e))
                        .with_metadata(metadata(m))
                        .with_error_code(*c)
                }).collect())).collect());
    }
    framed(correlation_id, OffsetFetchResponse::header_version(version), |out| {
        response.encode(out, version).map_err(|e| e.to_string())
    })
}

/// The length-prefixed Heartbeat response frame.
pub fn encode_heartbeat_response(correlation_id: i32, version: i16, error_code: i16)
                                 -> Result<Vec<u8>, String> {
    let response = HeartbeatResponse::default().with_error_code(error_code);
    framed(correlation_id, HeartbeatResponse::header_version(version), |out| {
        response.encode(out, version).map_err(|e| e.to_string())
    })
}

/// A response frame: the length, the header of `header_version`, what `body` writes.
fn framed(correlation_id: i32, header_version: i16,
          body: impl FnOnce(&mut BytesMut) -> Result<(), String>) -> Result<Vec<u8>, String> {
    let mut out = BytesMut::with_capacity(64);
    out.extend_from_slice(&[0; 4]);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, header_version)
        .map_err(|e| e.to_string())?;
    body(&mut out)?;
    let size = i32::try_from(out.len() - 4).map_err(|e| e.to_string())?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out.to_vec())
}
