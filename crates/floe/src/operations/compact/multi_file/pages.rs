//! arrow-rs's view of several whole files as one collection of row groups, and the page
//! reader that decompresses ZSTD pages with one context per thread.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::arrow_reader::RowGroups;
use parquet::basic::Compression;
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::serialized_reader::SerializedPageReader;

use super::FileBytes;

/// Row groups of several files, in order, seen by arrow-rs as one collection.
pub(super) struct Files {
    files: Vec<FileBytes>,
    rows: usize,
}

impl Files {
    pub(super) fn new(files: Vec<FileBytes>) -> Self {
        let rows = files
            .iter()
            .map(|f| f.meta.file_metadata().num_rows().max(0) as usize)
            .sum();
        Self { files, rows }
    }
}

impl RowGroups for Files {
    fn num_rows(&self) -> usize {
        self.rows
    }

    fn column_chunks(&self, i: usize) -> parquet::errors::Result<Box<dyn PageIterator>> {
        let chunks: Vec<(Bytes, parquet::file::metadata::ColumnChunkMetaData, usize)> = self
            .files
            .iter()
            .flat_map(|f| {
                f.meta.row_groups().iter().map(|rg| {
                    (
                        f.bytes.clone(),
                        rg.column(i).clone(),
                        rg.num_rows().max(0) as usize,
                    )
                })
            })
            .collect();
        Ok(Box::new(Chunks(chunks.into_iter())))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.files.iter().flat_map(|f| f.meta.row_groups().iter()))
    }

    fn metadata(&self) -> &ParquetMetaData {
        &self.files[0].meta
    }
}

/// The column chunks of one column across the collection's row groups.
struct Chunks(std::vec::IntoIter<(Bytes, parquet::file::metadata::ColumnChunkMetaData, usize)>);

impl Iterator for Chunks {
    type Item = parquet::errors::Result<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (bytes, meta, rows) = self.0.next()?;
        Some(page_reader(bytes, meta, rows))
    }
}

impl PageIterator for Chunks {}

/// Pages of one column chunk. A ZSTD chunk is read as stored (its metadata rewritten to
/// UNCOMPRESSED, so no codec is created) and its pages decompressed by [`ZstdPages`].
fn page_reader(
    bytes: Bytes,
    meta: parquet::file::metadata::ColumnChunkMetaData,
    rows: usize,
) -> parquet::errors::Result<Box<dyn PageReader>> {
    let data = Arc::new(bytes);
    if matches!(meta.compression(), Compression::ZSTD(_)) {
        let stored = meta
            .into_builder()
            .set_compression(Compression::UNCOMPRESSED)
            .build()?;
        let inner = SerializedPageReader::new(data, &stored, rows, None)?;
        Ok(Box::new(ZstdPages(inner)))
    } else {
        Ok(Box::new(SerializedPageReader::new(
            data, &meta, rows, None,
        )?))
    }
}

thread_local! {
    /// This thread's ZSTD decompression context, reused for every page.
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Decompresses one ZSTD frame (a page's compressed part) with this thread's context.
pub(super) fn zstd_decompress(frame: &[u8]) -> parquet::errors::Result<Vec<u8>> {
    let err = |e: std::io::Error| parquet::errors::ParquetError::External(Box::new(e));
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(ctx) => ctx,
            None => slot.insert(zstd::bulk::Decompressor::new().map_err(err)?),
        };
        // Writers record the frame's size (arrow-rs, parquet-cpp); for one that does not,
        // grow the buffer until the frame fits.
        let known = zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten();
        let mut capacity = known.map(|n| n as usize).unwrap_or(frame.len().max(64) * 4);
        loop {
            match ctx.decompress(frame, capacity) {
                Ok(out) => return Ok(out),
                Err(_) if known.is_none() && capacity < (1 << 31) => capacity *= 2,
                Err(e) => return Err(err(e)),
            }
        }
    })
}

/// A page reader that decompresses the ZSTD pages of a chunk read as stored.
struct ZstdPages(SerializedPageReader<Bytes>);

impl ZstdPages {
    fn decompress(mut page: Page) -> parquet::errors::Result<Page> {
        match &mut page {
            Page::DataPage { buf, .. } | Page::DictionaryPage { buf, .. } => {
                *buf = Bytes::from(zstd_decompress(buf)?);
            }
            Page::DataPageV2 {
                buf,
                def_levels_byte_len,
                rep_levels_byte_len,
                is_compressed,
                ..
            } => {
                // Levels are stored uncompressed ahead of the values (Parquet format, data
                // page V2); an empty value section was not compressed at all.
                let levels = (*def_levels_byte_len + *rep_levels_byte_len) as usize;
                if levels > buf.len() {
                    return Err(parquet::errors::ParquetError::General(
                        "data page V2: level lengths exceed the page".into(),
                    ));
                }
                if *is_compressed && buf.len() > levels {
                    let mut out = Vec::with_capacity(buf.len() * 4);
                    out.extend_from_slice(&buf[..levels]);
                    out.extend_from_slice(&zstd_decompress(&buf[levels..])?);
                    *buf = Bytes::from(out);
                }
                *is_compressed = false;
            }
        }
        Ok(page)
    }
}

impl Iterator for ZstdPages {
    type Item = parquet::errors::Result<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl PageReader for ZstdPages {
    fn get_next_page(&mut self) -> parquet::errors::Result<Option<Page>> {
        self.0.get_next_page()?.map(Self::decompress).transpose()
    }

    fn peek_next_page(&mut self) -> parquet::errors::Result<Option<PageMetadata>> {
        self.0.peek_next_page()
    }

    fn skip_next_page(&mut self) -> parquet::errors::Result<()> {
        self.0.skip_next_page()
    }

    fn at_record_boundary(&mut self) -> parquet::errors::Result<bool> {
        self.0.at_record_boundary()
    }
}
