//! The `JOB_DATA` columns of `QRTZ_JOB_DETAILS` and `QRTZ_TRIGGERS` to a JSON object.
//!
//! The bytes are sniffed, not taken from Quartz's configuration (`useProperties` may have been
//! flipped after rows were written): `AC ED` starts a Java-serialized `org.quartz.JobDataMap`,
//! NULL or nothing is an empty map, anything else is `java.util.Properties` text.
//!
//! Values keep what they mean rather than their Java type: numbers stay exact (a `long` keeps
//! every digit, a `float` is its shortest decimal), big decimals become exact decimal strings,
//! dates RFC 3339. A value of any other class (a user's own) is refused, naming its key and
//! class: chime cannot run the code that would read it.

use base64::Engine as _;
use jiff::Timestamp;
use serde_json::{Map, Number, Value};

use crate::java::{Graph, JObject, JValue, JavaError, jdk, looks_serialized};

/// How deep values may nest inside one key (lists of maps of lists…).
pub const MAX_NESTING: usize = 64;

/// How many JSON values one map may expand to at most: a stream can share one list many times
/// over (each sharing doubling the JSON), so the expansion is bounded, not just the stream.
pub const MAX_JSON_VALUES: usize = 1_000_000;

/// How many bytes of text one map may expand to at most: a few bytes of stream can repeat one
/// long string (or byte array) by reference many times over.
pub const MAX_JSON_TEXT_BYTES: usize = 64 << 20;

/// Below those maxima a map may expand only as far as its stream's own length allows without
/// sharing: every value but null takes at least a byte of stream, and no text is more than
/// four times its bytes (modified UTF-8, base64, a double written out); plus this allowance
/// for the few values a real map shares (one string under two keys). An import of many small
/// maps that each share one value a million times would otherwise hold gigabytes.
pub const SHARING_ALLOWANCE: usize = 64 << 10;

/// The most values and bytes of text a map read from a stream of `stream_len` bytes may make.
fn budget(stream_len: usize) -> (usize, usize) {
    (
        MAX_JSON_VALUES.min(stream_len.saturating_add(SHARING_ALLOWANCE)),
        MAX_JSON_TEXT_BYTES.min(
            stream_len
                .saturating_mul(4)
                .saturating_add(SHARING_ALLOWANCE),
        ),
    )
}

/// A decoded `JOB_DATA` column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecodedData {
    /// The map, keys as strings.
    pub data: Map<String, Value>,
    /// What was changed on the way (a NUL replaced, a NaN written as a string), one line each,
    /// naming the key.
    pub warnings: Vec<String>,
}

/// A `JOB_DATA` column chime cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    /// The Java stream does not parse, or a JDK value in it is malformed.
    #[error("unreadable Java job data: {0}")]
    Serialization(#[from] JavaError),
    /// The stream holds something other than a map.
    #[error("job data holds a {class}, not a JobDataMap")]
    NotAMap {
        /// What it holds.
        class: String,
    },
    /// A value of a class chime cannot read (typically a user's own class).
    #[error(
        "job data key {key:?} holds a {class}; chime reads only strings, numbers, booleans, \
         characters, dates, big numbers, enums, UUIDs, byte[], arrays, lists, sets and maps of those"
    )]
    Unreadable {
        /// The top-level key.
        key: String,
        /// The class found (at any depth below the key).
        class: String,
    },
    /// A value whose serialized form is broken (or nested too deep, or cyclic).
    #[error("job data key {key:?}: {detail}")]
    Malformed {
        /// The top-level key.
        key: String,
        /// What is wrong.
        detail: String,
    },
    /// Properties text that `Properties.load` would refuse.
    #[error("job data Properties text, line {line}: {detail}")]
    Properties {
        /// Which entry (1-based; comment and blank lines not counted).
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// Bytes that are neither Java-serialized nor Properties text.
    #[error("job data is neither Java-serialized nor Properties text: {0}")]
    UnknownFormat(String),
}

/// Decodes a `JOB_DATA` column (None: SQL NULL).
pub fn decode(bytes: Option<&[u8]>) -> Result<DecodedData, DataError> {
    let bytes = bytes.unwrap_or_default();
    if bytes.is_empty() {
        return Ok(DecodedData::default());
    }
    if looks_serialized(bytes) {
        let graph = Graph::parse(bytes)?;
        return from_java(graph.root(), bytes.len());
    }
    decode_properties(bytes)
}

