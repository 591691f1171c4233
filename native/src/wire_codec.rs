//! The wire server's hot requests in and their answers out, with the `kafka-protocol` crate
//! (generated from Kafka's message schemas): OffsetCommit, decoded into the fields the
//! Python handler checks (`offsetlog.server.offsets.commit_fields`) and answered from the
//! error codes it gives back. Nothing here decides anything: a frame the crate refuses goes
//! to the Python path, which answers it as every other bad frame (kio's decoder, closing
//! the connection).

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
    GroupId, HeartbeatRequest, HeartbeatResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, RequestHeader, ResponseHeader, TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

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

/// OffsetCommit's API key and the versions taken natively (those the server offers:
/// `offsetlog.server.apis.APIS`, checked there against this module's `OFFSET_COMMIT_VERSIONS`)
pub const OFFSET_COMMIT: i16 = 8;
pub const OFFSET_COMMIT_VERSIONS: (i16, i16) = (2, 9);

/// Heartbeat's API key and versions (all the server offers)
pub const HEARTBEAT: i16 = 12;
pub const HEARTBEAT_VERSIONS: (i16, i16) = (0, 4);

/// TxnOffsetCommit's API key and the versions the server offers
pub const TXN_OFFSET_COMMIT: i16 = 28;
pub const TXN_OFFSET_COMMIT_VERSIONS: (i16, i16) = (0, 4);

/// OffsetFetch's API key and the versions the server offers
pub const OFFSET_FETCH: i16 = 9;
pub const OFFSET_FETCH_VERSIONS: (i16, i16) = (1, 9);

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

