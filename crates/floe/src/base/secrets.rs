//! The one masking function: [`mask`] turns any text floe prints (a property value, a URI, an
//! error message, a log line) into one without secrets.
//!
//! Two layers, both always applied:
//! - **Known values.** Every secret of a resolved catalog configuration (values of secret-named
//!   keys, URI passwords, secret query parameters; see [`register_config_secrets`]) is
//!   remembered for the process, and every occurrence of it is replaced, whatever the library
//!   that echoed it (sqlx, reqwest, opendal) did to the text around it.
//! - **Shape.** Secrets floe was never told about are recognised by their place: the password
//!   of a URI's userinfo (`scheme://user:PASSWORD@host`), the value of a secret-named
//!   `name=value` pair (URI query and fragment parameters, `key=value` connection strings,
//!   form bodies), of a secret-named JSON member (`"token": "..."`), and `Bearer` / `Basic`
//!   credentials.
//!
//! A name is secret when it says so ([`is_secret_name`]): secret, password, token, credential,
//! account key, SAS token, session token, private key, signature, API key, a bare `key`,
//! `sig` or `pwd` segment, and every REST `header.*`; but not an identifier or a location
//! (`s3.access-key-id`, `encryption.key-id`, `oauth2-server-uri`, `token-refresh-enabled`),
//! whose values are still masked by shape.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{LazyLock, RwLock};

/// What a secret is replaced with.
pub const MASK: &str = "****";

/// Secrets shorter than this are masked by shape only: replacing every occurrence of a
/// two-letter string would make every message unreadable.
const MIN_REGISTERED_LEN: usize = 4;

/// Secret values of the configurations resolved in this process, longest first when used.
static SECRETS: LazyLock<RwLock<BTreeSet<String>>> = LazyLock::new(|| RwLock::new(BTreeSet::new()));

/// Masks every secret in `text`: the registered secret values, then URI passwords, secret
/// `name=value` pairs, secret JSON members and `Bearer`/`Basic` credentials.
pub fn mask(text: &str) -> String {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    mask_with(text, secrets.iter().map(String::as_str))
}

/// [`mask`] with an explicit list of known secret values instead of the registered ones.
pub fn mask_with<'a>(text: &str, secrets: impl IntoIterator<Item = &'a str>) -> String {
    let mut forms: Vec<String> = Vec::new();
    for s in secrets {
        for form in [s.to_string(), percent_decode(s, false)] {
            if form.chars().count() >= MIN_REGISTERED_LEN && !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    let out = replace_ranges(text, known_secret_ranges(text, &forms));
    let out = mask_userinfo(&out);
    let out = mask_pairs(&out);
    let out = mask_json_members(&out);
    mask_auth_schemes(&out)
}

/// Byte ranges of `text` that show one of `secrets`: as is, or percent-encoded in any way
/// (upper or lower case hex, some characters or all, `+` for a space), as URI libraries print
/// them.
fn known_secret_ranges(text: &str, secrets: &[String]) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let b = text.as_bytes();
    for secret in secrets {
        let needle = secret.as_bytes();
        if needle.is_empty() {
            continue;
        }
        // Every start, so that a `%` before the secret (`%0a` + `aA...`) cannot hide it by
        // pairing with its first characters, as one decoded view of the whole text would.
        for start in 0..b.len() {
            if let Some(end) = encoded_match(b, start, needle) {
                ranges.push((start, end));
            }
        }
    }
    ranges
}

/// The end of `needle` spelled at `b[at..]`, each byte either as itself, as `%XX` (either
/// case) or, for a space, as `+`.
fn encoded_match(b: &[u8], at: usize, needle: &[u8]) -> Option<usize> {
    let Some((&c, rest)) = needle.split_first() else {
        return Some(at);
    };
    let &first = b.get(at)?;
    if first == c {
        if let Some(end) = encoded_match(b, at + 1, rest) {
            return Some(end);
        }
    }
    let hex = |d: u8| (d as char).to_digit(16).map(|v| v as u8);
    if first == b'%' && at + 3 <= b.len() {
        if let (Some(hi), Some(lo)) = (hex(b[at + 1]), hex(b[at + 2])) {
            if (hi << 4) | lo == c {
                if let Some(end) = encoded_match(b, at + 3, rest) {
                    return Some(end);
                }
            }
        }
    }
    if c == b' ' && first == b'+' {
        return encoded_match(b, at + 1, rest);
    }
    None
}

/// `text` percent-decoded (and `+` as a space when `plus_is_space`), with the byte range of
/// `text` each decoded byte comes from.
fn decoded_view(text: &str, plus_is_space: bool) -> (Vec<u8>, Vec<(usize, usize)>) {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut origin = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                origin.push((i, i + 3));
                i += 3;
                continue;
            }
        }
        out.push(if plus_is_space && b[i] == b'+' {
            b' '
        } else {
            b[i]
        });
        origin.push((i, i + 1));
        i += 1;
    }
    (out, origin)
}

