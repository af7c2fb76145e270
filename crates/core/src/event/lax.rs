//! Reading JSON the way the seed's readers do: pydantic's lax Python mode.
//!
//! Lax mode coerces a few shapes (`"seq":"7"` reads as 7, `1.0` as an int, `"true"` as a bool) and
//! ignores unknown fields; strings stay strict. Every failure names the dotted path of the field.

use serde_json::{Map, Value};

use crate::Error;

/// A JSON object, keys in insertion order.
pub type JsonObject = Map<String, Value>;

/// A JSON object being read, with the path that names its fields in errors.
pub(crate) struct Fields<'a> {
    map: &'a JsonObject,
    path: &'a str,
}

impl<'a> Fields<'a> {
    pub(crate) fn of(value: &'a Value, path: &'a str) -> Result<Self, Error> {
        match value {
            Value::Object(map) => Ok(Fields { map, path }),
            other => Err(Error::invalid(
                path,
                format!("must be an object, got {}", type_name(other)),
            )),
        }
    }

    pub(crate) fn path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value under `key`, treating an explicit null like a missing key.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn raw(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    pub(crate) fn required(&self, key: &str) -> Result<&'a Value, Error> {
        self.get(key)
            .ok_or_else(|| Error::invalid(self.path(key), "is required"))
    }

    pub(crate) fn string(&self, key: &str) -> Result<String, Error> {
        as_string(self.required(key)?, &self.path(key))
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<String>, Error> {
        self.get(key)
            .map(|v| as_string(v, &self.path(key)))
            .transpose()
    }

    pub(crate) fn uint(&self, key: &str) -> Result<u64, Error> {
        as_uint(self.required(key)?, &self.path(key))
    }

    pub(crate) fn opt_uint(&self, key: &str) -> Result<Option<u64>, Error> {
        self.get(key)
            .map(|v| as_uint(v, &self.path(key)))
            .transpose()
    }

    pub(crate) fn boolean(&self, key: &str) -> Result<bool, Error> {
        as_bool(self.required(key)?, &self.path(key))
    }

    pub(crate) fn opt_float(&self, key: &str) -> Result<Option<f64>, Error> {
        self.get(key)
            .map(|v| as_float(v, &self.path(key)))
            .transpose()
    }

    /// A `{str: JSON}` field.
    pub(crate) fn object(&self, key: &str) -> Result<JsonObject, Error> {
        match self.required(key)? {
            Value::Object(map) => Ok(map.clone()),
            other => Err(Error::invalid(
                self.path(key),
                format!("must be an object, got {}", type_name(other)),
            )),
        }
    }

    pub(crate) fn array(&self, key: &str) -> Result<&'a Vec<Value>, Error> {
        match self.required(key)? {
            Value::Array(items) => Ok(items),
            other => Err(Error::invalid(
                self.path(key),
                format!("must be a list, got {}", type_name(other)),
            )),
        }
    }
}

pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn as_string(value: &Value, path: &str) -> Result<String, Error> {
    match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(Error::invalid(
            path,
            format!("must be a string, got {}", type_name(other)),
        )),
    }
}

pub(crate) fn as_uint(value: &Value, path: &str) -> Result<u64, Error> {
    let bad = || Error::invalid(path, format!("must be an integer >= 0, got {value}"));
    match value {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Ok(u)
            } else if let Some(f) = n.as_f64() {
                // Lax mode takes a float with no fractional part.
                if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 {
                    Ok(f as u64)
                } else {
                    Err(bad())
                }
            } else {
                Err(bad())
            }
        }
        Value::String(s) => s.trim().parse::<u64>().map_err(|_| bad()),
        Value::Bool(b) => Ok(u64::from(*b)),
        _ => Err(bad()),
    }
}

pub(crate) fn as_bool(value: &Value, path: &str) -> Result<bool, Error> {
    let bad = || Error::invalid(path, format!("must be a bool, got {value}"));
    match value {
        Value::Bool(b) => Ok(*b),
        Value::Number(n) => match n.as_u64() {
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            _ => Err(bad()),
        },
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Ok(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Ok(true),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

pub(crate) fn as_float(value: &Value, path: &str) -> Result<f64, Error> {
    let f = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .ok_or_else(|| Error::invalid(path, format!("must be a number, got {value}")))?;
    check_finite(f, path)?;
    Ok(f)
}

pub(crate) fn check_finite(f: f64, path: &str) -> Result<(), Error> {
    if f.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(
            path,
            "must be finite (NaN and Inf are rejected)",
        ))
    }
}
