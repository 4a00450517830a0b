//! The NDJSON record rule, shared by `floe append` (NDJSON files) and `floe ingest` (files,
//! stdin, Kafka payloads), so the two can never disagree about what a record is.
//!
//! - Lines end at `\n` (a `\r` before it is JSON whitespace, so CRLF files read the same); the
//!   last line of a file needs no newline.
//! - A line of only JSON whitespace (space, tab, CR) is blank: it is no record and is skipped
//!   (it still counts in line numbers). Any other content is a record.
//! - A record is exactly one JSON object (RFC 8259), optionally surrounded by JSON whitespace.
//!   A second value (`{"id":1}{"id":2}`), trailing characters, raw NUL bytes, invalid UTF-8,
//!   a byte order mark, invalid escapes or nesting deeper than 128 levels make the whole record
//!   bad; no part of it is stored.
//! - A key that appears twice in one object (also twice up to ASCII case, when both select the
//!   same column) is a bad record: keeping either value would silently drop the other.
//!
//! The parser keeps every number as its exact source text so that the checked conversions of
//! [`crate::records::value`] see the digits that were written, not an `f64` rounding of them.

use std::borrow::Cow;

/// A parsed JSON value; numbers keep their text, strings borrow from the input when they have
/// no escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// The number's text, valid JSON number grammar.
    Num(&'a str),
    Str(Cow<'a, str>),
    Arr(Vec<Json<'a>>),
    /// Members in input order (duplicates kept; the decoder rejects them).
    Obj(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl Json<'_> {
    /// The value as compact JSON text (numbers as written: nothing is rounded).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, usize::MAX);
        out
    }

    /// The value as compact JSON text, at most `max` characters (for error messages).
    pub fn display(&self, max: usize) -> String {
        let mut out = String::new();
        self.write(&mut out, max + 1);
        clip(&out, max)
    }

    fn write(&self, out: &mut String, max: usize) {
        if out.len() > max {
            return;
        }
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => out.push_str(n),
            Json::Str(s) => out.push_str(&quote(s)),
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out, max);
                    if out.len() > max {
                        return;
                    }
                }
                out.push(']');
            }
            Json::Obj(members) => {
                out.push('{');
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&quote(k));
                    out.push(':');
                    v.write(out, max);
                    if out.len() > max {
                        return;
                    }
                }
                out.push('}');
            }
        }
    }

    /// What kind of JSON value this is, for messages ("expected a number, found an object").
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Num(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }
}

/// `s` as a JSON string literal.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The first `max` characters of `s`, with `...` when cut.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((at, _)) => format!("{}...", &s[..at]),
    }
}

/// JSON whitespace (RFC 8259 section 2).
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// True when `line` holds only JSON whitespace: a blank line, which is not a record.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| is_ws(b))
}

/// Strips one trailing `\n` (the line terminator) from a line read with `read_until(b'\n')`.
pub fn strip_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// Maximum nesting of arrays and objects (serde_json's default recursion limit).
pub const MAX_DEPTH: usize = 128;

/// Parses one record: exactly one JSON object, optionally surrounded by JSON whitespace.
/// `Err` is the reason the record is bad.
pub fn parse_record(bytes: &[u8]) -> Result<Vec<(Cow<'_, str>, Json<'_>)>, String> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return Err(format!(
                "not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ))
        }
    };
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!("contains a NUL byte at offset {at}"));
    }
    let mut p = Parser::new(text, bytes);
    p.ws();
    if p.i == bytes.len() {
        return Err("empty record".into());
    }
    if text[p.i..].starts_with('\u{feff}') {
        return Err("invalid JSON: starts with a byte order mark (U+FEFF)".into());
    }
    let start = p.i;
    let value = p.value()?;
    let Json::Obj(members) = value else {
        return Err(format!(
            "expected one JSON object per record, found {}",
            value.kind()
        ));
    };
    p.ws();
    if p.i < bytes.len() {
        let rest = &text[p.i..];
        let mut probe = Parser {
            s: text,
            b: bytes,
            i: p.i,
            depth: 0,
        };
        return Err(if probe.value().is_ok() {
            format!(
                "more than one JSON value in one record (a second value starts at offset {}: {})",
                p.i,
                clip(rest, 20)
            )
        } else {
            format!(
                "unexpected characters after the JSON object (offset {} of a record starting at {start}): {}",
                p.i,
                clip(rest, 20)
            )
        });
    }
    Ok(members)
}