/// The value of property `key` as it may be shown: masked whole when the key names a secret,
/// else with its secret parts masked.
pub fn mask_property(key: &str, value: &str) -> String {
    if is_secret_name(key) {
        MASK.to_string()
    } else {
        mask(value)
    }
}

/// True for a property key, query parameter or field name whose value is a secret.
pub fn is_secret_name(name: &str) -> bool {
    let n: String = name
        .trim()
        .chars()
        .map(|c| match c {
            '_' | ' ' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    // REST catalog headers (`header.Authorization`, `header.X-Api-Key`, ...) carry credentials.
    if n.starts_with("header.") {
        return true;
    }
    let segments: Vec<&str> = n.split(['.', '-']).filter(|s| !s.is_empty()).collect();
    let Some(last) = segments.last() else {
        return false;
    };
    // Identifiers, locations and switches: not secrets themselves (a URI value is still masked
    // by shape).
    if matches!(
        *last,
        "id" | "uri" | "url" | "endpoint" | "enabled" | "name" | "region" | "type"
    ) {
        return false;
    }
    const WORDS: [&str; 17] = [
        "secret",
        "password",
        "passwd",
        "token",
        "credential",
        "private-key",
        "privatekey",
        "account-key",
        "accountkey",
        "signature",
        "api-key",
        "apikey",
        "authorization",
        "session",
        "connection-string",
        "connectionstring",
        "sas",
    ];
    const SEGMENTS: [&str; 6] = ["key", "sig", "pwd", "pw", "pass", "passphrase"];
    WORDS.iter().any(|w| {
        if *w == "sas" {
            segments.contains(w) || n.contains("sas-")
        } else {
            n.contains(w)
        }
    }) || segments.iter().any(|s| SEGMENTS.contains(s))
}

/// Remembers secret values for [`mask`], which masks each wherever it shows, percent-encoded
/// or decoded.
pub fn register_secrets<I, S>(values: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let values: Vec<String> = values
        .into_iter()
        .map(|v| v.as_ref().trim().to_string())
        .filter(|v| v.chars().count() >= MIN_REGISTERED_LEN && v != "true" && v != "false")
        .collect();
    if values.is_empty() {
        return;
    }
    let mut set = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    set.extend(values);
}

/// The secret values in a set of properties: values of secret-named keys (and, for
/// `id:secret` credentials, the part after the colon), and the secret parts of every value
/// that holds a URI or a `name=value` list.
pub fn secrets_of<'a>(props: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in props {
        if is_secret_name(k) {
            out.push(v.to_string());
            if let Some((_, secret)) = v.split_once(':') {
                out.push(secret.to_string());
            }
        }
        out.extend(secret_parts(v));
    }
    out
}

/// Registers the secrets of properties (see [`secrets_of`]).
pub fn register_config_secrets<'a>(props: impl IntoIterator<Item = (&'a str, &'a str)>) {
    register_secrets(secrets_of(props));
}

/// Secret parts of one value: the userinfo password of each URI in it and the values of its
/// secret-named `name=value` pairs.
pub fn secret_parts(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (start, end) in userinfo_passwords(value) {
        out.push(value[start..end].to_string());
    }
    for (start, end) in secret_pair_values(value) {
        out.push(value[start..end].to_string());
    }
    out
}

/// `Write` for log output: each event (tracing writes one per writer) is masked before it
/// reaches stderr. Use as `tracing_subscriber::fmt().with_writer(masked_stderr)`.
pub fn masked_stderr() -> MaskedStderr {
    MaskedStderr { buf: Vec::new() }
}

/// See [`masked_stderr`].
pub struct MaskedStderr {
    buf: Vec<u8>,
}

impl Write for MaskedStderr {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        // Colour codes would split `name=value` pairs (`\x1b[3mpassword\x1b[0m=...`) and hide
        // them from the masking: logs are masked plain.
        let text = strip_ansi(&String::from_utf8_lossy(&self.buf));
        self.buf.clear();
        let mut err = std::io::stderr().lock();
        err.write_all(mask(&text).as_bytes())?;
        err.flush()
    }
}

