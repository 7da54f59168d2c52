//! `_sessionizer_wire`: the node's wire decoder for the common fragment record.
//!
//! `WireDecoder.decode` takes a record as `router.wire.decode_fragment` does and returns
//! the same `Fragment`, or None for every record it does not handle itself: a record with
//! a `sessionizer-kind` header (watermarks, resize records), headers, a key, a timestamp
//! or a value of a type other than the exact ones the Kafka clients give, and whatever
//! `msgpack::Reader` declines.  The reference decoder decodes those, and raises its own
//! errors for the undecodable ones, so the fast path never decides a dead letter.
//! tests/unit/test_native_wire.py holds the two to the same results.

mod msgpack;

use std::collections::HashMap;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use msgpack::{Fast, Reader, Stop};

/// Field names longer than this are not kept (field names repeat; values do not).
const NAME_LIMIT: usize = 64;
/// At most this many distinct field names are kept.
const NAMES_KEPT: usize = 4096;
/// The names of this many first fields of the last record are remembered by position.
const LAST_KEPT: usize = 64;

/// Decodes fragment records for one process, keeping their field names interned.
#[pyclass(module = "_sessionizer_wire", frozen)]
struct WireDecoder {
    fragment: Py<PyAny>,
    kind_header: String,
    min_ms: i64,
    max_ms: i64,
    max_key_bytes: usize,
    names: Mutex<Names>,
}

/// Field names, interned: by their bytes, and the last record's by position (records of a
/// stream mostly repeat their fields in the same order, which then costs no hashing and no
/// UTF-8 check of a name).
#[derive(Default)]
struct Names {
    kept: HashMap<Box<[u8]>, Py<PyString>>,
    last: Vec<(Box<[u8]>, Py<PyString>)>,
}

#[pymethods]
impl WireDecoder {
    #[new]
    fn new(
        fragment: Py<PyAny>,
        kind_header: String,
        min_ms: i64,
        max_ms: i64,
        max_key_bytes: usize,
    ) -> Self {
        WireDecoder {
            fragment,
            kind_header,
            min_ms,
            max_ms,
            max_key_bytes,
            names: Mutex::new(Names::default()),
        }
    }

    /// The record's `Fragment`, or None where the reference decoder must decide.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        timestamp_ms: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let fragment = || -> Fast<Bound<'py, PyAny>> {
            self.check_headers(headers)?;
            self.check_timestamp(timestamp_ms)?;
            let text_key = self.key(py, key)?;
            let value = value
                .downcast_exact::<PyBytes>()
                .map_err(|_| Stop::Decline)?;
            let fields = self.fields(py, value.as_bytes())?;
            Ok(self
                .fragment
                .bind(py)
                .call1((offset, text_key, timestamp_ms, fields))?)
        };
        match fragment() {
            Ok(fragment) => Ok(Some(fragment)),
            Err(Stop::Decline) => Ok(None),
            Err(Stop::Failed(err)) => Err(err),
        }
    }

    /// How many field names are kept interned (for tests).
    fn names_kept(&self) -> usize {
        self.names.lock().map(|names| names.kept.len()).unwrap_or(0)
    }
}

impl WireDecoder {
    /// No header, or headers none of which is the kind header.
    fn check_headers(&self, headers: &Bound<'_, PyAny>) -> Fast<()> {
        if headers.is_none() {
            return Ok(());
        }
        let each = |header: Bound<'_, PyAny>| -> Fast<()> {
            let pair = header
                .downcast_exact::<PyTuple>()
                .map_err(|_| Stop::Decline)?;
            if pair.len() != 2 {
                return Err(Stop::Decline);
            }
            let name = pair.get_item(0)?;
            let name = name
                .downcast_exact::<PyString>()
                .map_err(|_| Stop::Decline)?;
            // A name that is not UTF-8 (a lone surrogate) is the reference's to judge.
            if name.to_str().map_err(|_| Stop::Decline)? == self.kind_header {
                return Err(Stop::Decline); // a watermark or a resize record
            }
            Ok(())
        };
        if let Ok(list) = headers.downcast_exact::<PyList>() {
            list.iter().try_for_each(each)
        } else if let Ok(tuple) = headers.downcast_exact::<PyTuple>() {
            tuple.iter().try_for_each(each)
        } else {
            Err(Stop::Decline)
        }
    }

    fn check_timestamp(&self, timestamp_ms: &Bound<'_, PyAny>) -> Fast<()> {
        let exact = timestamp_ms
            .downcast_exact::<PyInt>()
            .map_err(|_| Stop::Decline)?;
        let millis: i64 = exact.extract().map_err(|_| Stop::Decline)?;
        if millis < self.min_ms || millis > self.max_ms {
            return Err(Stop::Decline);
        }
        Ok(())
    }

    fn key<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> Fast<Bound<'py, PyString>> {
        let bytes = key
            .downcast_exact::<PyBytes>()
            .map_err(|_| Stop::Decline)?
            .as_bytes();
        if bytes.is_empty() || bytes.len() > self.max_key_bytes {
            return Err(Stop::Decline);
        }
        msgpack::new_str(py, bytes)
    }

    /// The top-level map of fields, every name a string.
    fn fields<'py>(&self, py: Python<'py>, value: &[u8]) -> Fast<Bound<'py, PyDict>> {
        let mut reader = Reader::new(value);
        let len = reader.map_len()?;
        let fields = PyDict::new(py);
        // Once per record; not held by another call (a collector's finalizer decoding on
        // this thread would find it taken): the names are then made without it.
        let mut names = self.names.try_lock().ok();
        for position in 0..len {
            let raw = reader.str_raw()?;
            let name = match names.as_deref_mut() {
                Some(names) => names.name(py, position, raw)?,
                None => PyString::new(py, utf8(raw)?),
            };
            let item = reader.value(py, 1)?;
            fields.set_item(name, item)?;
        }
        if !reader.at_end() {
            return Err(Stop::Decline); // trailing bytes: msgpack's ExtraData
        }
        Ok(fields)
    }
}

impl Names {
    /// The field name at `position` of a record as a `str`, interned.
    fn name<'py>(
        &mut self,
        py: Python<'py>,
        position: usize,
        raw: &[u8],
    ) -> Fast<Bound<'py, PyString>> {
        if let Some((bytes, kept)) = self.last.get(position) {
            if **bytes == *raw {
                return Ok(kept.bind(py).clone());
            }
        }
        let text = utf8(raw)?;
        if raw.len() > NAME_LIMIT {
            return Ok(PyString::new(py, text));
        }
        let made = match self.kept.get(raw) {
            Some(kept) => kept.bind(py).clone(),
            None => {
                let made = PyString::intern(py, text);
                if self.kept.len() < NAMES_KEPT {
                    self.kept.insert(raw.into(), made.clone().unbind());
                }
                made
            }
        };
        if position < self.last.len() {
            self.last[position] = (raw.into(), made.clone().unbind());
        } else if position == self.last.len() && position < LAST_KEPT {
            self.last.push((raw.into(), made.clone().unbind()));
        }
        Ok(made)
    }
}

/// `raw` as text, if it is UTF-8 (else the reference decoder decides).
fn utf8(raw: &[u8]) -> Fast<&str> {
    std::str::from_utf8(raw).map_err(|_| Stop::Decline)
}

#[pymodule]
fn _sessionizer_wire(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<WireDecoder>()?;
    Ok(())
}
