//! `_sessionizer_records`: what the engine builds once per finished session.
//!
//! - `session_id(stream, first_offset, key)` is the string
//!   `sessionizer.records.session_id` returns: `"<stream>:<first offset>:<8 hex of
//!   BLAKE2b(key), digest size 4>"`.
//! - `SlottedBuilder(cls, descriptors)` builds an instance of a slotted class from its
//!   fields' values in order, writing each slot through its member descriptor, as
//!   `framework.kernel.frozen.slot_writers` does from Python: the class (a frozen
//!   dataclass) keeps its `__init__`, equality, hashing and pickling.
//!
//! Interpreted, the two cost about 1.6 µs per session on the compiled engine (a frame,
//! a hashlib object, and ten method-wrapper calls); benchmarks/HOT_PATH.md, round 11.
//! tests/unit/test_native_records.py holds both to the Python reference.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `"<stream>:<first_offset>:<8 hex of BLAKE2b(key, digest_size=4)>"`.
#[pyfunction]
fn session_id(stream: &str, first_offset: i64, key: &str) -> String {
    let mut hasher = Blake2bVar::new(4).expect("4 bytes is a BLAKE2b digest size");
    hasher.update(key.as_bytes());
    let mut digest = [0u8; 4];
    hasher
        .finalize_variable(&mut digest)
        .expect("the buffer is the digest's size");
    let mut ident = String::with_capacity(stream.len() + 30);
    ident.push_str(stream);
    ident.push(':');
    ident.push_str(&first_offset.to_string());
    ident.push(':');
    for byte in digest {
        ident.push(HEX[usize::from(byte >> 4)] as char);
        ident.push(HEX[usize::from(byte & 15)] as char);
    }
    ident
}

/// Builds `cls` from its fields' values in order, through the slots' member descriptors.
#[pyclass(frozen, module = "_sessionizer_records")]
struct SlottedBuilder {
    cls: Py<PyType>,
    descriptors: Vec<Py<PyAny>>,
}

#[pymethods]
impl SlottedBuilder {
    #[new]
    fn new(cls: &Bound<'_, PyType>, descriptors: &Bound<'_, PyTuple>) -> PyResult<Self> {
        let member = cls.py().import("types")?.getattr("MemberDescriptorType")?;
        let mut kept = Vec::with_capacity(descriptors.len());
        for descriptor in descriptors.iter() {
            if !descriptor.get_type().is(&member) {
                return Err(PyTypeError::new_err(format!(
                    "{}: {} is not a slot's member descriptor",
                    cls.qualname()?,
                    descriptor.repr()?
                )));
            }
            kept.push(descriptor.unbind());
        }
        Ok(Self {
            cls: cls.clone().unbind(),
            descriptors: kept,
        })
    }

    /// A new instance whose slots hold `values`, in the descriptors' order.
    #[pyo3(signature = (*values))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if values.len() != self.descriptors.len() {
            return Err(PyTypeError::new_err(format!(
                "{} takes {} values, got {}",
                self.cls.bind(py).qualname()?,
                self.descriptors.len(),
                values.len()
            )));
        }
        // SAFETY: `cls` is a type, so it has `tp_alloc` (PyType_GenericAlloc, which tracks
        // a GC type's instance, as `object.__new__` does); each descriptor is a member
        // descriptor (checked in `new`), whose `tp_descr_set` checks the instance's type
        // and does not steal the value's reference.
        unsafe {
            let cls = self.cls.as_ptr().cast::<ffi::PyTypeObject>();
            let alloc = (*cls).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
            let instance = Bound::from_owned_ptr_or_err(py, alloc(cls, 0))?;
            for (descriptor, value) in self.descriptors.iter().zip(values.iter_borrowed()) {
                let set = (*ffi::Py_TYPE(descriptor.as_ptr()))
                    .tp_descr_set
                    .expect("a member descriptor has __set__");
                if set(descriptor.as_ptr(), instance.as_ptr(), value.as_ptr()) < 0 {
                    return Err(PyErr::fetch(py));
                }
            }
            Ok(instance)
        }
    }
}

#[pymodule]
fn _sessionizer_records(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(session_id, module)?)?;
    module.add_class::<SlottedBuilder>()?;
    Ok(())
}
