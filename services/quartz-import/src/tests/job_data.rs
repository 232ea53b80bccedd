use serde_json::{Value, json};

use super::fixture;
use crate::job_data::{DataError, decode};

#[test]
fn every_supported_type_decodes_exactly() {
    let decoded = decode(Some(fixture!("jobdata_types.ser"))).unwrap();
    // In three parts: one json! this size exceeds the macro recursion limit.
    let mut expected = json!({
        "string": "hello",
        "int": 42,
        "intNeg": -7,
        "long": 9007199254740993_i64,
        "longMin": i64::MIN,
        "short": -12,
        "byte": 7,
        "double": std::f64::consts::PI,
        "float": 0.1,
        "doubleNaN": "NaN",
        "floatInf": "Infinity",
        "doubleNegInf": "-Infinity",
        "boolean": true,
        "char": "é",
        "date": "2030-03-31T01:00:00.000Z",
        "dateBeforeEpoch": "1969-12-31T23:59:59.999Z",
        "sqlTimestamp": "2030-03-31T01:00:00.123456789Z",
        "sqlDate": "2030-03-30T22:00:00.000Z",
        "bigDecimal": "1234.5600",
        "bigDecimalNegScale": "-12345000",
        "bigDecimalSmall": "-0.00012",
        "bigInteger": "-123456789012345678901234567890",
        "bigIntegerZero": "0",
    });
    let more = json!({
        "enum": "SECONDS",
        "list": ["a", "b", "c"],
        "map": {"x": 1, "y": 2},
        "set": ["p"],
        "bytes": "AAEC/3+A",
        "null": null,
        "日报": "relatórios 📈",
        "nul": "a\u{FFFD}b",
        "key\u{FFFD}nul": "v",
    });
    let rest = json!({
        "linkedList": [1, 2],
        "treeMap": {"2": "two", "10": "ten"},
        "linkedHashMap": {"z": "last-first", "a": [false]},
        "arraysAsList": [1, 2, 3],
        "treeSet": ["a", "b"],
        "linkedHashSet": ["q", "p"],
        "hashtable": {"h": "t"},
        "properties": {"pk": "pv"},
        "stringArray": ["s1", null],
        "intArray": [1, -2],
        "uuid": "123e4567-e89b-12d3-a456-426614174000",
        "ref1": "shared-value",
        "ref2": "shared-value",
    });
    for part in [more, rest] {
        expected
            .as_object_mut()
            .unwrap()
            .extend(part.as_object().unwrap().clone());
    }
    assert_eq!(Value::Object(decoded.data.clone()), expected);
    assert_eq!(
        decoded.data.len(),
        45,
        "expected.txt: jobdata_types size: 45"
    );
    // Every digit of a long beyond 2^53 survives into the JSON text.
    let text = serde_json::to_string(&decoded.data).unwrap();
    assert!(text.contains("\"long\":9007199254740993"), "{text}");
    assert!(text.contains("\"float\":0.1,"), "{text}");

    let mut warnings = decoded.warnings.clone();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            r#"key "doubleNaN": NaN is no JSON number; stored as the string "NaN""#,
            r#"key "doubleNegInf": -Infinity is no JSON number; stored as the string "-Infinity""#,
            r#"key "floatInf": Infinity is no JSON number; stored as the string "Infinity""#,
            r#"key "key\0nul": NUL characters in the key replaced by U+FFFD"#,
            r#"key "nul": NUL characters replaced by U+FFFD"#,
        ]
    );
}