impl Drop for MaskedStderr {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... final-byte`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn percent_decode(s: &str, plus_is_space: bool) -> String {
    String::from_utf8_lossy(&decoded_view(s, plus_is_space).0).into_owned()
}

/// Characters that end a URI or a value inside a message.
fn ends_token(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>')
}

/// Byte ranges of the userinfo passwords (`scheme://user:PASSWORD@host`) in `text`.
fn userinfo_passwords(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let start = from + i + 3;
        let rest = &text[start..];
        let token_end = rest.find(ends_token).unwrap_or(rest.len());
        let token = &rest[..token_end];
        // The authority ends at the first '/', but a password may hold '?' or '#': the
        // userinfo is everything before the last '@' of that part.
        let authority = &token[..token.find('/').unwrap_or(token.len())];
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority[..at].find(':') {
                if colon + 1 < at {
                    out.push((start + colon + 1, start + at));
                }
            }
        }
        from = start;
    }
    out
}

fn mask_userinfo(text: &str) -> String {
    replace_ranges(text, userinfo_passwords(text))
}

/// Byte ranges of the values of secret-named `name=value` pairs: query and fragment
/// parameters, form bodies, `key=value;...` connection strings, `--flag name=value`.
fn secret_pair_values(text: &str) -> Vec<(usize, usize)> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let mut out = Vec::new();
    for (eq, _) in text.match_indices('=') {
        let name_start = text[..eq]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_name(*c))
            .last()
            .map_or(eq, |(i, _)| i);
        let name = &text[name_start..eq];
        if name.is_empty() || !is_secret_name(name) {
            continue;
        }
        let value_start = eq + 1;
        let rest = &text[value_start..];
        let len = pair_value_len(rest);
        if len > 0 && &rest[..len] != MASK {
            out.push((value_start, value_start + len));
        }
    }
    out
}

/// Length of the value at the start of `rest`: up to a separator (`&`, `;`, `#`), a space or
/// quote, or a closing bracket the value did not open (`label (uri?token=X)` keeps its `)`).
fn pair_value_len(rest: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return i,
            ')' | ']' | '}' => depth -= 1,
            c if ends_token(c) || matches!(c, '&' | ';' | '#') => return i,
            _ => {}
        }
    }
    rest.len()
}

fn mask_pairs(text: &str) -> String {
    replace_ranges(text, secret_pair_values(text))
}

/// Masks the string values of secret-named JSON members: `"token": "..."`.
fn mask_json_members(text: &str) -> String {
    let mut ranges = Vec::new();
    let bytes = text.as_bytes();
    for (colon, _) in text.match_indices(':') {
        // `"name"` right before the colon (spaces allowed).
        let before = text[..colon].trim_end();
        let Some(name_body) = before.strip_suffix('"') else {
            continue;
        };
        let Some(open) = name_body.rfind('"') else {
            continue;
        };
        if !is_secret_name(&name_body[open + 1..]) {
            continue;
        }
        let after = &text[colon + 1..];
        let ws = after.len() - after.trim_start().len();
        let value_start = colon + 1 + ws;
        if bytes.get(value_start) != Some(&b'"') {
            continue;
        }
        let mut i = value_start + 1;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let end = i.min(bytes.len());
        if end > value_start + 1 && &text[value_start + 1..end] != MASK {
            ranges.push((value_start + 1, end));
        }
    }
    replace_ranges(text, ranges)
}

/// Masks `Bearer <token>` and `Basic <credentials>` (HTTP Authorization schemes).
fn mask_auth_schemes(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut ranges = Vec::new();
    for scheme in ["bearer ", "basic "] {
        for (i, _) in lower.match_indices(scheme) {
            if i > 0 && lower.as_bytes()[i - 1].is_ascii_alphanumeric() {
                continue;
            }
            let start = i + scheme.len();
            let rest = &text[start..];
            let len = rest
                .find(|c: char| ends_token(c) || matches!(c, ',' | ';'))
                .unwrap_or(rest.len());
            // "Basic auth" in prose is not a credential: require a token-like value.
            let value = &rest[..len];
            if len >= 8 && value != MASK {
                ranges.push((start, start + len));
            }
        }
    }
    replace_ranges(text, ranges)
}

/// Replaces byte ranges (possibly overlapping, unordered) with [`MASK`].
fn replace_ranges(text: &str, mut ranges: Vec<(usize, usize)>) -> String {
    if ranges.is_empty() {
        return text.to_string();
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for (mut s, mut e) in merged {
        // Whole characters only (a match may end inside a multi-byte one).
        while !text.is_char_boundary(s) {
            s -= 1;
        }
        while e < text.len() && !text.is_char_boundary(e) {
            e += 1;
        }
        let s = s.max(pos);
        out.push_str(&text[pos..s]);
        out.push_str(MASK);
        pos = e.max(pos);
    }
    out.push_str(&text[pos..]);
    out
}

#[cfg(test)]
mod tests;
