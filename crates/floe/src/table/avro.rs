//! Avro, as far as Iceberg's metadata files need it: the object container file (header,
//! blocks, codecs), the binary encoding of values, and writer schemas.
//!
//! Written by hand, after the Avro specification 1.11 ("Binary Encoding", "Object Container
//! Files", "Schema Declaration"), because floe reads manifests without going through a generic
//! value tree: the apache-avro crate (under the iceberg crate's manifest reader) decodes every
//! entry into `Value`s, resolves them against a reader schema and deserializes them again with
//! serde, about 35 µs per manifest entry on a 2-core machine, a third of the CPU of a compaction
//! of 3,000 small files. [`super::manifest_reader`] decodes entries straight from the bytes
//! with the [`AvroType`] tree of the file's own (writer) schema.

use std::collections::HashMap;
use std::io::Read;

/// Reads the binary encoding: zigzag varints, length-prefixed bytes, little-endian floats.
pub(crate) struct Cursor<'a> {
    pub bytes: &'a [u8],
    pub at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// A zigzag-encoded variable-length long.
    #[inline]
    pub fn long(&mut self) -> Option<i64> {
        let mut n: u64 = 0;
        let mut shift = 0;
        loop {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
        Some((n >> 1) as i64 ^ -((n & 1) as i64))
    }

    #[inline]
    pub fn int(&mut self) -> Option<i32> {
        i32::try_from(self.long()?).ok()
    }

    #[inline]
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.long()?).ok()?;
        self.fixed(len)
    }

    #[inline]
    pub fn fixed(&mut self, len: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(out)
    }

    #[inline]
    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    #[inline]
    pub fn f32(&mut self) -> Option<f32> {
        Some(f32::from_le_bytes(self.fixed(4)?.try_into().ok()?))
    }

    #[inline]
    pub fn f64(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.fixed(8)?.try_into().ok()?))
    }

    #[inline]
    pub fn boolean(&mut self) -> Option<bool> {
        match self.fixed(1)?[0] {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// The item count of the next block of an array or map (0 at the end). A negative count
    /// is followed by the block's size in bytes, which is not needed here.
    #[inline]
    pub fn block_count(&mut self) -> Option<usize> {
        let count = self.long()?;
        if count < 0 {
            self.long()?;
        }
        usize::try_from(count.unsigned_abs()).ok()
    }

    /// Skips one value of type `ty`.
    pub fn skip(&mut self, ty: &AvroType) -> Option<()> {
        match ty {
            AvroType::Null => {}
            AvroType::Boolean => {
                self.fixed(1)?;
            }
            AvroType::Int | AvroType::Long | AvroType::Enum => {
                self.long()?;
            }
            AvroType::Float => {
                self.fixed(4)?;
            }
            AvroType::Double => {
                self.fixed(8)?;
            }
            AvroType::Bytes | AvroType::String => {
                self.bytes()?;
            }
            AvroType::Fixed(n) => {
                self.fixed(*n)?;
            }
            AvroType::Array(item) => loop {
                let n = self.block_count()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.skip(item)?;
                }
            },
            AvroType::Map(value) => loop {
                let n = self.block_count()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.bytes()?;
                    self.skip(value)?;
                }
            },
            AvroType::Union(branches) => {
                let b = branches.get(usize::try_from(self.long()?).ok()?)?;
                self.skip(b)?;
            }
            AvroType::Record(fields) => {
                for f in fields {
                    self.skip(&f.ty)?;
                }
            }
        }
        Some(())
    }
}

