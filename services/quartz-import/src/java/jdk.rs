//! The JDK classes Quartz's blobs hold, read from their serialized forms as their own
//! `readObject` methods read them: dates, time zones, boxed primitives, big numbers and the
//! common collections.
//!
//! Collections are matched by exact class name: a subclass may add state (or reorder what it
//! writes) that a generic reading would silently drop.

use super::{JObject, JValue, JavaError};

/// Longest `BigInteger` magnitude converted to decimal, in bytes (about 20 000 digits): the
/// conversion is quadratic.
pub const MAX_BIG_INTEGER_BYTES: usize = 8192;

/// Epoch milliseconds of a `java.util.Date` (or a subclass: `java.sql.Timestamp` keeps whole
/// seconds here and the rest in `nanos`). `Date.writeObject` writes them as one long.
pub fn date_millis(date: JObject<'_>) -> Result<i64, JavaError> {
    if !date.is_instance_of("java.util.Date") {
        return Err(JavaError::shape(
            date.class_name(),
            "is not a java.util.Date",
        ));
    }
    date.annotation("java.util.Date")
        .ok_or_else(|| JavaError::shape(date.class_name(), "Date has no writeObject data"))?
        .read_i64()
}

/// The `ID` of a `java.util.TimeZone` of any subclass (`sun.util.calendar.ZoneInfo`,
/// `java.util.SimpleTimeZone`, a user's own).
pub fn time_zone_id<'g>(zone: JObject<'g>) -> Result<&'g str, JavaError> {
    if !zone.is_instance_of("java.util.TimeZone") {
        return Err(JavaError::shape(
            zone.class_name(),
            "is not a java.util.TimeZone",
        ));
    }
    match zone.field_in("java.util.TimeZone", "ID") {
        Some(JValue::String(id)) => Ok(id),
        _ => Err(JavaError::shape(zone.class_name(), "time zone has no ID")),
    }
}

/// The primitive inside a `java.lang.Integer`, `Long`, `Short`, `Byte`, `Double`, `Float`,
/// `Boolean` or `Character`. None: not one of those.
pub fn unboxed<'g>(object: JObject<'g>) -> Option<JValue<'g>> {
    let class = object.class_name();
    match class {
        "java.lang.Integer"
        | "java.lang.Long"
        | "java.lang.Short"
        | "java.lang.Byte"
        | "java.lang.Double"
        | "java.lang.Float"
        | "java.lang.Boolean"
        | "java.lang.Character" => object.field_in(class, "value"),
        _ => None,
    }
}

/// The elements of a list or set, in stream order. None: not a collection class read here.
pub fn collection_elements<'g>(object: JObject<'g>) -> Result<Option<Vec<JValue<'g>>>, JavaError> {
    let class = object.class_name();
    let annotation = |of: &str| {
        object
            .annotation(of)
            .ok_or_else(|| JavaError::shape(class, format!("{of} has no writeObject data")))
    };
    let elements = match class {
        "java.util.ArrayList" => {
            let size = object.int_field("size")?;
            let mut data = annotation("java.util.ArrayList")?;
            data.read_i32()?; // the capacity, ignored by readObject too
            read_objects(&mut data, size, class)?
        }
        "java.util.LinkedList" => {
            let mut data = annotation("java.util.LinkedList")?;
            let size = data.read_i32()?;
            read_objects(&mut data, size, class)?
        }
        "java.util.HashSet" | "java.util.LinkedHashSet" => {
            let mut data = annotation("java.util.HashSet")?;
            data.read_i32()?; // capacity
            data.read_f32()?; // load factor
            let size = data.read_i32()?;
            read_objects(&mut data, size, class)?
        }
        "java.util.TreeSet" => {
            let mut data = annotation("java.util.TreeSet")?;
            data.read_object()?; // the comparator: the elements are written in its order
            let size = data.read_i32()?;
            read_objects(&mut data, size, class)?
        }
        "java.util.Arrays$ArrayList" => match object.required("a")? {
            JValue::Array(array) => array.iter().collect(),
            other => {
                return Err(JavaError::shape(
                    class,
                    format!("field \"a\" holds {}", other.type_name()),
                ));
            }
        },
        "java.util.Vector" => {
            let count = object.int_field("elementCount")?;
            let count = usize::try_from(count)
                .map_err(|_| JavaError::shape(class, format!("element count {count}")))?;
            match object.required("elementData")? {
                JValue::Array(array) if array.len() >= count => array.iter().take(count).collect(),
                _ => return Err(JavaError::shape(class, "elementData is not an array")),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(elements))
}

/// A map's entries: (key, value) pairs in stream order.
pub type Entries<'g> = Vec<(JValue<'g>, JValue<'g>)>;

/// The entries of a map. None: not a map class read here.
pub fn map_entries<'g>(object: JObject<'g>) -> Result<Option<Entries<'g>>, JavaError> {
    let class = object.class_name();
    let annotation = |of: &str| {
        object
            .annotation(of)
            .ok_or_else(|| JavaError::shape(class, format!("{of} has no writeObject data")))
    };
    let (mut data, size) = match class {
        "java.util.HashMap" | "java.util.LinkedHashMap" => {
            let mut data = annotation("java.util.HashMap")?;
            data.read_i32()?; // buckets
            let size = data.read_i32()?;
            (data, size)
        }
        "java.util.TreeMap" => {
            let mut data = annotation("java.util.TreeMap")?;
            let size = data.read_i32()?;
            (data, size)
        }
        "java.util.Hashtable" | "java.util.Properties" => {
            let mut data = annotation("java.util.Hashtable")?;
            data.read_i32()?; // length
            let size = data.read_i32()?;
            (data, size)
        }
        _ => return Ok(None),
    };
    let size =
        usize::try_from(size).map_err(|_| JavaError::shape(class, format!("size {size}")))?;
    // Each entry is two objects of the annotation: never allocate past what is there.
    let mut entries = Vec::with_capacity(size.min(data.remaining_objects() / 2));
    for _ in 0..size {
        let key = data.read_object()?;
        let value = data.read_object()?;
        entries.push((key, value));
    }
    Ok(Some(entries))
}

