use super::stream::decode_modified_utf8;
use super::*;
use crate::tests::{ALL, fixture};

/// Builds a stream by hand.
struct S(Vec<u8>);

impl S {
    fn new() -> Self {
        Self(MAGIC.to_vec())
    }

    fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    fn u8(self, b: u8) -> Self {
        self.raw(&[b])
    }

    fn u16(self, v: u16) -> Self {
        self.raw(&v.to_be_bytes())
    }

    fn i32(self, v: i32) -> Self {
        self.raw(&v.to_be_bytes())
    }

    fn utf(self, s: &str) -> Self {
        self.u16(u16::try_from(s.len()).unwrap()).raw(s.as_bytes())
    }

    fn string(self, s: &str) -> Self {
        self.u8(0x74).utf(s)
    }

    fn reference(self, n: u32) -> Self {
        self.u8(0x71).raw(&(0x7E_0000 + n).to_be_bytes())
    }

    /// `TC_CLASSDESC` up to and including its (empty) annotation; the super class follows.
    /// Object fields take a new type string (one more handle each).
    fn class(self, name: &str, flags: u8, fields: &[(u8, &str)]) -> Self {
        let mut s = self
            .u8(0x72)
            .utf(name)
            .raw(&1i64.to_be_bytes())
            .u8(flags)
            .u16(u16::try_from(fields.len()).unwrap());
        for (code, field) in fields {
            s = s.u8(*code).utf(field);
            if *code == b'L' || *code == b'[' {
                s = s.string("Ljava/lang/Object;");
            }
        }
        s.u8(0x78)
    }

    /// A new `Object[]` class and array of `len` (handles 0 and 1); elements follow.
    fn object_array(self, len: i32) -> Self {
        self.u8(0x75)
            .class("[Ljava.lang.Object;", SC_SERIALIZABLE, &[])
            .u8(0x70)
            .i32(len)
    }

    fn parse(self) -> Result<Graph, JavaError> {
        Graph::parse(&self.0)
    }
}

