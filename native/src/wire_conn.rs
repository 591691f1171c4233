//! A plaintext connection's request loop (`offsetlog.server.connection` runs it on the
//! connection's thread): frames are read and answers sent without the GIL, and an
//! OffsetCommit or a Heartbeat goes from its bytes to its answer's bytes with one call into
//! Python in between, for the handler's checks and the store's call (`wire_codec` decodes
//! and encodes); a plain OffsetCommit and a plain OffsetFetch (`wire_fetch`) with none.
//! Every other request is the Python connection's (`Connection.answer`), frame in, answer
//! bytes out, so this loop knows nothing of Kafka beyond the frame and those messages.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::route::{self, RouterState};
use crate::route_wire;
use crate::steady;
use crate::wire_codec::{self, OffsetCommit};
use crate::wire_fetch;
use crate::wire_txn;
use crate::write::os_error;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(serve_connection, m)?)?;
    m.add_function(wrap_pyfunction!(wire_decode_safe, m)?)?;
    m.add_function(wrap_pyfunction!(decode_offset_commit, m)?)?;
    m.add_function(wrap_pyfunction!(encode_offset_commit_response, m)?)?;
    m.add_function(wrap_pyfunction!(decode_heartbeat, m)?)?;
    m.add_function(wrap_pyfunction!(decode_offset_fetch, m)?)?;
    m.add_function(wrap_pyfunction!(encode_offset_fetch_response, m)?)?;
    m.add_function(wrap_pyfunction!(decode_txn_offset_commit, m)?)?;
    m.add_function(wrap_pyfunction!(encode_txn_offset_commit_response, m)?)?;
    m.add_function(wrap_pyfunction!(encode_heartbeat_response, m)?)?;
    m.add("OFFSET_COMMIT_VERSIONS", wire_codec::OFFSET_COMMIT_VERSIONS)?;
    Ok(())
}

/// Whether OffsetCommit may be decoded natively here: a hostile frame's claimed array
/// sizes can be reserved without backing them (`huge_alloc`)
#[pyfunction]
fn wire_decode_safe() -> bool {
    crate::huge_alloc::wire_safe()
}

/// An OffsetCommit frame (without its length) decoded, for the connections that answer in
/// Python (TLS, SASL, an authorizer): `(correlation_id, client_id, version, group,
/// generation, member, instance, topics, retention_time_ms)`, the topics as
/// `Connection.offset_commit` gets them; None when the crate does not decode it whole.
#[pyfunction]
fn decode_offset_commit<'py>(py: Python<'py>, frame: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(c) = wire_codec::decode_offset_commit(frame) else { return Ok(None) };
    let topics = topic_list(py, &c)?;
    Ok(Some((c.correlation_id, &c.client_id, c.version, &c.group_id, c.generation,
             &c.member_id, &c.group_instance_id, topics, c.retention_time_ms)
            .into_pyobject(py)?))
}

/// The length-prefixed OffsetCommit response of `topics`, `[(name, [(partition, code)])]`
/// in the answer's order.
#[pyfunction]
fn encode_offset_commit_response<'py>(py: Python<'py>, correlation_id: i32, version: i16,
                                      topics: Vec<(String, Vec<(i32, i16)>)>)
                                      -> PyResult<Bound<'py, PyBytes>> {
    let out = wire_codec::encode_offset_commit_response(correlation_id, version, &topics)
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

fn topic_list<'py>(py: Python<'py>, c: &OffsetCommit) -> PyResult<Bound<'py, PyList>> {
    let topics = PyList::empty(py);
    for (name, parts) in &c.topics {
        let list = PyList::empty(py);
        for (index, offset, epoch, metadata) in parts {
            list.append((index, offset, epoch, metadata))?;
        }
        topics.append((name, list))?;
    }
    Ok(topics)
}

