//! `_sessionizer_json`: a finished session's JSON, as `sessionizer.sinks` writes it.
//!
//! `session_json(value)` returns the bytes `json.dumps(value, sort_keys=True,
//! ensure_ascii=True, allow_nan=False)` gives (separators ", " and ": "), or None for
//! any value it does not handle itself: anything but `None`, exact `bool`, `int`,
//! finite `float`, `str` without lone surrogates, `list`, `tuple` and `dict` with `str`
//! keys, or nesting deeper than `MAX_DEPTH`.  The Python encoder, the reference, then
//! encodes the session, applies its fallback for other types and names the error of
//! an unsendable one.  tests/unit/test_native_json.py holds the two to the same bytes.
//!
//! `SessionJson(result, truncated, fixed)` is `session_json(session.to_dict())` for a
//! `FinishedSession`, read through its slots' member descriptors without building the
//! dict (`to_dict` cost as much as the JSON; benchmarks/HOT_PATH.md, round 12): the
//! result's entries, then the fixed fields, which win, then `truncated` when set.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes `write_str` cannot copy as they are: controls, `"`, `\\`, DEL and non-ASCII.
const ESCAPED: [bool; 256] = {
    let mut table = [true; 256];
    let mut byte = b' ';
    while byte <= b'~' {
        table[byte as usize] = byte == b'"' || byte == b'\\';
        byte += 1;
    }
    table
};

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
            Ok(small) => write_int(out, small),
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
    write_entries(out, &entries, depth)
}

/// `entries` (distinct keys) as a JSON object, sorted by key.
fn write_entries(
    out: &mut Vec<u8>,
    entries: &[(Bound<'_, PyString>, Bound<'_, PyAny>)],
    depth: usize,
) -> Fast<()> {
    let mut named = Vec::with_capacity(entries.len());
    for (key, item) in entries {
        let key = key.to_str().map_err(|_| Stop::Decline)?;
        named.push((prefix(key), key, item));
    }
    // The first eight bytes decide most comparisons as one integer's; equal ones, the rest.
    named.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
    });
    out.push(b'{');
    for (index, (_, key, item)) in named.iter().enumerate() {
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

/// The key's first eight bytes, big-endian, zero-padded: ordered as the bytes are, except
/// where the padding ties a shorter key with a longer one (the full compare decides).
fn prefix(key: &str) -> u64 {
    let mut head = [0u8; 8];
    let bytes = key.as_bytes();
    let length = bytes.len().min(8);
    head[..length].copy_from_slice(&bytes[..length]);
    u64::from_be_bytes(head)
}

/// `int.__repr__` of an i64, without `fmt`'s machinery.
fn write_int(out: &mut Vec<u8>, value: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut left = value.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (left % 10) as u8;
        left /= 10;
        if left == 0 {
            break;
        }
    }
    if value < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// `ensure_ascii`: printable ASCII as it is, the rest escaped as `json` escapes it.
fn write_str(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    if !text
        .as_bytes()
        .iter()
        .any(|&byte| ESCAPED[usize::from(byte)])
    {
        // Most keys, paths and agents: one copy instead of a push per character.
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        return;
    }
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

/// `session_json(session.to_dict())` of a `FinishedSession`, from its slots.
#[pyclass(frozen, module = "_sessionizer_json")]
struct SessionJson {
    result: Py<PyAny>,
    truncated: Py<PyAny>,
    fixed: Vec<(Py<PyString>, String, Py<PyAny>)>,
    truncated_name: Py<PyString>,
}

/// The value of `descriptor` (a slot's member descriptor) on `instance`.
fn slot<'py>(descriptor: &Py<PyAny>, instance: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = instance.py();
    // SAFETY: every descriptor was checked to be a member descriptor in `new`; its
    // `tp_descr_get` checks the instance's type and returns a new reference or NULL.
    unsafe {
        let get = (*ffi::Py_TYPE(descriptor.as_ptr()))
            .tp_descr_get
            .expect("a member descriptor has __get__");
        let value = get(
            descriptor.as_ptr(),
            instance.as_ptr(),
            ffi::Py_TYPE(instance.as_ptr()).cast(),
        );
        Bound::from_owned_ptr_or_err(py, value)
    }
}

#[pymethods]
impl SessionJson {
    /// `result` and `truncated`: those slots' descriptors; `fixed`: (name, descriptor) of
    /// the fields `to_dict` writes over the result's, in its order.
    #[new]
    fn new(
        result: &Bound<'_, PyAny>,
        truncated: &Bound<'_, PyAny>,
        fixed: Vec<(Bound<'_, PyString>, Bound<'_, PyAny>)>,
    ) -> PyResult<Self> {
        let py = result.py();
        let member = py.import("types")?.getattr("MemberDescriptorType")?;
        let member = member.downcast::<PyType>()?;
        let check = |descriptor: &Bound<'_, PyAny>| -> PyResult<Py<PyAny>> {
            if descriptor.get_type().is(member) {
                Ok(descriptor.clone().unbind())
            } else {
                Err(PyTypeError::new_err(format!(
                    "{} is not a slot's member descriptor",
                    descriptor.repr()?
                )))
            }
        };
        let mut kept = Vec::with_capacity(fixed.len());
        for (name, descriptor) in &fixed {
            kept.push((
                name.clone().unbind(),
                name.to_str()?.to_owned(),
                check(descriptor)?,
            ));
        }
        Ok(Self {
            result: check(result)?,
            truncated: check(truncated)?,
            fixed: kept,
            truncated_name: PyString::intern(py, "truncated").unbind(),
        })
    }

    /// The session's JSON bytes, or None where the reference must decide.
    fn __call__<'py>(&self, session: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let py = session.py();
        let result = slot(&self.result, session)?;
        let Ok(result) = result.downcast_exact::<PyDict>() else {
            return Ok(None); // another mapping: `to_dict` and the reference
        };
        let truncated = slot(&self.truncated, session)?.is_truthy()?;
        let mut entries = Vec::with_capacity(result.len() + self.fixed.len() + 1);
        for (key, item) in result.iter() {
            let Ok(key) = key.downcast_into_exact::<PyString>() else {
                return Ok(None);
            };
            let Ok(text) = key.to_str() else {
                return Ok(None); // a lone surrogate: the reference names the error
            };
            let overridden = self.fixed.iter().any(|(_, name, _)| name == text)
                || (truncated && text == "truncated");
            if !overridden {
                entries.push((key, item));
            }
        }
        for (name, _, descriptor) in &self.fixed {
            entries.push((name.bind(py).clone(), slot(descriptor, session)?));
        }
        if truncated {
            entries.push((
                self.truncated_name.bind(py).clone(),
                PyBool::new(py, true).to_owned().into_any(),
            ));
        }
        let mut out = Vec::with_capacity(512);
        match write_entries(&mut out, &entries, 0) {
            Ok(()) => Ok(Some(PyBytes::new(py, &out))),
            Err(Stop::Decline) => Ok(None),
            Err(Stop::Failed(err)) => Err(err),
        }
    }
}

#[pymodule]
fn _sessionizer_json(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(session_json, module)?)?;
    module.add_class::<SessionJson>()?;
    Ok(())
}
