//! A log partition's lock (`PartLock`): `threading.Lock`'s interface for Python (`with
//! part.lock:`, `acquire`, `release`, `locked`, and so `threading.Condition`), and a plain
//! mutex for the native commit paths, which take it with no Python call.
//!
//! Why: the native paths took `threading.Lock` through its bound `acquire` and `release`, a
//! Python call each, twice per `commit_async` and four times per lone commit; those calls were
//! a tenth of a `commit_async` call's CPU (bench/RESULTS.md, twenty-first session).
//!
//! As `threading.Lock`: not reentrant, no owner, a blocked `acquire` lets the GIL go (and on
//! the main thread still runs signal handlers, at least every `SLICE`), releasing an unlocked
//! lock is a `RuntimeError`.

use std::time::{Duration, Instant};

use parking_lot::lock_api::{RawMutex as _, RawMutexTimed as _};
use parking_lot::RawMutex;
use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::store_entry::Given;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PartLock>()?;
    Ok(())
}

/// How long a blocked `acquire` waits between looks at the signal handlers
const SLICE: Duration = Duration::from_millis(20);

/// `threading.TIMEOUT_MAX` as `threading.Lock` has it on Linux (seconds)
const TIMEOUT_MAX: f64 = 9_223_372_036.0;

#[pyclass(frozen, module = "offsetlog.log._native")]
pub struct PartLock {
    raw: RawMutex,
}

#[pymethods]
impl PartLock {
    #[new]
    pub fn new() -> Self {
        PartLock { raw: RawMutex::INIT }
    }

    /// `threading.Lock.acquire`: True once held; False when not within `timeout` seconds
    /// (`-1`: no limit) or, not `blocking` (an int: a bool, or 0 or not), held elsewhere.
    #[pyo3(signature = (blocking = Given::Absent, timeout = -1.0))]
    fn acquire(&self, py: Python<'_>, blocking: Given<'_>, timeout: f64) -> PyResult<bool> {
        let blocking = match blocking {
            Given::Value(blocking) => blocking.extract::<i64>()? != 0,
            Given::Absent => true,
        };
        self.acquire_as(py, blocking, timeout)
    }

    fn release(&self) -> PyResult<()> {
        self.unlock()
    }

    fn locked(&self) -> bool {
        self.raw.is_locked()
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.lock(py).map(|()| true)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.unlock()
    }

    fn __repr__(&self) -> &'static str {
        if self.raw.is_locked() { "<locked PartLock>" } else { "<unlocked PartLock>" }
    }
}

impl PartLock {
    /// `acquire`, its arguments read.
    fn acquire_as(&self, py: Python<'_>, blocking: bool, timeout: f64) -> PyResult<bool> {
        if !blocking && timeout != -1.0 {
            return Err(PyValueError::new_err("can't specify a timeout for a non-blocking call"));
        }
        if timeout < 0.0 && timeout != -1.0 {
            return Err(PyValueError::new_err("timeout value must be a non-negative number"));
        }
        if timeout > TIMEOUT_MAX {
            return Err(PyOverflowError::new_err("timeout value is too large"));
        }
        if self.raw.try_lock() {
            return Ok(true);
        }
        if !blocking {
            return Ok(false);
        }
        let deadline = (timeout >= 0.0).then(|| Instant::now() + Duration::from_secs_f64(timeout));
        self.wait(py, deadline)
    }

    /// Take the lock, blocking (the GIL released) while another holds it.
    pub fn lock(&self, py: Python<'_>) -> PyResult<()> {
        if self.raw.try_lock() {
            return Ok(());
        }
        self.wait(py, None).map(drop)
    }

    /// Take the lock, blocking (the GIL released) while another holds it, with no look at the
    /// signal handlers: for a commit that is already durable and must still apply it and end
    /// its leadership (`lone`), which an exception here would leave held for ever (and a
    /// follower waiting for it). The lock is held for short steps only.
    pub fn lock_quietly(&self, py: Python<'_>) {
        if !self.raw.try_lock() {
            py.detach(|| self.raw.lock());
        }
    }

    /// Release the lock; an unlocked one is an error, as `threading.Lock` has it.
    pub fn unlock(&self) -> PyResult<()> {
        if !self.raw.is_locked() {
            return Err(PyRuntimeError::new_err("release unlocked lock"));
        }
        // SAFETY: the mutex is locked (checked above), and it is its holder that releases it:
        // every release in offsetlog follows that thread's own acquire (the lock is the
        // store's, never handed to users). parking_lot's RawMutex has no owner thread to
        // check anyway: unlocking is an atomic store and a wake-up.
        unsafe { self.raw.unlock() };
        Ok(())
    }

    /// Block (the GIL released, looking at signal handlers every `SLICE`) until the lock is
    /// taken, true, or `deadline` passes, false.
    fn wait(&self, py: Python<'_>, deadline: Option<Instant>) -> PyResult<bool> {
        loop {
            let slice = match deadline {
                None => SLICE,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(self.raw.try_lock());
                    }
                    left.min(SLICE)
                }
            };
            if py.detach(|| self.raw.try_lock_for(slice)) {
                return Ok(true);
            }
            py.check_signals()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_release_and_timeouts() {
        Python::attach(|py| {
            let lock = PartLock::new();
            assert!(lock.acquire_as(py, true, -1.0).unwrap());
            assert!(lock.locked());
            assert!(!lock.acquire_as(py, false, -1.0).unwrap());
            let t0 = Instant::now();
            assert!(!lock.acquire_as(py, true, 0.05).unwrap());
            assert!(t0.elapsed() >= Duration::from_millis(50));
            lock.unlock().unwrap();
            assert!(!lock.locked());
            assert!(lock.unlock().is_err()); // released twice
            assert!(lock.acquire_as(py, false, 0.5).is_err());
            assert!(lock.acquire_as(py, true, -2.0).is_err());
        });
    }

    #[test]
    fn a_blocked_acquire_waits_for_the_release_without_the_gil() {
        Python::attach(|py| {
            let lock = std::sync::Arc::new(Py::new(py, PartLock::new()).unwrap());
            lock.get().lock(py).unwrap();
            let other = lock.clone();
            // the other thread needs the GIL to take the lock: this one must let it go
            let waiter = std::thread::spawn(move || {
                Python::attach(|py| {
                    other.get().lock(py).unwrap();
                    other.get().unlock().unwrap();
                })
            });
            py.detach(|| std::thread::sleep(Duration::from_millis(50)));
            lock.get().unlock().unwrap();
            py.detach(|| waiter.join().unwrap());
            assert!(!lock.get().locked());
        });
    }
}
