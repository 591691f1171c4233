//! A request frame's bytes (without its length prefix), as the wire server's native codec
//! gets them from any client: each hot message's decoder takes it or refuses it, never
//! panics or aborts (a claimed array of billions of elements included: `huge_alloc`), and
//! what one takes, the answer's encoder answers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offsetlog_native::wire_codec as codec;

// (The `expect`s below are this harness's assertions, not the extension's error handling: a
// panic here is the finding cargo-fuzz reports, an answer the encoder refused for a request
// the decoder took. The extension itself maps every encoder error to a Python exception.)

/// A commit's answer: error code 0 for each of its partitions, in request order.
fn zero_codes(topics: &[(String, Vec<codec::Partition>)]) -> Vec<(String, Vec<(i32, i16)>)> {
    topics.iter()
        .map(|(name, parts)| (name.clone(), parts.iter().map(|p| (p.0, 0)).collect()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    if let Some(c) = codec::decode_offset_commit(data) {
        codec::encode_offset_commit_response(c.correlation_id, c.version, &zero_codes(&c.topics))
            .expect("an OffsetCommit the decoder took is answered");
    }
    if let Some(t) = codec::decode_txn_offset_commit(data) {
        codec::encode_txn_offset_commit_response(t.correlation_id, t.version,
                                                 &zero_codes(&t.topics))
            .expect("a TxnOffsetCommit the decoder took is answered");
    }
    if let Some(f) = codec::decode_offset_fetch(data) {
        let groups: Vec<codec::FetchedGroup> = f.groups.iter().map(|(id, _, _, topics)| {
            (id.clone(), topics.iter().flatten().map(|(name, parts)| {
                (name.clone(), parts.iter().map(|&p| (p, -1, -1, None, 0)).collect())
            }).collect(), 0)
        }).collect();
        codec::encode_offset_fetch_response(f.correlation_id, f.version, &groups)
            .expect("an OffsetFetch the decoder took is answered");
    }
    if let Some(h) = codec::decode_heartbeat(data) {
        codec::encode_heartbeat_response(h.correlation_id, h.version, 0)
            .expect("a Heartbeat the decoder took is answered");
    }
});
