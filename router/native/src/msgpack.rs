//! msgpack into Python objects, for the shapes `msgpack.unpackb(raw=False,
//! strict_map_key=False)` turns into plain values; anything else is declined.
//!
//! Declining is never an error of its own: the reference decoder (router/wire.py) then
//! decodes the record and decides, so a record the fast path gives back gets exactly the
//! reference's result or dead-letter reason.  Declined: extension types (msgpack's
//! `ExtType` and `Timestamp`), the unused marker 0xc1, invalid UTF-8, truncated or
//! trailing bytes, nesting deeper than `MAX_DEPTH`, and maps keyed by arrays or maps.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};

/// Deeper nesting goes to the reference (msgpack's own limit is larger).
const MAX_DEPTH: usize = 64;

/// Why the fast path stops: the record goes to the reference decoder, or Python failed.
pub enum Stop {
    Decline,
    Failed(PyErr),
}

impl From<PyErr> for Stop {
    fn from(err: PyErr) -> Self {
        Stop::Failed(err)
    }
}

impl From<std::convert::Infallible> for Stop {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

pub type Fast<T> = Result<T, Stop>;

/// A cursor over one record's value bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn take(&mut self, n: usize) -> Fast<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Stop::Decline)?;
        let bytes = self.buf.get(self.pos..end).ok_or(Stop::Decline)?;
        self.pos = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Fast<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Fast<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A big-endian unsigned integer of 1, 2, 4 or 8 bytes.
    fn unsigned(&mut self, width: usize) -> Fast<u64> {
        Ok(match width {
            1 => self.byte()? as u64,
            2 => u16::from_be_bytes(self.array()?) as u64,
            4 => u32::from_be_bytes(self.array()?) as u64,
            _ => u64::from_be_bytes(self.array()?),
        })
    }

    /// A big-endian signed integer of 1, 2, 4 or 8 bytes.
    fn signed(&mut self, width: usize) -> Fast<i64> {
        Ok(match width {
            1 => self.byte()? as i8 as i64,
            2 => i16::from_be_bytes(self.array()?) as i64,
            4 => i32::from_be_bytes(self.array()?) as i64,
            _ => i64::from_be_bytes(self.array()?),
        })
    }

    fn length(&mut self, width: usize) -> Fast<usize> {
        usize::try_from(self.unsigned(width)?).map_err(|_| Stop::Decline)
    }

    /// The entry count of a map, if the next value is one.
    pub fn map_len(&mut self) -> Fast<usize> {
        match self.byte()? {
            m @ 0x80..=0x8f => Ok((m & 0x0f) as usize),
            m @ (0xde | 0xdf) => self.length(2 << (m - 0xde)),
            _ => Err(Stop::Decline),
        }
    }

    /// A string's bytes, if the next value is one: not yet checked to be UTF-8 (the caller
    /// checks, and makes the `str`).
    pub fn str_raw(&mut self) -> Fast<&'a [u8]> {
        let len = match self.byte()? {
            m @ 0xa0..=0xbf => (m & 0x1f) as usize,
            m @ 0xd9..=0xdb => self.length(1 << (m - 0xd9))?,
            _ => return Err(Stop::Decline),
        };
        self.take(len)
    }

    fn text<'py>(&mut self, py: Python<'py>, len: usize) -> Fast<Bound<'py, PyAny>> {
        Ok(new_str(py, self.take(len)?)?.into_any())
    }

    /// The next value, as msgpack-python makes it.
    pub fn value<'py>(&mut self, py: Python<'py>, depth: usize) -> Fast<Bound<'py, PyAny>> {
        let marker = self.byte()?;
        Ok(match marker {
            0x00..=0x7f => (marker as i64).into_pyobject(py)?.into_any(),
            0xe0..=0xff => ((marker as i8) as i64).into_pyobject(py)?.into_any(),
            0x80..=0x8f => self.map(py, (marker & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.list(py, (marker & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.text(py, (marker & 0x1f) as usize)?,
            0xc0 => py.None().into_bound(py),
            0xc2 => PyBool::new(py, false).to_owned().into_any(),
            0xc3 => PyBool::new(py, true).to_owned().into_any(),
            0xc4..=0xc6 => {
                let len = self.length(1 << (marker - 0xc4))?;
                PyBytes::new(py, self.take(len)?).into_any()
            }
            0xca => PyFloat::new(py, f32::from_be_bytes(self.array()?) as f64).into_any(),
            0xcb => PyFloat::new(py, f64::from_be_bytes(self.array()?)).into_any(),
            0xcc..=0xcf => {
                let number = self.unsigned(1 << (marker - 0xcc))?;
                number.into_pyobject(py)?.into_any()
            }
            0xd0..=0xd3 => {
                let number = self.signed(1 << (marker - 0xd0))?;
                number.into_pyobject(py)?.into_any()
            }
            0xd9..=0xdb => {
                let len = self.length(1 << (marker - 0xd9))?;
                self.text(py, len)?
            }
            0xdc | 0xdd => {
                let len = self.length(2 << (marker - 0xdc))?;
                self.list(py, len, depth)?
            }
            0xde | 0xdf => {
                let len = self.length(2 << (marker - 0xde))?;
                self.map(py, len, depth)?
            }
            // 0xc1 (never used), 0xc7-0xc9 and 0xd4-0xd8 (extension types)
            _ => return Err(Stop::Decline),
        })
    }

    fn list<'py>(&mut self, py: Python<'py>, len: usize, depth: usize) -> Fast<Bound<'py, PyAny>> {
        if depth >= MAX_DEPTH || len > self.buf.len() - self.pos {
            return Err(Stop::Decline); // each item takes a byte at least
        }
        let list = PyList::empty(py);
        for _ in 0..len {
            list.append(self.value(py, depth + 1)?)?;
        }
        Ok(list.into_any())
    }

    fn map<'py>(&mut self, py: Python<'py>, len: usize, depth: usize) -> Fast<Bound<'py, PyAny>> {
        if depth >= MAX_DEPTH || len > (self.buf.len() - self.pos) / 2 {
            return Err(Stop::Decline); // each entry takes two bytes at least
        }
        let map = PyDict::new(py);
        for _ in 0..len {
            // A key that is an array or a map: msgpack-python has its own rules; the reference decides.
            if matches!(self.buf.get(self.pos), Some(0x80..=0x9f | 0xdc..=0xdf)) {
                return Err(Stop::Decline);
            }
            let key = self.value(py, depth + 1)?;
            let item = self.value(py, depth + 1)?;
            map.set_item(key, item)?;
        }
        Ok(map.into_any())
    }
}

/// A `str` of UTF-8 bytes; ASCII (most of a log's text) is copied without decoding.
pub fn new_str<'py>(py: Python<'py>, bytes: &[u8]) -> Fast<Bound<'py, PyString>> {
    if !bytes.is_ascii() {
        let text = std::str::from_utf8(bytes).map_err(|_| Stop::Decline)?;
        return Ok(PyString::new(py, text));
    }
    let size = pyo3::ffi::Py_ssize_t::try_from(bytes.len()).map_err(|_| Stop::Decline)?;
    // SAFETY: PyUnicode_New(size, 127) makes a compact ASCII string of `size` one-byte
    // characters (or fails with an exception set); its data is filled before it is used.
    unsafe {
        let made = pyo3::ffi::PyUnicode_New(size, 127);
        let made = Bound::from_owned_ptr_or_err(py, made)?;
        let data = pyo3::ffi::PyUnicode_1BYTE_DATA(made.as_ptr());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        Ok(made.downcast_into_unchecked())
    }
}