/// Appends `v` as a zigzag varint.
pub(crate) fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The header metadata of an object container file (the magic `Obj\x01`, then a
/// `map<bytes>`: blocks of a zigzag count, negative when followed by the block's byte size,
/// then key/value pairs, ended by a zero count) and where the sync marker after it starts.
#[allow(clippy::type_complexity)]
pub(crate) fn header_metadata(bytes: &[u8]) -> Option<(Vec<(&str, &[u8])>, usize)> {
    if bytes.get(..4)? != b"Obj\x01" {
        return None;
    }
    let mut r = Cursor { bytes, at: 4 };
    let mut metadata = Vec::new();
    loop {
        let n = r.block_count()?;
        if n == 0 {
            return Some((metadata, r.at));
        }
        for _ in 0..n {
            let key = r.str()?;
            let value = r.bytes()?;
            metadata.push((key, value));
        }
    }
}

/// Appends the magic and `metadata` as a container file header, up to (not including) the
/// sync marker.
pub(crate) fn put_header_metadata(out: &mut Vec<u8>, metadata: &[(&str, &[u8])]) {
    out.extend_from_slice(b"Obj\x01");
    put_long(out, metadata.len() as i64);
    for (k, v) in metadata {
        put_long(out, k.len() as i64);
        out.extend_from_slice(k.as_bytes());
        put_long(out, v.len() as i64);
        out.extend_from_slice(v);
    }
    put_long(out, 0);
}

/// A writer schema, with named types resolved in place and logical types dropped (they do not
/// change the encoding).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AvroType {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum,
    Array(Box<AvroType>),
    Map(Box<AvroType>),
    Union(Vec<AvroType>),
    Record(Vec<AvroField>),
}

/// A record field: its name, Iceberg's `field-id` when the writer gave one, and its type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AvroField {
    pub name: String,
    pub id: Option<i32>,
    pub ty: AvroType,
}

impl AvroType {
    /// Parses a JSON schema declaration.
    pub fn parse(json: &[u8]) -> Option<AvroType> {
        let v: serde_json::Value = serde_json::from_slice(json).ok()?;
        parse_type(&v, &mut HashMap::new(), None)
    }

    /// The fields of a record, `None` for any other type.
    pub fn fields(&self) -> Option<&[AvroField]> {
        match self {
            AvroType::Record(f) => Some(f),
            _ => None,
        }
    }

    /// The record under an optional union (`["null", record]`) or the record itself.
    pub fn record_fields(&self) -> Option<&[AvroField]> {
        match self {
            AvroType::Record(f) => Some(f),
            AvroType::Union(b) => b.iter().find_map(AvroType::fields),
            _ => None,
        }
    }
}

fn parse_type(
    v: &serde_json::Value,
    named: &mut HashMap<String, AvroType>,
    namespace: Option<&str>,
) -> Option<AvroType> {
    use serde_json::Value;
    match v {
        Value::String(name) => primitive(name).or_else(|| lookup(named, name, namespace)),
        Value::Array(branches) => Some(AvroType::Union(
            branches
                .iter()
                .map(|b| parse_type(b, named, namespace))
                .collect::<Option<_>>()?,
        )),
        Value::Object(o) => {
            let kind = o.get("type")?;
            let Some(kind) = kind.as_str() else {
                // {"type": {...}}: a nested declaration
                return parse_type(kind, named, namespace);
            };
            let ns = o.get("namespace").and_then(Value::as_str).or(namespace);
            let ty = match kind {
                "record" | "error" => {
                    let fields = o.get("fields")?.as_array()?;
                    let mut out = Vec::with_capacity(fields.len());
                    for f in fields {
                        let name = f.get("name")?.as_str()?.to_string();
                        let id = match f.get("field-id") {
                            Some(Value::Number(n)) => Some(i32::try_from(n.as_i64()?).ok()?),
                            Some(Value::String(s)) => Some(s.parse().ok()?),
                            _ => None,
                        };
                        out.push(AvroField {
                            name,
                            id,
                            ty: parse_type(f.get("type")?, named, ns)?,
                        });
                    }
                    AvroType::Record(out)
                }
                "enum" => AvroType::Enum,
                "fixed" => AvroType::Fixed(usize::try_from(o.get("size")?.as_u64()?).ok()?),
                "array" => AvroType::Array(Box::new(parse_type(o.get("items")?, named, ns)?)),
                "map" => AvroType::Map(Box::new(parse_type(o.get("values")?, named, ns)?)),
                other => primitive(other).or_else(|| lookup(named, other, ns))?,
            };
            if let Some(name) = o.get("name").and_then(Value::as_str) {
                if matches!(kind, "record" | "error" | "enum" | "fixed") {
                    let full = match (name.contains('.'), ns) {
                        (false, Some(ns)) if !ns.is_empty() => format!("{ns}.{name}"),
                        _ => name.to_string(),
                    };
                    let short = full.rsplit('.').next().unwrap_or(&full).to_string();
                    named.insert(full, ty.clone());
                    named.entry(short).or_insert_with(|| ty.clone());
                }
            }
            Some(ty)
        }
        _ => None,
    }
}

