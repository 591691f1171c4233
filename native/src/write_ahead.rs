//! The store's write-ahead file (`<store>/WRITE-AHEAD`, docs/FORMAT.md "WRITE-AHEAD"): where
//! the usual durable write of many log partitions becomes durable in one shared round.
//!
//! Why: commits of many groups land in different log partitions, so each was a round of one
//! with its own `RWF_DSYNC` write, and at 32 threads on two CPUs the kernel's share of those
//! writes bounded the rate (docs/DESIGN.md, "Many groups: a store-wide write-ahead file").
//! Here each batch is written into its segment without a sync and then joins a round of this
//! file: the first committer to find no round writing writes every waiting batch, with where
//! it went, in one `RWF_DSYNC` write, while the others wait with the GIL released.
//!
//! Recovery writes the entries back into their segments before it reads them
//! (`offsetlog.log.write_ahead`). A checkpoint (the file full, or `checkpoint()` from the store's
//! close) syncs every segment holding bytes only this file made durable, then starts a new
//! generation at the file's start; `forget` takes a segment out before it is closed (a roll
//! syncs it first), so no entry of the live generation points into a segment that changed
//! under it.

use std::sync::{Condvar, Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub use crate::write_ahead_format::{decode, read_write_ahead, Decoded, Entry, HEADER};
use crate::write_ahead_format::{encode, marker};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<WriteAhead>()?;
    m.add_function(wrap_pyfunction!(read_write_ahead, m)?)?;
    m.add("WRITE_AHEAD_HEADER", HEADER)?;
    Ok(())
}

/// How many usual writes may be in flight alone, each its segment's own `RWF_DSYNC` write,
/// before commits share rounds of the file: 4 per CPU. Writes alone use the disk's own
/// parallelism and cost a lone committer nothing; shared rounds cost each commit a buffered
/// write and a wake-up but save the kernel most of a write per commit, which pays once the
/// CPUs, not the disk, bound the rate. Measured on 2 CPUs (bench/RESULTS.md, thirty-fourth
/// session), many groups' commits a second at 8 / 32 threads: 29,431 / 51,346 with one write
/// alone at most, 31,100 / 48,033 with 8, 32,514 / 31,221 with no file at all.
fn default_alone_limit() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cpus.saturating_mul(4)).unwrap_or(u32::MAX)
}

/// Bytes the file makes ready ahead of its writes at a time (`WriteAhead::reserve`).
const RESERVE_BYTES: i64 = 1 << 20;

/// A batch waiting for the next round: its entry's fields and its segment's fd.
struct Pending {
    partition: u32,
    base: i64,
    position: i64,
    data: Vec<u8>,
    fd: i32,
}

struct Inner {
    generation: u32,
    /// where the next round goes
    end: i64,
    pending: Vec<Pending>,
    /// batches queued, and made durable, since the file was opened (a batch waits until
    /// `durable` reaches its number)
    queued: u64,
    durable: u64,
    /// a round (or a checkpoint) is being written, with the lock released
    leading: bool,
    /// usual writes made alone (the segment's own `RWF_DSYNC`: `begin_alone`) in flight
    alone: u32,
    /// bytes of the file made ready ahead of its writes (zeros written and synced: `reserve`),
    /// so that a write inside them changes no size and no extent
    allocated: i64,
    /// the segments holding bytes only this file made durable: a checkpoint syncs them
    fds: Vec<i32>,
    /// a round failed (or the file was closed): every batch after it fails too
    failed: Option<(Option<i32>, String)>,
}

/// The store's write-ahead file, open (`fd`, which the caller opened and closes after
/// `close()`); entries written from `begin(generation)` on; `capacity` bytes before a
/// checkpoint starts the next generation.
#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct WriteAhead {
    fd: i32,
    capacity: i64,
    /// usual writes that may be in flight alone (`begin_alone`); 0: every one through the file
    alone_limit: std::sync::atomic::AtomicU32,
    inner: Mutex<Inner>,
    cv: Condvar,
}