/// A TxnOffsetCommit frame decoded, for the Python handler: `(correlation_id, client_id,
/// version, transactional_id, group, producer_id, producer_epoch, generation, member,
/// instance, topics)`; None when the crate does not decode it whole.
#[pyfunction]
fn decode_txn_offset_commit<'py>(py: Python<'py>, frame: &[u8])
                                 -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(t) = wire_codec::decode_txn_offset_commit(frame) else { return Ok(None) };
    let topics = PyList::empty(py);
    for (name, parts) in &t.topics {
        topics.append((name, parts.clone()))?;
    }
    let head = (t.correlation_id, t.client_id, t.version, t.transactional_id, t.group_id);
    let rest = (t.producer_id, t.producer_epoch, t.generation, t.member_id, t.group_instance_id,
                topics);
    let all = head.into_pyobject(py)?.add(rest.into_pyobject(py)?)?;
    Ok(Some(all.cast_into::<PyTuple>()?))
}

/// The length-prefixed TxnOffsetCommit response of `topics`, `[(name, [(partition, code)])]`.
#[pyfunction]
fn encode_txn_offset_commit_response<'py>(py: Python<'py>, correlation_id: i32, version: i16,
                                          topics: Vec<(String, Vec<(i32, i16)>)>)
                                          -> PyResult<Bound<'py, PyBytes>> {
    let out = wire_codec::encode_txn_offset_commit_response(correlation_id, version, &topics)
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// An OffsetFetch frame decoded, for the Python handler: `(correlation_id, client_id,
/// version, require_stable, groups)`, each group `(group, member or None, member epoch,
/// [(topic, [partition])] or None)` (before v8 the request's one group); None when the
/// crate does not decode it whole.
#[pyfunction]
fn decode_offset_fetch<'py>(py: Python<'py>, frame: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(f) = wire_codec::decode_offset_fetch(frame) else { return Ok(None) };
    Ok(Some((f.correlation_id, f.client_id, f.version, f.require_stable, f.groups)
        .into_pyobject(py)?))
}

/// The length-prefixed OffsetFetch response of `groups`, each `(group, [(topic,
/// [(partition, offset, leader epoch, metadata, code)])], code)` (before v8: one group).
#[pyfunction]
fn encode_offset_fetch_response<'py>(py: Python<'py>, correlation_id: i32, version: i16,
                                     groups: Vec<wire_codec::FetchedGroup>)
                                     -> PyResult<Bound<'py, PyBytes>> {
    let out = wire_codec::encode_offset_fetch_response(correlation_id, version, &groups)
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// A Heartbeat frame decoded, for the connections that answer in Python:
/// `(correlation_id, client_id, version, group, generation, member, instance)`; None when the
/// crate does not decode it whole.
#[pyfunction]
fn decode_heartbeat<'py>(py: Python<'py>, frame: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(h) = wire_codec::decode_heartbeat(frame) else { return Ok(None) };
    Ok(Some((h.correlation_id, h.client_id, h.version, h.group_id, h.generation, h.member_id,
             h.group_instance_id).into_pyobject(py)?))
}

/// The length-prefixed Heartbeat response with `error_code`.
#[pyfunction]
fn encode_heartbeat_response<'py>(py: Python<'py>, correlation_id: i32, version: i16,
                                  error_code: i16) -> PyResult<Bound<'py, PyBytes>> {
    let out = wire_codec::encode_heartbeat_response(correlation_id, version, error_code)
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// The shortest frame that holds a request header (`connection.MIN_FRAME`)
const MIN_FRAME: i32 = 10;
/// Bytes read at once (`connection.RECV_SIZE`)
const RECV_SIZE: usize = 64 * 1024;

enum Read {
    Data,
    /// the client went (or the connection was shut down: the server closes it)
    Closed,
    Idle,
}

