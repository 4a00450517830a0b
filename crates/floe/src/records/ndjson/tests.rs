use super::*;

fn ok(s: &str) -> Vec<(Cow<'_, str>, Json<'_>)> {
    parse_record(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn bad(s: &[u8]) -> String {
    match parse_record(s) {
        Ok(v) => panic!("{} accepted as {v:?}", String::from_utf8_lossy(s)),
        Err(e) => e,
    }
}

#[test]
fn a_record_is_exactly_one_json_object() {
    assert_eq!(ok(r#"{"id": 1}"#)[0].1, Json::Num("1"));
    assert_eq!(ok(" \t{\"id\":1}\r").len(), 1);
    assert_eq!(ok("{}").len(), 0);
    let e = bad(br#"{"id": 11}{"id": 12}"#);
    assert!(e.contains("more than one JSON value"), "{e}");
    let e = bad(br#"{"id": 11} {"id": 12}"#);
    assert!(e.contains("more than one JSON value"), "{e}");
    let e = bad(b"{\"id\": 11}\r{\"id\": 12}");
    assert!(e.contains("more than one JSON value"), "{e}");
    let e = bad(br#"{"id":10} garbage"#);
    assert!(e.contains("unexpected characters"), "{e}");
    assert!(bad(br#"{"id":10} 5"#).contains("more than one"));
    assert!(bad(b"{\"id\":1}\0").contains("NUL"));
    assert!(bad(b"{\"id\":\"a\0b\"}").contains("NUL"));
    assert!(bad(b"{\"id\":1, \"n\": \"\xff\"}").contains("UTF-8"));
    assert!(bad(b"[1]").contains("found an array"));
    assert!(bad(b"5").contains("found a number"));
    assert!(bad(b"   ").contains("empty"));
    assert!(bad("\u{feff}{}".as_bytes()).contains("byte order mark"));
    assert!(bad("{}\u{a0}".as_bytes()).contains("unexpected"));
}

#[test]
fn invalid_json_is_rejected() {
    for s in [
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{'a':1}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":.5}",
        "{\"a\":+1}",
        "{\"a\":1e}",
        "{\"a\":NaN}",
        "{\"a\":Infinity}",
        "{\"a\":tru}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"\\ud800\"}",
        "{\"a\":\"\\udc00x\"}",
        "{\"a\":\"tab\there\"}",
        "{\"a\":[1,]}",
        "{\"a\":1}}",
    ] {
        let e = bad(s.as_bytes());
        assert!(e.contains("JSON"), "{s}: {e}");
    }
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
    assert!(bad(deep.as_bytes()).contains("deeper"));
}

#[test]
fn numbers_keep_their_text_and_strings_unescape() {
    let m = ok(
        r#"{"a": -9223372036854775900, "b": 1.2390e-3, "c": "x\"\u00e9\ud83d\ude00\n", "d": [true, null], "e": {"f": 0}}"#,
    );
    assert_eq!(m[0].1, Json::Num("-9223372036854775900"));
    assert_eq!(m[1].1, Json::Num("1.2390e-3"));
    assert_eq!(m[2].1, Json::Str(Cow::Owned("x\"é😀\n".into())));
    assert_eq!(m[3].1, Json::Arr(vec![Json::Bool(true), Json::Null]));
    assert_eq!(m[4].1.display(80), r#"{"f":0}"#);
    // An escaped NUL is data, not a raw NUL byte.
    assert_eq!(ok(r#"{"a":"\u0000"}"#)[0].1, Json::Str("\0".into()));
}

#[test]
fn blank_lines_are_json_whitespace_only() {
    assert!(is_blank(b""));
    assert!(is_blank(b" \t\r"));
    assert!(!is_blank(b"\x0c"));
    assert!(!is_blank("\u{a0}".as_bytes()));
    assert_eq!(strip_newline(b"{}\r\n"), b"{}\r");
    assert_eq!(strip_newline(b"{}"), b"{}");
}
