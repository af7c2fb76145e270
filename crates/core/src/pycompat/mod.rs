//! What Python writes, written the same way from Rust: the one place for it (ADR 0177).
//!
//! The seeds' Python peers share files, keys and channels with switchyard and some compare or
//! parse the exact bytes: task envelopes and worker documents (`json.dumps(v)`), stream-bridge
//! entries (`json.dumps(v, ensure_ascii=False, separators=(",", ":"))`), SSE `data:` lines
//! (`json.dumps(v, ensure_ascii=False)`), scores published with `str(score)`, and task ids from
//! `uuid4().hex`. Every writer of such bytes goes through this module.
//!
//! * [`Dumps`] / [`dumps`]: `json.dumps` with or without `ensure_ascii`, default or compact
//!   separators; key order as given; floats as [`json_float`]; [`quote`] for one string.
//! * [`float_repr`]: Python's `repr(float)` (`0.1`, `1e-05`, `1e+16`, `-0.0`, `inf`).
//! * [`uuid4_hex`], `uuid.uuid4().hex`.
//!
//! The golden tests (`tests/pycompat_golden.rs`) compare these byte for byte with fixtures
//! written by the system `python3`'s own `json` module (`tests/fixtures/pycompat/make.py`).
//!
//! One known difference: a NaN or infinite `f64` inside typed data (a `Value` cannot hold one) is
//! written `null`, because serde_json's serializer writes it so before any formatter sees it;
//! Python writes `NaN`/`Infinity`. [`json_float`] spells them as Python does for callers that
//! write a float themselves.
//!
//! Not covered, because nothing switchyard reads or writes carries them: Python ints beyond the
//! 64-bit range (serde_json reads them as floats), lone surrogates (a Rust string cannot hold
//! one; serde_json refuses `"\ud800"` on input), and `json.dumps(default=str)` of non-JSON
//! Python objects.

mod float;
mod json;

pub use float::{float_repr, json_float};
pub use json::{Dumps, dumps, quote};

/// `uuid.uuid4().hex`: 32 lowercase hex digits of a random UUID, version 4, RFC 4122 variant.
pub fn uuid4_hex() -> String {
    let mut v: u128 = rand::random();
    // Version nibble (bits 76..80 counted from the low end) = 4; variant bits (62..64) = 0b10.
    v = (v & !(0xf << 76)) | (0x4 << 76);
    v = (v & !(0x3 << 62)) | (0x2 << 62);
    format!("{v:032x}")
}
