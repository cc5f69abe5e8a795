//! Opening and validating a GGUF file, metadata look-ups, and tensor loading with optional
//! requantisation to Q8_0.

use crate::{Error, Result};
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// An opened, validated GGUF file: header parsed, every tensor's data inside the file.
pub(crate) struct GgufFile {
    pub path: PathBuf,
    pub content: gguf_file::Content,
    pub reader: BufReader<File>,
}

/// Bytes of a tensor's data in the file.
pub(crate) fn tensor_bytes(info: &gguf_file::TensorInfo) -> Option<u64> {
    let elems = info.shape.elem_count();
    let bs = info.ggml_dtype.block_size();
    if bs == 0 || !elems.is_multiple_of(bs) {
        return None;
    }
    Some((elems / bs * info.ggml_dtype.type_size()) as u64)
}

impl GgufFile {
    /// Open `path`, parse its header and check that every tensor's data lies inside the
    /// file. Each failure names the file.
    pub fn open(path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::bad_input(path, "GGUF model file not found")
            } else {
                Error::io(path, e)
            }
        })?;
        if !meta.is_file() {
            return Err(Error::bad_input(
                path,
                "not a file (expected a GGUF model file)",
            ));
        }
        let file_size = meta.len();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| {
            Error::bad_input(
                path,
                format!("corrupt or unsupported GGUF header ({file_size} bytes): {e}"),
            )
        })?;
        // Truncation: the header says where each tensor's data is; all of it must be there.
        let mut needed = content.tensor_data_offset;
        let mut last: Option<&str> = None;
        for (name, info) in &content.tensor_infos {
            let bytes = tensor_bytes(info).ok_or_else(|| {
                Error::bad_input(
                    path,
                    format!(
                        "tensor `{name}`: {} elements are not a whole number of {:?} blocks",
                        info.shape.elem_count(),
                        info.ggml_dtype
                    ),
                )
            })?;
            let end = content
                .tensor_data_offset
                .saturating_add(info.offset)
                .saturating_add(bytes);
            if end > needed {
                needed = end;
                last = Some(name);
            }
        }
        if needed > file_size {
            return Err(Error::bad_input(
                path,
                format!(
                    "truncated GGUF: the header places tensor data up to byte {needed} (tensor `{}`), \
                     but the file has only {file_size} bytes",
                    last.unwrap_or("?")
                ),
            ));
        }
        Ok(GgufFile {
            path: path.to_path_buf(),
            content,
            reader,
        })
    }

    fn missing(&self, key: &str) -> Error {
        Error::bad_input(&self.path, format!("GGUF metadata key `{key}` is missing"))
    }

    fn wrong(&self, key: &str, e: impl std::fmt::Display) -> Error {
        Error::bad_input(&self.path, format!("GGUF metadata key `{key}`: {e}"))
    }

    /// A metadata value, if present.
    pub fn get(&self, key: &str) -> Option<&gguf_file::Value> {
        self.content.metadata.get(key)
    }

    /// A required string.
    pub fn str(&self, key: &str) -> Result<&str> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        v.to_string()
            .map(|s| s.as_str())
            .map_err(|e| self.wrong(key, e))
    }

    /// A required unsigned integer (any integer width).
    pub fn usize(&self, key: &str) -> Result<usize> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        value_u64(v)
            .map(|x| x as usize)
            .ok_or_else(|| self.wrong(key, format!("expected an integer, got {v:?}")))
    }

    /// An optional unsigned integer.
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.usize(key).map(Some),
        }
    }

    /// An optional float.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        match self.get(key) {
            None => Ok(None),
            Some(gguf_file::Value::F32(x)) => Ok(Some(*x)),
            Some(gguf_file::Value::F64(x)) => Ok(Some(*x as f32)),
            Some(v) => Err(self.wrong(key, format!("expected a float, got {v:?}"))),
        }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(gguf_file::Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, format!("expected a bool, got {v:?}"))),
        }
    }

    /// A required array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<String>> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        let arr = v.to_vec().map_err(|e| self.wrong(key, e))?;
        arr.iter()
            .enumerate()
            .map(|(i, x)| {
                x.to_string()
                    .cloned()
                    .map_err(|e| self.wrong(key, format!("element {i}: {e}")))
            })
            .collect()
    }

    /// An optional array of integers.
    pub fn opt_ints(&self, key: &str) -> Result<Option<Vec<u64>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let arr = v.to_vec().map_err(|e| self.wrong(key, e))?;
        arr.iter()
            .enumerate()
            .map(|(i, x)| {
                value_u64(x)
                    .ok_or_else(|| self.wrong(key, format!("element {i} is not an integer")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// Whether a tensor is present.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// Read a tensor; when `requantize` and its type is Q4_1/Q5_0/Q5_1, requantise it to
    /// Q8_0 (those types have no AVX2/AVX-512 matmul kernel in candle).
    pub fn tensor(&mut self, name: &str, requantize: bool) -> Result<QTensor> {
        if !self.has_tensor(name) {
            return Err(Error::bad_input(
                &self.path,
                format!("tensor `{name}` is missing"),
            ));
        }
        let path = self.path.clone();
        let t = self
            .content
            .tensor(&mut self.reader, name, &Device::Cpu)
            .map_err(|e| Error::bad_input(&path, format!("tensor `{name}`: {e}")))?;
        if requantize {
            self.requantize(name, t)
        } else {
            Ok(t)
        }
    }

    /// `t` (the tensor `name` as read) requantised to Q8_0 when its type has no fast CPU
    /// kernel ([`needs_requant`]) and its rows split into Q8_0 blocks; otherwise `t` itself.
    pub fn requantize(&self, name: &str, t: QTensor) -> Result<QTensor> {
        let cols = t.shape().dims().last().copied().unwrap_or(0);
        if !needs_requant(t.dtype()) || cols % GgmlDType::Q8_0.block_size() != 0 {
            return Ok(t);
        }
        t.dequantize(&Device::Cpu)
            .and_then(|f| QTensor::quantize(&f, GgmlDType::Q8_0))
            .map_err(|e| {
                Error::bad_input(&self.path, format!("tensor `{name}`: requantising: {e}"))
            })
    }
}

/// Whether a storage type has no fast CPU kernel in candle (requantised under
/// [`super::Requantize::Always`]).
pub(crate) fn needs_requant(d: GgmlDType) -> bool {
    matches!(d, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

fn value_u64(v: &gguf_file::Value) -> Option<u64> {
    use gguf_file::Value::*;
    Some(match v {
        U8(x) => *x as u64,
        U16(x) => *x as u64,
        U32(x) => *x as u64,
        U64(x) => *x,
        I8(x) if *x >= 0 => *x as u64,
        I16(x) if *x >= 0 => *x as u64,
        I32(x) if *x >= 0 => *x as u64,
        I64(x) if *x >= 0 => *x as u64,
        _ => return None,
    })
}
