//! `Ring`: durable writes the kernel makes while the thread that asked for them goes on,
//! through Linux's io_uring and the maintained `io-uring` crate (tokio-rs). Linux only.
//!
//! What for: the wire server's event loop leads the store's async writer
//! (`offsetlog/store/async_writer.py`), and a round of a log partition waits ~100 us for its
//! `RWF_DSYNC` write. Made by threads, every write costs its thread the GIL twice, and each
//! hand-over of the GIL between the loop and a thread waited for the other to wake. Through a
//! ring there is one thread: the loop queues writes (`write`), one `io_uring_enter` starts
//! them all (`submit`), the kernel signals their completions on the loop's eventfd
//! (`register_eventfd`), and the loop collects them (`reap`). `RingWrites` in
//! `offsetlog/store/write_pool.py` is the one user; `offsetlog/log/uring.py` decides whether
//! there is a ring (`open_ring`).
//!
//! Why native: the ring is memory shared with the kernel. Read with Python's loads and stores
//! (ctypes, before this module), its ordering held only on x86-64, and a ring head caught half
//! written once hung a server. The crate reads and writes it with atomics and the kernel's
//! ordering, on every architecture.
//!
//! The kernel reads a write's bytes from their address until the write completes, so the ring
//! holds a reference to each `bytes` object it was handed until its completion is reaped
//! (`pending`), and waits for what is in flight before it lets the memory go (`close`, and
//! `Drop` for a ring collected unclosed). One thread uses a ring (its methods borrow it; a
//! second thread gets PyO3's borrow error, not a race). Every failure is an `OSError` with
//! `errno` set (`crate::write::os_error`); a closed ring answers EBADF.

use std::collections::{HashMap, VecDeque};
use std::io;

use io_uring::{opcode, types, EnterFlags, IoUring};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::write::os_error;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Ring>()
}

/// The most bytes one write asks of the kernel: Linux's own cap on a read or write
/// (`MAX_RW_COUNT`, 2 GiB less a page). A longer `bytes` object is a short write, as
/// `pwritev2` makes it, and the caller finishes it (`SegmentFile.end_durable`).
const MAX_RW_COUNT: usize = 0x7fff_f000;

/// A write handed to the ring: the caller's token, and the `bytes` the kernel reads.
struct Pending {
    token: Py<PyAny>,
    data: Py<PyBytes>,
}

/// A submission and a completion queue. `write` queues a write, `submit` starts what is
/// queued, `reap` returns what has completed as `(token, result)`: the bytes written, or
/// `-errno`.
#[pyclass(module = "offsetlog.log._native")]
pub struct Ring {
    /// None once closed
    ring: Option<IoUring>,
    /// asked for at setup (a renewed ring is made with the same)
    entries: u32,
    /// writes in flight at most: by default what the completion queue holds, so it never
    /// overflows (tests raise it, to see an overflow reaped)
    #[pyo3(get, set)]
    capacity: usize,
    /// user_data -> write: queued or in the kernel, until reaped (holds the buffers)
    pending: HashMap<u64, Pending>,
    /// the queued writes' user_data, in queue order: in the submission queue, not yet taken
    /// by an enter
    queued: VecDeque<u64>,
    /// the buffers of writes taken back (`take_back`): their entries stay in the submission
    /// queue, which no enter of this ring takes from again; released with the ring
    stale: Vec<Py<PyBytes>>,
    /// registered for completions: registered again on a renewed ring
    eventfd: Option<i32>,
    next_id: u64,
}

fn closed_error() -> PyErr {
    PyOSError::new_err((libc::EBADF, "the io_uring ring is closed"))
}

/// `io_uring_enter` to wait for `min` completions (0: only move those that overflowed the
/// completion queue into it), retried on EINTR when `retry` (else EINTR is returned).
fn enter_wait(ring: &IoUring, min: u32, retry: bool) -> io::Result<()> {
    loop {
        // SAFETY: no entry is taken (to_submit 0: a taken-back entry stays where it is, see
        // `take_back`) and no argument structure is passed (None, size 0); the kernel only
        // waits and posts completions to the ring the crate mapped.
        let r = unsafe {
            ring.submitter().enter::<libc::sigset_t>(0, min, EnterFlags::GETEVENTS.bits(), None)
        };
        match r {
            Err(e) if retry && e.kind() == io::ErrorKind::Interrupted => {}
            other => return other.map(drop),
        }
    }
}