fn primitive(name: &str) -> Option<AvroType> {
    Some(match name {
        "null" => AvroType::Null,
        "boolean" => AvroType::Boolean,
        "int" => AvroType::Int,
        "long" => AvroType::Long,
        "float" => AvroType::Float,
        "double" => AvroType::Double,
        "bytes" => AvroType::Bytes,
        "string" => AvroType::String,
        _ => return None,
    })
}

fn lookup(
    named: &HashMap<String, AvroType>,
    name: &str,
    namespace: Option<&str>,
) -> Option<AvroType> {
    if let Some(ns) = namespace.filter(|ns| !ns.is_empty() && !name.contains('.')) {
        if let Some(t) = named.get(&format!("{ns}.{name}")) {
            return Some(t.clone());
        }
    }
    named.get(name).cloned()
}

/// An object container file: its header metadata and its data blocks, decompressed.
pub(crate) struct Container<'a> {
    pub metadata: Vec<(&'a str, &'a [u8])>,
    pub schema: AvroType,
    bytes: &'a [u8],
    at: usize,
    start: usize,
    sync: &'a [u8],
    codec: Codec,
}

#[derive(Clone, Copy)]
enum Codec {
    Null,
    Deflate,
    Zstandard,
}

impl<'a> Container<'a> {
    /// Parses the header; `None` when this is not a container file, or it uses a codec or a
    /// schema this module does not read (the caller then uses a general reader).
    pub fn open(bytes: &'a [u8]) -> Option<Self> {
        let (metadata, sync_at) = header_metadata(bytes)?;
        let mut r = Cursor { bytes, at: sync_at };
        let sync = r.fixed(16)?;
        let get = |k: &str| metadata.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let codec = match get("avro.codec") {
            None | Some(b"null") => Codec::Null,
            Some(b"deflate") => Codec::Deflate,
            Some(b"zstandard") => Codec::Zstandard,
            Some(_) => return None,
        };
        let schema = AvroType::parse(get("avro.schema")?)?;
        Some(Self {
            metadata,
            schema,
            bytes,
            at: r.at,
            start: r.at,
            sync,
            codec,
        })
    }

    /// Whether the blocks are stored without compression.
    pub fn is_uncompressed(&self) -> bool {
        matches!(self.codec, Codec::Null)
    }

    /// Where the first data block starts (the header's length).
    pub fn data_start(&self) -> usize {
        self.start
    }

