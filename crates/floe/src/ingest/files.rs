//! Input files for `floe append`: NDJSON, CSV (with a header) and Parquet, read in batches and
//! converted to the table schema. A record that does not fit names file, line/row, column and
//! value.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::json::ReaderBuilder as JsonReaderBuilder;
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::error::{Error, Result};
use crate::ingest::convert::{conform, Origin};

/// Records per batch read from an input file.
pub const BATCH_ROWS: usize = 8192;

/// Input file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    Ndjson,
    Csv,
    Parquet,
}

impl InputFormat {
    /// Parses `ndjson|json|jsonl|csv|parquet`.
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "ndjson" | "json" | "jsonl" => Ok(Self::Ndjson),
            "csv" => Ok(Self::Csv),
            "parquet" => Ok(Self::Parquet),
            _ => Err(Error::invalid_option(
                "format",
                s,
                "expected ndjson, csv or parquet",
            )),
        }
    }

    /// Guesses the format from the file extension.
    pub fn from_path(path: &Path) -> Result<Self> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        Self::parse(ext).map_err(|_| Error::InputFile {
            path: path.to_path_buf(),
            reason:
                "unknown extension; use .ndjson/.jsonl/.json, .csv or .parquet, or pass --format"
                    .into(),
        })
    }
}

enum Source {
    Ndjson {
        lines: std::io::Lines<BufReader<File>>,
    },
    Csv {
        reader: Box<arrow::csv::reader::BufReader<BufReader<File>>>,
    },
    Parquet {
        reader: ParquetRecordBatchReader,
    },
}

/// Reads one input file as batches in the table's Arrow schema.
pub struct InputReader {
    path: PathBuf,
    target: SchemaRef,
    source: Source,
    /// Number (line or row) of the next record.
    next: u64,
    done: bool,
}

fn input_err(path: &Path, e: impl ToString) -> Error {
    Error::InputFile {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl InputReader {
    /// Opens `path` in `format` (guessed from the extension when `None`).
    pub fn open(path: &Path, format: Option<InputFormat>, target: SchemaRef) -> Result<Self> {
        let format = match format {
            Some(f) => f,
            None => InputFormat::from_path(path)?,
        };
        let file = File::open(path).map_err(|e| input_err(path, e))?;
        let (source, next) = match format {
            InputFormat::Ndjson => (
                Source::Ndjson {
                    lines: BufReader::new(file).lines(),
                },
                1,
            ),
            InputFormat::Csv => {
                let mut file = file;
                let fmt = arrow::csv::reader::Format::default().with_header(true);
                let (inferred, _) = fmt
                    .infer_schema(&mut file, Some(0))
                    .map_err(|e| input_err(path, e))?;
                file.rewind().map_err(|e| input_err(path, e))?;
                let text_schema = Arc::new(Schema::new(
                    inferred
                        .fields()
                        .iter()
                        .map(|f| Field::new(f.name(), DataType::Utf8, true))
                        .collect::<Vec<_>>(),
                ));
                let reader = arrow::csv::ReaderBuilder::new(text_schema)
                    .with_header(true)
                    .with_batch_size(BATCH_ROWS)
                    .build_buffered(BufReader::new(file))
                    .map_err(|e| input_err(path, e))?;
                (
                    Source::Csv {
                        reader: Box::new(reader),
                    },
                    2,
                )
            }
            InputFormat::Parquet => {
                let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                    .map_err(|e| input_err(path, format!("not a readable Parquet file: {e}")))?
                    .with_batch_size(BATCH_ROWS)
                    .build()
                    .map_err(|e| input_err(path, e))?;
                (Source::Parquet { reader }, 1)
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            target,
            source,
            next,
            done: false,
        })
    }

    fn origin(&self, unit: &'static str) -> Origin {
        Origin {
            file: self.path.display().to_string(),
            unit,
            first: self.next,
        }
    }

    /// The next batch, or `None` at the end of the file.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if self.done {
            return Ok(None);
        }
        match &mut self.source {
            Source::Ndjson { .. } => self.next_ndjson(),
            Source::Csv { reader } => match reader.next() {
                None => {
                    self.done = true;
                    Ok(None)
                }
                Some(Err(e)) => Err(Error::BadRecord {
                    file: self.path.display().to_string(),
                    location: format!("near line {}", self.next),
                    column: "-".into(),
                    value: "-".into(),
                    reason: e.to_string(),
                }),
                Some(Ok(b)) => {
                    let out = conform(&b, &self.target, &self.origin("line"))?;
                    self.next += b.num_rows() as u64;
                    Ok(Some(out))
                }
            },
            Source::Parquet { reader } => match reader.next() {
                None => {
                    self.done = true;
                    Ok(None)
                }
                Some(Err(e)) => Err(input_err(&self.path, e)),
                Some(Ok(b)) => {
                    let out = conform(&b, &self.target, &self.origin("row"))?;
                    self.next += b.num_rows() as u64;
                    Ok(Some(out))
                }
            },
        }
    }

    fn next_ndjson(&mut self) -> Result<Option<RecordBatch>> {
        let Source::Ndjson { lines } = &mut self.source else {
            unreachable!("called on ndjson only")
        };
        let first = self.next;
        let mut chunk: Vec<(u64, String)> = Vec::with_capacity(BATCH_ROWS);
        let mut n = first;
        for line in lines.by_ref() {
            let line = line.map_err(|e| input_err(&self.path, e))?;
            let this = n;
            n += 1;
            if !line.trim().is_empty() {
                chunk.push((this, line));
            }
            if chunk.len() >= BATCH_ROWS {
                break;
            }
        }
        self.next = n;
        if chunk.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let mut body = String::with_capacity(chunk.iter().map(|(_, l)| l.len() + 1).sum());
        for (_, l) in &chunk {
            body.push_str(l);
            body.push('\n');
        }
        match decode_json(&self.target, body.as_bytes(), chunk.len()) {
            Ok(b) => Ok(Some(b)),
            Err(_) => Err(self.explain_json(&chunk)),
        }
    }

    /// Finds the first bad line of a chunk that failed to decode and names column and value.
    fn explain_json(&self, chunk: &[(u64, String)]) -> Error {
        let file = self.path.display().to_string();
        for (line_no, line) in chunk {
            if let Some(bad) = explain_line(&self.target, line) {
                return Error::BadRecord {
                    file,
                    location: format!("line {line_no}"),
                    column: bad.column,
                    value: bad.value,
                    reason: bad.reason,
                };
            }
        }
        Error::BadRecord {
            file,
            location: format!("lines {}..{}", chunk[0].0, chunk[chunk.len() - 1].0),
            column: "-".into(),
            value: "-".into(),
            reason: "records do not decode together (mixed types across lines?)".into(),
        }
    }
}

