use super::pages::zstd_decompress;
use super::*;
use arrow::array::{
    ArrayRef, Int64Array, ListBuilder, MapBuilder, StringArray, StringBuilder, StructArray,
};
use arrow::compute::concat_batches;
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::basic::ZstdLevel;
use parquet::file::properties::{WriterProperties, WriterVersion};

fn schema() -> SchemaRef {
    let id = |f: Field, n: i32| {
        f.with_metadata([("PARQUET:field_id".to_string(), n.to_string())].into())
    };
    let item = id(Field::new("element", DataType::Utf8, true), 10);
    let point = vec![
        id(Field::new("x", DataType::Int64, false), 11),
        id(Field::new("y", DataType::Utf8, true), 12),
    ];
    let entries = Field::new(
        "key_value",
        DataType::Struct(
            vec![
                id(Field::new("key", DataType::Utf8, false), 13),
                id(Field::new("value", DataType::Int64, true), 14),
            ]
            .into(),
        ),
        false,
    );
    Arc::new(Schema::new(vec![
        id(Field::new("id", DataType::Int64, false), 1),
        id(Field::new("name", DataType::Utf8, true), 2),
        id(Field::new("tags", DataType::List(Arc::new(item)), true), 3),
        id(Field::new("point", DataType::Struct(point.into()), true), 4),
        id(
            Field::new("attrs", DataType::Map(Arc::new(entries), false), true),
            5,
        ),
    ]))
}

/// A batch of `n` rows from `from`, with nulls, empty lists and an all-null stretch.
fn rows(schema: &SchemaRef, from: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (from..from + n).collect();
    let names: StringArray = ids
        .iter()
        .map(|i| (i % 7 != 0).then(|| format!("name-{}", i % 13)))
        .collect();
    let mut tags =
        ListBuilder::new(StringBuilder::new()).with_field(match schema.field(2).data_type() {
            DataType::List(f) => f.clone(),
            _ => unreachable!(),
        });
    for i in &ids {
        if i % 5 == 0 {
            tags.append_null();
        } else {
            for k in 0..(i % 3) {
                tags.values().append_value(format!("t{k}"));
            }
            tags.append(true);
        }
    }
    let DataType::Struct(point_fields) = schema.field(3).data_type() else {
        unreachable!()
    };
    let point = StructArray::new(
        point_fields.clone(),
        vec![
            Arc::new(Int64Array::from(
                ids.iter().map(|i| i * 2).collect::<Vec<_>>(),
            )) as ArrayRef,
            Arc::new(
                ids.iter()
                    .map(|i| (i % 4 != 0).then(|| format!("y{i}")))
                    .collect::<StringArray>(),
            ),
        ],
        Some(ids.iter().map(|i| i % 11 != 0).collect::<Vec<_>>().into()),
    );
    let DataType::Map(entries, _) = schema.field(4).data_type() else {
        unreachable!()
    };
    let DataType::Struct(kv) = entries.data_type() else {
        unreachable!()
    };
    let mut attrs = MapBuilder::new(
        Some(arrow::array::MapFieldNames {
            entry: "key_value".into(),
            key: "key".into(),
            value: "value".into(),
        }),
        StringBuilder::new(),
        arrow::array::Int64Builder::new(),
    )
    .with_keys_field(kv[0].clone())
    .with_values_field(kv[1].clone());
    for i in &ids {
        if i % 6 == 0 {
            attrs.append(false).unwrap();
        } else {
            attrs.keys().append_value("k");
            attrs.values().append_value(*i);
            attrs.append(true).unwrap();
        }
    }
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(names),
            Arc::new(tags.finish()),
            Arc::new(point),
            Arc::new(attrs.finish()),
        ],
    )
    .unwrap()
}

fn file(schema: &SchemaRef, batch: &RecordBatch, props: WriterProperties) -> Bytes {
    let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
    w.write(batch).unwrap();
    Bytes::from(w.into_inner().unwrap())
}