/// The request's API key and version (the first four bytes of every request header), if
/// the frame has them.
pub fn peek(frame: &[u8]) -> Option<(i16, i16)> {
    let key = frame.get(0..2)?;
    let version = frame.get(2..4)?;
    Some((i16::from_be_bytes([key[0], key[1]]), i16::from_be_bytes([version[0], version[1]])))
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

/// The length-prefixed TxnOffsetCommit response frame: each topic's partitions with their
/// error codes, in the order given.
pub fn encode_txn_offset_commit_response(correlation_id: i32, version: i16,
                                         topics: &[(String, Vec<(i32, i16)>)])
                                         -> Result<Vec<u8>, String> {
    codes_response!(TxnOffsetCommitResponse, TxnOffsetCommitResponseTopic,
                    TxnOffsetCommitResponsePartition, correlation_id, version, topics)
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

/// The length-prefixed OffsetCommit response frame: each topic's partitions with their
/// error codes, in the order given.
pub fn encode_offset_commit_response(correlation_id: i32, version: i16,
                                     topics: &[(String, Vec<(i32, i16)>)])
                                     -> Result<Vec<u8>, String> {
    codes_response!(OffsetCommitResponse, OffsetCommitResponseTopic,
                    OffsetCommitResponsePartition, correlation_id, version, topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };

    fn frame(version: i16, metadata: Option<&'static str>) -> Vec<u8> {
        retained_frame(version, metadata, -1)
    }

    fn retained_frame(version: i16, metadata: Option<&'static str>, retention_time_ms: i64)
                      -> Vec<u8> {
        let mut out = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(OFFSET_COMMIT)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("c")))
            .encode(&mut out, OffsetCommitRequest::header_version(version))
            .unwrap();
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_generation_id_or_member_epoch(3)
            .with_member_id(StrBytes::from_static_str("m"))
            .with_retention_time_ms(retention_time_ms)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(42)
                    .with_committed_leader_epoch(if version >= 6 { 5 } else { -1 })
                    .with_committed_metadata(metadata.map(StrBytes::from_static_str))])])
            .encode(&mut out, version)
            .unwrap();
        out.to_vec()
    }

    #[test]
    fn every_version_decodes_to_its_fields() {
        for version in 2..=9 {
            let c = decode_offset_commit(&frame(version, Some("md"))).unwrap();
            assert_eq!((c.correlation_id, c.version, c.group_id.as_str()), (7, version, "g"));
            assert_eq!((c.generation, c.member_id.as_str()), (3, "m"));
            let epoch = if version >= 6 { 5 } else { -1 };
            assert_eq!(c.topics, vec![("t".to_owned(), vec![(1, 42, epoch, Some("md".to_owned()))])]);
        }
    }

    #[test]
    fn versions_2_to_4_carry_the_retention_time() {
        for version in 2..=4 {
            for retention in [-1, 0, 5_000, i64::MAX, i64::MIN] {
                let c = decode_offset_commit(&retained_frame(version, None, retention)).unwrap();
                assert_eq!(c.retention_time_ms, retention);
            }
        }
        for version in 5..=9 {  // (the field is gone: the crate encodes none)
            assert_eq!(decode_offset_commit(&frame(version, None)).unwrap().retention_time_ms, -1);
        }
    }

    #[test]
    fn truncated_and_padded_frames_and_other_apis_are_refused() {
        let whole = frame(8, None);
        for end in 0..whole.len() {
            assert!(decode_offset_commit(&whole[..end]).is_none(), "{end} bytes decoded");
        }
        let mut padded = whole.clone();
        padded.push(0);
        assert!(decode_offset_commit(&padded).is_none());
        let mut other = whole;
        other[1] = 9; // OffsetFetch's key
        assert!(decode_offset_commit(&other).is_none());
        let mut old = frame(2, None);
        old[3] = 1; // v1: not taken natively
        assert!(decode_offset_commit(&old).is_none());
    }

    #[test]
    fn mutated_frames_never_panic() {
        // OffsetCommit's bytes flipped, cut and grown at random (xorshift, fixed seed): decode either
        // refuses the frame or gives fields; it never panics or reads out of bounds
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // (a long run by hand: OFFSETLOG_FUZZ_ITERATIONS=2000000 cargo test --release mutated)
        let iterations: u32 = std::env::var("OFFSETLOG_FUZZ_ITERATIONS").ok()
            .and_then(|n| n.parse().ok()).unwrap_or(20_000);
        for version in 2..=9 {
            let whole = frame(version, Some("metadata"));
            for _ in 0..iterations {
                let mut f = whole.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() as usize) % f.len();
                    f[at] = next() as u8;
                }
                match next() % 3 {
                    0 => f.truncate((next() as usize) % (f.len() + 1)),
                    1 => f.extend((0..next() % 16).map(|_| next() as u8)),
                    _ => {}
                }
                let _ = decode_offset_commit(&f);
            }
        }
    }

    #[test]
    fn heartbeats_decode_at_every_version_and_mutations_never_panic() {
        for version in 0..=4 {
            let mut f = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(HEARTBEAT)
                .with_request_api_version(version)
                .with_correlation_id(3)
                .encode(&mut f, HeartbeatRequest::header_version(version))
                .unwrap();
            HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id(4)
                .with_member_id(StrBytes::from_static_str("m"))
                .with_group_instance_id((version >= 3).then(|| StrBytes::from_static_str("i")))
                .encode(&mut f, version)
                .unwrap();
            let h = decode_heartbeat(&f).unwrap();
            assert_eq!((h.version, h.generation, h.member_id.as_str()), (version, 4, "m"));
            assert_eq!(h.group_instance_id.is_some(), version >= 3);
            for end in 0..f.len() {
                assert!(decode_heartbeat(&f[..end]).is_none());
            }
            for at in 4..f.len() {
                for b in [0u8, 0x7f, 0x80, 0xff] {
                    let mut m = f.to_vec();
                    m[at] = b;
                    let _ = decode_heartbeat(&m);
                }
            }
        }
        let out = encode_heartbeat_response(5, 4, 25).unwrap();
        let mut body = &out[9..];
        assert_eq!(HeartbeatResponse::decode(&mut body, 4).unwrap().error_code, 25);
    }

    #[test]
    fn txn_offset_commits_decode_and_mutations_never_panic() {
        use kafka_protocol::messages::txn_offset_commit_request::{
            TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::{ProducerId, TransactionalId};
        for version in 0..=4 {
            let mut f = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(TXN_OFFSET_COMMIT)
                .with_request_api_version(version)
                .with_correlation_id(3)
                .encode(&mut f, TxnOffsetCommitRequest::header_version(version))
                .unwrap();
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("t")))
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_producer_id(ProducerId(77))
                .with_producer_epoch(2)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("orders")))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(3)
                        .with_committed_offset(9)])])
                .encode(&mut f, version)
                .unwrap();
            let t = decode_txn_offset_commit(&f).unwrap();
            assert_eq!((t.producer_id, t.producer_epoch, t.transactional_id.as_str()), (77, 2, "t"));
            assert_eq!(t.topics[0].1[0].0, 3);
            for end in 0..f.len() {
                assert!(decode_txn_offset_commit(&f[..end]).is_none());
            }
            for at in 4..f.len() {
                for b in [0u8, 0x7f, 0x80, 0xff] {
                    let mut m = f.to_vec();
                    m[at] = b;
                    let _ = decode_txn_offset_commit(&m);
                }
            }
        }
        let out = encode_txn_offset_commit_response(5, 3, &[("o".to_owned(), vec![(1, 47)])]).unwrap();
        let mut body = &out[9..];
        let r = TxnOffsetCommitResponse::decode(&mut body, 3).unwrap();
        assert_eq!(r.topics[0].partitions[0].error_code, 47);
    }

    #[test]
    fn offset_fetches_decode_and_mutations_never_panic() {
        use kafka_protocol::messages::offset_fetch_request::{
            OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
        };
        for version in 1..=9 {
            let mut f = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(OFFSET_FETCH)
                .with_request_api_version(version)
                .with_correlation_id(3)
                .encode(&mut f, OffsetFetchRequest::header_version(version))
                .unwrap();
            let request = if version >= 8 {
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                        .with_name(TopicName(StrBytes::from_static_str("o")))
                        .with_partition_indexes(vec![1, 2])]))])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("o")))
                        .with_partition_indexes(vec![1, 2])]))
            };
            request.encode(&mut f, version).unwrap();
            let d = decode_offset_fetch(&f).unwrap();
            assert_eq!(d.groups, vec![("g".to_owned(), None, -1,
                                       Some(vec![("o".to_owned(), vec![1, 2])]))]);
            for end in 0..f.len() {
                assert!(decode_offset_fetch(&f[..end]).is_none());
            }
            for at in 4..f.len() {
                for b in [0u8, 0x7f, 0x80, 0xff] {
                    let mut m = f.to_vec();
                    m[at] = b;
                    let _ = decode_offset_fetch(&m);
                }
            }
        }
    }

    #[test]
    fn offset_fetches_answer_at_every_version() {
        for version in 1..=9 {
            let fetched = vec![("g".to_owned(), vec![("o".to_owned(),
                vec![(1, 42, 7, Some("md".to_owned()), 0)])], 16)];
            let out = encode_offset_fetch_response(3, version, &fetched).unwrap();
            let mut body = &out[if version >= 6 { 9 } else { 8 }..];
            let r = OffsetFetchResponse::decode(&mut body, version).unwrap();
            assert!(body.is_empty());
            let (offset, epoch, code) = if version >= 8 {
                let p = &r.groups[0].topics[0].partitions[0];
                (p.committed_offset, p.committed_leader_epoch, r.groups[0].error_code)
            } else {
                let p = &r.topics[0].partitions[0];
                (p.committed_offset, p.committed_leader_epoch, r.error_code)
            };
            assert_eq!(offset, 42);
            assert_eq!(epoch, if version >= 5 { 7 } else { -1 });
            assert_eq!(code, if version >= 2 { 16 } else { 0 });
        }
    }

    #[test]
    fn the_response_frame_is_length_prefixed_with_its_header() {
        let out = encode_offset_commit_response(9, 8, &[("t".to_owned(), vec![(1, 0), (2, 3)])])
            .unwrap();
        assert_eq!(i32::from_be_bytes(out[..4].try_into().unwrap()) as usize, out.len() - 4);
        assert_eq!(&out[4..8], &9i32.to_be_bytes());
        let mut body = &out[9..]; // v8's header has its tagged fields (one empty byte)
        let r = OffsetCommitResponse::decode(&mut body, 8).unwrap();
        assert_eq!(r.topics[0].partitions[1].error_code, 3);
        assert!(body.is_empty());
    }
}