/// Why one JSON record does not fit the table schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BadValue {
    /// The column, or "-" when the record itself is not a JSON object.
    pub column: String,
    /// The offending value (first 80 characters).
    pub value: String,
    pub reason: String,
}

/// Checks one NDJSON record against `target`: `None` when it decodes, otherwise the first bad
/// column and value.
pub fn explain_line(target: &SchemaRef, line: &str) -> Option<BadValue> {
    let value: serde_json::Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Some(BadValue {
                column: "-".into(),
                value: line.chars().take(80).collect(),
                reason: format!("invalid JSON: {e}"),
            })
        }
    };
    let Some(obj) = value.as_object() else {
        return Some(BadValue {
            column: "-".into(),
            value: line.chars().take(80).collect(),
            reason: "expected a JSON object per line".into(),
        });
    };
    for field in target.fields() {
        let v = obj.get(field.name()).unwrap_or(&serde_json::Value::Null);
        if v.is_null() {
            if !field.is_nullable() {
                return Some(BadValue {
                    column: field.name().clone(),
                    value: "null".into(),
                    reason: "required column is missing or null".into(),
                });
            }
            continue;
        }
        let one = Arc::new(Schema::new(vec![field
            .as_ref()
            .clone()
            .with_nullable(true)]));
        let doc = serde_json::json!({ field.name(): v }).to_string();
        if let Err(e) = decode_json(&one, doc.as_bytes(), 1) {
            return Some(BadValue {
                column: field.name().clone(),
                value: v.to_string().chars().take(80).collect(),
                reason: format!(
                    "not a valid {}: {}",
                    field.data_type(),
                    short(&e.to_string())
                ),
            });
        }
    }
    None
}

fn short(s: &str) -> String {
    s.rsplit(": ").next().unwrap_or(s).to_string()
}

/// Decodes `rows` NDJSON records in `body` into one batch of `schema`.
pub fn decode_json(schema: &SchemaRef, body: &[u8], rows: usize) -> Result<RecordBatch> {
    let mut decoder = JsonReaderBuilder::new(schema.clone())
        .with_batch_size(rows.max(1))
        .build_decoder()?;
    let mut rest = body;
    while !rest.is_empty() {
        let read = decoder.decode(rest)?;
        if read == 0 {
            break;
        }
        rest = &rest[read..];
    }
    decoder
        .flush()?
        .ok_or_else(|| Error::Arrow(arrow_schema::ArrowError::JsonError("no records".into())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
        ]))
    }

    fn read_all(path: &Path) -> Result<Vec<RecordBatch>> {
        let mut r = InputReader::open(path, None, schema())?;
        let mut out = vec![];
        while let Some(b) = r.next_batch()? {
            out.push(b);
        }
        Ok(out)
    }

    #[test]
    fn ndjson_and_csv_read_into_the_table_schema() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("a.ndjson");
        std::fs::write(
            &j,
            "{\"id\": 1, \"name\": \"x\"}\n\n{\"id\": 2, \"amount\": 2.5, \"extra\": true}\n",
        )
        .unwrap();
        let b = read_all(&j).unwrap();
        assert_eq!(b.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
        let c = dir.path().join("a.csv");
        std::fs::write(&c, "name,id,amount\nx,1,\ny,2,3.5\n").unwrap();
        let b = read_all(&c).unwrap();
        assert_eq!(b[0].num_rows(), 2);
        assert_eq!(b[0].schema(), schema());
    }

    #[test]
    fn bad_json_record_names_line_column_and_value() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("bad.ndjson");
        let mut f = File::create(&j).unwrap();
        writeln!(f, "{{\"id\": 1}}\n{{\"id\": 2}}\n{{\"id\": \"abc\"}}").unwrap();
        let e = read_all(&j).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("'id'") && e.contains("abc"),
            "{e}"
        );
        std::fs::write(&j, "{\"name\": \"no id\"}\n").unwrap();
        let e = read_all(&j).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("required"), "{e}");
    }

    #[test]
    fn bad_csv_value_names_line_column_and_value() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("bad.csv");
        std::fs::write(&c, "id,amount\n1,2.0\n2,lots\n").unwrap();
        let e = read_all(&c).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("'amount'") && e.contains("lots"),
            "{e}"
        );
    }
}