#[pymethods]
impl Ring {
    /// A ring of `entries` submission slots (rounded up to a power of two by the kernel).
    /// :raises OSError: the kernel has no io_uring or refuses it (ENOSYS; EPERM from seccomp
    ///     or the `kernel.io_uring_disabled` sysctl; ENOMEM for locked memory; EINVAL for a
    ///     bad `entries`), with its errno.
    #[new]
    fn new(entries: u32) -> PyResult<Self> {
        let ring = IoUring::new(entries).map_err(os_error)?;
        let params = ring.params();
        let capacity = params.sq_entries().min(params.cq_entries()) as usize;
        Ok(Ring {
            ring: Some(ring),
            entries,
            capacity,
            pending: HashMap::new(),
            queued: VecDeque::new(),
            stale: Vec::new(),
            eventfd: None,
            next_id: 1,
        })
    }

    /// Signal `efd` (an eventfd) on every completion.
    fn register_eventfd(&mut self, efd: i32) -> PyResult<()> {
        let ring = self.ring.as_ref().ok_or_else(closed_error)?;
        ring.submitter().register_eventfd(efd).map_err(os_error)?;
        self.eventfd = Some(efd);
        Ok(())
    }

    /// Writes queued or in the kernel, not yet reaped.
    #[getter]
    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Writes in the submission queue that no enter has taken yet.
    #[getter]
    fn queued(&self) -> usize {
        self.queued.len()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.ring.is_none()
    }