impl WriteAhead {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // (nothing panics while holding it; a poisoned lock still holds consistent state)
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, Inner>) -> MutexGuard<'a, Inner> {
        self.cv.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    /// Make `data`, just written without a sync at `position` of the segment `fd` (base
    /// offset `base`) of log partition `partition`, durable: queue its entry and return once
    /// a round holding it is (leading that round if none is being written). Called with the
    /// GIL released.
    pub fn commit(&self, partition: u32, base: i64, position: i64, data: &[u8], fd: i32)
                  -> std::io::Result<()> {
        let mut s = self.lock();
        if let Some(failed) = &s.failed {
            return Err(error_of(failed));
        }
        s.pending.push(Pending { partition, base, position, data: data.to_vec(), fd });
        if !s.fds.contains(&fd) {
            s.fds.push(fd);
        }
        s.queued += 1;
        let mine = s.queued;
        loop {
            if s.durable >= mine {
                return Ok(());
            }
            if let Some(failed) = &s.failed {
                return Err(error_of(failed));
            }
            if s.leading {
                s = self.wait(s);
                continue;
            }
            s = self.lead(s);
        }
    }

    /// Whether a usual write may be made alone, the segment's own `RWF_DSYNC` write with no
    /// entry: no round is writing or waiting to be written, and fewer than `alone_limit`
    /// writes alone are in flight (past that, the next commit starts a round that others
    /// join). True marks it in flight until `end_alone`.
    pub fn begin_alone(&self) -> bool {
        let mut s = self.lock();
        let limit = self.alone_limit.load(std::sync::atomic::Ordering::Relaxed);
        let alone = !s.leading && s.pending.is_empty() && s.alone < limit && s.failed.is_none();
        if alone {
            s.alone += 1;
        }
        alone
    }

    pub fn end_alone(&self) {
        self.lock().alone -= 1;
    }

    /// Write what is pending as one round (after a checkpoint if it would not fit); the
    /// lock is released meanwhile and taken back.
    fn lead<'a>(&'a self, mut s: MutexGuard<'a, Inner>) -> MutexGuard<'a, Inner> {
        s.leading = true;
        let round = std::mem::take(&mut s.pending);
        let upto = s.queued;
        let need: usize = round.iter().map(|p| HEADER + p.data.len()).sum();
        let full = s.end + need as i64 > self.capacity;
        let (generation, at, allocated) = (s.generation, s.end, s.allocated);
        let synced = if full { s.fds.clone() } else { Vec::new() };
        drop(s);
        let result = self.write_round(&round, full, &synced, generation, at, allocated);
        let mut s = self.lock();
        s.leading = false;
        match result {
            Ok((generation, end, allocated)) => {
                s.allocated = allocated;
                if full {
                    // (every segment synced above is clean but for this round's batches and
                    // those queued since)
                    let mut fds: Vec<i32> = round.iter().chain(s.pending.iter())
                        .map(|p| p.fd).collect();
                    fds.sort_unstable();
                    fds.dedup();
                    s.fds = fds;
                }
                s.generation = generation;
                s.end = end;
                s.durable = upto;
            }
            Err(e) => s.failed = Some((e.raw_os_error(), e.to_string())),
        }
        self.cv.notify_all();
        s
    }

    /// The round's I/O: a checkpoint first where `full` (the `synced` segments synced, the
    /// next generation's marker written at the start), then the entries; the generation and
    /// end after it.
    fn write_round(&self, round: &[Pending], full: bool, synced: &[i32], generation: u32,
                   at: i64, allocated: i64) -> std::io::Result<(u32, i64, i64)> {
        let (generation, at) = if full {
            self.restart(synced, generation.wrapping_add(1))?
        } else {
            (generation, at)
        };
        let mut buf = Vec::with_capacity(round.iter().map(|p| HEADER + p.data.len()).sum());
        for p in round {
            encode(&mut buf, generation, Entry { partition: p.partition, base: p.base,
                                                 position: p.position, data: &p.data });
        }
        let end = at + buf.len() as i64;
        // (from where the round starts at the least: what lies before it is the generation's)
        let allocated = if end > allocated { self.reserve(allocated.max(at), end) } else { allocated };
        write_all_dsync(self.fd, &buf, at)?;
        Ok((generation, end, allocated))
    }

    /// Make the file's space from `allocated` up to `end` and on (`RESERVE_BYTES` at a time,
    /// within the capacity) written zeros, synced: a durable write there then changes neither
    /// the file's size nor its extents (space reserved with `posix_fallocate` would be unwritten, and
    /// the first durable write to each block of it would need a journal commit to mark it
    /// written: 32 threads of many groups made 44,549 commits a second on a new store's file
    /// reserved that way, 53,753 on one made this way; bench/RESULTS.md, thirty-fourth
    /// session). Where that fails (no space), the writes grow the file. Returns how far the
    /// file is made now.
    fn reserve(&self, allocated: i64, end: i64) -> i64 {
        let want = end.max((allocated + RESERVE_BYTES).min(self.capacity));
        let zeros = vec![0u8; (want - allocated) as usize];
        let mut done = 0;
        while done < zeros.len() {
            // SAFETY: `zeros` is ours and outlives the call; the kernel only reads its bytes.
            let n = unsafe {
                libc::pwrite(self.fd, zeros[done..].as_ptr() as *const libc::c_void,
                             zeros.len() - done, allocated + done as i64)
            };
            if n <= 0 {
                return allocated;
            }
            done += n as usize;
        }
        if fdatasync(self.fd).is_err() { allocated } else { want }
    }

    /// Sync `synced` (the segments holding bytes only the file made durable), then write the
    /// marker of `generation` at the start: the generation and where its entries start.
    fn restart(&self, synced: &[i32], generation: u32) -> std::io::Result<(u32, i64)> {
        for &fd in synced {
            fdatasync(fd)?;
        }
        let m = marker(generation);
        write_all_dsync(self.fd, &m, 0)?;
        Ok((generation, m.len() as i64))
    }

    /// Take the lead once no round is being written (with the GIL released): for a
    /// checkpoint or a `forget`, which must not run beside a round's I/O.
    fn exclusive(&self) -> MutexGuard<'_, Inner> {
        let mut s = self.lock();
        while s.leading {
            s = self.wait(s);
        }
        s
    }
}

