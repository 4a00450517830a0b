use super::*;

const FILE: &str = r#"
default-catalog = "lake"

[catalog.lake]
type = "rest"
uri = "http://127.0.0.1:8181"
warehouse = "wh"
credential = "admin:topsecret"
"s3.endpoint" = "http://127.0.0.1:8333"
"s3.path-style-access" = true

[catalog.local]
uri = "sqlite:///tmp/c.db"
warehouse = "/tmp/wh"

[catalog.nested.s3]
endpoint = "http://x"
"#;

#[test]
fn parses_named_catalogs_and_flattens() {
    let f = ConfigFile::parse(FILE).unwrap();
    assert_eq!(f.default_catalog.as_deref(), Some("lake"));
    let lake = &f.catalogs["lake"];
    assert_eq!(lake["s3.path-style-access"], "true");
    assert_eq!(f.catalogs["nested"]["s3.endpoint"], "http://x");
    let err = ConfigFile::parse("[catalog]\nx = 1\n").unwrap_err();
    assert!(err.contains("catalog.x"), "{err}");
    let err = ConfigFile::parse("catalogs = 1").unwrap_err();
    assert!(err.contains("catalogs"), "{err}");
}

#[test]
fn env_keys_follow_pyiceberg_convention() {
    let env = env_catalogs([
        (
            "FLOE_CATALOG__LAKE__URI".to_string(),
            "http://h".to_string(),
        ),
        (
            "FLOE_CATALOG__LAKE__S3__SECRET_ACCESS_KEY".to_string(),
            "k".to_string(),
        ),
        ("FLOE_WAREHOUSE".to_string(), "x".to_string()),
    ]);
    assert_eq!(env["lake"]["uri"], "http://h");
    assert_eq!(env["lake"]["s3.secret-access-key"], "k");
    assert_eq!(env.len(), 1);
}

#[test]
fn precedence_file_env_flag() {
    let f = ConfigFile::parse(FILE).unwrap();
    let env = env_catalogs([(
        "FLOE_CATALOG__LAKE__S3__ENDPOINT".to_string(),
        "http://env".to_string(),
    )]);
    let sel = CatalogSelection::default();
    let c = resolve(&sel, &f, &env).unwrap();
    assert_eq!(c.kind, CatalogKind::Rest);
    assert_eq!(c.name, "lake");
    assert_eq!(c.props["s3.endpoint"], "http://env");
    let sel = CatalogSelection {
        name: Some("lake".into()),
        overrides: vec![("s3.endpoint".into(), "http://flag".into())],
        ..Default::default()
    };
    let c = resolve(&sel, &f, &env).unwrap();
    assert_eq!(c.props["s3.endpoint"], "http://flag");
    let sel = CatalogSelection {
        name: Some("local".into()),
        ..Default::default()
    };
    let c = resolve(&sel, &f, &env).unwrap();
    assert_eq!(c.kind, CatalogKind::Sql);
    assert_eq!(c.warehouse, "/tmp/wh");
}

#[test]
fn unknown_catalog_lists_known_ones() {
    let f = ConfigFile::parse(FILE).unwrap();
    let sel = CatalogSelection {
        name: Some("nope".into()),
        ..Default::default()
    };
    let e = resolve(&sel, &f, &BTreeMap::new()).unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("lake, local"), "{e}");
}

#[test]
fn secrets_are_masked() {
    let f = ConfigFile::parse(FILE).unwrap();
    let c = resolve(&CatalogSelection::default(), &f, &BTreeMap::new()).unwrap();
    let shown = format!("{c:?} {:?}", c.redacted());
    assert!(!shown.contains("topsecret"), "{shown}");
    assert!(shown.contains("admin") || shown.contains("****"));
    assert_eq!(
        redact_uri("postgres://u:pw@h:5/db"),
        "postgres://u:****@h:5/db"
    );
    assert_eq!(redact_uri("http://h:1/x"), "http://h:1/x");
}

/// The secrets a hostile configuration can hide in: a PostgreSQL URI's query, an ADLS
/// account key, a REST URI's token, an OAuth2 server URI's client secret, a userinfo
/// password, a SAS token.
const HOSTILE: &str = r#"
[catalog.pg]
uri = "postgres://floe@db:5432/catalog?password=pg-query-pass-1&sslmode=disable"
warehouse = "abfss://c@acct.dfs.core.windows.net/wh?sig=wh-sas-sig-2"
"adls.account-key" = "adls-account-key-3"
"adls.sas-token.acct" = "sv=2022&sig=adls-sas-sig-4"

