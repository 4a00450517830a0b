//! Text parsing (CSV fields, JSON strings in non-string columns): [`text_to`], the one text
//! rule for every column type, with hexadecimal bytes, UUIDs, ISO-8601 dates, times of day and
//! timestamps (with zone offsets), and fractional seconds that never round.

use std::borrow::Cow;

use super::number::{number_to, special_float, Dec, Number};
use super::{Cell, Leaf};

/// Converts text to a value of `leaf` (the one text rule for CSV fields and JSON strings).
pub(crate) fn text_to(
    leaf: Leaf,
    text: &str,
    name: &str,
) -> std::result::Result<Cell<'static>, String> {
    if leaf == Leaf::Str {
        return Ok(Cell::Str(Cow::Owned(text.to_string())));
    }
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    match leaf {
        Leaf::Bool => {
            if t.eq_ignore_ascii_case("true") {
                Ok(Cell::Bool(true))
            } else if t.eq_ignore_ascii_case("false") {
                Ok(Cell::Bool(false))
            } else {
                Err("not a boolean (expected true or false)".into())
            }
        }
        Leaf::Float | Leaf::Double if special_float(t).is_some() => {
            let v = special_float(t).expect("checked");
            Ok(if leaf == Leaf::Float {
                Cell::F32(v as f32)
            } else {
                Cell::F64(v)
            })
        }
        l if l.is_numeric() => {
            if Dec::parse(t).is_none() {
                return Err(format!("not a number (expected a {name})"));
            }
            number_to(leaf, Number::Text(t), name)
        }
        Leaf::Date => parse_date(t).map(Cell::I32),
        Leaf::Time(d) => parse_time(t, d, name).map(Cell::I64),
        Leaf::Timestamp(d, _) => parse_timestamp(t, d, name).map(Cell::I64),
        Leaf::Binary => hex(t)
            .map(|b| Cell::Bytes(Cow::Owned(b)))
            .ok_or_else(|| "not hexadecimal bytes (binary is written as hex text)".into()),
        Leaf::Fixed(n) => {
            let bytes = if n == 16 {
                uuid::Uuid::try_parse(t)
                    .ok()
                    .map(|u| u.as_bytes().to_vec())
                    .or_else(|| hex(t))
            } else {
                hex(t)
            };
            match bytes {
                Some(b) if b.len() == n as usize => Ok(Cell::Bytes(Cow::Owned(b))),
                Some(b) => Err(format!("has {} byte(s); {name} holds exactly {n}", b.len())),
                None => Err(format!(
                    "not hexadecimal bytes{} ({name} is written as hex text)",
                    if n == 16 { " or a UUID" } else { "" }
                )),
            }
        }
        _ => Err(format!("a {name} column cannot be read from text")),
    }
}

fn hex(t: &str) -> Option<Vec<u8>> {
    let b = t.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let val = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2)
        .map(|p| Some((val(p[0])? << 4) | val(p[1])?))
        .collect()
}

/// A fixed number of ASCII digits at `*i`.
fn fixed_digits(b: &[u8], i: &mut usize, n: usize) -> Option<u32> {
    let s = b.get(*i..*i + n)?;
    if !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    *i += n;
    Some(s.iter().fold(0, |a, d| a * 10 + (d - b'0') as u32))
}

/// `[+-]?YYYY-MM-DD` (4 to 6 year digits with a sign, 4 without) at the start of `b`: the
/// days since 1970-01-01 and the length read.
fn date_prefix(b: &[u8]) -> std::result::Result<(i64, usize), String> {
    const EXPECT: &str = "not a date (expected YYYY-MM-DD)";
    let mut i = 0;
    let sign = match b.first() {
        Some(b'-') => {
            i += 1;
            -1
        }
        Some(b'+') => {
            i += 1;
            1
        }
        _ => 0,
    };
    let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if n < 4 || (sign == 0 && n != 4) || n > 6 {
        return Err(EXPECT.into());
    }
    let year = fixed_digits(b, &mut i, n).ok_or(EXPECT)? as i32 * if sign < 0 { -1 } else { 1 };
    if b.get(i) != Some(&b'-') {
        return Err(EXPECT.into());
    }
    i += 1;
    let month = fixed_digits(b, &mut i, 2).ok_or(EXPECT)?;
    if b.get(i) != Some(&b'-') {
        return Err(EXPECT.into());
    }
    i += 1;
    let day = fixed_digits(b, &mut i, 2).ok_or(EXPECT)?;
    let invalid = || {
        if (1..=12).contains(&month) && (1..=31).contains(&day) && year.abs() < 200_000 {
            format!("no such date ({year:04}-{month:02}-{day:02})")
        } else {
            "not a valid date (month 01-12, day 01-31, year within +-262143)".to_string()
        }
    };
    if sign == 0 {
        // Years 0000-9999, the usual case: counted here (chrono's date type costs more than
        // the rest of a timestamp's parse); the same days as chrono's (unit test).
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return Err(invalid());
        }
        return Ok((days_from_civil(year as i64, month, day), i));
    }
    let date = chrono::NaiveDate::from_ymd_opt(year, month, day).ok_or_else(invalid)?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid");
    Ok((date.signed_duration_since(epoch).num_days(), i))
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a valid proleptic Gregorian date: the year counted from March (so
/// the leap day ends it), whole 400-year eras of 146,097 days, then days within the era (the
/// civil-from-days arithmetic of H. Hinnant's "chrono-Compatible Low-Level Date Algorithms").
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_date(t: &str) -> std::result::Result<i32, String> {
    let (days, n) = date_prefix(t.as_bytes())?;
    if n != t.len() {
        return Err("not a date (expected YYYY-MM-DD, without a time)".into());
    }
    i32::try_from(days).map_err(|_| "out of range for date".into())
}

/// `HH:MM[:SS[.fraction]]` at `*i`: seconds of the day and the fraction digits.
fn time_part<'t>(b: &'t [u8], i: &mut usize) -> std::result::Result<(i64, &'t [u8]), String> {
    const EXPECT: &str = "not a time (expected HH:MM[:SS[.fraction]])";
    let h = fixed_digits(b, i, 2).ok_or(EXPECT)?;
    if b.get(*i) != Some(&b':') {
        return Err(EXPECT.into());
    }
    *i += 1;
    let m = fixed_digits(b, i, 2).ok_or(EXPECT)?;
    let mut s = 0;
    let mut frac: &[u8] = &[];
    if b.get(*i) == Some(&b':') {
        *i += 1;
        s = fixed_digits(b, i, 2).ok_or(EXPECT)?;
        if b.get(*i) == Some(&b'.') {
            *i += 1;
            let start = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            if *i == start {
                return Err(EXPECT.into());
            }
            frac = &b[start..*i];
        }
    }
    if h > 23 || m > 59 || s > 59 {
        return Err(format!(
            "not a valid time of day ({h:02}:{m:02}:{s:02}; hours 00-23, minutes and seconds 00-59)"
        ));
    }
    Ok(((h * 3600 + m * 60 + s) as i64, frac))
}

