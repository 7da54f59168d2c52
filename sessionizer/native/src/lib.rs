//! `_sessionizer_json`: a finished session's JSON, as `sessionizer.sinks` writes it.
//!
//! `session_json(value)` returns the bytes `json.dumps(value, sort_keys=True,
//! ensure_ascii=True, allow_nan=False)` gives (separators ", " and ": "), or None for
//! any value it does not handle itself: anything but `None`, exact `bool`, `int`,
//! finite `float`, `str` without lone surrogates, `list`, `tuple` and `dict` with `str`
//! keys, or nesting deeper than `MAX_DEPTH`.  The Python encoder, the reference, then
//! encodes the session, applies its fallback for other types and names the error of
//! an unsendable one.  tests/unit/test_native_json.py holds the two to the same bytes.

use std::io::Write;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Deeper nesting goes to the reference.
const MAX_DEPTH: usize = 64;

enum Stop {
    Decline,
    Failed(PyErr),
}

impl From<PyErr> for Stop {
    fn from(err: PyErr) -> Self {
        Stop::Failed(err)
    }
}

type Fast<T> = Result<T, Stop>;

/// The session's JSON bytes, or None where the reference encoder must decide.
#[pyfunction]
fn session_json<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let mut out = Vec::with_capacity(512);
    match write_value(&mut out, value, 0) {
        Ok(()) => Ok(Some(PyBytes::new(py, &out))),
        Err(Stop::Decline) => Ok(None),
        Err(Stop::Failed(err)) => Err(err),
    }
}

fn write_value(out: &mut Vec<u8>, value: &Bound<'_, PyAny>, depth: usize) -> Fast<()> {
    if value.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(text) = value.downcast_exact::<PyString>() {
        write_str(out, text.to_str().map_err(|_| Stop::Decline)?);
    } else if let Ok(flag) = value.downcast_exact::<PyBool>() {
        out.extend_from_slice(if flag.is_true() { b"true" } else { b"false" });
    } else if let Ok(number) = value.downcast_exact::<PyInt>() {
        match number.extract::<i64>() {
            Ok(small) => write!(out, "{small}").map_err(|_| Stop::Decline)?,
            Err(_) => out.extend_from_slice(number.repr()?.to_str()?.as_bytes()),
        }
    } else if let Ok(number) = value.downcast_exact::<PyFloat>() {
        if !number.value().is_finite() {
            return Err(Stop::Decline); // allow_nan=False: the reference names the error
        }
        out.extend_from_slice(number.repr()?.to_str()?.as_bytes()); // float.__repr__, as json
    } else if depth >= MAX_DEPTH {
        return Err(Stop::Decline);
    } else if let Ok(map) = value.downcast_exact::<PyDict>() {
        write_dict(out, map, depth)?;
    } else if let Ok(list) = value.downcast_exact::<PyList>() {
        write_items(out, list.iter(), depth)?;
    } else if let Ok(tuple) = value.downcast_exact::<PyTuple>() {
        write_items(out, tuple.iter(), depth)?;
    } else {
        return Err(Stop::Decline); // the reference's fallback (sets, dates...) or its error
    }
    Ok(())
}

fn write_items<'py>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    depth: usize,
) -> Fast<()> {
    out.push(b'[');
    for (index, item) in items.enumerate() {
        if index > 0 {
            out.extend_from_slice(b", ");
        }
        write_value(out, &item, depth + 1)?;
    }
    out.push(b']');
    Ok(())
}

/// `sort_keys=True`: UTF-8 byte order is code point order, `str`'s own.
fn write_dict(out: &mut Vec<u8>, map: &Bound<'_, PyDict>, depth: usize) -> Fast<()> {
    let mut entries = Vec::with_capacity(map.len());
    for (key, item) in map.iter() {
        let key = key
            .downcast_into_exact::<PyString>()
            .map_err(|_| Stop::Decline)?;
        entries.push((key, item));
    }
    let mut named = Vec::with_capacity(entries.len());
    for (key, item) in &entries {
        named.push((key.to_str().map_err(|_| Stop::Decline)?, item));
    }
    named.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (index, (key, item)) in named.iter().enumerate() {
        if index > 0 {
            out.extend_from_slice(b", ");
        }
        write_str(out, key);
        out.extend_from_slice(b": ");
        write_value(out, item, depth + 1)?;
    }
    out.push(b'}');
    Ok(())
}

/// `ensure_ascii`: printable ASCII as it is, the rest escaped as `json` escapes it.
fn write_str(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for ch in text.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{08}' => out.extend_from_slice(b"\\b"),
            '\u{0c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(ch as u8),
            _ => {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    let digit = |shift: u16| HEX[((*unit >> shift) & 0xf) as usize];
                    out.extend_from_slice(&[b'\\', b'u', digit(12), digit(8), digit(4), digit(0)]);
                }
            }
        }
    }
    out.push(b'"');
}

#[pymodule]
fn _sessionizer_json(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(session_json, module)?)?;
    Ok(())
}
