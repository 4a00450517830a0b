//! Exact number reading: [`Dec`], an exact decimal parsed from text or built from a binary
//! value, and [`Number`], an input number before conversion; the checked conversions of a
//! number to `int`/`bigint` (whole numbers in range), `decimal(P,S)` (never rounded) and
//! `float`/`double` (IEEE rounding, no overflow to infinity or underflow to zero).

use std::borrow::Cow;

use super::{Cell, Leaf};

/// An exact decimal number: `(-1)^neg * digits * 10^exp`, with no leading or trailing zeros in
/// `digits` (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dec {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

/// Exponents are clamped here: any value this far from 1 is out of range for every type.
const EXP_CLAMP: i64 = 1 << 40;

impl Dec {
    /// Parses `[+-]? (D+ [. D*] | . D+) ([eE] [+-]? D+)?` (JSON numbers are a subset).
    pub(crate) fn parse(text: &str) -> Option<Dec> {
        let b = text.as_bytes();
        // An optional sign at `*i`: true for `-`.
        let sign = |i: &mut usize| match b.get(*i) {
            Some(&c @ (b'-' | b'+')) => {
                *i += 1;
                c == b'-'
            }
            _ => false,
        };
        let mut i = 0;
        let neg = sign(&mut i);
        let mut digits = Vec::new();
        let mut frac = 0i64;
        while i < b.len() && b[i].is_ascii_digit() {
            digits.push(b[i]);
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                digits.push(b[i]);
                i += 1;
                frac += 1;
            }
        }
        if digits.is_empty() {
            return None;
        }
        let mut e: i64 = 0;
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            let eneg = sign(&mut i);
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                e = (e * 10 + (b[i] - b'0') as i64).min(EXP_CLAMP);
                i += 1;
            }
            if i == start {
                return None;
            }
            if eneg {
                e = -e;
            }
        }
        if i != b.len() {
            return None;
        }
        let lead = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..lead);
        let trail = digits.iter().rev().take_while(|&&d| d == b'0').count();
        digits.truncate(digits.len() - trail);
        let exp = if digits.is_empty() {
            0
        } else {
            e - frac + trail as i64
        };
        Some(Dec {
            neg: neg && !digits.is_empty(),
            digits,
            exp,
        })
    }

    fn from_scaled(v: i128, scale: i64) -> Dec {
        let neg = v < 0;
        let mut digits = v.unsigned_abs().to_string().into_bytes();
        if digits == b"0" {
            digits.clear();
        }
        let trail = digits.iter().rev().take_while(|&&d| d == b'0').count();
        digits.truncate(digits.len() - trail);
        Dec {
            neg,
            exp: if digits.is_empty() {
                0
            } else {
                trail as i64 - scale
            },
            digits,
        }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// `digits * 10^shift` when it has at most `max_digits` digits.
    fn scaled(&self, shift: i64, max_digits: i64) -> Option<i128> {
        if self.digits.len() as i64 + shift > max_digits {
            return None;
        }
        let mut v: i128 = 0;
        for d in &self.digits {
            v = v.checked_mul(10)?.checked_add((d - b'0') as i128)?;
        }
        for _ in 0..shift {
            v = v.checked_mul(10)?;
        }
        Some(if self.neg { -v } else { v })
    }
}

/// Why a number does not fit.
enum Misfit {
    Fraction,
    Range,
}

/// `dec` as an integer in `min..=max`.
fn dec_to_int(dec: &Dec, min: i128, max: i128) -> std::result::Result<i128, Misfit> {
    if dec.is_zero() {
        return Ok(0);
    }
    if dec.exp < 0 {
        return Err(Misfit::Fraction);
    }
    match dec.scaled(dec.exp, 39) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Misfit::Range),
    }
}

/// `dec` as the unscaled value of a `decimal(p, s)`.
fn dec_to_decimal(dec: &Dec, p: u8, s: i8) -> std::result::Result<i128, Misfit> {
    if dec.is_zero() {
        return Ok(0);
    }
    let shift = dec.exp + s as i64;
    if shift < 0 {
        return Err(Misfit::Fraction);
    }
    dec.scaled(shift, p as i64).ok_or(Misfit::Range)
}

/// A number from an input, before conversion to a column type.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Number<'t> {
    /// Decimal text (JSON number grammar, or the looser [`Dec::parse`] grammar for text).
    Text(&'t str),
    Int(i128),
    /// An unscaled decimal and its scale.
    Scaled(i128, i8),
    Float(f64),
}