/// Serve requests on `fd` (a connected socket in non-blocking mode, owned by the caller)
/// until the connection is to be closed; returns why: "closed" (the client went, or
/// `conn.closing` was set), "idle" (nothing for `idle_ms`), "answer" (`conn.answer` said
/// close), or "frame N" (a frame of N bytes, outside [MIN_FRAME, `limit`]).
///
/// `conn` gives `answer(frame) -> bytes | None | False` (the answer, none, or close),
/// `offset_commit(version, group, generation, member, instance, topics) -> None | list`
/// (None: every partition committed; else each topic's `(name, [(partition, code)])` in the
/// answer's order), `heartbeat(group, generation, member, instance) -> error code`, and
/// `closing`; with `hot` false every request goes to `answer`.
///
/// With `router` (the store's `CommitRouter`) and `topics` (the server's `TopicRegistry`),
/// a plain OffsetCommit (`plain_commit`) is committed here without a Python call (but a
/// member's check); then
/// `conn` also gives `commit_error(version, group, error) -> error code`.
#[pyfunction]
#[pyo3(signature = (fd, idle_ms, limit, conn, hot, router=None, topics=None))]
#[allow(clippy::too_many_arguments)]
fn serve_connection(py: Python<'_>, fd: i32, idle_ms: i64, limit: i64, conn: &Bound<'_, PyAny>,
                    hot: bool, router: Option<Bound<'_, RouterState>>,
                    topics: Option<Bound<'_, PyAny>>) -> PyResult<String> {
    // (the steady boards a Heartbeat is checked against without the GIL, when hot)
    let steady = if hot { router.as_ref().and_then(route_wire::steady_without_gil) } else { None };
    let plain = router.zip(topics);
    let idle = Duration::from_millis(u64::try_from(idle_ms).map_err(|_| PyValueError::new_err("idle_ms < 0"))?);
    let mut buf: Vec<u8> = Vec::with_capacity(RECV_SIZE);
    let mut start = 0usize; // where the unhandled bytes of `buf` begin
    let mut out: Vec<u8> = Vec::new(); // the answer to send before reading on
    let mut last_active = Instant::now();
    loop {
        // Without the GIL, once per request: send the last answer, then read until a whole
        // frame is in (one hand-over of the GIL a request, besides the commit's write).
        let step = py.detach(|| -> std::io::Result<Step> {
            if !out.is_empty() {
                if !send_all(fd, &out, idle)? {
                    return Ok(Step::Stop("closed"));
                }
                out.clear();
                last_active = Instant::now();
            }
            loop {
                match whole_frame(&buf[start..], limit) {
                    Frame::Whole(end) => {
                        // (an OffsetCommit is decoded here, off the GIL)
                        let frame = &buf[start + 4..start + end];
                        let commit = if hot { wire_codec::decode_offset_commit(frame) } else {
                            None
                        };
                        if commit.is_none() {
                            // a steady member's Heartbeat: answered here, off the GIL too
                            if let Some(answer) = steady.as_ref().and_then(|s| steady_answer(s, frame)) {
                                start += end;
                                if !send_all(fd, &answer, idle)? {
                                    return Ok(Step::Stop("closed"));
                                }
                                last_active = Instant::now();
                                continue;
                            }
                        }
                        return Ok(Step::Frame(end, commit));
                    }
                    Frame::BadSize(size) => return Ok(Step::BadSize(size)),
                    Frame::Partial => {}
                }
                if start > 0 {
                    buf.drain(..start);
                    start = 0;
                }
                match read_some(fd, &mut buf, last_active + idle)? {
                    Read::Data => last_active = Instant::now(),
                    Read::Closed => return Ok(Step::Stop("closed")),
                    Read::Idle => return Ok(Step::Stop("idle")),
                }
            }
        }).map_err(os_error)?;
        let (end, commit) = match step {
            Step::Frame(end, commit) => (end, commit),
            Step::BadSize(size) => return Ok(format!("frame {size}")),
            Step::Stop(why) => return Ok(why.into()),
        };
        let answer = handle(py, conn, &buf[start + 4..start + end], commit, hot,
                            steady.is_some(), plain.as_ref())?;
        start += end;
        if start == buf.len() {
            buf.clear();
            start = 0;
        }
        match answer {
            Answer::Bytes(data) => out = data,
            Answer::Python(data) => out.extend_from_slice(data.bind(py).as_bytes()),
            Answer::Nothing => {}
            Answer::Close => return Ok("answer".into()),
        }
        if conn.getattr(pyo3::intern!(py, "closing"))?.is_truthy()? {
            // the server stops: this answer still goes out
            py.detach(|| send_all(fd, &out, idle)).map_err(os_error)?;
            return Ok("closed".into());
        }
    }
}