/// Decodes a `JobDataMap` (or a plain map) already read from a stream of `stream_len` bytes
/// (which bounds what it may expand to); null is an empty map.
pub fn from_java(value: JValue<'_>, stream_len: usize) -> Result<DecodedData, DataError> {
    let root = match value {
        JValue::Null => return Ok(DecodedData::default()),
        JValue::Object(object) => object,
        other => {
            return Err(DataError::NotAMap {
                class: other.type_name().to_string(),
            });
        }
    };
    // JobDataMap → StringKeyDirtyFlagMap → DirtyFlagMap { map: HashMap }.
    let map = if root.is_instance_of("org.quartz.utils.DirtyFlagMap") {
        match root.object_field("map")? {
            Some(map) => map,
            None => return Ok(DecodedData::default()),
        }
    } else {
        root
    };
    let entries = jdk::map_entries(map)?.ok_or_else(|| DataError::NotAMap {
        class: map.class_name().to_string(),
    })?;
    let mut out = DecodedData::default();
    let (max_values, max_text) = budget(stream_len);
    let mut converter = Converter {
        max_values,
        max_text,
        ..Converter::default()
    };
    for (key, value) in entries {
        let (raw, key, key_had_nul) = converter.key(key, 0).map_err(|e| e.at("(a map key)"))?;
        let label = format!("{raw:?}");
        if key_had_nul {
            out.warnings.push(format!(
                "key {label}: NUL characters in the key replaced by U+FFFD"
            ));
        }
        converter.nul = false;
        converter.notes.clear();
        let json = converter.value(value, 0).map_err(|e| e.at(&raw))?;
        if converter.nul {
            out.warnings
                .push(format!("key {label}: NUL characters replaced by U+FFFD"));
        }
        for note in converter.notes.drain(..) {
            out.warnings.push(format!("key {label}: {note}"));
        }
        if out.data.insert(key.clone(), json).is_some() {
            out.warnings.push(format!(
                "key {label} appears twice once converted; the later value is kept"
            ));
        }
    }
    Ok(out)
}

enum ConvError {
    Unreadable(String),
    Malformed(String),
}

impl From<JavaError> for ConvError {
    fn from(e: JavaError) -> Self {
        Self::Malformed(e.to_string())
    }
}

impl ConvError {
    /// The error for the top-level key `key` (as written in Java).
    fn at(self, key: &str) -> DataError {
        let key = key.to_string();
        match self {
            ConvError::Unreadable(class) => DataError::Unreadable { key, class },
            ConvError::Malformed(detail) => DataError::Malformed { key, detail },
        }
    }
}

#[derive(Default)]
struct Converter {
    /// JSON values produced so far (all keys).
    produced: usize,
    /// Bytes of text produced so far (all keys).
    text_bytes: usize,
    /// How many values may be produced.
    max_values: usize,
    /// How many bytes of text may be produced.
    max_text: usize,
    /// Objects and arrays on the path being converted: a cycle would never end.
    path: Vec<usize>,
    /// A NUL was replaced in the current key's value.
    nul: bool,
    /// Other changes to the current key's value.
    notes: Vec<String>,
}

impl Converter {
    fn text(&mut self, s: &str) -> String {
        if s.contains('\0') {
            self.nul = true;
            s.replace('\0', "\u{FFFD}")
        } else {
            s.to_string()
        }
    }

