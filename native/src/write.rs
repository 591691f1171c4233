//! The durable write of a round: `pwritev2(RWF_DSYNC)`, with the GIL released for its wait.
//!
//! `offsetlog.log.segment` calls it through its `_write_dsync` hook (which tests replace to
//! inject faults); the reserve, the refusal fallback and short writes stay there, in Python.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    #[cfg(target_os = "linux")]
    m.add_function(wrap_pyfunction!(pwrite_dsync, m)?)?;
    let _ = m; // (elsewhere: no pwritev2, and segment writes then syncs)
    Ok(())
}

/// Write `data` at `offset` of `fd` and return once it is as durable as `fdatasync` would
/// make it: one `pwritev2(fd, [data], offset, RWF_DSYNC)`, retried on EINTR, the GIL released
/// meanwhile. Returns the bytes written (possibly short); an error is the `OSError` the
/// system call gave (EOPNOTSUPP, ENOSYS, EINVAL: the flag refused, as `segment` expects).
#[cfg(target_os = "linux")]
#[pyfunction]
pub fn pwrite_dsync(py: Python<'_>, fd: i32, data: &Bound<'_, PyBytes>, offset: i64)
                    -> PyResult<usize> {
    let buf = data.as_bytes();
    py.detach(|| pwritev2_dsync(fd, buf, offset)).map_err(os_error)
}

/// The `OSError` Python's own `os` functions raise for `error`: `errno` and `strerror` set
/// (and the subclass Python picks for that errno), which `segment` reads to tell a refused
/// `RWF_DSYNC` (EOPNOTSUPP, ENOSYS, EINVAL) from a failed write. PyO3's own conversion
/// keeps only the message.
pub(crate) fn os_error(error: std::io::Error) -> PyErr {
    let Some(code) = error.raw_os_error() else { return error.into() };
    let text = error.to_string();
    let strerror = text.strip_suffix(&format!(" (os error {code})")).unwrap_or(&text).to_owned();
    pyo3::exceptions::PyOSError::new_err((code, strerror))
}

/// `pwrite_dsync`'s system call, retried on EINTR, for a caller that has released the GIL
/// (`pwrite_dsync`, and the usual write in `durable`).
#[cfg(target_os = "linux")]
pub(crate) fn pwritev2_dsync(fd: i32, buf: &[u8], offset: i64) -> std::io::Result<usize> {
    // (a slice of usize length fits the iovec; the kernel caps one write at 2 GiB anyway)
    loop {
        let iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: `iov` points at `buf`, borrowed for the whole call; the callers pass the
        // contents of a `bytes` object, which is immutable and kept alive by their reference
        // (the GIL is released, but nothing can change or free it); the kernel only reads
        // those `iov_len` bytes.
        let n = unsafe { libc::pwritev2(fd, &iov, 1, offset, libc::RWF_DSYNC) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}