/// The answer to `frame` if it is a Heartbeat that `steady` passes (`steady::Boards::check`,
/// at `clock_ms`'s time), else None.
fn steady_answer(steady: &steady::Shared, frame: &[u8]) -> Option<Vec<u8>> {
    let h = wire_codec::decode_heartbeat(frame)?;
    let passed = steady::lock(steady).check(&h.group_id, &h.member_id, h.generation,
                                            h.group_instance_id.as_deref(), route::now_ms());
    if !passed {
        return None;
    }
    wire_codec::encode_heartbeat_response(h.correlation_id, h.version, 0).ok()
}

enum Step {
    /// a whole frame of this many bytes (its length prefix included) starts the buffer
    /// (and the OffsetCommit it holds, decoded, when `hot`)
    Frame(usize, Option<OffsetCommit>),
    BadSize(i32),
    Stop(&'static str),
}

enum Frame {
    Whole(usize),
    BadSize(i32),
    Partial,
}

/// Whether `avail` starts with a whole frame (its length prefix read, then checked against
/// [MIN_FRAME, `limit`]).
fn whole_frame(avail: &[u8], limit: i64) -> Frame {
    let Some(prefix) = avail.get(..4) else { return Frame::Partial };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if size < MIN_FRAME || i64::from(size) > limit {
        return Frame::BadSize(size);
    }
    let end = 4 + size as usize; // (size >= MIN_FRAME > 0)
    if avail.len() >= end { Frame::Whole(end) } else { Frame::Partial }
}

enum Answer {
    Bytes(Vec<u8>),
    Python(Py<PyBytes>),
    Nothing,
    Close,
}

/// The store's commit entry and the server's topics, for plain commits
pub(crate) type Plain<'py> = (Bound<'py, RouterState>, Bound<'py, PyAny>);

/// One frame's answer, with the GIL (`steady_checked`: a Heartbeat was already checked
/// against the steady boards, without it, when the frame was read).
fn handle(py: Python<'_>, conn: &Bound<'_, PyAny>, frame: &[u8], commit: Option<OffsetCommit>,
          hot: bool, steady_checked: bool, plain: Option<&Plain<'_>>) -> PyResult<Answer> {
    if hot {
        if let Some(commit) = commit {
            if let Some(plain) = plain {
                if let Some(answer) = plain_commit(py, conn, plain, &commit)? {
                    return Ok(answer);
                }
            }
            return offset_commit(py, conn, commit);
        }
        if let Some((router, _)) = plain {
            // (a plain one answered here, any other by `answer`, which decodes it again)
            if let Some(fetch) = wire_codec::decode_offset_fetch(frame) {
                if let Some(answer) = wire_fetch::plain_fetch(py, router, &fetch)? {
                    return Ok(Answer::Bytes(answer));
                }
            }
        }
        if let Some(plain) = plain {
            // (the same: an open transaction's plain offsets written here)
            if let Some(t) = wire_codec::decode_txn_offset_commit(frame) {
                if let Some(answer) = wire_txn::txn_commit(py, conn, plain, &t)? {
                    return Ok(Answer::Bytes(answer));
                }
            }
        }
        if let Some(h) = wire_codec::decode_heartbeat(frame) {
            // (not again if it was checked without the GIL)
            if let Some((router, _)) = plain.filter(|_| !steady_checked) {
                // a steady member's: answered with no Python call (`steady`)
                let member = route::Member { generation: h.generation, member_id: &h.member_id,
                                             instance: h.group_instance_id.as_deref() };
                if route_wire::steady_heartbeat(router, &h.group_id, &member)? {
                    return wire_codec::encode_heartbeat_response(h.correlation_id, h.version, 0)
                        .map(Answer::Bytes)
                        .map_err(PyValueError::new_err);
                }
            }
            let code: i16 = conn.call_method1(pyo3::intern!(py, "heartbeat"), (
                &h.group_id, h.generation, &h.member_id, &h.group_instance_id))?.extract()?;
            return wire_codec::encode_heartbeat_response(h.correlation_id, h.version, code)
                .map(Answer::Bytes)
                .map_err(PyValueError::new_err);
        }
    }
    let answer = conn.call_method1(pyo3::intern!(py, "answer"), (PyBytes::new(py, frame),))?;
    if answer.is_none() {
        return Ok(Answer::Nothing);
    }
    match answer.cast_into::<PyBytes>() {
        Ok(bytes) => Ok(Answer::Python(bytes.unbind())),
        Err(_) => Ok(Answer::Close),
    }
}

fn offset_commit(py: Python<'_>, conn: &Bound<'_, PyAny>, c: OffsetCommit) -> PyResult<Answer> {
    let topics = topic_list(py, &c)?;
    let result = conn.call_method1(pyo3::intern!(py, "offset_commit"), (
        c.version, &c.group_id, c.generation, &c.member_id, &c.group_instance_id, topics,
        c.retention_time_ms))?;
    let answer: Vec<(String, Vec<(i32, i16)>)> = if result.is_none() {
        all_coded(&c, 0)
    } else {
        let mut out = Vec::new();
        for topic in result.try_iter()? {
            let topic = topic?;
            let topic = topic.cast::<PyTuple>()?;
            let name: String = topic.get_item(0)?.extract()?;
            let parts: Vec<(i32, i16)> = topic.get_item(1)?.extract()?;
            out.push((name, parts));
        }
        out
    };
    wire_codec::encode_offset_commit_response(c.correlation_id, c.version, &answer)
        .map(Answer::Bytes)
        .map_err(PyValueError::new_err)
}

/// A plain OffsetCommit (every partition of a known topic, an offset >= 0, metadata the
/// store's limit surely holds, none twice, no retention time of its own; a simple consumer's
/// or a member's) committed through the
/// store's native entry (`route_wire::commit_plain`), with no Python call but a member's check
/// (the coordinator's, under the partition lock): the answer. None, with nothing done, for
/// any other request, or one the entry does not take (a group whose name the store has not
/// checked yet, a closed store): `offset_commit`'s Python path answers it. The checks
/// skipped here are those that could only refuse what a plain commit is not (the
/// authorizer's: without one, `hot` is set); a fencing error is coded by
/// `conn.commit_error`, as the Python path codes it.
fn plain_commit(py: Python<'_>, conn: &Bound<'_, PyAny>, (router, topics): &Plain<'_>,
                c: &OffsetCommit) -> PyResult<Option<Answer>> {
    if c.retention_time_ms != -1 {
        return Ok(None);
    }
    let Some(entries) = plain_entries(py, topics, &c.topics)? else { return Ok(None) };
    let group = PyString::new(py, &c.group_id);
    let member = route::Member { generation: c.generation, member_id: &c.member_id,
                                 instance: c.group_instance_id.as_deref() };
    let classic = c.version < wire_codec::OFFSET_COMMIT_MEMBER_EPOCH_VERSION;
    let code = match route_wire::commit_plain(router, &group, &entries, &member, classic) {
        Ok(false) => return Ok(None),
        Ok(true) => 0,
        Err(error) => conn.call_method1(pyo3::intern!(py, "commit_error"),
                                        (c.version, &group, error.into_value(py)))?
                          .extract::<i16>()?,
    };
    wire_codec::encode_offset_commit_response(c.correlation_id, c.version, &all_coded(c, code))
        .map(|data| Some(Answer::Bytes(data)))
        .map_err(PyValueError::new_err)
}

/// A plain commit's `(topic, partition, offset, leader epoch, metadata)`: the epoch -1 (or
/// any negative one) for none, as Kafka's clients send it, the metadata "" for none (a null
/// one too, as the Python path reads it)
pub(crate) type Entry<'a> = (&'a str, i32, i64, i32, &'a str);

/// A commit request's entries, in its order, if every one is plain: a partition of a topic
/// the server's registry (`topics`) knows, none named twice (the Python path keeps the last
/// offset of a partition named twice); else None. Metadata over the store's limit is left
/// to the Python path too, by `commits::plain_fields_of`, which declines the call.
pub(crate) fn plain_entries<'a>(py: Python<'_>, topics: &Bound<'_, PyAny>,
                                requested: &'a [(String, Vec<wire_codec::Partition>)])
                                -> PyResult<Option<Vec<Entry<'a>>>> {
    let known = topics.getattr(pyo3::intern!(py, "topics"))?;
    let Ok(known) = known.cast_into::<PyDict>() else { return Ok(None) };
    let mut entries: Vec<Entry<'_>> = Vec::new();
    for (name, parts) in requested {
        let Some(topic) = known.get_item(name)? else { return Ok(None) };
        let Some(count) = topic.get_item(pyo3::intern!(py, "partitions")).ok() else {
            return Ok(None);
        };
        let Ok(count) = count.extract::<i64>() else { return Ok(None) };
        for (partition, offset, epoch, metadata) in parts {
            if *partition < 0 || i64::from(*partition) >= count {
                return Ok(None);
            }
            entries.push((name.as_str(), *partition, *offset, *epoch,
                          metadata.as_deref().unwrap_or("")));
        }
    }
    Ok(if has_twice(&entries) { None } else { Some(entries) })
}