    /// A map key as written in Java, as a JSON key (non-string keys as their JSON text: `2`,
    /// `true`), and whether it had a NUL.
    fn key(&mut self, key: JValue<'_>, depth: usize) -> Result<(String, String, bool), ConvError> {
        let outer = std::mem::take(&mut self.nul);
        let json = self.value(key, depth)?;
        let had_nul = std::mem::replace(&mut self.nul, outer);
        let text = match json {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let raw = key.as_str().map_or_else(|| text.clone(), str::to_string);
        Ok((raw, text, had_nul))
    }

    /// Counts `bytes` more of text against the map's budget.
    fn spend(&mut self, bytes: usize) -> Result<(), ConvError> {
        self.text_bytes = self.text_bytes.saturating_add(bytes);
        if self.text_bytes > self.max_text {
            return Err(ConvError::Malformed(format!(
                "expands to more than {} bytes of text (its stream holds values shared many \
                 times over)",
                self.max_text
            )));
        }
        Ok(())
    }

    /// A value as JSON; every string it makes (text, enum names, numbers written as text,
    /// base64) counts against the map's text budget. One string is at most as long as the
    /// stream; what is bounded is the repetition by reference.
    fn value(&mut self, value: JValue<'_>, depth: usize) -> Result<Value, ConvError> {
        let json = self.value_uncounted(value, depth)?;
        if let Value::String(s) = &json {
            self.spend(s.len())?;
        }
        Ok(json)
    }

    fn value_uncounted(&mut self, value: JValue<'_>, depth: usize) -> Result<Value, ConvError> {
        self.produced += 1;
        if self.produced > self.max_values {
            return Err(ConvError::Malformed(format!(
                "expands to more than {} values (its stream holds values shared many times \
                 over)",
                self.max_values
            )));
        }
        if depth > MAX_NESTING {
            return Err(ConvError::Malformed(format!(
                "nested deeper than {MAX_NESTING}"
            )));
        }
        Ok(match value {
            JValue::Null => Value::Null,
            JValue::Bool(b) => Value::Bool(b),
            JValue::Byte(v) => Value::from(v),
            JValue::Short(v) => Value::from(v),
            JValue::Int(v) => Value::from(v),
            JValue::Long(v) => Value::from(v),
            JValue::Char(c) => Value::String(self.text(&utf16_lossy(&[c]))),
            JValue::Float(f) => self.float(f64::from(f), f.is_finite().then(|| f.to_string())),
            JValue::Double(d) => self.float(d, None),
            JValue::String(s) => Value::String(self.text(s)),
            JValue::Enum(e) => Value::String(self.text(e.constant)),
            JValue::Class(_) | JValue::ClassDesc(_) => {
                return Err(ConvError::Unreadable(value.type_name().to_string()));
            }
            JValue::Array(array) => {
                if let Some(bytes) = array.bytes() {
                    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                } else if let Some(chars) = array.chars() {
                    Value::String(self.text(&utf16_lossy(chars)))
                } else {
                    self.enter(array.id())?;
                    let items = array
                        .iter()
                        .map(|v| self.value(v, depth + 1))
                        .collect::<Result<Vec<_>, _>>();
                    self.path.pop();
                    Value::Array(items?)
                }
            }
            JValue::Object(object) => {
                self.enter(object.id())?;
                let json = self.object(object, depth);
                self.path.pop();
                json?
            }
        })
    }

    fn enter(&mut self, id: usize) -> Result<(), ConvError> {
        if self.path.contains(&id) {
            return Err(ConvError::Malformed(
                "a value contains itself (cyclic reference)".into(),
            ));
        }
        self.path.push(id);
        Ok(())
    }

    /// A double as a JSON number; NaN and the infinities (no JSON number) as strings.
    /// `shortest` is a float's own shortest decimal, so 0.1f is 0.1, not 0.10000000149011612.
    fn float(&mut self, value: f64, shortest: Option<String>) -> Value {
        if !value.is_finite() {
            let text = if value.is_nan() {
                "NaN"
            } else if value > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            };
            self.notes.push(format!(
                "{text} is no JSON number; stored as the string {text:?}"
            ));
            return Value::String(text.into());
        }
        let value = shortest
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(value);
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }

