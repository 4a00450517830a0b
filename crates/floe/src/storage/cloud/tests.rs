use super::gcs::SingleEncodedUploads;
use super::*;

#[test]
fn azure_paths() {
    let p =
        AzurePath::parse("abfss://lake@acct.dfs.core.windows.net/wh/db/t/data/a.parquet").unwrap();
    assert_eq!(p.container, "lake");
    assert_eq!(p.account, "acct");
    assert_eq!(p.endpoint_suffix, "core.windows.net");
    assert_eq!(p.key, "wh/db/t/data/a.parquet");
    assert!(p.secure());
    let w = AzurePath::parse("wasb://c@a.blob.core.chinacloudapi.cn").unwrap();
    assert_eq!(w.key, "");
    assert!(!w.secure());
    assert_eq!(w.endpoint_suffix, "core.chinacloudapi.cn");
    for bad in [
        "abfss://acct.dfs.core.windows.net/x",
        "abfss://c@acct.blob.core.windows.net/x",
        "wasbs://c@acct.dfs.core.windows.net/x",
        "abfss://c@acct/x",
        "abfss://@acct.dfs.core.windows.net/x",
    ] {
        assert!(AzurePath::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn gcs_paths() {
    assert_eq!(
        split_gcs("gs://b/a/b.parquet").unwrap(),
        ("b", "a/b.parquet")
    );
    assert_eq!(split_gcs("gs://b").unwrap(), ("b", ""));
    assert!(split_gcs("gs:///x").is_err());
    assert!(is_cloud("gs://b/x") && is_cloud("abfss://c@a.dfs.x.y/z"));
    assert!(!is_cloud("s3://b/x") && !is_cloud("/tmp/gs://x"));
}

#[test]
fn doubly_encoded_upload_names_are_decoded_once() {
    let uri: http::Uri = "http://h:1/upload/storage/v1/b/lake/o?uploadType=multipart&name=wh%2Fdata%2Fts_day%253D2026-11-01%2Fa%2520b.parquet"
        .parse()
        .unwrap();
    let fixed = SingleEncodedUploads::fix(&uri).unwrap();
    assert_eq!(
        fixed.query().unwrap(),
        "uploadType=multipart&name=wh/data/ts_day%3D2026-11-01/a%20b.parquet"
    );
    // Singly encoded names, reads and other requests are left alone.
    for ok in [
        "http://h/upload/storage/v1/b/lake/o?uploadType=media&name=wh%2Fa.json",
        "http://h/storage/v1/b/lake/o/wh%2Fts_day%3D1%2Fa.parquet?alt=media",
    ] {
        assert!(
            SingleEncodedUploads::fix(&ok.parse().unwrap()).is_none(),
            "{ok}"
        );
    }
    assert_eq!(
        crate::storage::fence::percent_decode("a%2525b%zz%4"),
        "a%25b%zz%4"
    );
}

#[test]
fn azure_configuration_errors_name_the_property() {
    let path = "abfss://c@acct.dfs.core.windows.net/x";
    let cfg = CloudConfig::new(HashMap::from([(
        "adls.client-secret".to_string(),
        "s".to_string(),
    )]));
    let e = cfg.operator(path).unwrap_err().to_string();
    assert!(e.contains("adls.client-secret"), "{e}");
    let cfg = CloudConfig::new(HashMap::from([(
        "adls.account-name".to_string(),
        "other".to_string(),
    )]));
    let e = cfg.operator(path).unwrap_err().to_string();
    assert!(e.contains("adls.account-name") && e.contains("acct"), "{e}");
    // A configured key builds (no request is made here).
    let cfg = CloudConfig::new(HashMap::from([
        ("adls.account-name".to_string(), "acct".to_string()),
        ("adls.account-key".to_string(), "a2V5".to_string()),
    ]));
    let (_, key, cache) = cfg.operator(path).unwrap();
    assert_eq!(key, "x");
    assert_eq!(cache, "abfss://c@acct.core.windows.net");
}