/// One record read member by member, for decoders that match keys to columns as they go (see
/// [`crate::records::value`]'s columnar reader) instead of building the member list that
/// [`parse_record`] returns. It applies the same grammar with the same token parsers, but says
/// only *whether* the record is well formed: on `Err(())` the caller asks [`parse_record`] for
/// the reason, so every message comes from one place.
pub(crate) struct ObjectReader<'a> {
    p: Parser<'a>,
    first: bool,
}

impl<'a> ObjectReader<'a> {
    /// The record's object, opened: `None` when the record is not valid UTF-8, holds a NUL
    /// byte or does not start (after whitespace) with `{`.
    pub(crate) fn open(bytes: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        if memchr::memchr(0, bytes).is_some() {
            return None;
        }
        let mut p = Parser::new(text, bytes);
        p.ws();
        if p.b.get(p.i) != Some(&b'{') {
            return None;
        }
        p.enter().ok()?;
        p.i += 1;
        Some(Self { p, first: true })
    }

    /// The next member's key (the reader then stands before its value), or `None` after the
    /// closing brace.
    pub(crate) fn key(&mut self) -> Result<Option<Cow<'a, str>>, ()> {
        let p = &mut self.p;
        p.ws();
        if self.first {
            self.first = false;
            if p.b.get(p.i) == Some(&b'}') {
                p.i += 1;
                return Ok(None);
            }
        } else {
            match p.b.get(p.i) {
                Some(b',') => {
                    p.i += 1;
                    p.ws();
                }
                Some(b'}') => {
                    p.i += 1;
                    return Ok(None);
                }
                _ => return Err(()),
            }
        }
        if p.b.get(p.i) != Some(&b'"') {
            return Err(());
        }
        let key = p.string().map_err(drop)?;
        p.ws();
        if p.b.get(p.i) != Some(&b':') {
            return Err(());
        }
        p.i += 1;
        p.ws();
        Ok(Some(key))
    }

    /// The value of the member whose key was just read.
    pub(crate) fn value(&mut self) -> Result<Json<'a>, ()> {
        self.p.value().map_err(drop)
    }

    /// The value, when it is a string without escapes: its text, as [`Parser::string`] reads
    /// it (the reader then stands after it). `None`, the reader unmoved, for any other value
    /// (for [`ObjectReader::value`] to read).
    #[inline]
    pub(crate) fn plain_string(&mut self) -> Option<&'a str> {
        let p = &mut self.p;
        if p.b.get(p.i) != Some(&b'"') {
            return None;
        }
        let start = p.i + 1;
        let rest = &p.b[start..];
        let stop = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[stop] != b'"' || rest[..stop].iter().fold(false, |any, &c| any | (c < 0x20)) {
            return None;
        }
        p.i = start + stop + 1;
        Some(&p.s[start..start + stop])
    }

    /// The value, when it is a well-formed number: its text, as [`Parser::number`] reads it.
    /// `None`, the reader unmoved, for any other value.
    #[inline]
    pub(crate) fn number_text(&mut self) -> Option<&'a str> {
        let p = &mut self.p;
        if !matches!(p.b.get(p.i), Some(b'-' | b'0'..=b'9')) {
            return None;
        }
        let at = p.i;
        match p.number() {
            Ok(Json::Num(t)) => Some(t),
            _ => {
                p.i = at;
                None
            }
        }
    }

    /// After the closing brace: true when only whitespace follows.
    pub(crate) fn at_end(&mut self) -> bool {
        self.p.ws();
        self.p.i == self.p.b.len()
    }
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str, b: &'a [u8]) -> Self {
        Self {
            s,
            b,
            i: 0,
            depth: 0,
        }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && is_ws(self.b[self.i]) {
            self.i += 1;
        }
    }

    fn err(&self, what: &str) -> String {
        match self.s[self.i.min(self.s.len())..].chars().next() {
            None => format!("invalid JSON: {what} at offset {} (end of record)", self.i),
            Some(c) => format!(
                "invalid JSON: {what} at offset {}, found {}",
                self.i,
                describe_char(c)
            ),
        }
    }

    fn value(&mut self) -> Result<Json<'a>, String> {
        match self.b.get(self.i) {
            None => Err(self.err("expected a value")),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expected a value")),
        }
    }

    fn literal(&mut self, word: &str, v: Json<'a>) -> Result<Json<'a>, String> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err(&format!("expected '{word}'")))
        }
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "invalid JSON: nested deeper than {MAX_DEPTH} levels at offset {}",
                self.i
            ));
        }
        Ok(())
    }

    fn object(&mut self) -> Result<Json<'a>, String> {
        self.enter()?;
        self.i += 1;
        let mut members = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(Json::Obj(members));
        }
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a string key"));
            }
            let key = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return Err(self.err("expected ':'"));
            }
            self.i += 1;
            self.ws();
            let v = self.value()?;
            members.push((key, v));
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(Json::Obj(members));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self) -> Result<Json<'a>, String> {
        self.enter()?;
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(Json::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(Json::Arr(items));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Json<'a>, String> {
        let start = self.i;
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => {
                self.i += 1;
                if self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                    return Err(self.err("leading zero in a number"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("expected a digit")),
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("expected a digit after '.'"));
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("expected a digit in the exponent"));
            }
        }
        Ok(Json::Num(&self.s[start..self.i]))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .b
            .get(self.i..self.i + 4)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .ok_or_else(|| self.err("expected 4 hex digits after \\u"))?;
        let v = u32::from_str_radix(std::str::from_utf8(h).expect("hex is ASCII"), 16)
            .expect("4 hex digits");
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<Cow<'a, str>, String> {
        self.i += 1; // the opening quote
        let start = self.i;
        // Fast path: no escapes. The end (a quote) or the first escape is found with memchr;
        // a control character before it is the first problem, as a byte-by-byte scan finds.
        let rest = &self.b[start..];
        let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
        let plain = &rest[..stop];
        // An OR over the run vectorizes; the position is looked for only when there is one.
        if plain.iter().fold(false, |any, &c| any | (c < 0x20)) {
            self.i = start + plain.iter().position(|&c| c < 0x20).expect("found");
            return Err(self.err("unescaped control character in a string"));
        }
        self.i = start + stop;
        match self.b.get(self.i) {
            None => return Err(self.err("unterminated string")),
            Some(b'"') => {
                let s = &self.s[start..self.i];
                self.i += 1;
                return Ok(Cow::Borrowed(s));
            }
            _ => {} // an escape
        }
        let mut out = String::from(&self.s[start..self.i]);
        loop {
            match self.b.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.b.get(self.i) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.i += 1;
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if !self.b[self.i..].starts_with(b"\\u") {
                                    return Err(self.err("unpaired surrogate in a \\u escape"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("unpaired surrogate in a \\u escape"));
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(self.err("unpaired surrogate in a \\u escape"));
                            } else {
                                hi
                            };
                            out.push(char::from_u32(code).expect("valid scalar value"));
                            continue;
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    out.push(c);
                    self.i += 1;
                }
                Some(&c) if c < 0x20 => {
                    return Err(self.err("unescaped control character in a string"))
                }
                Some(_) => {
                    // Copy a run of plain characters (the text is valid UTF-8 and the run stops
                    // only at ASCII bytes, so the slice is on character boundaries).
                    let run = self.i;
                    while self
                        .b
                        .get(self.i)
                        .is_some_and(|&c| c != b'"' && c != b'\\' && c >= 0x20)
                    {
                        self.i += 1;
                    }
                    out.push_str(&self.s[run..self.i]);
                }
            }
        }
    }
}

fn describe_char(c: char) -> String {
    if c.is_control() || c == '\u{feff}' || c.is_whitespace() {
        format!("U+{:04X}", c as u32)
    } else {
        format!("'{c}'")
    }
}

#[cfg(test)]
mod tests;
