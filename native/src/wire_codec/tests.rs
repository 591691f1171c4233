//! The codec against frames the crate itself builds, and against bytes it must refuse.

use super::*;
use bytes::BytesMut;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, HeartbeatResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, RequestHeader, TopicName,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
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
