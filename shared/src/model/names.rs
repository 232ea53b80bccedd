//! What a job, trigger, calendar or group may be called.
//!
//! Quartz takes any string up to 200 characters, and its users name jobs in their own language
//! (`日报`, `relatórios`, `diário às 07:00`), so chime does too: every printable character,
//! spaces and punctuation included. A control character is refused because it cannot be shown or
//! typed back, a bidirectional override or line separator because it makes a name read as
//! another, a zero-width or invisible character because two names that look the same would
//! differ, and `/` because these names are segments of API and dashboard paths (every other
//! character is percent-encoded there). Worker groups, kinds and the AMQP prefix keep the narrower
//! rule of [`crate::config::is_valid_name`]: they become queue names and routing keys. Names are
//! taken in their composed form (NFC, [`nfc`]), from bodies and from paths alike; names an older
//! chime stored in another form are rewritten composed by migration 0022, except one whose
//! composed spelling already names another object, which keeps its spelling.

/// The longest name, in characters, as Quartz's `VARCHAR(200)` columns.
pub const MAX_NAME_CHARS: usize = 200;

/// Why `name` cannot name a job, trigger, calendar or group, if it cannot; `what` says which
/// (`"job name"`, `"trigger group"`, …) and leads the message.
///
/// ```
/// use chime_core::model::names::{check_name, nfc};
///
/// assert_eq!(check_name("job name", "nightly-export"), Ok(()));
/// // A right-to-left override would show this name as "reportexe.txt".
/// let refused = check_name("job name", "report\u{202E}txt.exe");
/// assert!(refused.is_err_and(|why| why.contains("U+202E")));
/// // "é" typed as "e" and a combining accent is the same name as the one character.
/// assert_eq!(nfc("cafe\u{301}"), "caf\u{e9}");
/// ```
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let shown = name.escape_debug();
    let chars = name.chars().count();
    if chars == 0 {
        return Err(format!("{what} is empty"));
    }
    if chars > MAX_NAME_CHARS {
        return Err(format!(
            "{what} {shown:.60}…: {chars} characters, at most {MAX_NAME_CHARS}"
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "{what} \"{shown}\": \".\" and \"..\" cannot name anything (a path would resolve them away)"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| c.is_control() || *c == '/' || is_deceptive(*c))
    {
        return Err(format!(
            "{what} \"{shown}\": {} is not allowed (no control characters, bidirectional \
             overrides, line separators or '/')",
            if bad == '/' {
                "'/'".to_string()
            } else if bad.is_control() {
                format!("the control character U+{:04X}", u32::from(bad))
            } else {
                format!("the layout character U+{:04X}", u32::from(bad))
            }
        ));
    }
    Ok(())
}

/// Characters that change how the text around them is shown rather than showing themselves:
/// line and paragraph separators, the bidirectional overrides, isolates and marks that can make a
/// name read as another in the dashboard, the CLI's tables and the audit trail, and the
/// zero-width and invisible characters that make two names that look the same differ.
fn is_deceptive(c: char) -> bool {
    matches!(
        c,
        '\u{2028}'
            | '\u{2029}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200B}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{2060}'..='\u{2064}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{FEFF}'
            | '\u{00AD}'
            | '\u{034F}'
    )
}

/// `name` in Unicode's composed form (NFC): `é` typed as `e` and a combining accent (as macOS
/// file names and some keyboards give it) and `é` as one character are one name. Names are
/// stored and looked up in this form, so both spellings find the same job.
pub fn nfc(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    if name.is_ascii() {
        return name.to_string();
    }
    name.nfc().collect()
}

/// Deserializes a name in its composed form ([`nfc`]), for the API's bodies.
pub fn deserialize_nfc<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name: String = serde::Deserialize::deserialize(d)?;
    Ok(nfc(&name))
}

/// [`deserialize_nfc`] for an optional name.
pub fn deserialize_nfc_opt<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    let name: Option<String> = serde::Deserialize::deserialize(d)?;
    Ok(name.map(|n| nfc(&n)))
}

/// Whether `name` may name a job, trigger, calendar or group.
pub fn is_valid_name(name: &str) -> bool {
    check_name("", name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_quartz_users_name_things() {
        for name in [
            "日报",
            "relatórios",
            "diário às 07:00",
            "Nightly report (EU)",
            "com.acme.reports",
            "a?b#c%d&e=f+g\"h'i\\j",
            "emoji 🚀",
            &"x".repeat(200),
            &"é".repeat(200),
        ] {
            assert!(check_name("job name", name).is_ok(), "{name}");
        }
    }

    #[test]
    fn refuses_what_cannot_be_shown_or_routed_with_the_reason() {
        let cases = [
            ("", "is empty"),
            (".", "cannot name"),
            ("..", "cannot name"),
            ("a/b", "'/'"),
            ("a\nb", "U+000A"),
            ("a\0b", "U+0000"),
            ("tab\there", "U+0009"),
            ("abc\u{202E}fdp.exe", "U+202E"),
            ("line\u{2028}sep", "U+2028"),
            ("zero\u{200B}width", "U+200B"),
            ("\u{FEFF}bom", "U+FEFF"),
            ("mark\u{200F}", "U+200F"),
        ];
        for (name, why) in cases {
            let error = check_name("job name", name).unwrap_err();
            assert!(error.starts_with("job name"), "{error}");
            assert!(error.contains(why), "{name:?}: {error}");
        }
        let long = check_name("trigger name", &"x".repeat(201)).unwrap_err();
        assert_eq!(nfc("caf\u{0065}\u{0301}"), "caf\u{00E9}");
        assert_eq!(nfc("日报"), "日报");
        assert!(long.contains("201 characters, at most 200"), "{long}");
    }
}