/// The fraction of a second in units of `10^-digits`; extra digits must be zeros.
fn fraction(frac: &[u8], digits: u32, name: &str) -> std::result::Result<i64, String> {
    let d = digits as usize;
    if frac.len() > d && frac[d..].iter().any(|&c| c != b'0') {
        return Err(format!(
            "has more than {d} fractional second digit(s); {name} does not round"
        ));
    }
    let mut v: i64 = 0;
    for k in 0..d {
        v = v * 10 + frac.get(k).map(|c| (c - b'0') as i64).unwrap_or(0);
    }
    Ok(v)
}

fn parse_time(t: &str, digits: u32, name: &str) -> std::result::Result<i64, String> {
    let b = t.as_bytes();
    let mut i = 0;
    let (secs, frac) = time_part(b, &mut i)?;
    if i != b.len() {
        return Err("not a time (expected HH:MM[:SS[.fraction]])".into());
    }
    Ok(secs * 10i64.pow(digits) + fraction(frac, digits, name)?)
}

fn parse_timestamp(t: &str, digits: u32, name: &str) -> std::result::Result<i64, String> {
    const EXPECT: &str = "not a timestamp (expected YYYY-MM-DD[THH:MM[:SS[.fraction]]][Z|+HH:MM])";
    let b = t.as_bytes();
    let (days, mut i) = date_prefix(b)?;
    let mut secs = days * 86_400;
    let mut frac: &[u8] = &[];
    if i < b.len() {
        if !matches!(b[i], b'T' | b't' | b' ') {
            return Err(EXPECT.into());
        }
        i += 1;
        let (s, f) = time_part(b, &mut i)?;
        secs += s;
        frac = f;
        match b.get(i) {
            None => {}
            Some(b'Z' | b'z') => i += 1,
            Some(&c @ (b'+' | b'-')) => {
                i += 1;
                let oh = fixed_digits(b, &mut i, 2).ok_or(EXPECT)?;
                let colon = b.get(i) == Some(&b':');
                if colon {
                    i += 1;
                }
                let om = if colon || i < b.len() {
                    fixed_digits(b, &mut i, 2).ok_or(EXPECT)?
                } else {
                    0
                };
                if oh > 23 || om > 59 {
                    return Err(format!("not a valid zone offset in {t}"));
                }
                let off = (oh * 3600 + om * 60) as i64;
                // Local time minus the offset is UTC.
                secs -= if c == b'+' { off } else { -off };
            }
            Some(_) => return Err(EXPECT.into()),
        }
        if i != b.len() {
            return Err(EXPECT.into());
        }
    }
    let f = fraction(frac, digits, name)?;
    secs.checked_mul(10i64.pow(digits))
        .and_then(|v| v.checked_add(f))
        .ok_or_else(|| format!("out of range for {name}"))
}

#[cfg(test)]
mod date_tests {
    use super::*;

    #[test]
    fn every_date_of_four_digit_years_counts_as_chrono_counts_it() {
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for year in (0..=9999)
            .step_by(7)
            .chain([1600, 1900, 1970, 2000, 2024, 2100, 9999])
        {
            for month in 0..=13u32 {
                for day in 0..=32u32 {
                    let text = format!("{year:04}-{month:02}-{day:02}");
                    let ours = date_prefix(text.as_bytes()).map(|(d, _)| d);
                    let chrono = chrono::NaiveDate::from_ymd_opt(year, month, day)
                        .map(|d| d.signed_duration_since(epoch).num_days());
                    assert_eq!(ours.ok(), chrono, "{text}");
                }
            }
        }
    }
}