    /// Queue `pwritev2(fd, [data], offset, rw_flags)`, to complete with `token`; False
    /// (nothing queued) when the ring is full. The ring holds `data` until the write is
    /// reaped: the kernel reads it from its address.
    /// :raises OSError: EBADF on a closed ring, EINVAL for a negative offset.
    fn write(&mut self, fd: i32, data: &Bound<'_, PyBytes>, offset: i64, rw_flags: i32,
             token: Py<PyAny>) -> PyResult<bool> {
        if self.ring.is_none() {
            return Err(closed_error());
        }
        let Ok(offset) = u64::try_from(offset) else {
            // (-1 would mean the file position to the kernel; to pwrite it is EINVAL)
            return Err(os_error(io::Error::from_raw_os_error(libc::EINVAL)));
        };
        if self.pending.len() >= self.capacity || (!self.stale.is_empty() && !self.renew()) {
            return Ok(false);
        }
        let buf = data.as_bytes();
        let len = buf.len().min(MAX_RW_COUNT) as u32; // (fits: MAX_RW_COUNT < 2^32)
        let id = self.next_id;
        let entry = opcode::Write::new(types::Fd(fd), buf.as_ptr(), len)
            .offset(offset)
            .rw_flags(rw_flags)
            .build()
            .user_data(id);
        self.pending.insert(id, Pending { token, data: data.clone().unbind() });
        let Some(ring) = self.ring.as_mut() else { return Err(closed_error()) };
        // SAFETY: the entry points at `len` bytes of `data`, a `bytes` object: immutable, its
        // buffer never moves, and the reference put in `pending` just above keeps it alive
        // until the write's completion is reaped (`reap` drops it then); a write taken back
        // keeps it in `stale` while its entry is in the ring (the kernel never reads it, but
        // the memory stays valid anyway); a ring dropped with writes in the kernel waits for
        // them or leaks their buffers (`Drop`). The kernel reads the entry no earlier than
        // the next `submit`. The fd is a number to the kernel: a bad one completes with
        // -EBADF.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            self.pending.remove(&id); // the submission queue is full
            return Ok(false);
        }
        self.next_id += 1;
        self.queued.push_back(id);
        Ok(true)
    }

    /// Start every queued write (one system call, more only if the kernel takes part).
    /// :raises OSError: the kernel took none of what is left (EAGAIN, ENOMEM): those stay
    ///     queued, see `take_back`.
    fn submit(&mut self) -> PyResult<()> {
        let ring = self.ring.as_ref().ok_or_else(closed_error)?;
        while !self.queued.is_empty() {
            let count = u32::try_from(self.queued.len()).unwrap_or(u32::MAX);
            // SAFETY: the kernel takes at most `count` entries from the submission queue's
            // head: the queued writes, whose buffers `pending` holds (`write`); no taken-back
            // entry is ever in a queue with queued ones (`take_back`, `renew`). No argument
            // structure is passed (None, size 0).
            let r = unsafe { ring.submitter().enter::<libc::sigset_t>(count, 0, 0, None) };
            match r {
                Ok(0) => return Err(os_error(io::Error::from_raw_os_error(libc::EAGAIN))),
                Ok(taken) => drop(self.queued.drain(..taken.min(self.queued.len()))),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(os_error(e)),
            }
        }
        Ok(())
    }

    /// After `submit` failed: the tokens of the queued writes, in queue order, which the
    /// kernel never will make now. Their entries stay in the submission queue, and this ring
    /// never asks the kernel to take from it again: the next `write` once nothing is in
    /// flight replaces the ring with a new one (until then `write` answers False).
    fn take_back(&mut self) -> PyResult<Vec<Py<PyAny>>> {
        if self.ring.is_none() {
            return Err(closed_error());
        }
        let mut tokens = Vec::with_capacity(self.queued.len());
        for id in self.queued.drain(..) {
            if let Some(p) = self.pending.remove(&id) {
                self.stale.push(p.data);
                tokens.push(p.token);
            }
        }
        Ok(tokens)
    }

    /// Block, the GIL released, until at least one write has completed (queued ones are
    /// started first); at once if nothing is in flight.
    /// :raises OSError: as `submit`; or the wait's own error.
    fn wait(&mut self, py: Python<'_>) -> PyResult<()> {
        self.submit()?;
        if self.pending.is_empty() {
            return Ok(());
        }
        let ring = self.ring.as_ref().ok_or_else(closed_error)?;
        loop {
            match py.detach(|| enter_wait(ring, 1, false)) {
                Ok(()) => return Ok(()),
                // a signal: its Python handler runs (and may raise), then the wait goes on
                Err(e) if e.kind() == io::ErrorKind::Interrupted => py.check_signals()?,
                Err(e) => return Err(os_error(e)),
            }
        }
    }

    /// The completed writes, as `(token, bytes written or -errno)`, in completion order;
    /// their buffers are let go.
    fn reap(&mut self) -> PyResult<Vec<(Py<PyAny>, i32)>> {
        let ring = self.ring.as_mut().ok_or_else(closed_error)?;
        let mut done = Vec::new();
        loop {
            // Completions the queue had no room for (never with the default capacity) wait
            // in the kernel until an enter moves them over.
            let overflowed = ring.submission().cq_overflow();
            if overflowed {
                if let Err(e) = enter_wait(ring, 0, true) {
                    if done.is_empty() {
                        return Err(os_error(e));
                    }
                    break; // (what was moved is answered; the rest at the next reap)
                }
            }
            for cqe in ring.completion() {
                if let Some(p) = self.pending.remove(&cqe.user_data()) {
                    done.push((p.token, cqe.result()));
                }
            }
            if !overflowed {
                return Ok(done);
            }
        }
        Ok(done)
    }

    /// Start what is queued and wait for everything in flight (the kernel reads buffers the
    /// ring holds), then release the ring. Idempotent.
    /// :raises OSError: as `wait`; the ring then stays open (nothing is let go), and a later
    ///     `close` tries again.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.ring.is_none() {
            return Ok(());
        }
        while !self.pending.is_empty() {
            self.wait(py)?;
            self.reap()?;
        }
        self.ring = None; // (unmapped and closed by the crate)
        self.stale.clear();
        Ok(())
    }
}

impl Ring {
    /// Replace a ring holding taken-back entries with a new one, once nothing of it is in
    /// flight; false if that cannot be yet (or the kernel refuses a new ring: the caller
    /// then writes itself, as it does when the ring is full).
    fn renew(&mut self) -> bool {
        if !self.pending.is_empty() {
            return false;
        }
        let Ok(fresh) = IoUring::new(self.entries) else { return false };
        if let Some(efd) = self.eventfd {
            if fresh.submitter().register_eventfd(efd).is_err() {
                return false;
            }
        }
        // The old ring goes with its taken-back entries, which the kernel never read (it
        // reads an entry only when an enter asks it to take it) and never will.
        self.ring = Some(fresh);
        self.stale.clear();
        true
    }
}