fn array(graph: &Graph) -> JArray<'_> {
    match graph.root() {
        JValue::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn strings_and_back_references() {
    let graph = S::new()
        .object_array(3)
        .string("a")
        .reference(2)
        .u8(0x70)
        .parse()
        .unwrap();
    let a = array(&graph);
    assert_eq!(a.class_name(), "[Ljava.lang.Object;");
    assert_eq!(a.len(), 3);
    assert_eq!(a.get(0).and_then(|v| v.as_str()), Some("a"));
    assert_eq!(a.get(1).and_then(|v| v.as_str()), Some("a"));
    assert!(a.get(2).unwrap().is_null());
    assert!(a.get(3).is_none());
}

#[test]
fn reset_clears_the_handle_table() {
    let err = S::new()
        .object_array(2)
        .string("a")
        .u8(0x79)
        .reference(2)
        .parse()
        .unwrap_err();
    assert!(
        matches!(
            err,
            JavaError::BadHandle {
                handle: 0x7E_0002,
                ..
            }
        ),
        "{err}"
    );
    let graph = S::new()
        .object_array(2)
        .u8(0x79)
        .string("b")
        .reference(0)
        .parse()
        .unwrap();
    assert_eq!(array(&graph).get(1).and_then(|v| v.as_str()), Some("b"));
}

#[test]
fn long_strings() {
    let text = "é".repeat(40_000);
    let graph = S::new()
        .u8(0x7C)
        .raw(&i64::try_from(text.len()).unwrap().to_be_bytes())
        .raw(text.as_bytes())
        .parse()
        .unwrap();
    assert_eq!(graph.root().as_str(), Some(text.as_str()));
    let err = S::new()
        .u8(0x7C)
        .raw(&(-1i64).to_be_bytes())
        .parse()
        .unwrap_err();
    assert!(matches!(err, JavaError::Malformed { .. }), "{err}");
}

#[test]
fn modified_utf8() {
    assert_eq!(decode_modified_utf8(b"plain").unwrap(), "plain");
    assert_eq!(
        decode_modified_utf8(&[b'a', 0xC0, 0x80, b'b']).unwrap(),
        "a\0b"
    );
    assert_eq!(decode_modified_utf8(&[0xC3, 0xA9]).unwrap(), "é");
    assert_eq!(decode_modified_utf8(&[0xE6, 0x97, 0xA5]).unwrap(), "日");
    // U+1F4C8 as the surrogates D83D DCC8, each in three bytes.
    let pair = [0xED, 0xA0, 0xBD, 0xED, 0xB3, 0x88];
    assert_eq!(decode_modified_utf8(&pair).unwrap(), "📈");
    // Unpaired surrogates.
    assert_eq!(decode_modified_utf8(&pair[..3]).unwrap(), "\u{FFFD}");
    assert_eq!(
        decode_modified_utf8(&[0xED, 0xB3, 0x88, b'x']).unwrap(),
        "\u{FFFD}x"
    );
    // Four-byte UTF-8, a lone continuation byte, a cut sequence.
    assert_eq!(decode_modified_utf8(&[0xF0, 0x9F, 0x93, 0x88]), Err(0));
    assert_eq!(decode_modified_utf8(&[b'a', 0x80]), Err(1));
    assert_eq!(decode_modified_utf8(&[b'a', 0xE6, 0x97]), Err(3));
    let err = S::new().u8(0x74).u16(1).u8(0x80).parse().unwrap_err();
    assert!(
        matches!(err, JavaError::Malformed { offset: 7, .. }),
        "{err}"
    );
}

#[test]
fn enums_and_classes() {
    let graph = S::new()
        .u8(0x7E)
        .class("Color", SC_SERIALIZABLE | SC_ENUM, &[])
        .class("java.lang.Enum", SC_SERIALIZABLE | SC_ENUM, &[])
        .u8(0x70)
        .string("RED")
        .parse()
        .unwrap();
    match graph.root() {
        JValue::Enum(e) => {
            assert_eq!(e.class_name, "Color");
            assert_eq!(e.constant, "RED");
        }
        other => panic!("{other:?}"),
    }
    let graph = S::new()
        .u8(0x76)
        .class("Foo", SC_SERIALIZABLE, &[])
        .u8(0x70)
        .parse()
        .unwrap();
    assert!(matches!(graph.root(), JValue::Class(c) if c.name == "Foo"));
}

#[test]
fn fields_by_name_across_the_class_chain() {
    let graph = S::new()
        .u8(0x73)
        .class("Sub", SC_SERIALIZABLE, &[(b'I', "x"), (b'L', "name")])
        .class("Base", SC_SERIALIZABLE, &[(b'I', "x"), (b'Z', "flag")])
        .u8(0x70)
        // Base's values first, then Sub's.
        .i32(1)
        .u8(1)
        .i32(2)
        .string("n")
        .parse()
        .unwrap();
    let object = graph.root().as_object().unwrap();
    assert_eq!(object.class_name(), "Sub");
    assert_eq!(
        object
            .class_chain()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["Sub", "Base"]
    );
    assert!(object.is_instance_of("Base"));
    assert!(matches!(object.field("x"), Some(JValue::Int(2))));
    assert!(matches!(object.field_in("Base", "x"), Some(JValue::Int(1))));
    assert_eq!(object.bool_field("flag"), Ok(true));
    assert_eq!(object.string_field("name"), Ok(Some("n")));
    assert!(object.field("missing").is_none());
    let err = object.int_field("missing").unwrap_err();
    assert_eq!(err.to_string(), "Sub: has no field \"missing\"");
    let err = object.long_field("x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Sub: field \"x\" holds int, expected a long"
    );
}

#[test]
fn write_object_data_spans_chunks_and_objects() {
    let graph = S::new()
        .u8(0x73)
        .class("W", SC_SERIALIZABLE | SC_WRITE_METHOD, &[(b'I', "a")])
        .u8(0x70)
        .i32(7)
        .raw(&[0x77, 0x02, 0x00, 0x01])
        .raw(&[0x77, 0x02, 0x00, 0x02])
        .string("obj")
        .raw(&[0x7A, 0, 0, 0, 4, 0, 0, 0, 3])
        .u8(0x78)
        .parse()
        .unwrap();
    let object = graph.root().as_object().unwrap();
    assert_eq!(object.int_field("a"), Ok(7));
    let mut data = object.annotation("W").unwrap();
    assert_eq!(data.remaining_bytes(), 8);
    assert_eq!(data.remaining_objects(), 1);
    assert_eq!(data.read_i32(), Ok(0x0001_0002));
    assert_eq!(data.read_object().unwrap().as_str(), Some("obj"));
    assert_eq!(data.read_i32(), Ok(3));
    assert!(data.read_i32().is_err());
    assert!(data.read_object().is_err());
    assert!(object.annotation("Other").is_none());
}

/// `MakeBlobs.Chunky`: 1 + 300×4 bytes of writeObject data cut into 1 KiB blocks (the int
/// at offset 1021 straddles two), then an object, more primitives and a null.
#[test]
fn chunked_block_data_reads_as_one_stream() {
    let bytes = fixture!("raw_chunky.ser");
    assert_eq!(bytes.get(37..42), Some(&[0x7A, 0, 0, 4, 0][..]));
    let graph = Graph::parse(bytes).unwrap();
    let object = graph.root().as_object().unwrap();
    assert_eq!(object.class_name(), "MakeBlobs$Chunky");
    let mut data = object.annotation("MakeBlobs$Chunky").unwrap();
    assert_eq!(data.read_u8(), Ok(0x5A));
    for i in 0..300 {
        assert_eq!(data.read_i32(), Ok(i * 1000));
    }
    assert_eq!(data.read_object().unwrap().as_str(), Some("middle"));
    assert_eq!(data.read_i64(), Ok(0x0102_0304_0506_0708));
    assert_eq!(data.read_f32(), Ok(1.5));
    assert!(data.read_object().unwrap().is_null());
    assert_eq!(data.remaining_bytes(), 0);
    assert_eq!(data.remaining_objects(), 0);
}

#[test]
fn externalizable_needs_block_data() {
    let graph = S::new()
        .u8(0x73)
        .class("E", SC_EXTERNALIZABLE | SC_BLOCK_DATA, &[])
        .u8(0x70)
        .raw(&[0x77, 0x01, 0x05, 0x78])
        .parse()
        .unwrap();
    let object = graph.root().as_object().unwrap();
    assert_eq!(object.annotation("E").unwrap().read_u8(), Ok(5));
    let err = S::new()
        .u8(0x73)
        .class("E", SC_EXTERNALIZABLE, &[])
        .u8(0x70)
        .u8(0x05)
        .parse()
        .unwrap_err();
    assert!(
        matches!(err, JavaError::Unsupported { what, .. } if what.contains("protocol version 1")),
        "{err}"
    );
}

#[test]
fn proxies_and_exceptions_are_refused() {
    for code in [0x7D, 0x7B] {
        let err = S::new().u8(code).parse().unwrap_err();
        assert!(
            matches!(err, JavaError::Unsupported { offset: 4, .. }),
            "{err}"
        );
    }
    let err = S::new().u8(0x73).u8(0x7D).parse().unwrap_err();
    assert!(matches!(err, JavaError::Unsupported { .. }), "{err}");
}

#[test]
fn cycles_in_classes_and_objects() {
    // A class whose super class is itself.
    let err = S::new()
        .u8(0x73)
        .class("A", SC_SERIALIZABLE, &[])
        .reference(0)
        .parse()
        .unwrap_err();
    assert!(
        matches!(&err, JavaError::Malformed { detail, .. } if detail.contains("cyclic")),
        "{err}"
    );
    // An object that holds itself: a graph, not a tree.
    let graph = S::new()
        .u8(0x73)
        .class("N", SC_SERIALIZABLE, &[(b'L', "self")])
        .u8(0x70)
        .reference(2)
        .parse()
        .unwrap();
    let object = graph.root().as_object().unwrap();
    let inner = object.object_field("self").unwrap().unwrap();
    assert_eq!(inner.id(), object.id());
}

#[test]
fn limits_hold() {
    // Nesting: Object[] in Object[] … 100 deep.
    let mut s = S::new().object_array(1);
    for _ in 0..99 {
        s = s.u8(0x75).reference(0).i32(1);
    }
    let err = s.u8(0x70).parse().unwrap_err();
    assert!(
        matches!(
            err,
            JavaError::Limit {
                what: "nesting depth",
                ..
            }
        ),
        "{err}"
    );

    let few = |limits: Limits| {
        let mut s = S::new().object_array(10);
        for i in 0..10 {
            s = s.string(&i.to_string());
        }
        Graph::parse_with_limits(&s.0, &limits)
    };
    assert!(few(Limits::default()).is_ok());
    let err = few(Limits {
        max_handles: 5,
        ..Limits::default()
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            JavaError::Limit {
                what: "handles",
                ..
            }
        ),
        "{err}"
    );
    let err = few(Limits {
        max_values: 9,
        ..Limits::default()
    })
    .unwrap_err();
    assert!(matches!(err, JavaError::Limit { .. }), "{err}");

    let byte_array = |len: i32| {
        S::new()
            .u8(0x75)
            .class("[B", SC_SERIALIZABLE, &[])
            .u8(0x70)
            .i32(len)
            .raw(&[1, 2, 3])
            .parse()
    };
    assert_eq!(array(&byte_array(3).unwrap()).bytes(), Some(&[1, 2, 3][..]));
    let err = byte_array(2_000_000).unwrap_err();
    assert!(
        matches!(
            err,
            JavaError::Limit {
                what: "array length",
                ..
            }
        ),
        "{err}"
    );
    let err = byte_array(1000).unwrap_err();
    assert!(matches!(err, JavaError::Truncated { .. }), "{err}");
    let err = byte_array(-1).unwrap_err();
    assert!(matches!(err, JavaError::Malformed { .. }), "{err}");
    // An Object[] claiming more elements than bytes left.
    let err = S::new().object_array(1_000).u8(0x70).parse().unwrap_err();
    assert!(matches!(err, JavaError::Truncated { .. }), "{err}");
}

#[test]
fn bad_starts() {
    assert!(matches!(Graph::parse(b""), Err(JavaError::BadMagic { .. })));
    let err = Graph::parse(b"#Properties").unwrap_err();
    assert_eq!(
        err.to_string(),
        "not a Java serialization stream (starts with 23 50 72 6F, expected AC ED 00 05)"
    );
    assert!(matches!(
        Graph::parse(&MAGIC),
        Err(JavaError::Truncated { offset: 4, .. })
    ));
    let err = S::new().u8(0x77).parse().unwrap_err();
    assert!(
        matches!(err, JavaError::UnexpectedCode { code: 0x77, .. }),
        "{err}"
    );
    let err = S::new().u8(0x42).parse().unwrap_err();
    assert!(
        matches!(err, JavaError::UnexpectedCode { code: 0x42, .. }),
        "{err}"
    );
    assert!(looks_serialized(&MAGIC));
    assert!(!looks_serialized(b"#"));
}

#[test]
fn every_java_fixture_parses() {
    for (name, bytes) in ALL {
        if name.ends_with(".ser") {
            let graph = Graph::parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(graph.root().as_object().is_some(), "{name}");
        }
    }
}
