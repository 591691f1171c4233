//! The write-ahead file's bytes (docs/FORMAT.md, "WRITE-AHEAD"): an entry's framing, the
//! start marker of a generation, and the reader recovery and `offsetlog verify` use
//! (`read_write_ahead`). The rounds that write them are `write_ahead`'s.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

/// Bytes of an entry before its data: length u32, CRC u32, generation u32, partition u32,
/// segment base offset i64, position i64 (little-endian).
pub const HEADER: usize = 32;
/// The bytes the length counts besides the data (generation to position).
pub(crate) const FIELDS: usize = HEADER - 8;
/// The partition field of a generation's start marker.
pub(crate) const MARKER: u32 = u32::MAX;

/// One entry: a batch written at `position` of the segment of log partition `partition`
/// whose base offset is `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub partition: u32,
    pub base: i64,
    pub position: i64,
    pub data: &'a [u8],
}

/// Append the entry `e` of `generation` to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, generation: u32, e: Entry<'_>) {
    let start = out.len();
    // (an entry is a segment write: never near 4 GiB, which the segment's size caps)
    out.extend_from_slice(&((FIELDS + e.data.len()) as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&e.partition.to_le_bytes());
    out.extend_from_slice(&e.base.to_le_bytes());
    out.extend_from_slice(&e.position.to_le_bytes());
    out.extend_from_slice(e.data);
    let crc = crc32fast::hash(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The start marker of `generation`: the first entry of the file.
pub(crate) fn marker(generation: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER);
    encode(&mut out, generation, Entry { partition: MARKER, base: -1, position: -1, data: &[] });
    out
}

/// What the file's bytes hold (see `decode`).
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// the generation of the start marker; None: no valid marker, so no entries
    pub generation: Option<u32>,
    pub entries: Vec<Entry<'a>>,
    /// where the entries end
    pub end: usize,
    /// the bytes ended inside an entry that claims more: more of the file may complete it
    pub short: bool,
}

/// The entry at the start of `data`: `Ok(Some((generation, entry, its size)))`, `Ok(None)`
/// where it is not a whole valid entry (a short one is `Err(())`: more bytes may make it one).
#[allow(clippy::type_complexity)]
fn entry_at(data: &[u8]) -> Result<Option<(u32, Entry<'_>, usize)>, ()> {
    let Some(head) = data.get(..HEADER) else {
        return if data.iter().all(|&b| b == 0) { Ok(None) } else { Err(()) };
    };
    let u32_at = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    let i64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[i..i + 8]);
        i64::from_le_bytes(b)
    };
    let length = u32_at(0) as usize;
    if length < FIELDS {
        return Ok(None);
    }
    let Some(size) = length.checked_add(8) else { return Ok(None) };
    let Some(whole) = data.get(..size) else { return Err(()) };
    if crc32fast::hash(&whole[8..]) != u32_at(4) {
        return Ok(None);
    }
    let entry = Entry { partition: u32_at(12), base: i64_at(16), position: i64_at(24),
                        data: &whole[HEADER..] };
    Ok(Some((u32_at(8), entry, size)))
}

/// Read the file's bytes `data` (from its start): the start marker's generation and the
/// entries of that generation after it, up to the first that is not one (a torn last
/// round, the reserve's zeros, an older generation's bytes).
pub fn decode(data: &[u8]) -> Decoded<'_> {
    let none = |short| Decoded { generation: None, entries: Vec::new(), end: 0, short };
    let (generation, mut at) = match entry_at(data) {
        Err(()) => return none(true),
        Ok(Some((g, e, size)))
            if e.partition == MARKER && e.base == -1 && e.position == -1 && e.data.is_empty() =>
        {
            (g, size)
        }
        Ok(_) => return none(false),
    };
    let mut entries = Vec::new();
    let mut short = false;
    loop {
        match entry_at(&data[at..]) {
            Ok(Some((g, e, size)))
                if g == generation && e.partition != MARKER && e.base >= 0 && e.position >= 0 =>
            {
                entries.push(e);
                at += size;
            }
            Ok(_) => break,
            Err(()) => {
                short = true;
                break;
            }
        }
    }
    Decoded { generation: Some(generation), entries, end: at, short }
}

/// `read_write_ahead(data) -> (generation or None, [(partition, base, position, data)], end,
/// short)`: the write-ahead file's bytes from its start, decoded (see `decode`; recovery
/// reads more of the file while `short`).
#[pyfunction]
pub fn read_write_ahead<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
    let d = decode(data);
    let entries = PyList::empty(py);
    for e in &d.entries {
        entries.append((e.partition, e.base, e.position, PyBytes::new(py, e.data)))?;
    }
    (d.generation, entries, d.end, d.short).into_pyobject(py)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(entries: &[(u32, Entry<'_>)]) -> Vec<u8> {
        let mut out = marker(7);
        for (g, e) in entries {
            encode(&mut out, *g, *e);
        }
        out
    }

    const E1: Entry<'static> = Entry { partition: 3, base: 100, position: 4096, data: b"abc" };
    const E2: Entry<'static> = Entry { partition: 0, base: 0, position: 0, data: b"" };

    #[test]
    fn entries_of_the_markers_generation_read_back_in_order() {
        let data = file(&[(7, E1), (7, E2)]);
        let d = decode(&data);
        assert_eq!(d.generation, Some(7));
        assert_eq!(d.entries, vec![E1, E2]);
        assert_eq!(d.end, data.len());
        assert!(!d.short);
    }

    #[test]
    fn an_older_generation_ends_the_entries() {
        let mut data = file(&[(7, E1), (6, E2)]);
        data.extend_from_slice(&[0; 40]);
        let d = decode(&data);
        assert_eq!(d.entries, vec![E1]);
        assert_eq!(d.end, HEADER * 2 + 3);
        assert!(!d.short);
    }

    #[test]
    fn a_cut_anywhere_keeps_the_whole_entries_before_it() {
        let data = file(&[(7, E1), (7, E2)]);
        for cut in 0..data.len() {
            let d = decode(&data[..cut]);
            if cut < HEADER {
                assert_eq!(d.generation, None);
                continue;
            }
            let whole = if cut >= HEADER * 2 + 3 { 1 } else { 0 };
            assert_eq!(d.entries.len(), whole, "cut {cut}");
            assert!(d.short || cut == HEADER || cut == HEADER * 2 + 3, "cut {cut}");
        }
    }

    #[test]
    fn a_flipped_bit_ends_the_entries_there() {
        let data = file(&[(7, E1), (7, E2)]);
        for i in HEADER..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                let d = decode(&bad);
                assert!(d.entries.len() < 2 || d.entries == vec![E1, E2], "byte {i}");
                if i < HEADER * 2 + 3 {
                    assert!(d.entries.is_empty(), "byte {i} bit {bit}");
                }
            }
        }
    }

    #[test]
    fn no_marker_no_entries() {
        let mut data = Vec::new();
        encode(&mut data, 7, E1);
        let d = decode(&data);
        assert_eq!((d.generation, d.entries.len(), d.end), (None, 0, 0));
        assert_eq!(decode(&[0; 100]).generation, None);
        assert!(!decode(&[0; 100]).short);
    }
}