    fn object(&mut self, object: JObject<'_>, depth: usize) -> Result<Value, ConvError> {
        if let Some(primitive) = jdk::unboxed(object) {
            return self.value(primitive, depth + 1);
        }
        match object.class_name() {
            "java.util.Date" | "java.sql.Date" => {
                let ms = jdk::date_millis(object)?;
                return Ok(self.instant(Timestamp::from_millisecond(ms).ok(), 3, ms));
            }
            "java.sql.Timestamp" => {
                let ms = jdk::date_millis(object)?;
                let nanos = object.int_field("nanos")?;
                let at = Timestamp::new(ms.div_euclid(1000), nanos).ok();
                let precision = if nanos % 1_000_000 == 0 { 3 } else { 9 };
                return Ok(self.instant(at, precision, ms));
            }
            "java.math.BigDecimal" => return Ok(Value::String(jdk::big_decimal(object)?)),
            "java.math.BigInteger" => return Ok(Value::String(jdk::big_integer(object)?)),
            "java.util.UUID" => return Ok(Value::String(jdk::uuid(object)?)),
            _ => {}
        }
        if let Some(elements) = jdk::collection_elements(object)? {
            let items = elements
                .into_iter()
                .map(|v| self.value(v, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Value::Array(items));
        }
        if let Some(entries) = jdk::map_entries(object)? {
            if object.class_name() == "java.util.Properties"
                && object.field("defaults").is_some_and(|d| !d.is_null())
            {
                self.notes.push(
                    "a Properties' defaults are dropped (only its own entries are kept)".into(),
                );
            }
            let mut map = Map::new();
            for (key, value) in entries {
                let (_, key, had_nul) = self.key(key, depth + 1)?;
                self.nul |= had_nul;
                let value = self.value(value, depth + 1)?;
                map.insert(key, value);
            }
            return Ok(Value::Object(map));
        }
        Err(ConvError::Unreadable(object.class_name().to_string()))
    }

    /// An instant as RFC 3339 UTC; one jiff cannot hold (beyond year 9999) as epoch ms.
    fn instant(&mut self, at: Option<Timestamp>, precision: usize, ms: i64) -> Value {
        match at {
            Some(at) if precision == 9 => Value::String(format!("{at:.9}")),
            Some(at) => Value::String(format!("{at:.3}")),
            None => {
                self.notes.push(format!(
                    "date {ms} ms is outside years -9999..9999; kept as epoch milliseconds"
                ));
                Value::from(ms)
            }
        }
    }
}

fn utf16_lossy(units: &[u16]) -> String {
    char::decode_utf16(units.iter().copied())
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// Properties text (what `Properties.store` writes; `Properties.load` semantics).
fn decode_properties(bytes: &[u8]) -> Result<DecodedData, DataError> {
    if let Some(at) = bytes
        .iter()
        .position(|b| *b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0C))
    {
        return Err(DataError::UnknownFormat(format!(
            "control byte 0x{:02X} at offset {at} (Properties.store never writes one; \
             Quartz.NET's binary format starts 00 01 00 00 00 FF FF FF FF)",
            bytes.get(at).copied().unwrap_or_default()
        )));
    }
    let trimmed = bytes.trim_ascii();
    if trimmed.starts_with(b"{") && trimmed.ends_with(b"}") {
        return Err(DataError::UnknownFormat(
            "it looks like JSON (as Quartz.NET writes)".into(),
        ));
    }
    let mut out = DecodedData::default();
    for (key, value) in properties::parse(bytes)? {
        let mut replace = |s: String, what: &str, key: &str| {
            if s.contains('\0') {
                out.warnings.push(format!(
                    "key {key:?}: NUL characters in the {what} replaced by U+FFFD"
                ));
                s.replace('\0', "\u{FFFD}")
            } else {
                s
            }
        };
        let label = key.clone();
        let value = replace(value, "value", &label);
        let key = replace(key, "key", &label);
        out.data.insert(key, Value::String(value));
    }
    Ok(out)
}

mod properties {
    //! `java.util.Properties.load` of ISO-8859-1 text.

    use super::DataError;

    const BLANK: [char; 3] = [' ', '\t', '\x0C'];

    /// The key-value pairs in order (a later duplicate overrides when inserted in a map).
    pub(super) fn parse(bytes: &[u8]) -> Result<Vec<(String, String)>, DataError> {
        // ISO-8859-1: every byte is the code point of the same value.
        let chars: Vec<char> = bytes.iter().map(|b| char::from(*b)).collect();
        let mut pairs = Vec::new();
        for (number, line) in logical_lines(&chars).into_iter().enumerate() {
            let (key, value) = split(&line);
            let err = |detail: &str| DataError::Properties {
                line: number + 1,
                detail: detail.to_string(),
            };
            pairs.push((unescape(key).map_err(err)?, unescape(value).map_err(err)?));
        }
        Ok(pairs)
    }

