//! The record batch's header: its layout, its two checksums, and the checks that decide
//! whether the bytes at a position are a valid batch (docs/FORMAT.md, "Record batch").
//!
//! Pure Rust, no Python: the rest of the crate and `cargo test` build on it. Every read
//! goes through `slice::get`, so no input, however damaged, can index out of bounds.

/// Bytes of the header, the length field included.
pub const HEADER_SIZE: usize = 48;
/// Bytes of the length field.
pub const LENGTH_SIZE: usize = 4;
/// First byte after the two checksums: the header CRC covers `[0, 4)` and `[12, 48)`.
pub const CRC_START: usize = 12;
/// Bytes counted by `length` that are header, not payload.
pub const HEADER_AFTER_LENGTH: u32 = (HEADER_SIZE - LENGTH_SIZE) as u32;
/// Batch format 1.
pub const MAGIC: u8 = 0xA1;
/// The largest `length` a reader believes.
pub const MAX_BATCH_BYTES: u32 = 1 << 30;
/// The attribute bits format 1 defines: transactional, control, delete horizon.
pub const KNOWN_ATTRIBUTES: u8 = 0x07;
/// The attribute bit of a batch of an open transaction's records (docs/FORMAT.md)
pub const TRANSACTIONAL: u8 = 0x01;

/// The header's fields, in their order on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub length: u32,
    pub header_crc: u32,
    pub crc: u32,
    pub magic: u8,
    pub attributes: u8,
    pub base_offset: i64,
    pub last_offset_delta: u32,
    pub record_count: u32,
    pub timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

fn array<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..at.checked_add(N)?)?.try_into().ok()
}

impl Header {
    /// The header at `pos`, or None if fewer than `HEADER_SIZE` bytes are there.
    pub fn parse(data: &[u8], pos: usize) -> Option<Header> {
        let h = data.get(pos..pos.checked_add(HEADER_SIZE)?)?;
        Some(Header {
            length: u32::from_le_bytes(array(h, 0)?),
            header_crc: u32::from_le_bytes(array(h, 4)?),
            crc: u32::from_le_bytes(array(h, 8)?),
            magic: h[12],
            attributes: h[13],
            base_offset: i64::from_le_bytes(array(h, 14)?),
            last_offset_delta: u32::from_le_bytes(array(h, 22)?),
            record_count: u32::from_le_bytes(array(h, 26)?),
            timestamp: i64::from_le_bytes(array(h, 30)?),
            producer_id: i64::from_le_bytes(array(h, 38)?),
            producer_epoch: i16::from_le_bytes(array(h, 46)?),
        })
    }

    /// The log offset after the batch's last slot.
    pub fn next_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
            .saturating_add(1)
    }
}

/// The header CRC of the header bytes `h` (at least `HEADER_SIZE` of them): the length
/// field, then every field after the two checksums.
pub fn header_crc(h: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&h[..LENGTH_SIZE]);
    hasher.update(&h[CRC_START..HEADER_SIZE]);
    hasher.finalize()
}

/// Why the bytes at a position are not a valid batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Not a batch: `reason`, and where a following valid batch could start (None when the
    /// batch is certainly the torn end of the buffer: an intact header running past it).
    Invalid {
        reason: &'static str,
        search_from: Option<usize>,
    },
    /// A batch whose header checks out, of a format this reader does not know.
    Unsupported(String),
}

/// The valid batch at `pos` (not reaching past `end`, base offset at least `min_offset`),
/// or why there is none. The order of the checks is the classification of docs/FORMAT.md.
pub fn check(data: &[u8], pos: usize, end: usize, min_offset: i64) -> Result<Header, Bad> {
    let invalid = |reason, search_from| Err(Bad::Invalid { reason, search_from });
    let end = end.min(data.len());
    if end.saturating_sub(pos) < HEADER_SIZE {
        return invalid("truncated header", Some(pos.saturating_add(1)));
    }
    let (Some(h), Some(raw)) = (Header::parse(data, pos), data.get(pos..pos + HEADER_SIZE))
    else {
        return invalid("truncated header", Some(pos.saturating_add(1)));
    };
    if header_crc(raw) != h.header_crc {
        return invalid("header checksum mismatch", Some(pos.saturating_add(1)));
    }
    if h.magic != MAGIC {
        return Err(Bad::Unsupported(format!(
            "batch magic {:#x} at byte {} is not {:#x}",
            h.magic, pos, MAGIC
        )));
    }
    if h.attributes & !KNOWN_ATTRIBUTES != 0 {
        return Err(Bad::Unsupported(format!(
            "unknown batch attributes {:#x} at byte {}",
            h.attributes, pos
        )));
    }
    if h.length < HEADER_AFTER_LENGTH || h.length > MAX_BATCH_BYTES {
        return invalid("bad length", Some(pos.saturating_add(1)));
    }
    let stop = pos + LENGTH_SIZE + h.length as usize;
    if stop > end {
        return invalid("truncated batch", None);
    }
    let payload = data.get(pos + HEADER_SIZE..stop).unwrap_or_default();
    if crc32fast::hash(payload) != h.crc {
        return invalid("checksum mismatch", Some(stop));
    }
    if h.record_count == 0 || h.last_offset_delta < h.record_count - 1 {
        return invalid("bad record count", Some(stop));
    }
    if h.base_offset < min_offset {
        return invalid("offset out of order", Some(stop));
    }
    Ok(h)
}

/// The end of the valid batch at `pos` whose header is `h` (`check` passed).
pub fn stop_of(pos: usize, h: &Header) -> usize {
    pos + LENGTH_SIZE + h.length as usize
}

