//! The functions `offsetlog.log.framing` calls: framing a batch, and the loops that read a
//! buffer's batches. Each loop runs until the end, a limit of batches, or the first bytes
//! that are not a valid batch, and returns where it stopped: the reader in Python decides
//! what those bytes mean (a torn tail, preallocated space, corruption, salvage).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySequence, PyTuple, PyType};

use crate::apply;
use crate::batch::{self, Bad, Frame, Header, HEADER_SIZE};
use crate::msgpack;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32, m)?)?;
    m.add_function(wrap_pyfunction!(encode_payload, m)?)?;
    m.add_function(wrap_pyfunction!(decode_payload, m)?)?;
    m.add_function(wrap_pyfunction!(frame_payload, m)?)?;
    m.add_function(wrap_pyfunction!(frame_records, m)?)?;
    m.add_function(wrap_pyfunction!(check_at, m)?)?;
    m.add_function(wrap_pyfunction!(find_next_valid, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(decode_chunk, m)?)?;
    m.add_function(wrap_pyfunction!(replay_chunk, m)?)?;
    m.add_function(wrap_pyfunction!(apply::apply_records, m)?)?;
    m.add_function(wrap_pyfunction!(apply::offsets_from_flat, m)?)?;
    Ok(())
}

/// CRC-32 of `data` (zlib's polynomial), continuing from `value` as `zlib.crc32` does.
#[pyfunction]
#[pyo3(signature = (data, value=0))]
fn crc32(data: &[u8], value: u32) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(value);
    h.update(data);
    h.finalize()
}

/// The msgpack bytes of `records` (any value the format holds).
#[pyfunction]
fn encode_payload<'py>(py: Python<'py>, records: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::with_capacity(64);
    msgpack::encode(records, &mut out, 0)?;
    Ok(PyBytes::new(py, &out))
}

/// The value `data` holds, all of it.
#[pyfunction]
fn decode_payload<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    msgpack::decode(py, data)
}

/// One batch's bytes: its header, then `payload`.
#[pyfunction]
#[pyo3(signature = (base_offset, payload, record_count, last_offset_delta, timestamp,
                    attributes=0, producer_id=-1, producer_epoch=-1))]
#[allow(clippy::too_many_arguments)] // the header's fields, as the format names them
fn frame_payload<'py>(
    py: Python<'py>,
    base_offset: i64,
    payload: &[u8],
    record_count: u32,
    last_offset_delta: u32,
    timestamp: i64,
    attributes: u8,
    producer_id: i64,
    producer_epoch: i16,
) -> PyResult<Bound<'py, PyBytes>> {
    let f = Frame {
        base_offset,
        record_count,
        last_offset_delta,
        timestamp,
        attributes,
        producer_id,
        producer_epoch,
    };
    let mut buf = Vec::with_capacity(HEADER_SIZE + payload.len());
    buf.resize(HEADER_SIZE, 0);
    buf.extend_from_slice(payload);
    batch::write_header(&mut buf, 0, &f).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &buf))
}

/// One batch's bytes from its records (a non-empty sequence of 5-element records), encoded
/// and framed in one pass: the count and the last offset delta come from the records.
#[pyfunction]
#[pyo3(signature = (base_offset, records, timestamp, attributes=0, producer_id=-1,
                    producer_epoch=-1))]
fn frame_records<'py>(
    py: Python<'py>,
    base_offset: i64,
    records: &Bound<'py, PyAny>,
    timestamp: i64,
    attributes: u8,
    producer_id: i64,
    producer_epoch: i16,
) -> PyResult<Bound<'py, PyBytes>> {
    let seq = records.cast::<PySequence>()?;
    let count = seq.len()?;
    if count == 0 {
        return Err(PyValueError::new_err("a batch holds at least one record"));
    }
    let last_offset_delta: u32 = seq.get_item(count - 1)?.get_item(0)?.extract()?;
    let mut buf = Vec::with_capacity(HEADER_SIZE + 32 * count);
    buf.resize(HEADER_SIZE, 0);
    msgpack::encode(records, &mut buf, 0)?;
    let f = Frame {
        base_offset,
        record_count: u32::try_from(count).map_err(|_| PyValueError::new_err("too many records"))?,
        last_offset_delta,
        timestamp,
        attributes,
        producer_id,
        producer_epoch,
    };
    batch::write_header(&mut buf, 0, &f).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &buf))
}