    /// Natural lines joined where one ends in an odd number of backslashes (the next line's
    /// leading blanks dropped); comment and blank lines skipped.
    fn logical_lines(chars: &[char]) -> Vec<Vec<char>> {
        let mut lines = Vec::new();
        let mut i = 0;
        let end_of_line = |mut i: usize| {
            while chars.get(i).is_some_and(|c| *c != '\n' && *c != '\r') {
                i += 1;
            }
            i
        };
        let skip_terminator = |i: usize| match (chars.get(i), chars.get(i + 1)) {
            (Some('\r'), Some('\n')) => i + 2,
            (Some(_), _) => i + 1,
            (None, _) => i,
        };
        let skip_blank = |mut i: usize| {
            while chars.get(i).is_some_and(|c| BLANK.contains(c)) {
                i += 1;
            }
            i
        };
        while i < chars.len() {
            i = skip_blank(i);
            match chars.get(i) {
                None => break,
                Some('\n' | '\r') => {
                    i += 1;
                    continue;
                }
                Some('#' | '!') => {
                    i = skip_terminator(end_of_line(i));
                    continue;
                }
                Some(_) => {}
            }
            let mut line = Vec::new();
            loop {
                let end = end_of_line(i);
                let segment = chars.get(i..end).unwrap_or_default();
                let backslashes = segment.iter().rev().take_while(|c| **c == '\\').count();
                let continues = backslashes % 2 == 1;
                let keep = if continues {
                    segment.len() - 1
                } else {
                    segment.len()
                };
                line.extend_from_slice(segment.get(..keep).unwrap_or_default());
                i = skip_terminator(end);
                if !continues || i >= chars.len() {
                    break;
                }
                i = skip_blank(i);
            }
            lines.push(line);
        }
        lines
    }

    /// The key ends at the first unescaped `=`, `:` or blank; blanks, then one `=` or `:`,
    /// then blanks separate it from the value.
    fn split(line: &[char]) -> (&[char], &[char]) {
        let mut key_end = line.len();
        let mut value_start = line.len();
        let mut has_separator = false;
        let mut escaped = false;
        for (i, c) in line.iter().enumerate() {
            if !escaped && (*c == '=' || *c == ':') {
                key_end = i;
                value_start = i + 1;
                has_separator = true;
                break;
            }
            if !escaped && BLANK.contains(c) {
                key_end = i;
                value_start = i + 1;
                break;
            }
            escaped = *c == '\\' && !escaped;
        }
        while let Some(c) = line.get(value_start) {
            if BLANK.contains(c) {
                value_start += 1;
            } else if !has_separator && (*c == '=' || *c == ':') {
                has_separator = true;
                value_start += 1;
            } else {
                break;
            }
        }
        (
            line.get(..key_end).unwrap_or_default(),
            line.get(value_start..).unwrap_or_default(),
        )
    }

    /// `\t \n \r \f`, `\uXXXX` (UTF-16 units: surrogate pairs join), `\x` → `x`.
    fn unescape(text: &[char]) -> Result<String, &'static str> {
        let mut units: Vec<u16> = Vec::with_capacity(text.len());
        let mut i = 0;
        while let Some(&c) = text.get(i) {
            i += 1;
            if c != '\\' {
                units.push(u16::try_from(u32::from(c)).unwrap_or(0xFFFD));
                continue;
            }
            let Some(&escaped) = text.get(i) else {
                break;
            };
            i += 1;
            let unit = match escaped {
                't' => u16::from(b'\t'),
                'n' => u16::from(b'\n'),
                'r' => u16::from(b'\r'),
                'f' => 0x0C,
                'u' => {
                    let hex: String = text.get(i..i + 4).unwrap_or_default().iter().collect();
                    if hex.len() != 4 {
                        return Err("malformed \\uxxxx encoding");
                    }
                    i += 4;
                    u16::from_str_radix(&hex, 16).map_err(|_| "malformed \\uxxxx encoding")?
                }
                other => u16::try_from(u32::from(other)).unwrap_or(0xFFFD),
            };
            units.push(unit);
        }
        Ok(super::utf16_lossy(&units))
    }
}
