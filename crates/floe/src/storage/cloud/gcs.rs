//! Google Cloud Storage: `gs://bucket/key` locations and the operator for a bucket.

use base64::Engine;
use opendal::Operator;

use super::{io_error, CloudConfig};

/// A `gs://` location split into bucket and key.
pub(super) fn split_gcs(location: &str) -> Result<(&str, &str), String> {
    let rest = location
        .strip_prefix("gs://")
        .ok_or_else(|| format!("{location}: not a gs:// URI"))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("{location}: no bucket"));
    }
    Ok((bucket, key.trim_start_matches('/')))
}

/// opendal 0.57's GCS writer percent-encodes an object name twice in one-shot uploads
/// (`POST /upload/storage/v1/b/B/o?uploadType=...&name=N`): `ts_day=2026-11-01` is stored as
/// `ts_day%3D2026-11-01`, so every Hive-style partition path would be written under a name no
/// reader finds (opendal issue 7926, fixed in 0.59, which floe cannot take while the iceberg
/// crate's S3 storage pins 0.57). This HTTP client decodes the `name` parameter of those
/// uploads once before sending, so the store decodes it to the intended name. Signing is a
/// bearer header for GCS, so the URL may change after it. Reads, listings and deletes encode
/// once and pass through untouched.
pub(super) struct SingleEncodedUploads(opendal::raw::HttpClient);

impl SingleEncodedUploads {
    pub(super) fn fix(uri: &http::Uri) -> Option<http::Uri> {
        if !uri.path().contains("/upload/storage/v1/b/") {
            return None;
        }
        let query = uri.query()?;
        let mut changed = false;
        let fixed: Vec<String> = query
            .split('&')
            .map(|kv| match kv.strip_prefix("name=") {
                Some(v) if v.contains("%25") => {
                    changed = true;
                    format!("name={}", crate::storage::fence::percent_decode(v))
                }
                _ => kv.to_string(),
            })
            .collect();
        if !changed {
            return None;
        }
        let pq = format!("{}?{}", uri.path(), fixed.join("&"));
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = pq.parse().ok();
        http::Uri::from_parts(parts).ok()
    }
}

impl opendal::raw::HttpFetch for SingleEncodedUploads {
    async fn fetch(
        &self,
        mut req: http::Request<opendal::Buffer>,
    ) -> opendal::Result<http::Response<opendal::raw::HttpBody>> {
        if req.method() == http::Method::POST {
            if let Some(uri) = Self::fix(req.uri()) {
                *req.uri_mut() = uri;
            }
        }
        self.0.fetch(req).await
    }
}

impl CloudConfig {
    pub(super) fn gcs_operator(&self, bucket: &str) -> iceberg::Result<Operator> {
        let mut b = opendal::services::Gcs::default().bucket(bucket).root("/");
        if let Some(ep) = self
            .get("gcs.service.host")
            .or(self.get("gcs.service.path"))
        {
            b = b.endpoint(ep.trim_end_matches('/'));
        }
        if let Some(t) = self.get("gcs.oauth2.token") {
            b = b.token(t.to_string());
        }
        if let Some(json) = self.get("gcs.credentials-json") {
            // opendal takes the key base64-encoded; users paste the JSON itself as often.
            let encoded = if json.trim_start().starts_with('{') {
                base64::engine::general_purpose::STANDARD.encode(json.as_bytes())
            } else {
                json.to_string()
            };
            b = b.credential(&encoded);
        }
        if self.flag("gcs.no-auth") || self.flag("gcs.allow-anonymous") {
            b = b
                .skip_signature()
                .disable_vm_metadata()
                .disable_config_load();
        }
        if self.get("gcs.oauth2.token").is_some() || self.get("gcs.credentials-json").is_some() {
            b = b.disable_vm_metadata().disable_config_load();
        }
        if self.flag("gcs.disable-vm-metadata") {
            b = b.disable_vm_metadata();
        }
        if self.flag("gcs.disable-config-load") {
            b = b.disable_config_load();
        }
        let op = Operator::new(b)
            .map_err(|e| io_error("configuring GCS for bucket", bucket, e))?
            .finish();
        opendal::raw::Access::info(op.inner())
            .update_http_client(|c| opendal::raw::HttpClient::with(SingleEncodedUploads(c)));
        Ok(op)
    }
}
