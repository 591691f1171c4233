//! A batch's payload: Python values to msgpack and back, with `rmp`'s encoders and marker
//! table. The engine's only msgpack codec of log records (docs/FORMAT.md, "Records").
//!
//! Encoding gives the bytes `msgpack.Packer(use_bin_type=True)` gives (the smallest form of
//! every integer, length and string header), so logs written before the native core and
//! after it are the same bytes. Decoding gives what `msgpack.unpackb(raw=False,
//! use_list=True)` gives: arrays as lists, maps as dicts with str or bytes keys, str as
//! str, bin as bytes. What it refuses is a `ValueError` (recovery turns it into a
//! `CorruptLogError` naming the batch): invalid UTF-8, a truncated value, bytes after the
//! payload's one value, a map key that is not a string, nesting past `MAX_DEPTH`, and the
//! extension types, which no record holds.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use rmp::encode as enc;
use rmp::Marker;

/// Deeper nesting than any record has; a bound so that crafted bytes cannot exhaust the
/// stack (each level is one Rust frame).
pub const MAX_DEPTH: usize = 256;

// Writing into a Vec cannot fail: rmp's error types are generic over the writer's.
fn wrote<T, E>(r: Result<T, E>) {
    let _ = r;
}

/// Append the msgpack encoding of `obj` to `out`.
pub fn encode(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>, depth: usize) -> PyResult<()> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err("value nested too deeply to encode"));
    }
    if obj.is_none() {
        enc::write_nil(out).ok();
    } else if let Ok(b) = obj.cast::<PyBool>() {
        wrote(enc::write_bool(out, b.is_true()));
    } else if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            if v >= 0 {
                wrote(enc::write_uint(out, v as u64));
            } else {
                wrote(enc::write_sint(out, v));
            }
        } else if let Ok(v) = i.extract::<u64>() {
            wrote(enc::write_uint(out, v));
        } else {
            return Err(PyOverflowError::new_err("int too big to encode"));
        }
    } else if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_str()?;
        wrote(enc::write_str_len(out, len32(text.len())?));
        out.extend_from_slice(text.as_bytes());
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        wrote(enc::write_array_len(out, len32(t.len())?));
        for item in t.iter() {
            encode(&item, out, depth + 1)?;
        }
    } else if let Ok(l) = obj.cast::<PyList>() {
        wrote(enc::write_array_len(out, len32(l.len())?));
        for item in l.iter() {
            encode(&item, out, depth + 1)?;
        }
    } else if let Ok(d) = obj.cast::<PyDict>() {
        wrote(enc::write_map_len(out, len32(d.len())?));
        for (k, v) in d.iter() {
            encode(&k, out, depth + 1)?;
            encode(&v, out, depth + 1)?;
        }
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        bin(out, b.as_bytes())?;
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        bin(out, &b.to_vec())?;
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        wrote(enc::write_f64(out, f.value()));
    } else {
        let name = obj.get_type().name()?;
        return Err(PyTypeError::new_err(format!("can not serialize {name:?} object")));
    }
    Ok(())
}

fn bin(out: &mut Vec<u8>, data: &[u8]) -> PyResult<()> {
    wrote(enc::write_bin_len(out, len32(data.len())?));
    out.extend_from_slice(data);
    Ok(())
}

fn len32(n: usize) -> PyResult<u32> {
    u32::try_from(n).map_err(|_| PyValueError::new_err("too long for msgpack (2**32 - 1)"))
}

/// A cursor over one payload.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