[catalog.rest]
uri = "https://cat.example.com/api?token=rest-uri-token-5"
"oauth2-server-uri" = "https://idp.example.com/oauth/token?client_id=me&client_secret=oauth-secret-6"
"s3.access-key-id" = "AKIAVISIBLE"

[catalog.user]
uri = "postgresql://floe:userinfo-pass-7@db:5432/c"
warehouse = "/tmp/wh"
"#;

const HOSTILE_SECRETS: [&str; 7] = [
    "pg-query-pass-1",
    "wh-sas-sig-2",
    "adls-account-key-3",
    "adls-sas-sig-4",
    "rest-uri-token-5",
    "oauth-secret-6",
    "userinfo-pass-7",
];

#[test]
fn redacted_configs_show_no_secret_of_any_shape() {
    let f = ConfigFile::parse(HOSTILE).unwrap();
    let mut shown = String::new();
    for name in ["pg", "rest", "user"] {
        let sel = CatalogSelection {
            name: Some(name.into()),
            ..Default::default()
        };
        let c = resolve(&sel, &f, &BTreeMap::new()).unwrap();
        shown.push_str(&format!("{c:?} {:?}\n", c.redacted()));
    }
    for s in HOSTILE_SECRETS {
        assert!(!shown.contains(s), "{s} shown: {shown}");
    }
    // What is not secret stays readable.
    assert!(shown.contains("AKIAVISIBLE"), "{shown}");
    assert!(shown.contains("client_id=me"), "{shown}");
    assert!(
        shown.contains("https://cat.example.com/api?token=****"),
        "{shown}"
    );
    assert!(
        shown.contains("postgresql://floe:****@db:5432/c"),
        "{shown}"
    );
}

#[test]
fn resolved_secrets_are_scrubbed_from_any_message() {
    let f = ConfigFile::parse(HOSTILE).unwrap();
    for name in ["pg", "rest", "user"] {
        let sel = CatalogSelection {
            name: Some(name.into()),
            ..Default::default()
        };
        resolve(&sel, &f, &BTreeMap::new()).unwrap();
    }
    // A library echoing a secret bare, out of any URI or key=value shape.
    let msg = HOSTILE_SECRETS.join(" | ");
    let out = mask(&msg);
    for s in HOSTILE_SECRETS {
        assert!(!out.contains(s), "{s} survived: {out}");
    }
}

#[test]
fn uri_as_catalog_keeps_old_meaning() {
    let sel = CatalogSelection {
        name: Some("sqlite:///tmp/x.db".into()),
        ..Default::default()
    };
    let c = resolve(&sel, &ConfigFile::default(), &BTreeMap::new()).unwrap();
    assert_eq!(c.kind, CatalogKind::Sql);
    assert_eq!(c.uri, "sqlite:///tmp/x.db");
}

#[test]
fn unknown_catalog_keys_sub_tables_and_non_string_uris_are_refused_by_name() {
    let typo =
        ConfigFile::parse("[catalog.x]\nuri = \"http://h\"\n\"s3.endpont\" = \"http://s3\"\n")
            .unwrap();
    let e = CatalogConfig::from_props("x", typo.catalogs["x"].clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("s3.endpont") && e.contains("s3.endpoint"), "{e}");
    let sub =
        ConfigFile::parse("[catalog.x]\nuri = \"http://h\"\n[catalog.x.storage]\nroot = \"/a\"\n")
            .unwrap();
    let e = CatalogConfig::from_props("x", sub.catalogs["x"].clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("storage.root"), "{e}");
    let e = ConfigFile::parse("[catalog.x]\nuri = 5\n").unwrap_err();
    assert!(e.contains("catalog.x.uri") && e.contains("string"), "{e}");
    // What floe reads passes, open families included.
    let ok = ConfigFile::parse(FILE).unwrap();
    for name in ["lake", "local"] {
        CatalogConfig::from_props(name, ok.catalogs[name].clone()).unwrap();
    }
    let mut headers = BTreeMap::from([("uri".to_string(), "http://h".to_string())]);
    headers.insert(
        "header.X-Iceberg-Access-Delegation".into(),
        "vended-credentials".into(),
    );
    headers.insert("adls.sas-token.acct".into(), "sig".into());
    CatalogConfig::from_props("h", headers).unwrap();
}