    /// The 16-byte sync marker that ends the header and every block.
    pub fn sync(&self) -> &'a [u8] {
        self.sync
    }

    /// The header metadata as the iceberg crate's `ManifestMetadata::parse` takes it.
    pub fn metadata_map(&self) -> HashMap<String, Vec<u8>> {
        self.metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_vec()))
            .collect()
    }

    /// The next block: its record count and its (decompressed) bytes; `Ok(None)` at the end.
    #[allow(clippy::type_complexity)]
    pub fn next_block(&mut self) -> Option<Option<(usize, std::borrow::Cow<'a, [u8]>)>> {
        if self.at >= self.bytes.len() {
            return Some(None);
        }
        let mut r = Cursor {
            bytes: self.bytes,
            at: self.at,
        };
        let count = usize::try_from(r.long()?).ok()?;
        let size = usize::try_from(r.long()?).ok()?;
        let raw = r.fixed(size)?;
        if r.fixed(16)? != self.sync {
            return None;
        }
        self.at = r.at;
        let data = match self.codec {
            Codec::Null => std::borrow::Cow::Borrowed(raw),
            Codec::Deflate => {
                let mut out = Vec::with_capacity(raw.len() * 4);
                flate2::read::DeflateDecoder::new(raw)
                    .read_to_end(&mut out)
                    .ok()?;
                std::borrow::Cow::Owned(out)
            }
            Codec::Zstandard => std::borrow::Cow::Owned(zstd::stream::decode_all(raw).ok()?),
        };
        Some(Some((count, data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longs_round_trip_through_zigzag_varints() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -301,
            i64::MAX,
            i64::MIN,
            1 << 40,
        ] {
            let mut out = Vec::new();
            put_long(&mut out, v);
            assert_eq!(Cursor::new(&out).long(), Some(v), "{v}");
        }
        // a varint longer than ten bytes is refused, not wrapped
        assert_eq!(Cursor::new(&[0xff; 11]).long(), None);
        assert_eq!(Cursor::new(&[0x80]).long(), None, "truncated");
    }

    #[test]
    fn schemas_resolve_named_types_and_field_ids() {
        let json = br#"{"type":"record","name":"manifest_entry","namespace":"ns","fields":[
            {"name":"a","type":{"type":"record","name":"r1","fields":[
                {"name":"x","type":["null",{"type":"int","logicalType":"date"}],"field-id":1000}]},
             "field-id":7},
            {"name":"b","type":["null","r1"],"field-id":"8"},
            {"name":"c","type":{"type":"array","items":{"type":"fixed","name":"f16","size":16}}},
            {"name":"d","type":{"type":"map","values":"ns.f16"}}]}"#;
        let t = AvroType::parse(json).unwrap();
        let f = t.fields().unwrap();
        assert_eq!(f[0].id, Some(7));
        assert_eq!(f[1].id, Some(8));
        assert_eq!(f[2].id, None);
        let r1 = AvroType::Record(vec![AvroField {
            name: "x".into(),
            id: Some(1000),
            ty: AvroType::Union(vec![AvroType::Null, AvroType::Int]),
        }]);
        assert_eq!(f[0].ty, r1);
        assert_eq!(f[1].ty, AvroType::Union(vec![AvroType::Null, r1]));
        assert_eq!(f[2].ty, AvroType::Array(Box::new(AvroType::Fixed(16))));
        assert_eq!(f[3].ty, AvroType::Map(Box::new(AvroType::Fixed(16))));
        assert!(AvroType::parse(
            br#"{"type":"record","name":"x","fields":[{"name":"a","type":"nope"}]}"#
        )
        .is_none());
    }

    #[test]
    fn skip_walks_every_type() {
        let mut b = Vec::new();
        put_long(&mut b, 2); // array block of 2
        put_long(&mut b, 5);
        put_long(&mut b, -6);
        put_long(&mut b, -1); // block of 1 with a size
        put_long(&mut b, 1);
        put_long(&mut b, 9);
        put_long(&mut b, 0);
        put_long(&mut b, 1); // union branch 1: a string
        put_long(&mut b, 3);
        b.extend_from_slice(b"abc");
        b.extend_from_slice(&1.5f64.to_le_bytes());
        b.push(42); // the byte after
        let ty = AvroType::Record(vec![
            AvroField {
                name: "a".into(),
                id: None,
                ty: AvroType::Array(Box::new(AvroType::Long)),
            },
            AvroField {
                name: "s".into(),
                id: None,
                ty: AvroType::Union(vec![AvroType::Null, AvroType::String]),
            },
            AvroField {
                name: "d".into(),
                id: None,
                ty: AvroType::Double,
            },
        ]);
        let mut c = Cursor::new(&b);
        c.skip(&ty).unwrap();
        assert_eq!(c.bytes[c.at], 42);
    }
}
