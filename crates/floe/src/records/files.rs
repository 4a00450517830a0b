//! Input files for `floe append`: NDJSON, CSV (with a header) and Parquet, read in batches and
//! converted to the table schema by the checked rules of [`crate::records::value`] (NDJSON
//! lines by the record rule of [`crate::records::ndjson`], the one `floe ingest` uses). A record
//! that does not fit names file, line/row, column and value.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::base::error::{Error, Result};
use crate::records::convert::{conform, Origin, TextSource};
use crate::records::ndjson;
pub use crate::records::value::BadValue;
use crate::records::value::Plan;

/// Records per batch read from an input file.
pub use crate::write::BATCH_ROWS;

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
        reader: BufReader<File>,
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
    plan: Plan,
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
                    reader: BufReader::with_capacity(1 << 20, file),
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
                // Every field is read as text and converted by the checked rules. A UTF-8 byte
                // order mark (as spreadsheet tools write) is not part of the first name.
                let text_schema = Arc::new(Schema::new(
                    inferred
                        .fields()
                        .iter()
                        .enumerate()
                        .map(|(i, f)| {
                            let name = if i == 0 {
                                f.name().trim_start_matches('\u{feff}')
                            } else {
                                f.name()
                            };
                            Field::new(name, DataType::Utf8, true)
                        })
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
            plan: Plan::new(&target),
            source,
            next,
            done: false,
        })
    }

    fn origin(&self, unit: &'static str, text: TextSource) -> Origin {
        Origin {
            file: self.path.display().to_string(),
            unit,
            first: self.next,
            text,
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
                    let out = conform(&b, &self.plan, &self.origin("line", TextSource::Csv))?;
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
                    let out = conform(&b, &self.plan, &self.origin("row", TextSource::Typed))?;
                    self.next += b.num_rows() as u64;
                    Ok(Some(out))
                }
            },
        }
    }

    /// Up to [`BATCH_ROWS`] records, each line decoded by the shared NDJSON record rule
    /// ([`crate::records::ndjson`]); the first bad line fails the file.
    fn next_ndjson(&mut self) -> Result<Option<RecordBatch>> {
        let Source::Ndjson { reader } = &mut self.source else {
            unreachable!("called on ndjson only")
        };
        let mut lines: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut n = self.next;
        loop {
            let mut line = Vec::new();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| input_err(&self.path, e))?;
            if read == 0 {
                self.done = true;
                break;
            }
            let this = n;
            n += 1;
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if ndjson::is_blank(&line) {
                continue;
            }
            lines.push((this, line));
            if lines.len() >= BATCH_ROWS {
                break;
            }
        }
        self.next = n;
        if lines.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let payloads: Vec<&[u8]> = lines.iter().map(|(_, l)| l.as_slice()).collect();
        let mut cells = self.plan.decode_many(&payloads);
        if let Some((i, bad)) = std::mem::take(&mut cells.bad).into_iter().next() {
            return Err(Error::BadRecord {
                file: self.path.display().to_string(),
                location: format!("line {}", lines[i].0),
                column: bad.column,
                value: bad.value,
                reason: bad.reason,
            });
        }
        Ok(Some(self.plan.build_columns(cells)?))
    }
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