fn unsupported(py: Python<'_>, message: String) -> PyErr {
    match py
        .import("offsetlog.errors")
        .and_then(|m| m.getattr("UnsupportedVersionError"))
        .and_then(|c| Ok(c.cast_into::<PyType>()?))
    {
        Ok(cls) => PyErr::from_type(cls, message),
        Err(e) => e,
    }
}

/// The header's fields as the tuple `offsetlog.log.format.BatchHeader` takes.
fn header_tuple<'py>(py: Python<'py>, h: &Header) -> PyResult<Bound<'py, PyTuple>> {
    (
        h.length,
        h.header_crc,
        h.crc,
        h.magic,
        h.attributes,
        h.base_offset,
        h.last_offset_delta,
        h.record_count,
        h.timestamp,
        h.producer_id,
        h.producer_epoch,
    )
        .into_pyobject(py)
}

/// Why the bytes at `pos` are not a valid batch: `(reason, search_from)` (both None if they
/// are one), `search_from` None when the batch is certainly the torn end of the buffer.
/// Raises `UnsupportedVersionError` for a batch of another format whose header checks out.
#[pyfunction]
fn check_at(
    py: Python<'_>,
    data: &[u8],
    pos: usize,
    end: usize,
    min_offset: i64,
) -> PyResult<(Option<&'static str>, Option<usize>)> {
    match batch::check(data, pos, end, min_offset) {
        Ok(_) => Ok((None, None)),
        Err(Bad::Invalid { reason, search_from }) => Ok((Some(reason), search_from)),
        Err(Bad::Unsupported(message)) => Err(unsupported(py, message)),
    }
}

/// The first position at or after `start` where a valid batch begins, or None.
#[pyfunction]
fn find_next_valid(data: &[u8], start: usize, end: usize, min_offset: i64) -> Option<usize> {
    batch::find_next_valid(data, start, end, min_offset)
}

/// Up to `limit` valid batches from `start`: `(batches, pos, min_offset, bad)`, each batch
/// `(position, stop, header)`; `pos` is where reading stopped and `bad` whether the bytes
/// there are not a valid batch (False: the end or the limit).
#[pyfunction]
fn scan<'py>(
    py: Python<'py>,
    data: &[u8],
    start: usize,
    end: usize,
    mut min_offset: i64,
    limit: usize,
) -> PyResult<(Bound<'py, PyList>, usize, i64, bool)> {
    let (end, limit) = (end.min(data.len()), limit.max(1));
    let out = PyList::empty(py);
    let mut pos = start;
    while pos < end && out.len() < limit {
        let Ok(h) = batch::check(data, pos, end, min_offset) else {
            return Ok((out, pos, min_offset, true));
        };
        let stop = batch::stop_of(pos, &h);
        out.append((pos, stop, header_tuple(py, &h)?))?;
        min_offset = h.next_offset();
        pos = stop;
    }
    Ok((out, pos, min_offset, false))
}

/// How `decode_chunk` and `replay_chunk` stopped.
const REACHED_END: u8 = 0;
const CHUNK_FULL: u8 = 1;
const BAD_BATCH: u8 = 2;
const UNDECODABLE: u8 = 3;
const HANDED_BACK: u8 = 4;

/// Where a loop over a buffer's batches stands: the position, the offset floor, and what it
/// has read past.
struct Cursor<'a> {
    data: &'a [u8],
    end: usize,
    limit: usize,
    pos: usize,
    min_offset: i64,
    batches: usize,
    records: u64,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8], start: usize, end: usize, min_offset: i64, limit: usize) -> Self {
        let (end, limit) = (end.min(data.len()), limit.max(1));
        Cursor { data, end, limit, pos: start, min_offset, batches: 0, records: 0 }
    }

    /// The next valid batch and its payload, or how reading stops here.
    fn next(&self) -> Result<(Header, usize, &'a [u8]), u8> {
        if self.pos >= self.end {
            return Err(REACHED_END);
        }
        if self.batches >= self.limit {
            return Err(CHUNK_FULL);
        }
        let h = batch::check(self.data, self.pos, self.end, self.min_offset)
            .map_err(|_| BAD_BATCH)?;
        let stop = batch::stop_of(self.pos, &h);
        Ok((h, stop, self.data.get(self.pos + HEADER_SIZE..stop).unwrap_or_default()))
    }

    /// Read past the batch `next` gave.
    fn advance(&mut self, h: &Header, stop: usize) {
        self.min_offset = h.next_offset();
        self.batches += 1;
        self.records += u64::from(h.record_count);
        self.pos = stop;
    }
}