impl Drop for Ring {
    /// A ring collected without `close`: queued writes never reached the kernel and go with
    /// it; writes in the kernel are waited for (the GIL held: a destructor cannot give it
    /// up), and if the wait fails their buffers are leaked rather than freed under the kernel.
    fn drop(&mut self) {
        let Some(ring) = self.ring.as_mut() else { return };
        for id in self.queued.drain(..) {
            self.pending.remove(&id);
        }
        while !self.pending.is_empty() {
            if enter_wait(ring, 1, true).is_err() {
                std::mem::forget(std::mem::take(&mut self.pending));
                return;
            }
            for cqe in ring.completion() {
                self.pending.remove(&cqe.user_data());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// A ring, or None where this kernel has none (the test then has nothing to check).
    fn ring() -> Option<Ring> {
        Ring::new(4).ok()
    }

    fn temp_file(name: &str) -> std::fs::File {
        let path = std::env::temp_dir().join(format!("offsetlog-uring-{}-{name}",
                                                     std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true)
            .truncate(true).open(&path).expect("a temporary file");
        let _ = std::fs::remove_file(&path);
        f
    }

    #[test]
    fn a_write_completes_with_its_token_and_the_buffer_is_let_go() {
        let Some(mut r) = ring() else { return };
        let f = temp_file("write");
        Python::attach(|py| {
            let data = PyBytes::new(py, b"hello");
            let token = 7i32.into_pyobject(py).unwrap().into_any().unbind();
            assert!(r.write(f.as_raw_fd(), &data, 0, libc::RWF_DSYNC, token).unwrap());
            assert_eq!((r.in_flight(), r.queued()), (1, 1));
            let mut done = Vec::new();
            while done.is_empty() {
                r.wait(py).unwrap();
                done = r.reap().unwrap();
            }
            assert_eq!(done.len(), 1);
            assert_eq!(done[0].0.extract::<i32>(py).unwrap(), 7);
            assert_eq!(done[0].1, 5);
            assert_eq!(r.in_flight(), 0);
            r.close(py).unwrap();
            r.close(py).unwrap(); // idempotent
        });
        assert_eq!(std::fs::read(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap(),
                   b"hello");
    }

    #[test]
    fn a_closed_ring_answers_ebadf_and_a_negative_offset_einval() {
        let Some(mut r) = ring() else { return };
        Python::attach(|py| {
            let data = PyBytes::new(py, b"x");
            let err = r.write(0, &data, -1, 0, py.None()).unwrap_err();
            assert_eq!(err.value(py).getattr("errno").unwrap().extract::<i32>().unwrap(),
                       libc::EINVAL);
            r.close(py).unwrap();
            assert!(r.closed());
            let err = r.write(0, &data, 0, 0, py.None()).unwrap_err();
            assert!(err.is_instance_of::<PyOSError>(py));
            assert_eq!(err.value(py).getattr("errno").unwrap().extract::<i32>().unwrap(),
                       libc::EBADF);
            assert!(r.submit().is_err() && r.reap().is_err() && r.take_back().is_err());
        });
    }

    #[test]
    fn taken_back_writes_are_never_made_and_the_ring_is_renewed() {
        let Some(mut r) = ring() else { return };
        let f = temp_file("take-back");
        Python::attach(|py| {
            let data = PyBytes::new(py, b"never");
            assert!(r.write(f.as_raw_fd(), &data, 0, 0, py.None()).unwrap());
            assert_eq!(r.take_back().unwrap().len(), 1); // as after a failed submit
            assert_eq!((r.in_flight(), r.queued(), r.stale.len()), (0, 0, 1));
            let again = PyBytes::new(py, b"ok");
            assert!(r.write(f.as_raw_fd(), &again, 10, 0, py.None()).unwrap()); // renewed
            assert!(r.stale.is_empty());
            r.close(py).unwrap(); // starts it and waits
        });
        let mut content = vec![0u8; 10];
        content.extend_from_slice(b"ok");
        assert_eq!(std::fs::read(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap(),
                   content);
    }
}