/// arrow-rs's own reader, one file at a time.
fn plain(schema: &SchemaRef, files: &[Bytes]) -> RecordBatch {
    let mut all = Vec::new();
    for f in files {
        for b in ParquetRecordBatchReaderBuilder::try_new(f.clone())
            .unwrap()
            .build()
            .unwrap()
        {
            all.push(RecordBatch::try_new(schema.clone(), b.unwrap().columns().to_vec()).unwrap());
        }
    }
    concat_batches(schema, &all).unwrap()
}

#[test]
fn many_files_through_one_reader_give_each_files_rows_in_order() {
    let schema = schema();
    let zstd = |v| {
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
            .set_writer_version(v)
            .set_data_page_row_count_limit(7)
            .set_write_batch_size(7)
            .build()
    };
    let configs = [
        zstd(WriterVersion::PARQUET_1_0),
        zstd(WriterVersion::PARQUET_2_0),
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_dictionary_enabled(false)
            .set_max_row_group_row_count(Some(16))
            .build(),
    ];
    for (c, props) in configs.into_iter().enumerate() {
        // Files of 1 to 60 rows, one with several row groups.
        let files: Vec<Bytes> = (0..12)
            .map(|i| {
                let n = [1, 60, 3, 17][i % 4];
                file(&schema, &rows(&schema, i as i64 * 100, n), props.clone())
            })
            .collect();
        let read: Vec<FileBytes> = files
            .iter()
            .map(|b| FileBytes {
                bytes: b.clone(),
                meta: Arc::new(ParquetMetaDataReader::new().parse_and_finish(b).unwrap()),
                deletes: vec![],
                vector: None,
            })
            .collect();
        let batches: Vec<RecordBatch> = decode(read, &schema)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert!(batches.iter().all(|b| b.num_rows() <= BATCH_ROWS));
        let got = concat_batches(&schema, &batches).unwrap();
        assert_eq!(got, plain(&schema, &files), "config {c}");
        assert_eq!(got.num_rows(), 3 * (1 + 60 + 3 + 17), "config {c}");
    }
}

#[test]
fn a_frame_without_its_size_still_decompresses() {
    let data: Vec<u8> = (0..100_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    enc.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut enc, &data).unwrap();
    let frame = enc.finish().unwrap();
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&frame)
            .ok()
            .flatten(),
        None
    );
    assert_eq!(zstd_decompress(&frame).unwrap(), data);
}

/// Files decoded together, some with a deletion vector: exactly the positions each vector
/// holds are left out, counted from each file's own first row (vectors on files that follow
/// others in the collection, on a file spanning several batches, and on its last row).
#[test]
fn deletion_vectors_drop_their_positions_file_by_file() {
    let schema = schema();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(16))
        .build();
    let sizes = [5i64, 9000, 1, 40, 7];
    let files: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            file(
                &schema,
                &rows(&schema, i as i64 * 100_000, n),
                props.clone(),
            )
        })
        .collect();
    let vectors: Vec<Option<Vec<u64>>> = vec![
        None,
        Some(vec![0, 1, 8191, 8192, 8999]),
        Some(vec![0]),
        None,
        Some(vec![2, 6]),
    ];
    let read: Vec<FileBytes> = files
        .iter()
        .zip(&vectors)
        .map(|(b, v)| FileBytes {
            bytes: b.clone(),
            meta: Arc::new(ParquetMetaDataReader::new().parse_and_finish(b).unwrap()),
            deletes: vec![],
            vector: v
                .as_ref()
                .map(|p| Arc::new(DeletionVector::from_positions(p.iter().copied()))),
        })
        .collect();
    let batches: Vec<RecordBatch> = decode(read, &schema)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    let got = concat_batches(&schema, &batches).unwrap();
    let mut expected = Vec::new();
    for (f, v) in files.iter().zip(&vectors) {
        let all = plain(&schema, std::slice::from_ref(f));
        let keep: BooleanArray = (0..all.num_rows() as u64)
            .map(|p| Some(!v.as_ref().is_some_and(|v| v.contains(&p))))
            .collect();
        expected.push(arrow::compute::filter_record_batch(&all, &keep).unwrap());
    }
    let expected = concat_batches(&schema, &expected).unwrap();
    assert_eq!(got.num_rows(), 9053 - 8);
    assert_eq!(got, expected);
}
