//! A write-ahead file's bytes, as damaged as libFuzzer makes them: reading its entries ends
//! without a panic, every entry it accepts lies inside the bytes read, after the one before,
//! and reading the bytes cut where the entries end gives the same entries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offsetlog_native::write_ahead::{decode, HEADER};

fuzz_target!(|data: &[u8]| {
    let d = decode(data);
    assert!(d.end <= data.len());
    if d.generation.is_none() {
        assert!(d.entries.is_empty() && d.end == 0);
        return;
    }
    let mut at = HEADER;
    for e in &d.entries {
        assert!(e.base >= 0 && e.position >= 0);
        at += HEADER + e.data.len();
    }
    assert_eq!(at, d.end);
    let again = decode(&data[..d.end]);
    assert_eq!(again.entries, d.entries);
    assert_eq!(again.generation, d.generation);
});