#[test]
fn long_strings_and_many_entries() {
    let decoded = decode(Some(fixture!("jobdata_big.ser"))).unwrap();
    assert_eq!(decoded.data.len(), 601);
    for i in 0..600 {
        assert_eq!(decoded.data[&format!("k{i}")], json!(i * 3));
    }
    let long = decoded.data["long"].as_str().unwrap();
    // expected.txt: 70090 UTF-16 chars, 70810 UTF-8 bytes, of which 70 NULs (each now a
    // 3-byte U+FFFD) and 10 emoji.
    assert_eq!(long.encode_utf16().count(), 70090);
    assert_eq!(long.len(), 70810 + 70 * 2);
    assert!(long.starts_with("é\u{FFFD}📈xx"), "{}", &long[..20]);
    assert_eq!(long.matches('📈').count(), 10);
    assert_eq!(long.matches('\u{FFFD}').count(), 70);
    // In modified UTF-8 (NUL in 2 bytes, an emoji in 6) that is more than 65535 bytes: the
    // stream holds it as a TC_LONGSTRING with an 8-byte length.
    let modified_len: i64 = 70810 + 70 + 10 * 2;
    let mut marker = vec![0x7C];
    marker.extend_from_slice(&modified_len.to_be_bytes());
    let bytes = fixture!("jobdata_big.ser");
    assert!(bytes.windows(marker.len()).any(|w| w == marker));
    assert_eq!(
        decoded.warnings,
        [r#"key "long": NUL characters replaced by U+FFFD"#]
    );
}

#[test]
fn empty_and_null_columns_are_empty_maps() {
    for bytes in [None, Some(&[][..]), Some(fixture!("jobdata_empty.ser"))] {
        let decoded = decode(bytes).unwrap();
        assert!(decoded.data.is_empty());
        assert!(decoded.warnings.is_empty());
    }
}

#[test]
fn a_user_class_is_refused_naming_key_and_class() {
    let err = decode(Some(fixture!("jobdata_pojo.ser"))).unwrap_err();
    assert_eq!(
        err,
        DataError::Unreadable {
            key: "payload".into(),
            class: "MakeBlobs$Pojo".into()
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("\"payload\"") && text.contains("MakeBlobs$Pojo"),
        "{text}"
    );
}

#[test]
fn shared_and_cyclic_values_are_bounded() {
    let started = std::time::Instant::now();
    let err = decode(Some(fixture!("jobdata_bomb.ser"))).unwrap_err();
    assert!(
        matches!(&err, DataError::Malformed { key, detail } if key == "bomb" && detail.contains("expands")),
        "{err}"
    );
    eprintln!("bomb refused in {:?}", started.elapsed());
    // 72 KB sharing one 60,000-character string under 1,000 keys would be 60 MB of text: under
    // the absolute limit, but far past what its stream could hold unshared.
    let err = decode(Some(fixture!("jobdata_sharing.ser"))).unwrap_err();
    assert!(
        matches!(&err, DataError::Malformed { detail, .. } if detail.contains("expands to more than") && detail.contains("bytes of text")),
        "{err}"
    );
    let err = decode(Some(fixture!("jobdata_cycle.ser"))).unwrap_err();
    assert!(
        matches!(&err, DataError::Malformed { key, detail } if key == "cycle" && detail.contains("cyclic")),
        "{err}"
    );
}

fn props_expected() -> Value {
    json!({
        "plain": "value",
        "with=equals": "a=b",
        "with:colon": "c:d",
        "#hash": "#not a comment",
        "!bang": "!x",
        " leading": "  two leading spaces",
        "back\\slash": "C:\\temp\\x",
        "multi": "line1\nline2\r\nline3\ttab",
        "unicode": "日报 relatórios 📈",
        "latin1": "café",
        "empty": "",
        "": "empty key",
        "trailing": "space ",
        "nullValue": "",
    })
}

#[test]
fn properties_text_as_quartz_writes_it() {
    for bytes in [
        fixture!("jobdata_props.properties"),
        fixture!("jobdata_props_crlf.properties"),
    ] {
        let decoded = decode(Some(bytes)).unwrap();
        assert_eq!(Value::Object(decoded.data), props_expected());
        assert!(decoded.warnings.is_empty());
    }
}

#[test]
fn properties_text_as_people_write_it() {
    let text = b"# comment \\\n! another\n  key1 = value1\nkey2:value2\nkey3 value3\n\
        key4\t=\t  spaced\\\n    continued \\\\\nkey5\\\r\n  =x\r\n\
        key6=caf\xE9\nkey7=\\u0041\\u00\nkey8\nkey9=a\\u0000b\nkey1=override\n";
    let err = decode(Some(text)).unwrap_err();
    assert!(
        matches!(&err, DataError::Properties { line: 7, detail } if detail.contains("uxxxx")),
        "{err}"
    );

    let text = b"# comment \\\n! another\n  key1 = value1\nkey2:value2\nkey3 value3\n\
        key4\t=\t  spaced\\\n    continued \\\\\nkey5\\\r\n  =x\r\n\
        key6=caf\xE9\nkey7=\\u0041\\q\nkey8\nkey9=a\\u0000b\nkey1=override\n";
    let decoded = decode(Some(text)).unwrap();
    assert_eq!(
        Value::Object(decoded.data),
        json!({
            "key1": "override",
            "key2": "value2",
            "key3": "value3",
            "key4": "spacedcontinued \\",
            "key5": "x",
            "key6": "café",
            "key7": "Aq",
            "key8": "",
            "key9": "a\u{FFFD}b",
        })
    );
    assert_eq!(
        decoded.warnings,
        [r#"key "key9": NUL characters in the value replaced by U+FFFD"#]
    );
}

#[test]
fn other_formats_are_refused() {
    // Quartz.NET's BinaryFormatter and JSON.
    let binary = [0x00, 0x01, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
    assert!(matches!(
        decode(Some(&binary)),
        Err(DataError::UnknownFormat(_))
    ));
    assert!(matches!(
        decode(Some(b" {\"a\": 1}\n")),
        Err(DataError::UnknownFormat(_))
    ));
    // AC ED is Java, even with a wrong version.
    assert!(matches!(
        decode(Some(&[0xAC, 0xED, 0x00, 0x04, 0x70])),
        Err(DataError::Serialization(_))
    ));
}

#[test]
fn a_stream_holding_no_map_is_refused() {
    // A serialized java.lang.String.
    let mut bytes = crate::java::MAGIC.to_vec();
    bytes.extend_from_slice(&[0x74, 0x00, 0x02, b'h', b'i']);
    assert_eq!(
        decode(Some(&bytes)),
        Err(DataError::NotAMap {
            class: "java.lang.String".into()
        })
    );
}