fn read_objects<'g>(
    data: &mut super::AnnotationReader<'g>,
    size: i32,
    class: &str,
) -> Result<Vec<JValue<'g>>, JavaError> {
    let size =
        usize::try_from(size).map_err(|_| JavaError::shape(class, format!("size {size}")))?;
    let mut elements = Vec::with_capacity(size.min(data.remaining_objects()));
    for _ in 0..size {
        elements.push(data.read_object()?);
    }
    Ok(elements)
}

/// A `java.math.BigInteger` in decimal.
pub fn big_integer(object: JObject<'_>) -> Result<String, JavaError> {
    let class = object.class_name();
    let signum = object.int_field("signum")?;
    let magnitude = match object.required("magnitude")? {
        JValue::Array(array) => array
            .bytes()
            .ok_or_else(|| JavaError::shape(class, "magnitude is not a byte[]"))?,
        _ => return Err(JavaError::shape(class, "magnitude is not a byte[]")),
    };
    let digits = magnitude_to_decimal(magnitude, class)?;
    match (signum, digits == "0") {
        (0, true) => Ok(digits),
        (1, false) => Ok(digits),
        (-1, false) => Ok(format!("-{digits}")),
        _ => Err(JavaError::shape(
            class,
            format!("signum {signum} does not match its magnitude"),
        )),
    }
}

fn magnitude_to_decimal(bytes: &[u8], class: &str) -> Result<String, JavaError> {
    if bytes.len() > MAX_BIG_INTEGER_BYTES {
        return Err(JavaError::shape(
            class,
            format!(
                "{} bytes of magnitude is more than the {MAX_BIG_INTEGER_BYTES} read",
                bytes.len()
            ),
        ));
    }
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    let bytes = bytes.get(first..).unwrap_or_default();
    // Base 2^32 limbs, most significant first.
    let pad = (4 - bytes.len() % 4) % 4;
    let mut limbs: Vec<u32> = std::iter::repeat_n(0u8, pad)
        .chain(bytes.iter().copied())
        .collect::<Vec<u8>>()
        .chunks_exact(4)
        .map(|c| c.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
        .collect();
    const BILLION: u64 = 1_000_000_000;
    let mut groups = Vec::new();
    let mut start = 0;
    while start < limbs.len() {
        let mut rem = 0u64;
        for limb in limbs.iter_mut().skip(start) {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = u32::try_from(cur / BILLION).unwrap_or(u32::MAX);
            rem = cur % BILLION;
        }
        groups.push(rem);
        while limbs.get(start) == Some(&0) {
            start += 1;
        }
    }
    let mut text = String::new();
    for (i, group) in groups.iter().rev().enumerate() {
        if i == 0 {
            text.push_str(&group.to_string());
        } else {
            text.push_str(&format!("{group:09}"));
        }
    }
    if text.is_empty() {
        text.push('0');
    }
    Ok(text)
}

/// Longest plain decimal written for a `BigDecimal`; past it, `unscaledE±exponent` (exact too).
const MAX_PLAIN_DECIMAL: usize = 1000;

/// A `java.math.BigDecimal` as an exact decimal string honouring its scale: `1234.5600`; a
/// negative scale appends zeros (`-12345000`), as `toPlainString`.
pub fn big_decimal(object: JObject<'_>) -> Result<String, JavaError> {
    let class = object.class_name();
    let scale = object.int_field("scale")?;
    let unscaled = object
        .object_field("intVal")?
        .ok_or_else(|| JavaError::shape(class, "intVal is null"))?;
    let unscaled = big_integer(unscaled)?;
    let (sign, digits) = match unscaled.strip_prefix('-') {
        Some(digits) => ("-", digits),
        None => ("", unscaled.as_str()),
    };
    let scale_len = usize::try_from(i64::from(scale).unsigned_abs()).unwrap_or(usize::MAX);
    if scale_len.saturating_add(digits.len()) > MAX_PLAIN_DECIMAL {
        return Ok(format!("{sign}{digits}E{:+}", -i64::from(scale)));
    }
    if digits == "0" && scale <= 0 {
        return Ok("0".into());
    }
    if scale <= 0 {
        return Ok(format!("{sign}{digits}{}", "0".repeat(scale_len)));
    }
    let text = if digits.len() > scale_len {
        let (int, frac) = digits.split_at(digits.len() - scale_len);
        format!("{sign}{int}.{frac}")
    } else {
        format!("{sign}0.{}{digits}", "0".repeat(scale_len - digits.len()))
    };
    Ok(text)
}

/// A `java.util.UUID` in its canonical form.
pub fn uuid(object: JObject<'_>) -> Result<String, JavaError> {
    let high = object.long_field("mostSigBits")?.to_be_bytes();
    let low = object.long_field("leastSigBits")?.to_be_bytes();
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let (a, b) = high.split_at(4);
    let (b, c) = b.split_at(2);
    let (d, e) = low.split_at(2);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        hex(a),
        hex(b),
        hex(c),
        hex(d),
        hex(e)
    ))
}
