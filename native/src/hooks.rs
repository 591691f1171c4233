//! Whether a test's fault-injection hook replaced what the native path would call, asked on
//! every commit and answered without a Python attribute look-up: a module's global read from
//! its dict, a class's method through a cache kept per (type, version tag).
//!
//! The tests replace `offsetlog.log.segment._write_dsync`, `offsetlog.store.lone_commit.
//! frame_fields` and `OffsetTable.apply_commit_calls`; the lone commit then calls what they
//! put there (the write: `durable::append_durable`, through `global`) or hands that step to
//! Python. `getattr` on a module or a type costs ~150-300 instructions a call
//! (three of them were ~9% of a `commit_sync`).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyModule, PyString, PyType};

/// `module.name` (None when it is gone): the module's dict read directly, as `getattr` finds
/// a module's global (a test's `monkeypatch.setattr` writes there).
pub fn global<'py>(module: &Bound<'py, PyModule>, name: &Bound<'py, PyString>)
                   -> PyResult<Option<Bound<'py, PyAny>>> {
    module.dict().get_item(name)
}

/// Whether `module.name` is `expected` (false when it is gone; see `global`).
pub fn global_is(module: &Bound<'_, PyModule>, name: &Bound<'_, PyString>,
                 expected: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(global(module, name)?.is_some_and(|v| v.is(expected)))
}

/// The answer of `type.name is expected` for one type, kept while the type is unchanged.
///
/// CPython gives a type a new `tp_version_tag` (from one counter that only rises, so a tag is
/// never given twice) whenever the type or one of its bases changes, and 0 with the
/// `VALID_VERSION_TAG` flag cleared until its next look-up; its method cache relies on exactly
/// that. A (type, tag) pair seen with a valid tag therefore names one state of the type's
/// attributes. Read and written under the GIL only, which orders the two fields' accesses.
pub struct MethodIs {
    ty: AtomicUsize,
    tag: AtomicU32,
}

impl MethodIs {
    pub const fn new() -> Self {
        MethodIs { ty: AtomicUsize::new(0), tag: AtomicU32::new(0) }
    }

    /// Whether `ty.name` is `expected`; a look-up only when `ty` or its tag changed since
    /// the last true answer.
    pub fn check(&self, ty: &Bound<'_, PyType>, name: &Bound<'_, PyString>,
                 expected: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = ty.as_ptr() as usize;
        let tag = version_tag(ty);
        if tag != 0 && self.ty.load(Ordering::Relaxed) == key
            && self.tag.load(Ordering::Relaxed) == tag
        {
            return Ok(true);
        }
        let same = ty.getattr(name)?.is(expected);
        // (the look-up just made assigns a tag if the type had none)
        let tag = version_tag(ty);
        if same && tag != 0 {
            self.ty.store(key, Ordering::Relaxed);
            self.tag.store(tag, Ordering::Relaxed);
        } else {
            self.tag.store(0, Ordering::Relaxed);
        }
        Ok(same)
    }
}

/// `ty`'s version tag, 0 when it has no valid one.
fn version_tag(ty: &Bound<'_, PyType>) -> u32 {
    let tp = ty.as_type_ptr();
    // SAFETY: `tp` is a live type object (held by `ty`, the GIL held); the flags and the
    // version tag are plain fields of every PyTypeObject, which CPython writes under the GIL.
    unsafe {
        if (*tp).tp_flags & pyo3::ffi::Py_TPFLAGS_VALID_VERSION_TAG == 0 {
            return 0;
        }
        (*tp).tp_version_tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_class_is_looked_up_again() {
        Python::attach(|py| {
            let ns = pyo3::types::PyDict::new(py);
            py.run(c"class A:\n    def m(self): pass\nclass B(A): pass\nf = A.m\n", Some(&ns), None)
                .unwrap();
            let b = ns.get_item("B").unwrap().unwrap();
            let b = b.cast::<PyType>().unwrap();
            let f = ns.get_item("f").unwrap().unwrap();
            let name = PyString::new(py, "m");
            let cache = MethodIs::new();
            assert!(cache.check(b, &name, &f).unwrap());
            assert!(cache.check(b, &name, &f).unwrap());
            // (a change to a base reaches the subclass's tag)
            py.run(c"A.m = lambda self: None\n", Some(&ns), None).unwrap();
            assert!(!cache.check(b, &name, &f).unwrap());
            py.run(c"A.m = f\n", Some(&ns), None).unwrap();
            assert!(cache.check(b, &name, &f).unwrap());
            py.run(c"B.m = lambda self: None\n", Some(&ns), None).unwrap();
            assert!(!cache.check(b, &name, &f).unwrap());
            assert!(!cache.check(b, &name, &f).unwrap());
        });
    }
}
