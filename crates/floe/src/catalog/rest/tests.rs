use super::*;

#[tokio::test]
async fn https_catalogs_are_reachable() {
    // TLS is compiled in: an https URI fails on the connection, not on the scheme.
    let mut props = std::collections::BTreeMap::new();
    props.insert("uri".to_string(), "https://127.0.0.1:1".to_string());
    let config = CatalogConfig::from_props("tls", props).unwrap();
    let err = RestBackend::connect(&config)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("scheme"), "{err}");
}

#[test]
fn http_errors_are_one_line_from_the_error_model() {
    let body = r#"{"error":{"message":"Requirement failed: branch main has changed\nmore","type":"CommitFailedException","code":409}}"#;
    assert_eq!(
        http_error(reqwest::StatusCode::CONFLICT, body),
        "HTTP 409 Conflict: CommitFailedException: Requirement failed: branch main has changed"
    );
    assert_eq!(
        http_error(reqwest::StatusCode::BAD_GATEWAY, "<html>bad\n</html>"),
        "HTTP 502 Bad Gateway: <html>bad"
    );
    let oauth = r#"{"error":"invalid_client","error_description":"bad secret"}"#;
    assert_eq!(
        http_error(reqwest::StatusCode::UNAUTHORIZED, oauth),
        "HTTP 401 Unauthorized: bad secret"
    );
}