/// The answer's topics with `code` for every partition of the request, in its order.
fn all_coded(c: &OffsetCommit, code: i16) -> Vec<(String, Vec<(i32, i16)>)> {
    coded(&c.topics, code)
}

/// `topics`' partitions in their order, each with `code`.
pub(crate) fn coded(topics: &[(String, Vec<wire_codec::Partition>)], code: i16)
                    -> Vec<(String, Vec<(i32, i16)>)> {
    topics.iter().map(|(name, parts)| {
        (name.clone(), parts.iter().map(|p| (p.0, code)).collect())
    }).collect()
}

/// Whether a partition is named twice.
fn has_twice(entries: &[Entry<'_>]) -> bool {
    if entries.len() < 2 {
        return false;
    }
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    !entries.iter().all(|&(name, partition, ..)| seen.insert((name, partition)))
}

/// Read what the socket has into `buf`, waiting for it until `deadline`.
fn read_some(fd: i32, buf: &mut Vec<u8>, deadline: Instant) -> std::io::Result<Read> {
    buf.reserve(RECV_SIZE);
    loop {
        let spare = buf.spare_capacity_mut();
        // SAFETY: `spare` is the vector's unused capacity, valid for `spare.len()` bytes of
        // writes; recv writes at most that many and returns how many, which are then
        // initialised and taken into the length below.
        let n = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), spare.len(), 0) };
        if n > 0 {
            // SAFETY: recv initialised `n` bytes just past the old length (see above)
            unsafe { buf.set_len(buf.len() + n as usize) };
            return Ok(Read::Data);
        }
        if n == 0 {
            return Ok(Read::Closed);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Read::Idle);
                }
                if !wait(fd, libc::POLLIN, left)? {
                    return Ok(Read::Idle);
                }
            }
            Some(libc::ECONNRESET) | Some(libc::ENOTCONN) | Some(libc::EPIPE) => {
                return Ok(Read::Closed)
            }
            _ => return Err(error),
        }
    }
}

/// Send all of `data`; false if the connection broke, or its client took nothing for
/// `idle` (it does not read its answers).
fn send_all(fd: i32, mut data: &[u8], idle: Duration) -> std::io::Result<bool> {
    while !data.is_empty() {
        // SAFETY: `data` is a live slice of `data.len()` bytes, only read by send
        let n = unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
        if n >= 0 {
            data = &data[n as usize..];
            continue;
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                if !wait(fd, libc::POLLOUT, idle)? {
                    return Ok(false);
                }
            }
            Some(libc::ECONNRESET) | Some(libc::EPIPE) | Some(libc::ENOTCONN) => return Ok(false),
            _ => return Err(error),
        }
    }
    Ok(true)
}

/// Wait until `fd` is ready for `events` (or hung up: the next call says how); false when
/// `timeout` passed first.
fn wait(fd: i32, events: libc::c_short, timeout: Duration) -> std::io::Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        let mut p = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: one valid pollfd, borrowed for the call
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n > 0 {
            return Ok(true);
        }
        if n == 0 {
            if Instant::now() >= deadline {
                return Ok(false);
            }
            continue;
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}