fn corrupt(what: &str) -> PyErr {
    PyValueError::new_err(what.to_string())
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// Whether every byte has been read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn take(&mut self, n: usize) -> PyResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| corrupt("truncated msgpack value"))?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn be<const N: usize>(&mut self) -> PyResult<[u8; N]> {
        self.take(N)?
            .try_into()
            .map_err(|_| corrupt("truncated msgpack value"))
    }

    fn len(&mut self, bytes: usize) -> PyResult<usize> {
        Ok(match bytes {
            1 => usize::from(self.be::<1>()?[0]),
            2 => usize::from(u16::from_be_bytes(self.be()?)),
            _ => u32::from_be_bytes(self.be()?) as usize,
        })
    }

    /// The marker of the next value.
    pub fn marker(&mut self) -> PyResult<Marker> {
        Ok(Marker::from_u8(self.be::<1>()?[0]))
    }

    /// The length of an array whose marker is `m`, or None if `m` is no array's.
    pub fn array_len(&mut self, m: Marker) -> PyResult<Option<usize>> {
        let n = match m {
            Marker::FixArray(n) => usize::from(n),
            Marker::Array16 => self.len(2)?,
            Marker::Array32 => self.len(4)?,
            _ => return Ok(None),
        };
        // every element takes at least one byte: a count beyond the bytes left is damage,
        // refused before anything is allocated for it
        if n > self.data.len() - self.pos {
            return Err(corrupt("truncated msgpack array"));
        }
        Ok(Some(n))
    }

    /// The length of a map whose marker is `m`, or None if `m` is no map's.
    pub fn map_len(&mut self, m: Marker) -> PyResult<Option<usize>> {
        let n = match m {
            Marker::FixMap(n) => usize::from(n),
            Marker::Map16 => self.len(2)?,
            Marker::Map32 => self.len(4)?,
            _ => return Ok(None),
        };
        // every entry takes at least two bytes
        if n > (self.data.len() - self.pos) / 2 {
            return Err(corrupt("truncated msgpack map"));
        }
        Ok(Some(n))
    }

    /// A str value whose marker is `m`, as a Rust str, or None if `m` is no str's.
    pub fn str_after(&mut self, m: Marker) -> PyResult<Option<&'a str>> {
        let n = match m {
            Marker::FixStr(n) => usize::from(n),
            Marker::Str8 => self.len(1)?,
            Marker::Str16 => self.len(2)?,
            Marker::Str32 => self.len(4)?,
            _ => return Ok(None),
        };
        let raw = self.take(n)?;
        std::str::from_utf8(raw)
            .map(Some)
            .map_err(|_| corrupt("invalid UTF-8 in a msgpack str"))
    }

    /// An integer value whose marker is `m`, if it is one that fits an i64.
    pub fn int_after(&mut self, m: Marker) -> PyResult<Option<i64>> {
        Ok(Some(match m {
            Marker::FixPos(n) => i64::from(n),
            Marker::FixNeg(n) => i64::from(n),
            Marker::U8 => i64::from(self.be::<1>()?[0]),
            Marker::U16 => i64::from(u16::from_be_bytes(self.be()?)),
            Marker::U32 => i64::from(u32::from_be_bytes(self.be()?)),
            Marker::U64 => match i64::try_from(u64::from_be_bytes(self.be()?)) {
                Ok(v) => v,
                Err(_) => {
                    // beyond i64: put the 8 bytes back, so the caller reads them as a u64
                    self.pos -= 8;
                    return Ok(None);
                }
            },
            Marker::I8 => i64::from(i8::from_be_bytes(self.be()?)),
            Marker::I16 => i64::from(i16::from_be_bytes(self.be()?)),
            Marker::I32 => i64::from(i32::from_be_bytes(self.be()?)),
            Marker::I64 => i64::from_be_bytes(self.be()?),
            _ => return Ok(None),
        }))
    }

    /// The next value as a Python object.
    pub fn value<'py>(&mut self, py: Python<'py>, depth: usize) -> PyResult<Bound<'py, PyAny>> {
        if depth > MAX_DEPTH {
            return Err(corrupt("msgpack value nested too deeply"));
        }
        let m = self.marker()?;
        if let Some(v) = self.int_after(m)? {
            return Ok(v.into_pyobject(py)?.into_any());
        }
        if let Some(s) = self.str_after(m)? {
            return Ok(PyString::new(py, s).into_any());
        }
        if let Some(n) = self.array_len(m)? {
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(self.value(py, depth + 1)?);
            }
            return Ok(PyList::new(py, items)?.into_any());
        }
        Ok(match m {
            Marker::Null => py.None().into_bound(py),
            Marker::True => PyBool::new(py, true).to_owned().into_any(),
            Marker::False => PyBool::new(py, false).to_owned().into_any(),
            Marker::U64 => u64::from_be_bytes(self.be()?).into_pyobject(py)?.into_any(),
            Marker::F32 => {
                PyFloat::new(py, f64::from(f32::from_be_bytes(self.be()?))).into_any()
            }
            Marker::F64 => PyFloat::new(py, f64::from_be_bytes(self.be()?)).into_any(),
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let n = self.len(match m {
                    Marker::Bin8 => 1,
                    Marker::Bin16 => 2,
                    _ => 4,
                })?;
                PyBytes::new(py, self.take(n)?).into_any()
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                let n = self.map_len(m)?.unwrap_or_default();
                let dict = PyDict::new(py);
                for _ in 0..n {
                    let key = self.value(py, depth + 1)?;
                    if !(key.is_instance_of::<PyString>() || key.is_instance_of::<PyBytes>()) {
                        return Err(corrupt("a msgpack map key that is not a string"));
                    }
                    let value = self.value(py, depth + 1)?;
                    dict.set_item(key, value)?;
                }
                dict.into_any()
            }
            Marker::Reserved => return Err(corrupt("reserved msgpack marker 0xc1")),
            _ => return Err(corrupt("msgpack extension types are not part of the format")),
        })
    }
}

/// The one value of `data`, which must be all of it.
pub fn decode<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let mut r = Reader::new(data);
    let value = r.value(py, 0)?;
    if !r.at_end() {
        return Err(corrupt("extra bytes after the msgpack value"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_python() {
        Python::attach(|py| {
            let value = py
                .eval(c"[1, -1, 2**63, 'é', b'\\x00', None, True, 1.5, {'k': [[]]}]", None, None)
                .unwrap();
            let mut out = Vec::new();
            encode(&value, &mut out, 0).unwrap();
            assert!(decode(py, &out).unwrap().eq(&value).unwrap());
        });
    }

    #[test]
    fn damage_is_a_value_error_not_a_panic() {
        Python::attach(|py| {
            for data in [&b""[..], b"\xc1", b"\xdd\xff\xff\xff\xff", b"\xa5abc", b"\x81\x01\x02",
                         b"\xc7\x01\x05x", b"\x90\x90"] {
                let err = decode(py, data).unwrap_err();
                assert!(err.is_instance_of::<PyValueError>(py), "{data:?}");
            }
        });
    }
}