/// A payload's decoding error, as the message `ValueError` would carry.
fn message(py: Python<'_>, e: &PyErr) -> Option<String> {
    Some(e.value(py).str().map(|s| s.to_string()).unwrap_or_default())
}

/// Up to `limit` valid batches from `start`, decoded: `(chunk, pos, min_offset, batches,
/// records, status, error)`. `chunk` holds `(base_offset, records, attributes, producer_id,
/// producer_epoch)` per batch (what `OffsetTable.apply_batches` takes); `status` is 0 at the
/// end, 1 when the chunk is full, 2 at bytes that are not a valid batch, 3 at a valid batch
/// whose payload does not decode (`error` says why; it is not in the chunk).
#[pyfunction]
#[allow(clippy::type_complexity)] // the one tuple the reader unpacks
fn decode_chunk<'py>(
    py: Python<'py>,
    data: &[u8],
    start: usize,
    end: usize,
    min_offset: i64,
    limit: usize,
) -> PyResult<(Bound<'py, PyList>, usize, i64, usize, u64, u8, Option<String>)> {
    let mut c = Cursor::new(data, start, end, min_offset, limit);
    let chunk = PyList::empty(py);
    let (status, error) = loop {
        let (h, stop, payload) = match c.next() {
            Ok(found) => found,
            Err(status) => break (status, None),
        };
        match msgpack::decode(py, payload) {
            Ok(decoded) => chunk.append((h.base_offset, decoded, h.attributes, h.producer_id,
                                         h.producer_epoch))?,
            Err(e) => break (UNDECODABLE, message(py, &e)),
        }
        c.advance(&h, stop);
    };
    Ok((chunk, c.pos, c.min_offset, c.batches, c.records, status, error))
}

/// Replay from `start`: the plain commits of up to `limit` batches go straight into
/// `offsets` (the table's dict, through `apply::apply_commit`); the first batch holding
/// anything else is decoded and handed back, for the Python table to apply before reading
/// goes on. Returns `(handed_back, pos, min_offset, batches, records, applied, next_offset,
/// status, error)`: `applied` records went into `offsets`, the last of them ending at
/// `next_offset` (-1 if none); `status` as `decode_chunk`'s, or 4 with a batch handed back
/// (`(base_offset, records, attributes, producer_id, producer_epoch)`, counted and read past).
#[pyfunction]
#[allow(clippy::type_complexity)] // the one tuple the reader unpacks
pub fn replay_chunk<'py>(
    py: Python<'py>,
    data: &[u8],
    start: usize,
    end: usize,
    min_offset: i64,
    limit: usize,
    offsets: &Bound<'py, PyDict>,
) -> PyResult<(Option<Bound<'py, PyTuple>>, usize, i64, usize, u64, u64, i64, u8, Option<String>)> {
    let mut c = Cursor::new(data, start, end, min_offset, limit);
    let (mut applied, mut next) = (0u64, -1i64);
    let mut cache = apply::Cache::default();
    let (handed, status, error) = loop {
        let (h, stop, payload) = match c.next() {
            Ok(found) => found,
            Err(status) => break (None, status, None),
        };
        let plain = if h.attributes & SEMANTIC == 0 { apply::parse_payload(payload) } else { None };
        let Some(commits) = plain else {
            match msgpack::decode(py, payload) {
                Ok(decoded) => {
                    let batch = (h.base_offset, decoded, h.attributes, h.producer_id,
                                 h.producer_epoch).into_pyobject(py)?;
                    c.advance(&h, stop);
                    break (Some(batch), HANDED_BACK, None);
                }
                Err(e) => break (None, UNDECODABLE, message(py, &e)),
            }
        };
        for commit in &commits {
            apply::apply_commit(py, offsets, commit, &mut cache)?;
        }
        if let Some(last) = commits.last() {
            next = h.base_offset.saturating_add(last.delta).saturating_add(1);
        }
        applied += commits.len() as u64;
        c.advance(&h, stop);
    };
    Ok((handed, c.pos, c.min_offset, c.batches, c.records, applied, next, status, error))
}

/// The attribute bits that change what records mean (transactional, control): such batches
/// are the Python table's.
const SEMANTIC: u8 = 0x03;
