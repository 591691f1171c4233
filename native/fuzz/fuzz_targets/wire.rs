//! A request frame's bytes (without its length prefix), as the wire server's native codec
//! gets them from any client: each hot message's decoder takes it or refuses it, never
//! panics or aborts (a claimed array of billions of elements included: `huge_alloc`), and
//! what one takes, the answer's encoder answers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offsetlog_native::wire_codec as codec;

fuzz_target!(|data: &[u8]| {
    if let Some(c) = codec::decode_offset_commit(data) {
        let codes: Vec<(String, Vec<(i32, i16)>)> = c.topics.iter()
            .map(|(name, parts)| (name.clone(), parts.iter().map(|p| (p.0, 0)).collect()))
            .collect();
        codec::encode_offset_commit_response(c.correlation_id, c.version, &codes).unwrap();
    }
    if let Some(t) = codec::decode_txn_offset_commit(data) {
        let codes: Vec<(String, Vec<(i32, i16)>)> = t.topics.iter()
            .map(|(name, parts)| (name.clone(), parts.iter().map(|p| (p.0, 0)).collect()))
            .collect();
        codec::encode_txn_offset_commit_response(t.correlation_id, t.version, &codes).unwrap();
    }
    if let Some(f) = codec::decode_offset_fetch(data) {
        let groups: Vec<codec::FetchedGroup> = f.groups.iter().map(|(id, _, _, topics)| {
            (id.clone(), topics.iter().flatten().map(|(name, parts)| {
                (name.clone(), parts.iter().map(|&p| (p, -1, -1, None, 0)).collect())
            }).collect(), 0)
        }).collect();
        codec::encode_offset_fetch_response(f.correlation_id, f.version, &groups).unwrap();
    }
    if let Some(h) = codec::decode_heartbeat(data) {
        codec::encode_heartbeat_response(h.correlation_id, h.version, 0).unwrap();
    }
});
