//! A segment's bytes, as damaged as libFuzzer makes them: reading batch after batch (and
//! resyncing after each bad one, as salvage does) ends without a panic, and every batch it
//! accepts lies inside the data, after the one before.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offsetlog_native::batch::{check, find_next_valid, stop_of, Bad};

fuzz_target!(|data: &[u8]| {
    let (mut pos, mut floor) = (0usize, -1i64);
    while pos < data.len() {
        match check(data, pos, data.len(), floor) {
            Ok(h) => {
                let stop = stop_of(pos, &h);
                assert!(stop > pos && stop <= data.len());
                assert!(h.base_offset >= floor);
                floor = h.next_offset();
                pos = stop;
            }
            Err(Bad::Unsupported(_)) => break,
            Err(Bad::Invalid { search_from, .. }) => {
                let Some(from) = search_from else { break };
                match find_next_valid(data, from, data.len(), floor) {
                    Some(next) => {
                        assert!(next >= from && next < data.len());
                        pos = next;
                    }
                    None => break,
                }
            }
        }
    }
});