impl Number<'_> {
    fn dec(&self) -> std::result::Result<Dec, String> {
        match *self {
            Number::Text(t) => Dec::parse(t).ok_or_else(|| "not a number".to_string()),
            Number::Int(v) => Ok(Dec::from_scaled(v, 0)),
            Number::Scaled(v, s) => Ok(Dec::from_scaled(v, s as i64)),
            Number::Float(f) if !f.is_finite() => Err(format!("{f} is not a finite number")),
            // An integral double is exactly that integer (every double from 2^53 up is).
            Number::Float(f) if f.fract() == 0.0 && f.abs() < 1e38 => {
                Ok(Dec::from_scaled(f as i128, 0))
            }
            // Otherwise the shortest text that reads back as the same double: what the writer
            // meant (0.1, not the binary fraction 0.1000000000000000055...).
            Number::Float(f) => Ok(Dec::parse(&format!("{f:e}")).expect("float text parses")),
        }
    }

    fn text(&self) -> Cow<'_, str> {
        match *self {
            Number::Text(t) => Cow::Borrowed(t),
            Number::Int(v) => Cow::Owned(v.to_string()),
            Number::Scaled(v, s) => Cow::Owned(format!("{v}e{}", -(s as i32))),
            Number::Float(f) => Cow::Owned(format!("{f:e}")),
        }
    }
}

/// Fast path for the common case: plain integer text that fits `i64`.
fn small_int(t: &str) -> Option<i64> {
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn to_int(n: Number, min: i128, max: i128, name: &str) -> std::result::Result<i128, String> {
    let v = match n {
        Number::Int(v) => v,
        Number::Text(t) if small_int(t).is_some() => small_int(t).expect("checked") as i128,
        _ => {
            let dec = n.dec()?;
            return dec_to_int(&dec, min, max).map_err(|m| match m {
                Misfit::Fraction => {
                    format!("has a fractional part; {name} takes whole numbers")
                }
                Misfit::Range => format!("out of range for {name}"),
            });
        }
    };
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(format!("out of range for {name}"))
    }
}

fn to_decimal(n: Number, p: u8, s: i8) -> std::result::Result<i128, String> {
    let dec = n.dec()?;
    dec_to_decimal(&dec, p, s).map_err(|m| match m {
        Misfit::Fraction => format!(
            "has more than {s} digit(s) after the decimal point; decimal({p},{s}) does not round"
        ),
        Misfit::Range => format!(
            "out of range for decimal({p},{s}) (at most {} digit(s) before the decimal point)",
            p as i64 - s as i64
        ),
    })
}

/// Rejects what IEEE rounding would silently turn into infinity or zero.
fn float_fits(
    v_is_inf: bool,
    v_is_zero: bool,
    n: &Number,
    name: &str,
) -> std::result::Result<(), String> {
    let source_finite = !matches!(n, Number::Float(f) if !f.is_finite());
    if v_is_inf && source_finite {
        return Err(format!("out of range for {name}"));
    }
    if v_is_zero {
        let source_zero = match n {
            Number::Float(f) => *f == 0.0,
            Number::Int(v) | Number::Scaled(v, _) => *v == 0,
            Number::Text(_) => n.dec().map(|d| d.is_zero()).unwrap_or(true),
        };
        if !source_zero {
            return Err(format!("too small for {name} (it would be stored as 0)"));
        }
    }
    Ok(())
}

fn to_f64(n: Number) -> std::result::Result<f64, String> {
    let v = match n {
        Number::Float(f) => f,
        Number::Int(v) => v as f64,
        _ => n
            .text()
            .parse::<f64>()
            .map_err(|_| "not a number".to_string())?,
    };
    float_fits(v.is_infinite(), v == 0.0, &n, "double")?;
    Ok(v)
}

fn to_f32(n: Number) -> std::result::Result<f32, String> {
    let v = match n {
        Number::Float(f) => f as f32,
        Number::Int(v) => v as f32,
        _ => n
            .text()
            .parse::<f32>()
            .map_err(|_| "not a number".to_string())?,
    };
    float_fits(v.is_infinite(), v == 0.0, &n, "float")?;
    Ok(v)
}

pub(super) fn number_to(
    leaf: Leaf,
    n: Number,
    name: &str,
) -> std::result::Result<Cell<'static>, String> {
    Ok(match leaf {
        Leaf::Int => Cell::I32(to_int(n, i32::MIN as i128, i32::MAX as i128, name)? as i32),
        Leaf::Long => Cell::I64(to_int(n, i64::MIN as i128, i64::MAX as i128, name)? as i64),
        Leaf::Decimal(p, s) => Cell::I128(to_decimal(n, p, s)?),
        Leaf::Float => Cell::F32(to_f32(n)?),
        Leaf::Double => Cell::F64(to_f64(n)?),
        _ => return Err(format!("a number cannot be stored in a {name} column")),
    })
}

pub(super) fn special_float(t: &str) -> Option<f64> {
    let l = t.to_ascii_lowercase();
    match l.as_str() {
        "nan" | "+nan" | "-nan" => Some(f64::NAN),
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}