#[pymethods]
impl WriteAhead {
    #[new]
    fn new(fd: i32, capacity: i64) -> PyResult<Self> {
        if capacity < (HEADER * 2) as i64 {
            return Err(PyValueError::new_err(format!("capacity {capacity} is too small")));
        }
        Ok(WriteAhead {
            fd,
            capacity,
            alone_limit: std::sync::atomic::AtomicU32::new(default_alone_limit()),
            inner: Mutex::new(Inner { generation: 0, end: 0, pending: Vec::new(), queued: 0,
                                      durable: 0, leading: false, alone: 0, allocated: 0,
                                      fds: Vec::new(),
                                      failed: Some((None, "not begun".into())) }),
            cv: Condvar::new(),
        })
    }

    /// Start the file's `generation` (recovery has applied, and synced, every entry of the
    /// one before): its marker written at the start, durably.
    fn begin(&self, py: Python<'_>, generation: u32) -> PyResult<()> {
        py.detach(|| {
            let mut s = self.exclusive();
            let (generation, end) = self.restart(&[], generation)?;
            s.generation = generation;
            s.end = end;
            s.failed = None;
            Ok::<_, std::io::Error>(())
        }).map_err(crate::write::os_error)
    }

    /// Sync every segment holding bytes only the file made durable and start the next
    /// generation (the store's close, before its segments are closed). A failed checkpoint
    /// fails the file: nothing written after it would be durable.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut s = self.exclusive();
            if let Some(failed) = &s.failed {
                return Err(error_of(failed));
            }
            let synced = std::mem::take(&mut s.fds);
            match self.restart(&synced, s.generation.wrapping_add(1)) {
                Ok((generation, end)) => {
                    s.generation = generation;
                    s.end = end;
                    Ok(())
                }
                Err(e) => {
                    s.failed = Some((e.raw_os_error(), e.to_string()));
                    Err(e)
                }
            }
        }).map_err(crate::write::os_error)
    }

    /// The segment `fd` is about to be closed, synced already (a roll), or with nothing
    /// written through the file since (a close after `checkpoint`): the file no longer
    /// syncs it.
    fn forget(&self, py: Python<'_>, fd: i32) {
        py.detach(|| self.exclusive().fds.retain(|&f| f != fd));
    }

    /// No more rounds: a commit that still comes fails (the store is closing).
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let mut s = self.exclusive();
            if s.failed.is_none() {
                s.failed = Some((Some(libc::EBADF), "the write-ahead file is closed".into()));
            }
        });
    }

    /// How many usual writes may be in flight alone, each its segment's own `RWF_DSYNC`
    /// write, before commits share the file's rounds (4 per CPU; 0: every usual write goes
    /// through the file, which tests of the file's path set)
    #[getter]
    fn alone_limit(&self) -> u32 {
        self.alone_limit.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[setter]
    fn set_alone_limit(&self, limit: u32) {
        self.alone_limit.store(limit, std::sync::atomic::Ordering::Relaxed);
    }

    /// The file's descriptor (the caller's, which it closes after `close`)
    #[getter]
    fn fd(&self) -> i32 {
        self.fd
    }

    /// The generation entries are written in now
    #[getter]
    fn generation(&self) -> u32 {
        self.lock().generation
    }

    /// Where the next round goes
    #[getter]
    fn end(&self) -> i64 {
        self.lock().end
    }
}

fn error_of(failed: &(Option<i32>, String)) -> std::io::Error {
    match failed.0 {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::other(format!("the write-ahead file failed: {}", failed.1)),
    }
}

/// All of `buf` written at `at` of `fd` with `RWF_DSYNC` (a short write is finished with
/// another).
fn write_all_dsync(fd: i32, buf: &[u8], at: i64) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = crate::write::pwritev2_dsync(fd, &buf[done..], at + done as i64)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

fn fdatasync(fd: i32) -> std::io::Result<()> {
    loop {
        // SAFETY: fdatasync takes a file descriptor by value and touches no memory of ours.
        if unsafe { libc::fdatasync(fd) } == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}