/// The first position at or after `start` where a valid batch begins (a resync after
/// corruption), or None. A candidate is any magic byte, `CRC_START` bytes into a batch.
pub fn find_next_valid(data: &[u8], start: usize, end: usize, min_offset: i64) -> Option<usize> {
    let end = end.min(data.len());
    let mut search = start.checked_add(CRC_START)?;
    while search < end {
        let i = search + data.get(search..end)?.iter().position(|&b| b == MAGIC)?;
        let candidate = i - CRC_START;
        if check(data, candidate, end, min_offset).is_ok() {
            return Some(candidate);
        }
        search = i + 1;
    }
    None
}

/// The fields a writer gives a batch's header (the rest follow from its payload).
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub base_offset: i64,
    pub record_count: u32,
    pub last_offset_delta: u32,
    pub timestamp: i64,
    pub attributes: u8,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Fill in the header of the batch in `buf[at..]`: `HEADER_SIZE` bytes reserved at `at`,
/// its payload after them up to the end of `buf`. Errs if the batch would be longer than
/// `MAX_BATCH_BYTES` allows (the caller refuses larger calls before they get here).
pub fn write_header(buf: &mut [u8], at: usize, f: &Frame) -> Result<(), String> {
    let payload_len = buf.len().saturating_sub(at + HEADER_SIZE);
    let length = u32::try_from(payload_len)
        .ok()
        .and_then(|n| n.checked_add(HEADER_AFTER_LENGTH))
        .filter(|&n| n <= MAX_BATCH_BYTES)
        .ok_or_else(|| format!("a batch of {payload_len} payload bytes is over the format's limit"))?;
    let batch = buf.get_mut(at..).filter(|b| b.len() >= HEADER_SIZE);
    let (head, payload) = batch.ok_or("no room for the header")?.split_at_mut(HEADER_SIZE);
    head[0..4].copy_from_slice(&length.to_le_bytes());
    head[8..12].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    head[12] = MAGIC;
    head[13] = f.attributes;
    head[14..22].copy_from_slice(&f.base_offset.to_le_bytes());
    head[22..26].copy_from_slice(&f.last_offset_delta.to_le_bytes());
    head[26..30].copy_from_slice(&f.record_count.to_le_bytes());
    head[30..38].copy_from_slice(&f.timestamp.to_le_bytes());
    head[38..46].copy_from_slice(&f.producer_id.to_le_bytes());
    head[46..48].copy_from_slice(&f.producer_epoch.to_le_bytes());
    let crc = header_crc(head);
    head[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(base: i64, payload: &[u8], count: u32) -> Vec<u8> {
        let mut buf = vec![0u8; HEADER_SIZE];
        buf.extend_from_slice(payload);
        let f = Frame {
            base_offset: base,
            record_count: count,
            last_offset_delta: count - 1,
            timestamp: 1_700_000_000_000,
            attributes: 0,
            producer_id: -1,
            producer_epoch: -1,
        };
        write_header(&mut buf, 0, &f).unwrap();
        buf
    }

    #[test]
    fn the_documented_example_round_trips() {
        // docs/FORMAT.md, "Worked example": offset 42 for my-group/orders/0 at log offset 7
        let payload: &[u8] = b"\x91\x95\x00\x01\x01\x93\xa8my-group\xa6orders\x00\x92\x2a\xcf\x00\x00\x01\x8b\xcf\xe5\x68\x00";
        let buf = frame(7, payload, 1);
        assert_eq!(buf.len(), 82);
        assert_eq!(&buf[0..8], &[0x4e, 0, 0, 0, 0xe0, 0x2b, 0x24, 0x07]);
        let h = check(&buf, 0, buf.len(), 0).unwrap();
        assert_eq!(h.base_offset, 7);
        assert_eq!(stop_of(0, &h), buf.len());
    }

    #[test]
    fn every_cut_of_a_batch_is_torn_or_short() {
        let buf = frame(0, b"\x91\x90", 1);
        for cut in 0..buf.len() {
            match check(&buf[..cut], 0, cut, 0) {
                Err(Bad::Invalid { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let buf = frame(3, b"\x91\x95\x00\x01\x01\x93\xa1g\xa1t\x00\x92\x01\x02", 1);
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                assert!(check(&bad, 0, bad.len(), 0).is_err(), "byte {byte} bit {bit}");
            }
        }
    }

    #[test]
    fn a_buffer_without_room_for_the_header_is_refused() {
        let f = Frame { base_offset: 0, record_count: 1, last_offset_delta: 0, timestamp: 0,
                        attributes: 0, producer_id: -1, producer_epoch: -1 };
        assert!(write_header(&mut [0u8; 47], 0, &f).is_err());
        assert!(write_header(&mut [0u8; 60], 13, &f).is_err());
        assert!(write_header(&mut [0u8; 60], 12, &f).is_ok());
    }

    #[test]
    fn resync_finds_the_next_batch_after_garbage() {
        let mut buf = vec![0xA1u8; 100];
        let good = frame(5, b"\x91\x90", 1);
        buf.extend_from_slice(&good);
        assert_eq!(find_next_valid(&buf, 0, buf.len(), 0), Some(100));
        assert_eq!(find_next_valid(&buf, 0, buf.len(), 6), None);
    }

    #[test]
    fn unknown_magic_with_a_valid_header_is_unsupported() {
        let mut buf = frame(0, b"\x91\x90", 1);
        buf[12] = 0xA2;
        let crc = header_crc(&buf);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(check(&buf, 0, buf.len(), 0), Err(Bad::Unsupported(_))));
    }
}
